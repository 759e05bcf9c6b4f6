//! What would unblock a refused promotion: each gate's [`Reason`] followed by the step that
//! lifts it — the upstream promotion, `dray approve`, the wait for a soak or a window, a
//! person with `override`, more people's `dray signoff` — and, when the Freight's verification upstream is still running,
//! that it is. The gates decide (`availability`, `windows`); this module only words the way
//! out, for the refusal a person reads.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::api::{Stage, VerificationPhase};

use super::availability::Reason;

/// The promotion that was refused.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The project.
    pub project: &'a str,
    /// The Stage it was for.
    pub stage: &'a str,
    /// The Freight's alias.
    pub alias: &'a str,
    /// The Freight's id.
    pub freight: &'a str,
}

impl Target<'_> {
    fn approve(&self) -> String {
        format!(
            "`dray approve -p {} --stage {} --alias {} --reason …`",
            self.project, self.stage, self.alias
        )
    }

    fn promote_to(&self, stage: &str) -> String {
        format!(
            "`dray promote -p {} --stage {stage} --alias {}`",
            self.project, self.alias
        )
    }
}

/// `reason`, then what would lift it: `not verified in `qa` — promote it there first: …`.
/// `upstream` holds the Stages the reason may name, for what their verification is doing.
pub fn explain(
    reason: &Reason,
    target: &Target<'_>,
    upstream: &BTreeMap<String, Stage>,
    now: Timestamp,
) -> String {
    format!("{reason} — {}", way_out(reason, target, upstream, now))
}

/// The Stages a reason waits on, whose state [`explain`] reads.
pub fn upstream_names(reason: &Reason) -> Vec<String> {
    match reason {
        Reason::NotVerified { stages, .. } => stages.clone(),
        _ => Vec::new(),
    }
}

fn way_out(
    reason: &Reason,
    target: &Target<'_>,
    upstream: &BTreeMap<String, Stage>,
    now: Timestamp,
) -> String {
    let approve = target.approve();
    match reason {
        Reason::OriginNotRequested { origin, stage } => format!(
            "promote Freight from a Warehouse that Stage `{stage}` requests, or add \
             `{{origin: {{kind: Warehouse, name: {origin}}}}}` to its `requestedFreight`"
        ),
        Reason::NotVerified { stages, all } => {
            if let Some(running) = stages
                .iter()
                .find_map(|s| verification_of(target, upstream.get(s)?, s, now))
            {
                return format!("{running}; wait for it, or {approve}");
            }
            let promotions: Vec<String> = stages.iter().map(|s| target.promote_to(s)).collect();
            let joined = if *all {
                promotions.join(" and ")
            } else {
                promotions.join(" or ")
            };
            format!("promote it there first: {joined}; or {approve}")
        }
        Reason::Soaking { left, .. } => format!(
            "wait {}, or {approve}",
            humantime::format_duration(std::time::Duration::from_secs(left.as_secs()))
        ),
        Reason::SoakedTooShort { stage, .. } => format!(
            "promote it to `{stage}` again and let it soak: {}; or {approve}",
            target.promote_to(stage)
        ),
        // The reason says until when, if that is known.
        Reason::WindowClosed { .. } => format!(
            "wait until it opens, or ask someone with `override` on stages/{stage} to run {} \
             with `--override-window REASON`",
            target.promote_to(target.stage),
            stage = target.stage
        ),
        Reason::NotPermitted { verb, stage, .. } => {
            format!("ask someone with `{verb}` on stages/{stage}")
        }
        Reason::SignoffsMissing {
            required,
            have,
            groups,
            ..
        } => {
            let more = (*required as usize).saturating_sub(have.len());
            let who = match groups.len() {
                0 => String::new(),
                _ => format!(
                    " (members of {})",
                    groups
                        .iter()
                        .map(|g| format!("`{g}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let people = if more == 1 { "person" } else { "people" };
            format!(
                "ask {more} more {people}{who} to run `dray signoff {} -p {} --stage {} --reason …`; an approval does not lift this gate",
                target.alias, target.project, target.stage
            )
        }
        Reason::Rejected { stage, .. } => format!(
            "promote other Freight, or lift the rejection: `dray freight unreject {} -p {}{}`",
            target.alias,
            target.project,
            stage
                .as_ref()
                .map(|s| format!(" --stage {s}"))
                .unwrap_or_default()
        ),
        Reason::Frozen { scope, .. } => {
            let (lift, resource) = match scope {
                crate::api::Scope::Stage(stage) => (
                    format!("`dray unfreeze -p {} --stage {stage}`", target.project),
                    format!("stages/{stage}"),
                ),
                crate::api::Scope::Project(project) => (
                    format!("`dray unfreeze -p {project}`"),
                    format!("stages/{}", target.stage),
                ),
            };
            format!(
                "wait until it is lifted ({lift}), or ask someone with `override` on {resource} \
                 to run {} with `--override-window REASON`",
                target.promote_to(target.stage)
            )
        }
    }
}

/// "verification of A in `qa` is still running (started 40s ago)", when the Freight's
/// verification in `stage` has not ended; or how it ended, when it failed.
fn verification_of(
    target: &Target<'_>,
    upstream: &Stage,
    name: &str,
    now: Timestamp,
) -> Option<String> {
    let run = upstream.status.as_ref()?.verification.as_ref()?;
    if run.freight != target.freight {
        return None;
    }
    let alias = target.alias;
    match run.phase {
        VerificationPhase::Pending | VerificationPhase::Running => {
            let started = run
                .start_time
                .as_ref()
                .map(|t| {
                    let secs = now.duration_since(t.0).as_secs().max(0) as u64;
                    let ago = humantime::format_duration(std::time::Duration::from_secs(secs));
                    format!(" (started {ago} ago)")
                })
                .unwrap_or_default();
            Some(format!(
                "verification of {alias} in `{name}` is still running{started}"
            ))
        }
        VerificationPhase::Successful => None,
        phase => Some(format!(
            "verification of {alias} in `{name}` ended {phase}; re-run it with \
             `dray verify stage {name} -p {}`",
            target.project
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    const TARGET: Target<'static> = Target {
        project: "demo",
        stage: "prod",
        alias: "frosty-otter",
        freight: "f1",
    };

    fn qa(phase: &str, freight: &str) -> BTreeMap<String, Stage> {
        let stage: Stage = serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "qa", "namespace": "demo"},
            "spec": {"requestedFreight": []},
            "status": {"verification": {"id": "v1", "freight": freight, "phase": phase,
                                        "startTime": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap();
        BTreeMap::from([("qa".to_owned(), stage)])
    }

    fn now() -> Timestamp {
        "2026-01-01T00:00:40Z".parse().unwrap()
    }

    #[test]
    fn not_verified_names_the_upstream_promotion_and_approval() {
        let reason = Reason::NotVerified {
            stages: vec!["qa".into()],
            all: false,
        };
        assert_eq!(
            explain(&reason, &TARGET, &BTreeMap::new(), now()),
            "not verified in `qa` — promote it there first: \
             `dray promote -p demo --stage qa --alias frosty-otter`; or \
             `dray approve -p demo --stage prod --alias frosty-otter --reason …`"
        );
    }

    #[test]
    fn a_running_verification_upstream_is_said_to_be_running() {
        let reason = Reason::NotVerified {
            stages: vec!["qa".into()],
            all: false,
        };
        assert_eq!(
            explain(&reason, &TARGET, &qa("Running", "f1"), now()),
            "not verified in `qa` — verification of frosty-otter in `qa` is still running \
             (started 40s ago); wait for it, or \
             `dray approve -p demo --stage prod --alias frosty-otter --reason …`"
        );
        let failed = explain(&reason, &TARGET, &qa("Failed", "f1"), now());
        assert!(
            failed.contains("ended Failed; re-run it with `dray verify stage qa -p demo`"),
            "{failed}"
        );
        // Another Freight's run says nothing about this one.
        let other = explain(&reason, &TARGET, &qa("Running", "f2"), now());
        assert!(other.contains("promote it there first"), "{other}");
    }

    #[test]
    fn soak_and_windows_say_how_long_and_who_may_pass() {
        let soaking = Reason::Soaking {
            stage: "qa".into(),
            left: Duration::from_secs(125),
            until: now(),
        };
        let said = explain(&soaking, &TARGET, &BTreeMap::new(), now());
        assert!(said.contains("— wait 2m 5s, or `dray approve"), "{said}");
        let window = Reason::WindowClosed {
            window: "freeze".into(),
            until: None,
        };
        let said = explain(&window, &TARGET, &BTreeMap::new(), now());
        assert!(
            said.ends_with(
                "wait until it opens, or ask someone with `override` on stages/prod to run \
                 `dray promote -p demo --stage prod --alias frosty-otter` with \
                 `--override-window REASON`"
            ),
            "{said}"
        );
    }
}
