//! Dray's labelled counters and histograms: promotions that ended (per project, Stage and
//! phase) and how long they took, how long each kind of step took, and how long each
//! Warehouse's discovery took and how often it failed. The layers above record into them
//! (`promotion::engine`, `discovery::controller`); `GET /metrics` reads them.
//!
//! Owns the numbers and nothing else: they only grow, and they never decide. Like the
//! other counters of the process ([`super::metrics`], `store::stats`) they are
//! process-wide, a Prometheus client's default registry: a test process with many servers
//! adds them up. Labels are names (project, Stage, Warehouse, step kind) and phases, never
//! users, Credentials or messages.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// The upper bounds (seconds) of every duration histogram's buckets, from a quick step
/// to a promotion that waited an hour for a review.
pub const DURATION_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// One histogram read at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Per bound of [`DURATION_BUCKETS`], how many observations were at most it
    /// (cumulative, as the exposition format has it).
    pub buckets: Vec<u64>,
    /// How many observations in all (the `+Inf` bucket).
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
}

impl HistogramSnapshot {
    fn observe(&mut self, seconds: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; DURATION_BUCKETS.len()];
        }
        for (bound, count) in DURATION_BUCKETS.iter().zip(self.buckets.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Label values, in the order the family names its labels.
pub type LabelValues = Vec<String>;

#[derive(Default)]
struct Instruments {
    promotions: BTreeMap<LabelValues, u64>,
    promotion_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    step_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    discovery_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    discovery_errors: BTreeMap<LabelValues, u64>,
}

fn instruments() -> std::sync::MutexGuard<'static, Instruments> {
    static INSTRUMENTS: OnceLock<Mutex<Instruments>> = OnceLock::new();
    INSTRUMENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Counts a promotion of `project`/`stage` that ended in `phase` (`Succeeded`, `Failed`,
/// …), and observes how long it ran when that is known.
pub fn record_promotion(project: &str, stage: &str, phase: &str, ran: Option<Duration>) {
    let mut all = instruments();
    *all.promotions
        .entry(vec![project.to_owned(), stage.to_owned(), phase.to_owned()])
        .or_default() += 1;
    if let Some(ran) = ran {
        all.promotion_seconds
            .entry(vec![project.to_owned(), stage.to_owned()])
            .or_default()
            .observe(ran.as_secs_f64());
    }
}

/// Observes how long one step of kind `kind` (`git-clone`, …) ran.
pub fn record_step(kind: &str, ran: Duration) {
    instruments()
        .step_seconds
        .entry(vec![kind.to_owned()])
        .or_default()
        .observe(ran.as_secs_f64());
}

/// Observes one discovery of `project`/`warehouse` that took `ran`, and counts an error
/// when it `failed`.
pub fn record_discovery(project: &str, warehouse: &str, ran: Duration, failed: bool) {
    let labels = vec![project.to_owned(), warehouse.to_owned()];
    let mut all = instruments();
    all.discovery_seconds
        .entry(labels.clone())
        .or_default()
        .observe(ran.as_secs_f64());
    let errors = all.discovery_errors.entry(labels).or_default();
    if failed {
        *errors += 1;
    }
}

/// Everything recorded so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// `(project, stage, phase)` → promotions ended.
    pub promotions: BTreeMap<LabelValues, u64>,
    /// `(project, stage)` → promotion durations.
    pub promotion_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    /// `(step kind)` → step durations.
    pub step_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    /// `(project, warehouse)` → discovery durations.
    pub discovery_seconds: BTreeMap<LabelValues, HistogramSnapshot>,
    /// `(project, warehouse)` → discoveries that failed.
    pub discovery_errors: BTreeMap<LabelValues, u64>,
}

/// The instruments now.
pub fn snapshot() -> Snapshot {
    let all = instruments();
    Snapshot {
        promotions: all.promotions.clone(),
        promotion_seconds: all.promotion_seconds.clone(),
        step_seconds: all.step_seconds.clone(),
        discovery_seconds: all.discovery_seconds.clone(),
        discovery_errors: all.discovery_errors.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets are cumulative and the `+Inf` count holds every observation, as the
    /// exposition format wants; labels keep promotions of different Stages apart. Other
    /// tests record too, so only this test's own labels are read.
    #[test]
    fn histograms_are_cumulative_and_labels_keep_series_apart() {
        let project = "instruments-test-project";
        record_promotion(
            project,
            "dev",
            "Succeeded",
            Some(Duration::from_millis(300)),
        );
        record_promotion(project, "dev", "Succeeded", Some(Duration::from_secs(40)));
        record_promotion(project, "prod", "Failed", None);
        let now = snapshot();
        let dev = vec![project.to_owned(), "dev".to_owned(), "Succeeded".to_owned()];
        let prod = vec![project.to_owned(), "prod".to_owned(), "Failed".to_owned()];
        assert_eq!(now.promotions.get(&dev), Some(&2));
        assert_eq!(now.promotions.get(&prod), Some(&1));
        let seconds = &now.promotion_seconds[&vec![project.to_owned(), "dev".to_owned()]];
        assert_eq!(seconds.count, 2);
        assert!((seconds.sum - 40.3).abs() < 1e-9, "{seconds:?}");
        let at = |bound: f64| {
            seconds.buckets[DURATION_BUCKETS.iter().position(|b| *b == bound).unwrap()]
        };
        assert_eq!(
            (at(0.25), at(0.5), at(30.0), at(60.0), at(3600.0)),
            (0, 1, 1, 2, 2)
        );
        assert!(
            !now.promotion_seconds
                .contains_key(&vec![project.to_owned(), "prod".to_owned()]),
            "a promotion without a start time has no duration"
        );
    }
}
