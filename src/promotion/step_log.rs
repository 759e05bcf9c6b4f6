//! What steps log while a promotion runs: each line goes to the process log and is kept,
//! with its time, on the step's `StepExecution.log` (the newest [`MAX_LINES_PER_STEP`]
//! lines, each at most [`MAX_LINE_CHARS`] characters), so the web UI and
//! `dray promote --wait` can show it. Steps log what they may show: the `http` step, for
//! one, redacts secrets before it logs.

use std::sync::{Arc, Mutex, PoisonError};

use dray_steps::LogSink;

use crate::api::StepExecution;

/// How many lines a step keeps (the newest).
pub const MAX_LINES_PER_STEP: usize = 100;
/// How long one kept line may be.
pub const MAX_LINE_CHARS: usize = 500;

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

    /// Moves the pending lines onto their steps, keeping the newest of each.
    pub fn drain_into(&self, steps: &mut [StepExecution]) {
        let pending = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for (index, line) in pending {
            if let Some(step) = steps.get_mut(index) {
                step.log.push(line);
                let extra = step.log.len().saturating_sub(MAX_LINES_PER_STEP);
                step.log.drain(..extra);
            }
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
        assert_eq!(steps[0].log.len(), MAX_LINES_PER_STEP);
        assert!(steps[0].log[0].ends_with(" line 5"), "{}", steps[0].log[0]);
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
}
