//! What a finished promotion changes besides git — an aborted one that changed nothing
//! takes its hold away ([`lift_hold_of`]); a succeeded one: the Stage's current Freight and branch,
//! and the Freight's `currentlyIn` / `verifiedIn`. A Stage that verifies (AnalysisTemplates,
//! or Applications a step registered) starts a verification run instead, and the Freight
//! is verified there when the run succeeds; a Stage without verification counts its
//! Freight verified when the promotion succeeds. The Freight that leaves the Stage keeps
//! its longest continuous stay as `longestSoakSeconds`. A success is recorded before the
//! Promotion says `Succeeded` (`engine/run.rs`), so whoever sees it ended sees the record.
//!
//! It reads what the steps reported as typed effects ([`StepEffect`]: a pushed branch,
//! a registered Application), never step kinds or step outputs.

use dray_steps::Effect;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::verification_run as verification;
use crate::api::{
    CurrentStage, Freight, FreightStatus, HealthState, Kind, ObjectKey, Promotion,
    RegisteredApplication, Stage, StageBranch, StageFreightRef, StageHealth, StageStatus, Time,
    VerificationPhase,
};
use crate::store::{Store, StoreError, modify_typed_status};

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// One effect a step of a promotion reported, kept in the Promotion's `status.state.effects`
/// in the order the steps ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StepEffect {
    /// The step's alias.
    pub step: String,
    /// What it changed.
    #[serde(flatten)]
    pub effect: Effect,
}

/// The effects a Promotion's `status.state` keeps (none when it keeps none, e.g. one
/// recorded before effects were).
pub fn effects_of(state: Option<&Value>) -> Vec<StepEffect> {
    state
        .and_then(|s| s.get("effects"))
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default()
}

/// The branch a promotion wrote to last (a pushed branch), if it wrote one.
pub fn written_to_git(effects: &[StepEffect]) -> Option<StageBranch> {
    effects.iter().rev().find_map(|e| {
        let (repo_url, name, commit) = e.effect.pushed()?;
        Some(StageBranch {
            repo_url: repo_url.to_owned(),
            name: name.to_owned(),
            commit: commit.to_owned(),
        })
    })
}

/// The Applications the promotion's steps registered for the Stage's health.
pub fn registered_applications(effects: &[StepEffect]) -> Vec<RegisteredApplication> {
    effects
        .iter()
        .filter_map(|e| match &e.effect {
            Effect::RegisteredApplication(app) => Some(RegisteredApplication {
                name: app.name.clone(),
                namespace: app.namespace.clone(),
                api_server: app.api_server.clone(),
                kubernetes: app.kubernetes.clone(),
                desired_revisions: app.desired_revisions.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The branch a promotion pushed, read from its steps' outputs: only for the web UI's
/// view of a Promotion recorded before steps reported effects. Dray itself reads
/// [`written_to_git`].
pub fn pushed_branch(outputs: &Map<String, Value>) -> Option<StageBranch> {
    outputs.values().rev().find_map(|o| {
        Some(StageBranch {
            repo_url: o
                .get("repoURL")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: o.get("branch").and_then(Value::as_str)?.to_owned(),
            commit: o.get("commit").and_then(Value::as_str)?.to_owned(),
        })
    })
}

/// A Stage's or Freight's status written against the version read, so a concurrent writer
/// (the verification loop, a person's approval) is never overwritten; a resource deleted
/// meanwhile is left alone.
async fn modify<R, S>(
    store: &dyn Store,
    key: &ObjectKey,
    change: impl FnMut(&R, &mut S) -> Result<Option<()>, StoreError>,
) -> Result<(), StoreError>
where
    R: serde::de::DeserializeOwned,
    S: serde::Serialize + serde::de::DeserializeOwned + Default,
{
    match modify_typed_status(store, key, change).await {
        Err(StoreError::NotFound(_)) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Records a succeeded promotion on its Stage and on the Freight going in and out.
pub async fn promotion_succeeded(
    store: &dyn Store,
    key: &ObjectKey,
    promotion: &Promotion,
    freight: &Freight,
    effects: &[StepEffect],
) -> Result<(), StoreError> {
    let project = key.namespace.clone().unwrap_or_default();
    let stage_name = &promotion.spec.stage;
    let freight_id = freight.metadata.name.clone().unwrap_or_default();
    let stage_key = ObjectKey::namespaced(Kind::Stage, &project, stage_name);
    let (mut previous, mut arrived, mut verifies) = (None, None, false);
    let written = modify_typed_status(
        store,
        &stage_key,
        |stage: &Stage, status: &mut StageStatus| {
            previous = status.current_freight.clone();
            arrived = match &previous {
                Some(previous) if previous.name == freight_id => previous.since.clone(),
                _ => Some(now()),
            };
            status.current_freight = Some(StageFreightRef {
                name: freight_id.clone(),
                alias: freight.spec.alias.clone(),
                since: arrived.clone(),
            });
            status.last_promotion = Some(key.name.clone());
            status.current_promotion = None;
            if let Some(branch) = written_to_git(effects) {
                status.branch = Some(branch);
                status.drift = None;
            }
            verifies = start_verification(stage, status, &freight_id, &key.name, effects);
            Ok(Some(()))
        },
    )
    .await;
    match written {
        Err(StoreError::NotFound(_)) => return Ok(()),
        other => other?,
    };

    if let Some(previous) = previous.filter(|p| p.name != freight_id) {
        let previous_key = ObjectKey::namespaced(Kind::Freight, &project, &previous.name);
        modify(
            store,
            &previous_key,
            |_: &Freight, status: &mut FreightStatus| {
                let Some(stay) = status.currently_in.remove(stage_name) else {
                    return Ok(None);
                };
                let seconds = stay
                    .since
                    .map(|since| {
                        jiff::Timestamp::now()
                            .duration_since(since.0)
                            .as_secs()
                            .max(0) as u64
                    })
                    .unwrap_or(0);
                let verified = status.verified_in.entry(stage_name.clone()).or_default();
                verified.longest_soak_seconds =
                    Some(verified.longest_soak_seconds.unwrap_or(0).max(seconds));
                Ok(Some(()))
            },
        )
        .await?;
    }

    let freight_key = ObjectKey::namespaced(Kind::Freight, &project, &freight_id);
    modify(
        store,
        &freight_key,
        |_: &Freight, status: &mut FreightStatus| {
            status.currently_in.insert(
                stage_name.clone(),
                CurrentStage {
                    since: arrived.clone(),
                },
            );
            if !verifies {
                let verified = status.verified_in.entry(stage_name.clone()).or_default();
                if verified.verified_at.is_none() {
                    verified.verified_at = Some(now());
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

/// Registers the Applications the promotion synced and, when the Stage verifies its
/// Freight, starts verifying the new one (a run still going for the old one is aborted).
/// Returns whether it did; otherwise the Freight counts as verified at once.
fn start_verification(
    stage: &Stage,
    status: &mut StageStatus,
    freight: &str,
    promotion: &str,
    effects: &[StepEffect],
) -> bool {
    let now = jiff::Timestamp::now();
    status.applications = registered_applications(effects);
    status.health = (!status.applications.is_empty()).then(|| StageHealth {
        status: HealthState::Progressing,
        message: "waiting for Argo CD to report the Applications synced and healthy".into(),
        since: Some(Time(now)),
        ..Default::default()
    });
    let superseded = format!("superseded by promotion `{promotion}`");
    if verification::verifies(stage, &status.applications) {
        verification::begin(status, freight, verification::DRAY_ACTOR, &superseded, now);
        true
    } else {
        verification::end(status, VerificationPhase::Aborted, &superseded, now);
        false
    }
}

/// Records on the Stage which promotion is running now (`None` when `finished` was it).
pub async fn set_current_promotion(
    store: &dyn Store,
    project: &str,
    stage: &str,
    running: Option<&str>,
    finished: &str,
) -> Result<(), StoreError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    modify(store, &key, |_: &Stage, status: &mut StageStatus| {
        let next = match running {
            Some(name) => Some(name.to_owned()),
            None if status.current_promotion.as_deref() == Some(finished) => None,
            None => return Ok(None),
        };
        if status.current_promotion == next {
            return Ok(None);
        }
        status.current_promotion = next;
        Ok(Some(()))
    })
    .await
}

/// Lifts the Stage's hold on auto-promotion when it names `freight`: a promotion of it that
/// was aborted before it changed anything rolled nothing back.
pub async fn lift_hold_of(
    store: &dyn Store,
    project: &str,
    stage: &str,
    freight: &str,
) -> Result<(), StoreError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    modify(store, &key, |_: &Stage, status: &mut StageStatus| {
        if status.hold.as_ref().is_none_or(|h| h.freight != freight) {
            return Ok(None);
        }
        status.hold = None;
        Ok(Some(()))
    })
    .await
}

#[cfg(test)]
mod tests {
    use dray_steps::{ArgocdApplication, PullRequestRef};
    use serde_json::json;

    use super::*;

    fn effect(step: &str, effect: Effect) -> StepEffect {
        StepEffect {
            step: step.into(),
            effect,
        }
    }

    fn pushed(branch: &str, commit: &str) -> Effect {
        Effect::PushedBranch {
            repo_url: "http://git/cd.git".into(),
            branch: branch.into(),
            commit: commit.into(),
        }
    }

    #[test]
    fn the_stage_branch_and_applications_come_from_effects_only() {
        let effects = vec![
            effect("push", pushed("stage/dev", "aaa")),
            effect(
                "pr",
                Effect::OpenedPullRequest(PullRequestRef {
                    number: 3,
                    url: "http://forge/pr/3".into(),
                }),
            ),
            effect("again", pushed("stage/dev", "bbb")),
            effect(
                "sync",
                Effect::RegisteredApplication(ArgocdApplication {
                    name: "shop".into(),
                    api_server: Some("http://argocd".into()),
                    desired_revisions: vec!["bbb".into()],
                    ..Default::default()
                }),
            ),
        ];
        let branch = written_to_git(&effects).unwrap();
        assert_eq!(
            (
                branch.repo_url.as_str(),
                branch.name.as_str(),
                branch.commit.as_str()
            ),
            ("http://git/cd.git", "stage/dev", "bbb")
        );
        let apps = registered_applications(&effects);
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].name, "shop");
        assert_eq!(apps[0].api_server.as_deref(), Some("http://argocd"));
        assert_eq!(apps[0].desired_revisions, ["bbb"]);
        assert_eq!(written_to_git(&effects[1..2]), None);
        assert!(registered_applications(&effects[..3]).is_empty());
    }

    #[test]
    fn effects_are_kept_in_the_state_with_their_step() {
        let effects = vec![effect("push", pushed("stage/dev", "aaa"))];
        let state = json!({"outputs": {}, "effects": effects});
        assert_eq!(
            state["effects"],
            json!([{"step": "push", "effect": "pushedBranch", "repoURL": "http://git/cd.git",
                    "branch": "stage/dev", "commit": "aaa"}])
        );
        assert_eq!(effects_of(Some(&state)), effects);
        // A state from before effects were recorded has none, whatever its outputs say.
        let old = json!({"outputs": {"push": {"branch": "stage/dev", "commit": "aaa"}}});
        assert!(effects_of(Some(&old)).is_empty());
        assert!(effects_of(None).is_empty());
    }
}
