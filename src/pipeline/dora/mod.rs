//! The four DORA numbers of each Stage of a project, over a window of days, computed from
//! its history ([`History`]: promotions that ended, verifications that ended, when each
//! Freight's images were built). Pure: [`compute`] reads no store and no clock; [`read`]
//! gathers a project's history from the store.
//!
//! What each number means here (`docs/resources.md`, "DORA numbers"):
//! - **deployment frequency**: Succeeded promotions into the Stage per day over the window;
//! - **lead time**: the median, over those promotions, of the time from the newest of the
//!   Freight's images being built (its config's `created`) to the promotion's end; Freight
//!   whose build time discovery did not read is left out;
//! - **change failure ratio**: of those promotions, the share whose Freight then failed a
//!   verification in the Stage before the next promotion there;
//! - **time to restore**: the median time from a verification failing in the Stage (the
//!   first of a run of failures) to the next one that succeeds there, for failures in the
//!   window that were restored.
//!
//! A number with nothing to measure (no promotions, no build times, no failure) is `None`,
//! never a misleading zero.

pub mod read;

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

/// How many days the project page's chart shows.
pub const CHART_DAYS: usize = 14;

/// One promotion that ended Succeeded: a deployment.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    /// The Stage.
    pub stage: String,
    /// The Freight's id.
    pub freight: String,
    /// When it ended.
    pub at: Timestamp,
}

/// How a verification ended, as DORA counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `Successful`.
    Passed,
    /// `Failed`: the change failed in the Stage (`Inconclusive`, `Error` and `Aborted`
    /// say nothing about the change and are not counted).
    Failed,
}

/// One verification that ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Verification {
    /// The Stage.
    pub stage: String,
    /// The Freight verified.
    pub freight: String,
    /// How it ended.
    pub verdict: Verdict,
    /// When it ended.
    pub at: Timestamp,
}

/// What the numbers are computed from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Succeeded promotions, in any order.
    pub deployments: Vec<Deployment>,
    /// Ended verifications, in any order.
    pub verifications: Vec<Verification>,
    /// Freight id → when the newest of its images was built, where known.
    pub built: HashMap<String, Timestamp>,
}

/// A Stage's numbers over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageNumbers {
    /// The Stage.
    pub stage: String,
    /// The window, in days.
    pub days: u32,
    /// Succeeded promotions in the window.
    pub deployments: u32,
    /// `deployments / days`.
    pub deployment_frequency: f64,
    /// The median lead time, in seconds.
    pub lead_time_seconds: Option<f64>,
    /// Promotions followed by a failed verification / promotions.
    pub change_failure_ratio: Option<f64>,
    /// The median time to restore, in seconds.
    pub time_to_restore_seconds: Option<f64>,
    /// Deployments per day for the last [`CHART_DAYS`] days, oldest first (the last is
    /// the 24 hours up to `now`).
    pub daily: Vec<u32>,
}

/// The numbers of each of `stages` (in their order) over the `days` up to `now`.
pub fn compute(
    history: &History,
    stages: &[String],
    now: Timestamp,
    days: u32,
) -> Vec<StageNumbers> {
    stages
        .iter()
        .map(|stage| stage_numbers(history, stage, now, days))
        .collect()
}

fn stage_numbers(history: &History, stage: &str, now: Timestamp, days: u32) -> StageNumbers {
    let since = now - SignedDuration::from_hours(24 * i64::from(days));
    let mut all: Vec<&Deployment> = history
        .deployments
        .iter()
        .filter(|d| d.stage == stage && d.at <= now)
        .collect();
    all.sort_by_key(|d| d.at);
    let mut verifications: Vec<&Verification> = history
        .verifications
        .iter()
        .filter(|v| v.stage == stage && v.at <= now)
        .collect();
    verifications.sort_by_key(|v| v.at);

    let mut deployments = 0u32;
    let mut failed = 0u32;
    let mut lead_times = Vec::new();
    for (i, deployment) in all.iter().enumerate() {
        if deployment.at <= since {
            continue;
        }
        deployments += 1;
        if let Some(built) = history.built.get(&deployment.freight)
            && *built <= deployment.at
        {
            lead_times.push(seconds(deployment.at.duration_since(*built)));
        }
        let until = all.get(i + 1).map_or(now, |next| next.at);
        if verifications.iter().any(|v| {
            v.verdict == Verdict::Failed
                && v.freight == deployment.freight
                && v.at >= deployment.at
                && v.at <= until
        }) {
            failed += 1;
        }
    }

    let mut restores = Vec::new();
    let mut failing_since: Option<Timestamp> = None;
    for verification in &verifications {
        match (verification.verdict, failing_since) {
            (Verdict::Failed, None) => failing_since = Some(verification.at),
            (Verdict::Passed, Some(failed_at)) => {
                if failed_at > since {
                    restores.push(seconds(verification.at.duration_since(failed_at)));
                }
                failing_since = None;
            }
            _ => {}
        }
    }

    StageNumbers {
        stage: stage.to_owned(),
        days,
        deployments,
        deployment_frequency: f64::from(deployments) / f64::from(days.max(1)),
        lead_time_seconds: median(lead_times),
        change_failure_ratio: (deployments > 0).then(|| f64::from(failed) / f64::from(deployments)),
        time_to_restore_seconds: median(restores),
        daily: daily(&all, now),
    }
}

/// Deployments per 24 hours for the last [`CHART_DAYS`] periods up to `now`, oldest first.
fn daily(deployments: &[&Deployment], now: Timestamp) -> Vec<u32> {
    let mut counts = vec![0u32; CHART_DAYS];
    for deployment in deployments {
        let age = now.duration_since(deployment.at);
        if age.is_negative() {
            continue;
        }
        let days_ago = (age.as_secs() / 86_400) as usize;
        if days_ago < CHART_DAYS {
            counts[CHART_DAYS - 1 - days_ago] += 1;
        }
    }
    counts
}

fn seconds(duration: SignedDuration) -> f64 {
    duration.as_secs_f64()
}

/// The median (the mean of the middle two for an even count); `None` for no values.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 0 {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// `hours` before [`NOW`].
    fn ago(hours: i64) -> Timestamp {
        now() - SignedDuration::from_hours(hours)
    }

    fn deployed(stage: &str, freight: &str, hours_ago: i64) -> Deployment {
        Deployment {
            stage: stage.into(),
            freight: freight.into(),
            at: ago(hours_ago),
        }
    }

    fn verified(stage: &str, freight: &str, verdict: Verdict, hours_ago: i64) -> Verification {
        Verification {
            stage: stage.into(),
            freight: freight.into(),
            verdict,
            at: ago(hours_ago),
        }
    }

    fn numbers(history: &History, days: u32) -> StageNumbers {
        compute(history, &["prod".to_owned()], now(), days).remove(0)
    }

    /// Deployment frequency counts Succeeded promotions into the Stage inside the window
    /// and divides by its days; other Stages' promotions and older ones do not count; the
    /// chart puts each in its day, today last.
    #[test]
    fn deployment_frequency_per_day_over_7_and_30_days() {
        let history = History {
            deployments: vec![
                deployed("prod", "a", 1),
                deployed("prod", "b", 2),
                deployed("prod", "c", 24 * 3 + 1),
                deployed("prod", "d", 24 * 10),
                deployed("prod", "e", 24 * 29),
                deployed("prod", "old", 24 * 31),
                deployed("dev", "a", 1),
            ],
            ..Default::default()
        };
        let week = numbers(&history, 7);
        assert_eq!(week.deployments, 3);
        assert!(
            (week.deployment_frequency - 3.0 / 7.0).abs() < 1e-12,
            "{week:?}"
        );
        let month = numbers(&history, 30);
        assert_eq!(month.deployments, 5);
        assert!(
            (month.deployment_frequency - 5.0 / 30.0).abs() < 1e-12,
            "{month:?}"
        );

        let mut chart = vec![0; CHART_DAYS];
        chart[CHART_DAYS - 1] = 2; // today: a and b
        chart[CHART_DAYS - 1 - 3] = 1; // three days ago: c
        chart[CHART_DAYS - 1 - 10] = 1; // ten days ago: d
        assert_eq!(week.daily, chart);
    }

    /// Lead time runs from the Freight's newest image build to the promotion's end; the
    /// median of an even count is the mean of the middle two; Freight without a known
    /// build time is left out, and a Stage with none has no lead time at all.
    #[test]
    fn lead_time_is_the_median_from_image_build_to_promotion() {
        let history = History {
            deployments: vec![
                deployed("prod", "a", 1),
                deployed("prod", "b", 10),
                deployed("prod", "c", 20),
                deployed("prod", "d", 30),
                deployed("prod", "unknown", 40),
            ],
            built: HashMap::from([
                ("a".to_owned(), ago(2)),   // 1h
                ("b".to_owned(), ago(13)),  // 3h
                ("c".to_owned(), ago(25)),  // 5h
                ("d".to_owned(), ago(130)), // 100h
            ]),
            ..Default::default()
        };
        assert_eq!(numbers(&history, 7).lead_time_seconds, Some(4.0 * 3600.0));
        let unbuilt = History {
            deployments: vec![deployed("prod", "unknown", 1)],
            ..Default::default()
        };
        assert_eq!(numbers(&unbuilt, 7).lead_time_seconds, None);
    }

    /// A promotion counts as a failed change when its Freight failed verification in the
    /// Stage before the next promotion there; a failure of the same Freight after it was
    /// replaced, or of another Stage, does not count; no promotions, no ratio.
    #[test]
    fn change_failure_ratio_is_failed_verifications_over_promotions() {
        let history = History {
            deployments: vec![
                deployed("prod", "a", 50),
                deployed("prod", "b", 40),
                deployed("prod", "c", 30),
                deployed("prod", "d", 20),
            ],
            verifications: vec![
                verified("prod", "a", Verdict::Passed, 49),
                verified("prod", "b", Verdict::Failed, 39),
                // `b` failed again after `c` replaced it: `c` is not to blame.
                verified("prod", "b", Verdict::Failed, 25),
                verified("prod", "c", Verdict::Passed, 29),
                verified("staging", "d", Verdict::Failed, 21),
                verified("prod", "d", Verdict::Failed, 19),
                verified("prod", "d", Verdict::Failed, 18),
            ],
            ..Default::default()
        };
        let n = numbers(&history, 7);
        assert_eq!(n.deployments, 4);
        assert_eq!(n.change_failure_ratio, Some(0.5), "b and d of four");
        assert_eq!(numbers(&History::default(), 7).change_failure_ratio, None);
    }

    /// Time to restore runs from the first failure of a run of failures to the next
    /// success; a failure not yet restored counts nothing; the median is taken.
    #[test]
    fn time_to_restore_runs_from_the_first_failure_to_the_next_success() {
        let history = History {
            verifications: vec![
                verified("prod", "a", Verdict::Failed, 100),
                verified("prod", "a", Verdict::Failed, 99),
                verified("prod", "b", Verdict::Passed, 96), // 4h after the first failure
                verified("prod", "c", Verdict::Failed, 50),
                verified("prod", "d", Verdict::Passed, 48), // 2h
                verified("prod", "e", Verdict::Failed, 30),
                verified("prod", "f", Verdict::Passed, 20), // 10h
                verified("dev", "x", Verdict::Failed, 10),
                verified("prod", "g", Verdict::Failed, 5), // not restored yet
            ],
            ..Default::default()
        };
        assert_eq!(
            numbers(&history, 7).time_to_restore_seconds,
            Some(4.0 * 3600.0)
        );
        assert_eq!(
            numbers(&History::default(), 7).time_to_restore_seconds,
            None
        );
    }
}
