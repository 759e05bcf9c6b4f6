//! The numbers the benchmarks (`src/bin/bench*.rs`) report: durations of repeated runs with
//! their median, percentiles and range, and the formats of the results tables (`52 ms`,
//! `9.3×`, `yes`/`**no**`). Benchmark tooling only, never shipped.

use std::time::Duration;

/// The durations of one measurement, one per run.
#[derive(Debug, Default, Clone)]
pub struct Durations(pub Vec<Duration>);

impl Durations {
    /// Adds one run's duration.
    pub fn push(&mut self, duration: Duration) {
        self.0.push(duration);
    }

    /// The last run's duration (zero before any run).
    pub fn last(&self) -> Duration {
        self.0.last().copied().unwrap_or_default()
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted
    }

    /// The median (zero without runs).
    pub fn median(&self) -> Duration {
        let sorted = self.sorted();
        match sorted.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
        }
    }

    /// The nearest-rank `p`th percentile (zero without runs).
    pub fn percentile(&self, p: usize) -> Duration {
        let sorted = self.sorted();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    /// The slowest run (zero without runs).
    pub fn max(&self) -> Duration {
        self.0.iter().max().copied().unwrap_or_default()
    }

    /// `46 ms–59 ms`, or `–` without runs.
    pub fn range(&self) -> String {
        let sorted = self.sorted();
        match (sorted.first(), sorted.last()) {
            (Some(min), Some(max)) => format!("{}–{}", fmt_duration(*min), fmt_duration(*max)),
            _ => "–".to_owned(),
        }
    }
}

/// `4.34 ms`, `52 ms`, `3.68 s`.
/// The peak resident memory (`VmHWM`) of process `pid` (`"self"` for this one) so far, as
/// the kernel writes it (`28120 kB`), or `unknown`.
pub fn peak_rss(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1_000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1_000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1_000.0)
    }
}

/// How many times longer `baseline` took than `dray`.
pub fn ratio_of(baseline: Duration, dray: Duration) -> f64 {
    baseline.as_secs_f64() / dray.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// `9.3×`, `113×`.
pub fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

/// Whether an aim was met, as the tables say it.
pub fn met(yes: bool) -> String {
    if yes { "yes" } else { "**no**" }.to_owned()
}

/// A benchmark flag's positive whole number (`--runs 5`), for clap's `value_parser`.
pub fn positive(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("takes a positive whole number, not `{text}`"))
}

/// The runtime every benchmark runs on: two workers, as the machines have two cores.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// A Markdown table of measurements: name, median, min–max.
pub fn median_table(rows: &[(&str, &Durations)]) -> String {
    let mut md = String::from("| Measurement | Median | Min–max |\n|---|---:|---:|\n");
    for (name, samples) in rows {
        md.push_str(&format!(
            "| {name} | {} | {} |\n",
            fmt_duration(samples.median()),
            samples.range()
        ));
    }
    md
}

/// Writes one benchmark part's Markdown section to `path`: its results, or, when it failed,
/// a section titled `title` saying it was not measured and quoting the error (which is also
/// printed, prefixed with `who`). Returns whether the part failed.
pub fn write_section(
    path: &std::path::Path,
    who: &str,
    title: &str,
    result: anyhow::Result<String>,
) -> std::io::Result<bool> {
    let (text, failed) = match result {
        Ok(text) => (text, false),
        Err(err) => {
            eprintln!("{who}: failed: {err:#}");
            let quoted: String = format!("{err:#}")
                .lines()
                .take(40)
                .map(|l| format!("    {l}\n"))
                .collect();
            let text = format!(
                "### {title}\n\n**Not measured**: the benchmark failed with this error, so \
                 there are no numbers for this part of this run.\n\n{quoted}"
            );
            (text, true)
        }
    };
    std::fs::write(path, text)?;
    Ok(failed)
}

/// `21`, or `21–23` when the runs differ.
pub fn counts(values: &[u32]) -> String {
    let min = values.iter().min().copied().unwrap_or_default();
    let max = values.iter().max().copied().unwrap_or_default();
    if min == max {
        min.to_string()
    } else {
        format!("{min}–{max}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_percentiles_and_formats() {
        let ms = Duration::from_millis;
        let d = Durations(vec![ms(30), ms(10), ms(20), ms(40)]);
        assert_eq!(d.median(), ms(25));
        assert_eq!(d.percentile(95), ms(40));
        assert_eq!(d.percentile(50), ms(20));
        assert_eq!(d.range(), "10 ms–40 ms");
        assert_eq!(Durations::default().range(), "–");
        assert_eq!(fmt_duration(Duration::from_micros(4_340)), "4.34 ms");
        assert_eq!(fmt_duration(Duration::from_millis(3_680)), "3.68 s");
        assert_eq!(fmt_ratio(ratio_of(ms(930), ms(100))), "9.3×");
        assert_eq!(counts(&[21, 23, 21]), "21–23");
        assert_eq!(met(false), "**no**");
    }
}
