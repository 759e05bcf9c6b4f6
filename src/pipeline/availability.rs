//! Whether a piece of Freight may enter a Stage, and if not, every reason why.
//!
//! The gates, in the order a release manager reads them:
//! 1. the Stage must request the Freight's origin;
//! 2. Freight a person approved for the Stage is available, bypassing 3 and 4 — on the
//!    record (who, when, why);
//! 3. from upstream Stages, the Freight must be verified there (`OneOf` by default, or
//!    `All`);
//! 4. and must have stayed there continuously for `requiredSoakTime`;
//! 5. and, when the Stage has `spec.signoff`, enough people must have signed it off — an
//!    approval does not bypass this one ([`super::signoff`]).
//!
//! Before all of them: Freight a person rejected (for this Stage, or everywhere) is not
//! available, approved or not ([`super::reject`]).
//!
//! Promotion windows, freezes ([`super::freeze`]) and permissions are checked by the
//! caller, which adds their reasons to the same list. Each [`Reason`] reads as a sentence that names the gate.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::{AvailabilityStrategy, Freight, FreightRequest, Scope, Stage, parse_duration};

/// One reason Freight may not enter a Stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The Stage does not request Freight from this origin.
    OriginNotRequested {
        /// The Freight's Warehouse.
        origin: String,
        /// The Stage.
        stage: String,
    },
    /// Not verified in the upstream Stage(s).
    NotVerified {
        /// The upstream Stages it still needs to be verified in.
        stages: Vec<String>,
        /// `true` when every one is needed (`All`).
        all: bool,
    },
    /// Verified upstream, but not there long enough yet.
    Soaking {
        /// The upstream Stage.
        stage: String,
        /// How long is left.
        left: Duration,
        /// When it will have soaked enough.
        until: Timestamp,
    },
    /// It left the upstream Stage before it had soaked long enough, so it never will.
    SoakedTooShort {
        /// The upstream Stage.
        stage: String,
        /// Its longest continuous stay there.
        soaked: Duration,
        /// The required soak.
        required: Duration,
    },
    /// A promotion window is closed.
    WindowClosed {
        /// The window.
        window: String,
        /// When it opens again, if known.
        until: Option<Timestamp>,
    },
    /// The user may not do this.
    NotPermitted {
        /// Who.
        user: String,
        /// Which verb.
        verb: String,
        /// Which Stage.
        stage: String,
    },
    /// Fewer people than the Stage's `spec.signoff.required` have signed it off.
    SignoffsMissing {
        /// How many distinct people must sign off.
        required: u32,
        /// Who signed off and counts, in the order they signed.
        have: Vec<String>,
        /// The groups whose members count (anyone with `signoff` when empty).
        groups: Vec<String>,
        /// The promoter, when they signed off themselves and that does not count.
        own: Option<String>,
    },
    /// A person rejected the Freight (`dray freight reject`).
    Rejected {
        /// Who.
        by: String,
        /// Why.
        reason: String,
        /// The Stage it was rejected for; `None`: everywhere.
        stage: Option<String>,
    },
    /// A person stopped the line (`dray freeze`).
    Frozen {
        /// Who.
        by: String,
        /// Why.
        reason: String,
        /// When it lifts by itself, if it does.
        until: Option<Timestamp>,
        /// The Stage, or the whole project.
        scope: Scope,
    },
}

fn plain(d: Duration) -> String {
    let seconds = d.as_secs();
    let (h, m, s) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s:02}s"),
        _ => format!("{h}h{m:02}m{s:02}s"),
    }
}

fn backticked(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::OriginNotRequested { origin, stage } => write!(
                f,
                "comes from Warehouse `{origin}`, which Stage `{stage}` does not request"
            ),
            Reason::NotVerified { stages, all: false } if stages.len() == 1 => {
                write!(f, "not verified in `{}`", stages[0])
            }
            Reason::NotVerified { stages, all: false } => {
                write!(f, "not verified in any of {}", backticked(stages))
            }
            Reason::NotVerified { stages, all: true } => {
                write!(
                    f,
                    "not verified in {} (all upstream Stages are required)",
                    backticked(stages)
                )
            }
            Reason::Soaking { stage, left, until } => write!(
                f,
                "soaking in `{stage}`: {} left (until {})",
                plain(*left),
                until.round(jiff::Unit::Second).unwrap_or(*until)
            ),
            Reason::SoakedTooShort {
                stage,
                soaked,
                required,
            } => write!(
                f,
                "stayed only {} in `{stage}` before it left (needs {} continuously)",
                plain(*soaked),
                plain(*required)
            ),
            Reason::WindowClosed {
                window,
                until: Some(until),
            } => {
                write!(f, "frozen by window `{window}` until {until}")
            }
            Reason::WindowClosed {
                window,
                until: None,
            } => write!(f, "frozen by window `{window}`"),
            Reason::NotPermitted { user, verb, stage } => {
                write!(f, "user `{user}` may not {verb} to `{stage}`")
            }
            Reason::SignoffsMissing {
                required,
                have,
                groups,
                own,
            } => {
                let people = if *required == 1 { "person" } else { "people" };
                write!(f, "needs sign-offs from {required} {people}")?;
                if !groups.is_empty() {
                    write!(f, " in {}", backticked(groups))?;
                }
                match have.len() {
                    0 => write!(f, ", has none")?,
                    n => write!(f, ", has {n} ({})", backticked(have))?,
                }
                if let Some(own) = own {
                    write!(
                        f,
                        "; `{own}` signed off too, but your own sign-off does not count (the Stage does not set `allowSelf`)"
                    )?;
                }
                Ok(())
            }
            Reason::Rejected { by, reason, stage } => {
                write!(f, "rejected by {by}: {reason} ")?;
                match stage {
                    Some(stage) => write!(f, "(for Stage `{stage}`)"),
                    None => write!(f, "(everywhere)"),
                }
            }
            Reason::Frozen {
                by,
                reason,
                until,
                scope,
            } => {
                write!(f, "frozen by {by}: {reason} ({scope}")?;
                match until {
                    Some(until) => write!(f, ", until {until})"),
                    None => write!(f, ")"),
                }
            }
        }
    }
}

/// What the gates say about one (Freight, Stage).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Availability {
    /// Every reason it may not go; empty when it may.
    pub reasons: Vec<Reason>,
    /// When soak will end, if soaking is what holds it back.
    pub soak_ends_at: Option<Timestamp>,
    /// Who approved it for this Stage, if someone did.
    pub approved_by: Option<String>,
}

impl Availability {
    /// Whether the Freight may enter the Stage.
    pub fn is_available(&self) -> bool {
        self.reasons.is_empty()
    }
}

fn request<'a>(stage: &'a Stage, freight: &Freight) -> Option<&'a FreightRequest> {
    stage
        .spec
        .requested_freight
        .iter()
        .find(|r| r.origin.name == freight.spec.origin.name)
}

/// How long `freight` has soaked in `upstream`: its current continuous stay, or the
/// longest one it had before it left.
fn soaked(freight: &Freight, upstream: &str, now: Timestamp) -> Duration {
    let status = freight.status.clone().unwrap_or_default();
    let current = status
        .currently_in
        .get(upstream)
        .and_then(|c| c.since.as_ref())
        .map(|since| Duration::from_secs(now.duration_since(since.0).as_secs().max(0) as u64))
        .unwrap_or_default();
    let longest = status
        .verified_in
        .get(upstream)
        .and_then(|v| v.longest_soak_seconds)
        .map(Duration::from_secs)
        .unwrap_or_default();
    current.max(longest)
}

/// The gates for `freight` entering `stage` at `now` (windows and permissions aside),
/// whoever promotes: the sign-off gate ([`super::signoff`]) counts every signer here; the
/// promote path counts again without the promoter's own sign-off.
/// The rejections of `freight` that gate `stage`: everywhere, then for the Stage.
fn rejections(stage_name: &str, freight: &Freight) -> Vec<Reason> {
    let Some(status) = freight.status.as_ref() else {
        return Vec::new();
    };
    let everywhere = status.rejected.iter().map(|r| Reason::Rejected {
        by: r.by.clone(),
        reason: r.reason.clone(),
        stage: None,
    });
    let here = status
        .rejected_for
        .get(stage_name)
        .map(|r| Reason::Rejected {
            by: r.by.clone(),
            reason: r.reason.clone(),
            stage: Some(stage_name.to_owned()),
        });
    everywhere.chain(here).collect()
}

/// The gates for `freight` entering `stage` at `now` (windows, freezes and permissions
/// aside): a rejection first, then the rest.
pub fn availability(stage: &Stage, freight: &Freight, now: Timestamp) -> Availability {
    let mut result = upstream_gates(stage, freight, now);
    let requested = !matches!(
        result.reasons.first(),
        Some(Reason::OriginNotRequested { .. })
    );
    if requested && let Some(reason) = super::signoff::missing(stage, freight, None) {
        result.reasons.push(reason);
    }
    result
}

/// Every gate but sign-offs: origin, approval, verification upstream, soak.
fn upstream_gates(stage: &Stage, freight: &Freight, now: Timestamp) -> Availability {
    let stage_name = stage.metadata.name.clone().unwrap_or_default();
    let mut result = gates(stage, freight, now);
    let rejected = rejections(&stage_name, freight);
    if !rejected.is_empty() {
        result.reasons.splice(0..0, rejected);
    }
    result
}

/// The gates of [`availability`] but rejection.
fn gates(stage: &Stage, freight: &Freight, now: Timestamp) -> Availability {
    let stage_name = stage.metadata.name.clone().unwrap_or_default();
    let Some(request) = request(stage, freight) else {
        return Availability {
            reasons: vec![Reason::OriginNotRequested {
                origin: freight.spec.origin.name.clone(),
                stage: stage_name,
            }],
            ..Default::default()
        };
    };
    let status = freight.status.clone().unwrap_or_default();
    let approved_by = status.approved_for.get(&stage_name).map(|a| a.by.clone());
    if request.sources.direct || approved_by.is_some() || request.sources.stages.is_empty() {
        return Availability {
            approved_by,
            ..Default::default()
        };
    }
    let upstream = &request.sources.stages;
    let verified: Vec<&String> = upstream
        .iter()
        .filter(|s| status.verified_in.contains_key(*s))
        .collect();
    let missing: Vec<String> = upstream
        .iter()
        .filter(|s| !status.verified_in.contains_key(*s))
        .cloned()
        .collect();
    let all = request.sources.availability_strategy == AvailabilityStrategy::All;
    if verified.is_empty() || (all && !missing.is_empty()) {
        return Availability {
            reasons: vec![Reason::NotVerified {
                stages: missing,
                all,
            }],
            ..Default::default()
        };
    }
    let required = request
        .sources
        .required_soak_time
        .as_deref()
        .and_then(|t| parse_duration(t).ok())
        .unwrap_or_default();
    if required.is_zero() {
        return Availability::default();
    }
    let status_now = freight.status.clone().unwrap_or_default();
    let mut soaking: Vec<Reason> = verified
        .iter()
        .filter_map(|up| {
            let have = soaked(freight, up, now);
            if have >= required {
                return None;
            }
            let since = status_now
                .currently_in
                .get(*up)
                .and_then(|c| c.since.as_ref());
            Some(match since {
                Some(since) => {
                    let until =
                        since.0 + jiff::SignedDuration::try_from(required).unwrap_or_default();
                    Reason::Soaking {
                        stage: (*up).clone(),
                        left: required - have,
                        until,
                    }
                }
                None => Reason::SoakedTooShort {
                    stage: (*up).clone(),
                    soaked: have,
                    required,
                },
            })
        })
        .collect();
    let satisfied = verified.len() - soaking.len();
    let enough = if all {
        soaking.is_empty()
    } else {
        satisfied > 0
    };
    if enough {
        return Availability::default();
    }
    soaking.sort_by_key(|r| match r {
        Reason::Soaking { left, .. } => *left,
        _ => Duration::MAX,
    });
    if !all {
        soaking.truncate(1);
    }
    let soak_ends_at = soaking
        .iter()
        .filter_map(|r| match r {
            Reason::Soaking { until, .. } => Some(*until),
            _ => None,
        })
        .max();
    Availability {
        reasons: soaking,
        soak_ends_at,
        approved_by: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stage(sources: serde_json::Value) -> Stage {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "staging", "namespace": "demo"},
            "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"}, "sources": sources}]}
        }))
        .unwrap()
    }

    fn freight(status: serde_json::Value) -> Freight {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": "f1", "namespace": "demo"},
            "alias": "frosty-otter", "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}],
            "status": status
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    fn reasons(stage: &Stage, freight: &Freight) -> Vec<String> {
        availability(stage, freight, now())
            .reasons
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn unverified_upstream_is_named() {
        let s = stage(json!({"stages": ["dev"]}));
        assert_eq!(reasons(&s, &freight(json!({}))), ["not verified in `dev`"]);
        let verified =
            freight(json!({"verifiedIn": {"dev": {"verifiedAt": "2026-11-29T11:00:00Z"}}}));
        assert!(reasons(&s, &verified).is_empty());
    }

    #[test]
    fn soak_reports_the_time_left_and_when_it_ends() {
        let s = stage(json!({"stages": ["dev"], "requiredSoakTime": "1h"}));
        let f = freight(json!({
            "currentlyIn": {"dev": {"since": "2026-11-29T11:18:48Z"}},
            "verifiedIn": {"dev": {"verifiedAt": "2026-11-29T11:18:48Z"}}
        }));
        let result = availability(&s, &f, now());
        assert_eq!(
            result.reasons[0].to_string(),
            "soaking in `dev`: 18m48s left (until 2026-11-29T12:18:48Z)"
        );
        assert_eq!(
            result.soak_ends_at,
            Some("2026-11-29T12:18:48Z".parse().unwrap())
        );
        let left_long_ago = freight(json!({"verifiedIn": {"dev": {"longestSoakSeconds": 7200}}}));
        assert!(
            reasons(&s, &left_long_ago).is_empty(),
            "the longest stay counts after it left"
        );
    }

    #[test]
    fn approval_bypasses_verification_and_soak() {
        let s = stage(json!({"stages": ["dev"], "requiredSoakTime": "1h"}));
        let f = freight(json!({"approvedFor": {"staging": {"by": "ann", "reason": "hotfix"}}}));
        let result = availability(&s, &f, now());
        assert!(result.is_available());
        assert_eq!(result.approved_by.as_deref(), Some("ann"));
    }

    #[test]
    fn strategies_and_origins() {
        let all = stage(json!({"stages": ["a", "b"], "availabilityStrategy": "All"}));
        let one = stage(json!({"stages": ["a", "b"]}));
        let in_a = freight(json!({"verifiedIn": {"a": {}}}));
        assert_eq!(
            reasons(&all, &in_a),
            ["not verified in `b` (all upstream Stages are required)"]
        );
        assert!(reasons(&one, &in_a).is_empty());
        assert_eq!(
            reasons(&one, &freight(json!({}))),
            ["not verified in any of `a`, `b`"]
        );
        let mut other = freight(json!({}));
        other.spec.origin.name = "lib".into();
        assert_eq!(
            reasons(&one, &other),
            ["comes from Warehouse `lib`, which Stage `staging` does not request"]
        );
        assert!(reasons(&stage(json!({"direct": true})), &freight(json!({}))).is_empty());
    }

    #[test]
    fn a_rejection_gates_even_approved_or_direct_freight() {
        let direct = stage(json!({"direct": true}));
        let here = freight(json!({
            "approvedFor": {"staging": {"by": "bob"}},
            "rejectedFor": {"staging": {"by": "ann", "reason": "leaks memory"}}
        }));
        assert_eq!(
            reasons(&direct, &here),
            ["rejected by ann: leaks memory (for Stage `staging`)"]
        );
        let elsewhere = freight(json!({"rejectedFor": {"prod": {"by": "ann", "reason": "x"}}}));
        assert!(reasons(&direct, &elsewhere).is_empty());
        let everywhere = freight(json!({"rejected": {"by": "ann", "reason": "CVE"}}));
        let upstream = stage(json!({"stages": ["dev"]}));
        assert_eq!(
            reasons(&upstream, &everywhere),
            ["rejected by ann: CVE (everywhere)", "not verified in `dev`"]
        );
    }
}
