//! What steps log while a promotion runs: each line goes to the process log and is kept,
//! with its time, on the step's `StepExecution.log` (the newest [`MAX_LINES_PER_STEP`]
//! lines, each at most [`MAX_LINE_CHARS`] characters, and at most [`MAX_LOG_BYTES`] for
//! the whole promotion), so the web UI and `dray promote --wait` can show it. Where older
//! lines were cut, the step's first line says how many ([`cut_marker`]). The bounds keep a
//! Promotion well inside what etcd accepts in one request (1.5 MiB by default): forty
//! verbose steps would otherwise hold 2 MB of log. Steps log what they may show: the
//! `http` step, for one, redacts secrets before it logs.

use std::sync::{Arc, Mutex, PoisonError};

use dray_steps::LogSink;

use crate::api::StepExecution;

/// How many lines a step keeps (the newest).
pub const MAX_LINES_PER_STEP: usize = 100;
/// How long one kept line may be.
pub const MAX_LINE_CHARS: usize = 500;
/// How many bytes of log a promotion keeps over all its steps.
pub const MAX_LOG_BYTES: usize = 400 * 1024;

/// The first line of a step's log once `count` older lines were cut.
pub fn cut_marker(count: usize) -> String {
    format!(
        "… {count} earlier lines not kept (a step keeps its newest {MAX_LINES_PER_STEP}, a \
         promotion {} KiB; the process log has every line)",
        MAX_LOG_BYTES / 1024
    )
}

/// How many lines the marker at the head of `log` says were cut (0 without one).
fn cut_so_far(log: &[String]) -> usize {
    log.first()
        .and_then(|line| line.strip_prefix("… "))
        .and_then(|rest| rest.split_once(" earlier lines not kept"))
        .and_then(|(count, _)| count.parse().ok())
        .unwrap_or(0)
}

/// Cuts the `count` oldest lines of `log` (never its marker), counting them in the marker.
fn cut_oldest(log: &mut Vec<String>, count: usize) {
    let before = cut_so_far(log);
    let first_line = usize::from(before > 0);
    let count = count.min(log.len() - first_line);
    if count == 0 {
        return;
    }
    log.drain(first_line..first_line + count);
    let marker = cut_marker(before + count);
    match first_line {
        1 => log[0] = marker,
        _ => log.insert(0, marker),
    }
}

fn log_bytes(log: &[String]) -> usize {
    log.iter().map(String::len).sum()
}

/// Lines of `log` a step logged (its marker left out).
fn logged_lines(log: &[String]) -> usize {
    log.len() - usize::from(cut_so_far(log) > 0)
}

/// Lines logged since the promotion's status was last saved, by step index.
#[derive(Clone, Default)]
pub struct StepLogs(Arc<Mutex<Vec<(usize, String)>>>);

impl StepLogs {
    /// The sink step `index` (`alias`) of `promotion` logs to.
    pub fn sink(&self, promotion: &str, index: usize, alias: &str) -> LogSink {
        let pending = Arc::clone(&self.0);
        let (promotion, alias) = (promotion.to_owned(), alias.to_owned());
        Arc::new(move |line: &str| {
            tracing::info!(%promotion, step = %alias, "{line}");
            let mut kept: String = line.chars().take(MAX_LINE_CHARS).collect();
            if kept.len() < line.len() {
                kept.push('…');
            }
            let stamped = format!("{} {kept}", jiff::Timestamp::now().strftime("%H:%M:%S"));
            pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((index, stamped));
        })
    }

    /// Moves the pending lines onto their steps, keeping the newest of each, then cuts the
    /// oldest lines of the most verbose steps until the promotion is within [`MAX_LOG_BYTES`].
    pub fn drain_into(&self, steps: &mut [StepExecution]) {
        let pending = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for (index, line) in pending {
            if let Some(step) = steps.get_mut(index) {
                step.log.push(line);
                let extra = logged_lines(&step.log).saturating_sub(MAX_LINES_PER_STEP);
                cut_oldest(&mut step.log, extra);
            }
        }
        while steps.iter().map(|s| log_bytes(&s.log)).sum::<usize>() > MAX_LOG_BYTES {
            let Some(largest) = steps
                .iter_mut()
                .filter(|s| logged_lines(&s.log) > 0)
                .max_by_key(|s| log_bytes(&s.log))
            else {
                break;
            };
            let lines = logged_lines(&largest.log);
            cut_oldest(&mut largest.log, lines.div_ceil(4));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_land_on_their_step_bounded_and_stamped() {
        let logs = StepLogs::default();
        let first = logs.sink("demo/p", 0, "clone");
        let second = logs.sink("demo/p", 1, "push");
        for i in 0..(MAX_LINES_PER_STEP + 5) {
            first(&format!("line {i}"));
        }
        second(&"x".repeat(MAX_LINE_CHARS + 10));
        let mut steps = vec![StepExecution::default(), StepExecution::default()];
        logs.drain_into(&mut steps);
        assert_eq!(steps[0].log.len(), MAX_LINES_PER_STEP + 1);
        assert_eq!(steps[0].log[0], cut_marker(5));
        assert!(steps[0].log[1].ends_with(" line 5"), "{}", steps[0].log[1]);
        assert!(
            steps[0]
                .log
                .last()
                .unwrap()
                .ends_with(&format!(" line {}", MAX_LINES_PER_STEP + 4))
        );
        assert!(steps[1].log[0].ends_with('…'));
        assert_eq!(
            steps[1].log[0].chars().count(),
            "00:00:00 ".len() + MAX_LINE_CHARS + 1
        );
        // Drained: a second drain adds nothing.
        logs.drain_into(&mut steps);
        assert_eq!(steps[1].log.len(), 1);
    }

    #[test]
    fn forty_verbose_steps_stay_within_the_promotions_budget_and_say_what_was_cut() {
        let logs = StepLogs::default();
        let mut steps = vec![StepExecution::default(); 40];
        let line = "y".repeat(MAX_LINE_CHARS);
        // Logged over several saves, as a running promotion does.
        for round in 0..3 {
            for index in 0..steps.len() {
                let sink = logs.sink("demo/p", index, "verbose");
                for i in 0..60 {
                    sink(&format!("{round}-{i} {line}"));
                }
            }
            logs.drain_into(&mut steps);
        }
        let total: usize = steps.iter().map(|s| log_bytes(&s.log)).sum();
        assert!(total <= MAX_LOG_BYTES, "{total} bytes kept");
        for step in &steps {
            let cut = cut_so_far(&step.log);
            assert!(
                cut > 0,
                "every step says lines were cut: {:?}",
                step.log.first()
            );
            // What was cut and what was kept add up to what was logged.
            assert_eq!(cut + logged_lines(&step.log), 180);
            // The newest line is always kept.
            assert!(step.log.last().unwrap().contains("2-59 "));
        }
        // The whole status, as JSON, stays far inside etcd's 1.5 MiB.
        let json = serde_json::to_vec(&steps).unwrap();
        assert!(json.len() < 1024 * 1024, "{} bytes", json.len());
    }
}
