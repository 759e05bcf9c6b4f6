//! What a succeeded promotion changes besides git: the Stage's current Freight and branch,
//! and the Freight's `currentlyIn` / `verifiedIn`. A Stage that verifies (AnalysisTemplates,
//! or Applications registered by `argocd-update`) starts a verification run instead, and
//! the Freight is verified there when the run succeeds; a Stage without verification counts
//! its Freight verified when the promotion succeeds. The Freight that leaves the Stage keeps
//! its longest continuous stay as `longestSoakSeconds`.

use serde_json::{Map, Value};

use crate::api::verification_run as verification;
use crate::api::{
    CurrentStage, Freight, FreightStatus, HealthState, Kind, ObjectKey, Promotion, Stage,
    StageBranch, StageFreightRef, StageHealth, StageStatus, Time, VerificationPhase,
};
use crate::store::{Store, StoreError, modify_typed_status};

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// The branch a promotion pushed, from the outputs of its `git-push` step.
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
    outputs: &Map<String, Value>,
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
            if let Some(branch) = pushed_branch(outputs) {
                status.branch = Some(branch);
                status.drift = None;
            }
            verifies = start_verification(stage, status, &freight_id, &key.name, outputs);
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
    outputs: &Map<String, Value>,
) -> bool {
    let now = jiff::Timestamp::now();
    status.applications = verification::registered_applications(outputs);
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
