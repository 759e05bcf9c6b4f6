//! One metric's bookkeeping, as pure functions over its [`MetricResult`]: recording a
//! measurement (counters, the newest few kept), deciding whether the metric has ended
//! (Argo Rollouts' strict `>` limits), when the next measurement is due, and how an
//! unfinished metric ends at the deadline.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::{Measurement, MetricResult, VerificationPhase};

use super::spec::MetricSpec;

/// The most measurements kept per metric (the newest).
pub const MAX_MEASUREMENTS: usize = 10;

/// After an `Error` measurement the next one is taken this soon (or after `interval`, when
/// that is shorter), as Argo Rollouts retries errors.
pub const ERROR_RETRY: Duration = Duration::from_secs(10);

/// A fresh result for `spec`: Running, nothing measured.
pub(super) fn fresh(spec: &MetricSpec) -> MetricResult {
    MetricResult {
        name: spec.name.clone(),
        phase: VerificationPhase::Running,
        ..MetricResult::default()
    }
}

/// Adds `measurement` to `result`: the counters (an Error counts into `error` and
/// `consecutiveError`, anything else into `count` and resets `consecutiveError`), and the
/// list, keeping the newest [`MAX_MEASUREMENTS`].
pub(super) fn record(result: &mut MetricResult, measurement: Measurement) {
    use VerificationPhase::*;
    match measurement.phase {
        Error => {
            result.error += 1;
            result.consecutive_error += 1;
        }
        phase => {
            result.count += 1;
            result.consecutive_error = 0;
            match phase {
                Successful => result.successful += 1,
                Failed => result.failed += 1,
                _ => result.inconclusive += 1,
            }
        }
    }
    result.measurements.push(measurement);
    let extra = result.measurements.len().saturating_sub(MAX_MEASUREMENTS);
    result.measurements.drain(..extra);
}

/// Whether the metric has ended, and how: more failures than `failureLimit`, more
/// inconclusive measurements than `inconclusiveLimit`, more errors in a row than
/// `consecutiveErrorLimit` (checked in that order), or `count` measurements taken.
pub(super) fn assess(
    spec: &MetricSpec,
    result: &MetricResult,
) -> Option<(VerificationPhase, String)> {
    if result.failed > spec.failure_limit {
        return Some((
            VerificationPhase::Failed,
            format!(
                "failed ({}) > failureLimit ({})",
                result.failed, spec.failure_limit
            ),
        ));
    }
    if result.inconclusive > spec.inconclusive_limit {
        return Some((
            VerificationPhase::Inconclusive,
            format!(
                "inconclusive ({}) > inconclusiveLimit ({})",
                result.inconclusive, spec.inconclusive_limit
            ),
        ));
    }
    if result.consecutive_error > spec.consecutive_error_limit {
        let last = result
            .measurements
            .last()
            .map(|m| format!("; last error: {}", m.message))
            .unwrap_or_default();
        return Some((
            VerificationPhase::Error,
            format!(
                "consecutiveErrors ({}) > consecutiveErrorLimit ({}){last}",
                result.consecutive_error, spec.consecutive_error_limit
            ),
        ));
    }
    match spec.effective_count() {
        Some(count) if result.count >= count => Some((
            VerificationPhase::Successful,
            format!(
                "{} of {count} measurements taken within the limits",
                result.count
            ),
        )),
        _ => None,
    }
}

/// When the next measurement of a running metric is due: `start + initialDelay` for the
/// first, then `interval` after the previous one finished ([`ERROR_RETRY`] at most after an
/// error). `None` when no further measurement is planned.
pub(super) fn next_due(
    spec: &MetricSpec,
    result: &MetricResult,
    start: Timestamp,
) -> Option<Timestamp> {
    let Some(last) = result.measurements.last() else {
        return Some(add(start, spec.initial_delay));
    };
    let after = last
        .finished_at
        .as_ref()
        .or(last.started_at.as_ref())
        .map_or(start, |t| t.0);
    let wait = match (last.phase, spec.interval) {
        (VerificationPhase::Error, Some(interval)) => interval.min(ERROR_RETRY),
        (VerificationPhase::Error, None) => ERROR_RETRY,
        (_, Some(interval)) => interval,
        (_, None) => return None,
    };
    Some(add(after, wait))
}

/// How a metric still running at the deadline ends: one without `count` that never
/// crossed a limit succeeds; one that had measurements left to take is an Error.
pub(super) fn at_deadline(spec: &MetricSpec, result: &MetricResult) -> (VerificationPhase, String) {
    match spec.effective_count() {
        None => (
            VerificationPhase::Successful,
            format!(
                "deadline reached after {} measurements within the limits",
                result.count
            ),
        ),
        Some(count) => (
            VerificationPhase::Error,
            format!(
                "deadline passed after {} of {count} measurements",
                result.count
            ),
        ),
    }
}

/// `t + d`, saturating at the end of time.
pub(super) fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verification::analysis::spec::{PrometheusQuery, Provider};

    fn spec(count: Option<u32>, interval: Option<u64>) -> MetricSpec {
        MetricSpec {
            language: crate::expr::exprlang::ExprLanguage::Cel,
            name: "m".into(),
            template: "t".into(),
            provider: Provider::Prometheus(PrometheusQuery {
                address: "http://127.0.0.1:1".into(),
                query: "up".into(),
                timeout: Duration::from_secs(1),
            }),
            success_condition: None,
            failure_condition: None,
            failure_limit: 1,
            inconclusive_limit: 0,
            consecutive_error_limit: 4,
            interval: interval.map(Duration::from_secs),
            initial_delay: Duration::ZERO,
            count,
        }
    }

    fn measured(phases: &[VerificationPhase]) -> MetricResult {
        let mut result = MetricResult::default();
        for phase in phases {
            record(
                &mut result,
                Measurement {
                    phase: *phase,
                    ..Measurement::default()
                },
            );
        }
        result
    }

    #[test]
    fn limits_are_strict_and_checked_in_order() {
        use VerificationPhase::*;
        let spec = spec(Some(10), Some(60));
        // At the limit: still running.
        assert_eq!(assess(&spec, &measured(&[Failed])), None);
        assert_eq!(assess(&spec, &measured(&[Error; 4])), None);
        // Over two limits at once: Failed wins over Inconclusive.
        let both = measured(&[Failed, Inconclusive, Failed]);
        assert_eq!(
            assess(&spec, &both),
            Some((Failed, "failed (2) > failureLimit (1)".to_owned()))
        );
        assert_eq!(
            assess(&spec, &measured(&[Successful, Inconclusive])).map(|a| a.1),
            Some("inconclusive (1) > inconclusiveLimit (0)".to_owned())
        );
        let errors = measured(&[Error; 5]);
        assert_eq!((errors.count, errors.error), (0, 5));
        assert!(assess(&spec, &errors).is_some_and(|(p, m)| p == Error
            && m.starts_with("consecutiveErrors (5) > consecutiveErrorLimit (4)")));
    }

    #[test]
    fn without_count_or_interval_a_metric_measures_once() {
        use VerificationPhase::*;
        assert_eq!(spec(None, None).effective_count(), Some(1));
        assert_eq!(spec(None, Some(60)).effective_count(), None);
        let once = spec(None, None);
        assert_eq!(
            assess(&once, &measured(&[Successful])).map(|a| a.0),
            Some(Successful)
        );
        assert_eq!(
            next_due(&once, &measured(&[Successful]), Timestamp::UNIX_EPOCH),
            None
        );
        // An error is retried even without an interval.
        assert_eq!(
            next_due(&once, &measured(&[Error]), Timestamp::UNIX_EPOCH),
            Some(add(Timestamp::UNIX_EPOCH, ERROR_RETRY))
        );
        let kept = measured(&[Successful; 15]);
        assert_eq!(
            (kept.count, kept.measurements.len()),
            (15, MAX_MEASUREMENTS)
        );
    }
}
