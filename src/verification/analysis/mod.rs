//! The analysis engine: runs a Stage's AnalysisTemplates with Argo Rollouts' semantics.
//!
//! [`prepare`] resolves the templates with the Stage's args into [`MetricSpec`]s;
//! [`Analyzer::advance`] takes every measurement due now and updates the run, which lives
//! entirely in the Stage's [`VerificationInfo`] (so a restart resumes where it stopped).
//! The caller (the verification controller) persists the info and calls again at the time
//! `advance` returns.
//!
//! - `spec.rs`: [`MetricSpec`] and [`prepare`]; `args.rs`: `{{args.NAME}}`;
//! - `metric.rs`: one metric's counters, limits, schedule and deadline (pure);
//! - `condition.rs`: judging one measurement (conditions, empty and NaN results);
//! - `providers/`: `web` and `prometheus`; `json_path.rs`: `{$.data.ok}`.
//!
//! Rules, as in Argo Rollouts: a measurement is Failed when `failureCondition` is true,
//! else Successful when `successCondition` is true; a lone `successCondition` that is false
//! fails, a lone `failureCondition` that is false succeeds, both false is Inconclusive; a
//! provider or evaluation error is an Error. An empty result or NaN is Inconclusive, never
//! Successful. A metric ends Failed when `failed > failureLimit`, Inconclusive when
//! `inconclusive > inconclusiveLimit`, Error when `consecutiveError >
//! consecutiveErrorLimit`, Successful after `count` measurements (errors not counted).
//! When one metric ends other than Successful, the others stop (`Aborted`), and the run
//! takes the worst phase: Failed > Error > Inconclusive.

mod args;
mod condition;
mod error;
mod json_path;
mod metric;
mod providers;
mod spec;

#[cfg(test)]
mod tests;

use std::time::Instant;

use jiff::Timestamp;

use crate::api::{Measurement, Time, VerificationInfo, VerificationPhase};
use crate::expr::ExprCache;

pub use args::{
    PLACEHOLDER as ARG_PLACEHOLDER, referenced as referenced_args,
    with_placeholders as with_arg_placeholders,
};
pub use condition::{Observed, Verdict};
pub use error::AnalysisError;
pub use json_path::JsonPath;
pub use metric::{ERROR_RETRY, MAX_MEASUREMENTS};
pub use spec::{MetricSpec, PrometheusQuery, Provider, WEB_METHODS, WebRequest, prepare};

/// Takes measurements for verification runs; cheap to clone.
#[derive(Clone, Debug)]
pub struct Analyzer {
    http: reqwest::Client,
    cache: ExprCache,
}

impl Analyzer {
    /// An analyzer that sends its requests with `http` (each request sets its own timeout).
    pub fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            cache: ExprCache::new(),
        }
    }

    /// Takes every measurement due at `now` (the first at `info.analysisStartTime +
    /// initialDelay`, set to `now` when missing; then every `interval` after the previous
    /// one finished), updates `info.metrics` (creating an entry per metric on the first
    /// call), and when every metric has ended sets `info.phase` (Successful only when all
    /// are; otherwise Failed > Error > Inconclusive), `info.message` and
    /// `info.finishTime`. Returns when the next measurement is due (never after
    /// `deadline`), or `None` when the run has ended.
    ///
    /// At `deadline` unfinished metrics end: one without `count` that never crossed a
    /// limit is Successful, one with `count` is an Error ("deadline passed after N of M
    /// measurements"). A run that already ended (e.g. Aborted) is left as it is.
    pub async fn advance(
        &self,
        metrics: &[MetricSpec],
        info: &mut VerificationInfo,
        now: Timestamp,
        deadline: Timestamp,
    ) -> Option<Timestamp> {
        if info.phase.is_terminal() {
            return None;
        }
        info.phase = VerificationPhase::Running;
        let start = info.analysis_start_time.get_or_insert(Time(now)).0;
        for spec in metrics {
            if !info.metrics.iter().any(|m| m.name == spec.name) {
                info.metrics.push(metric::fresh(spec));
            }
        }
        let position =
            |info: &VerificationInfo, name: &str| info.metrics.iter().position(|m| m.name == name);

        if now < deadline {
            let due: Vec<(&MetricSpec, usize)> = metrics
                .iter()
                .filter_map(|spec| {
                    let i = position(info, &spec.name)?;
                    let result = &info.metrics[i];
                    let running = result.phase == VerificationPhase::Running;
                    (running && metric::next_due(spec, result, start).is_some_and(|t| t <= now))
                        .then_some((spec, i))
                })
                .collect();
            let taken =
                futures::future::join_all(due.iter().map(|(spec, _)| self.measure(spec, now)))
                    .await;
            for ((spec, i), measurement) in due.into_iter().zip(taken) {
                let result = &mut info.metrics[i];
                metric::record(result, measurement);
                if let Some((phase, message)) = metric::assess(spec, result) {
                    tracing::info!(metric = %spec.name, ?phase, %message, "analysis metric ended");
                    result.phase = phase;
                    result.message = message;
                }
            }
        } else {
            for spec in metrics {
                let Some(i) = position(info, &spec.name) else {
                    continue;
                };
                let result = &mut info.metrics[i];
                if result.phase == VerificationPhase::Running {
                    let (phase, message) = metric::at_deadline(spec, result);
                    result.phase = phase;
                    result.message = message;
                }
            }
        }

        let ours = |info: &VerificationInfo| -> Vec<usize> {
            metrics
                .iter()
                .filter_map(|spec| position(info, &spec.name))
                .collect()
        };
        let indices = ours(info);
        let ended_badly = indices.iter().find_map(|&i| {
            let m = &info.metrics[i];
            matches!(
                m.phase,
                VerificationPhase::Failed
                    | VerificationPhase::Error
                    | VerificationPhase::Inconclusive
            )
            .then(|| (m.name.clone(), m.phase))
        });
        if let Some((name, phase)) = ended_badly {
            for &i in &indices {
                let m = &mut info.metrics[i];
                if m.phase == VerificationPhase::Running {
                    m.phase = VerificationPhase::Aborted;
                    m.message = format!("not measured further: metric `{name}` ended {phase:?}");
                }
            }
        }

        if indices.iter().all(|&i| info.metrics[i].phase.is_terminal()) {
            let (phase, message) = verdict(info, &indices);
            info.phase = phase;
            info.message = message;
            info.finish_time = Some(Time(now));
            return None;
        }
        let next = metrics
            .iter()
            .filter_map(|spec| {
                let i = position(info, &spec.name)?;
                let result = &info.metrics[i];
                (result.phase == VerificationPhase::Running)
                    .then(|| metric::next_due(spec, result, start))
                    .flatten()
            })
            .min()
            .unwrap_or(deadline);
        info.message = format!("measuring {} metrics", indices.len());
        Some(next.min(deadline))
    }

    /// Takes one measurement of `spec`, started at `now`.
    async fn measure(&self, spec: &MetricSpec, now: Timestamp) -> Measurement {
        let started = Instant::now();
        let (verdict, value) = match providers::measure(&self.http, &spec.provider).await {
            Ok(observed) => (
                condition::judge(&self.cache, spec, &observed),
                observed.text(),
            ),
            Err(message) => (Verdict::error(message), String::new()),
        };
        Measurement {
            phase: verdict.phase,
            value,
            message: verdict.message,
            started_at: Some(Time(now)),
            finished_at: Some(Time(metric::add(now, started.elapsed()))),
        }
    }
}

/// The run's phase and message from its ended metrics (`indices` into `info.metrics`):
/// Successful only when all are; otherwise the worst, Failed > Error > Inconclusive.
fn verdict(info: &VerificationInfo, indices: &[usize]) -> (VerificationPhase, String) {
    for phase in [
        VerificationPhase::Failed,
        VerificationPhase::Error,
        VerificationPhase::Inconclusive,
        VerificationPhase::Aborted,
    ] {
        let reasons: Vec<String> = indices
            .iter()
            .map(|&i| &info.metrics[i])
            .filter(|m| m.phase == phase)
            .map(|m| format!("metric `{}`: {}", m.name, m.message))
            .collect();
        if !reasons.is_empty() {
            return (phase, reasons.join("; "));
        }
    }
    let message = match indices.len() {
        0 => "no metrics to measure".to_owned(),
        1 => format!("metric `{}` successful", info.metrics[indices[0]].name),
        n => format!("all {n} metrics successful"),
    };
    (VerificationPhase::Successful, message)
}
