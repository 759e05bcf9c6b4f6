//! Reading a project's DORA history from the store, in a bounded number of reads: its
//! Stages' verification histories, its newest [`PROMOTION_LIMIT`] Promotions (their
//! stage, Freight, phase and end), and the Freight those promoted (one batched read).
//! Only those fields are read ([`Store::list_fields`], [`Store::list_newest_fields`]):
//! a project of thousands of Stages and Promotions is not read and typed whole. Also
//! counts the Promotions waiting in each Stage's queue, which `GET /metrics` exports
//! beside.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;

use serde::Deserialize;

use super::{Deployment, History, StageNumbers, Verdict, Verification, compute};
use crate::api::{Freight, Kind, PromotionPhase, Time, VerificationInfo, VerificationPhase};
use crate::store::{KeptBy, ObjectFields, Store, StoreError};

/// How many of a project's newest Promotions the numbers are computed from: enough for
/// 30 days of a busy project, bounded for a huge one (older ones are then not counted).
pub const PROMOTION_LIMIT: usize = 5_000;

/// A project's numbers, and its queues.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProjectNumbers {
    /// Each Stage's numbers, in name order.
    pub stages: Vec<StageNumbers>,
    /// Stage → Promotions pending in its queue (every Stage, zeros included).
    pub queued: BTreeMap<String, u32>,
}

/// What [`project_numbers`] reads of each Stage.
const STAGE_FIELDS: [&str; 2] = ["/status/verification", "/status/verificationHistory"];

/// The shape of [`STAGE_FIELDS`] in a Stage.
#[derive(Deserialize, Default)]
struct PickedStage {
    #[serde(default)]
    status: PickedStatus,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PickedStatus {
    #[serde(default)]
    verification: Option<VerificationInfo>,
    #[serde(default)]
    verification_history: Vec<VerificationInfo>,
}

/// What [`project_numbers`] reads of each Promotion.
const PROMOTION_FIELDS: [&str; 4] = [
    "/spec/stage",
    "/spec/freight",
    "/status/phase",
    "/status/finishedAt",
];

/// The shape of [`PROMOTION_FIELDS`] in a Promotion.
#[derive(Deserialize)]
struct PickedPromotion {
    spec: PickedPromotionSpec,
    #[serde(default)]
    status: PickedPromotionStatus,
}

#[derive(Deserialize)]
struct PickedPromotionSpec {
    stage: String,
    freight: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PickedPromotionStatus {
    #[serde(default)]
    phase: PromotionPhase,
    #[serde(default)]
    finished_at: Option<Time>,
}

/// Each Stage's verifications, typed out of the store's answer while it gives the same.
static STAGES: KeptBy<Vec<ObjectFields>, Vec<(String, PickedStatus)>> = KeptBy::new();

fn stage_statuses(answer: &[ObjectFields]) -> Vec<(String, PickedStatus)> {
    answer
        .iter()
        .filter_map(|fields| {
            let picked: PickedStage = fields.to_typed().ok()?;
            Some((fields.key.name.clone(), picked.status))
        })
        .collect()
}

/// The numbers of every Stage of `project` over the `days` up to `now`.
pub async fn project_numbers(
    store: &dyn Store,
    project: &str,
    now: Timestamp,
    days: u32,
) -> Result<ProjectNumbers, StoreError> {
    let answer = store
        .list_fields(Kind::Stage, project, &STAGE_FIELDS)
        .await?;
    let stages = STAGES.get_or_derive(&answer, |a| stage_statuses(a));
    let names: Vec<String> = stages.iter().map(|(name, _)| name.clone()).collect();
    let promotions: Vec<PickedPromotion> = store
        .list_newest_fields(Kind::Promotion, project, PROMOTION_LIMIT, &PROMOTION_FIELDS)
        .await?
        .iter()
        .filter_map(|p| p.to_typed().ok())
        .collect();

    let mut queued: BTreeMap<String, u32> = names.iter().map(|n| (n.clone(), 0)).collect();
    let mut history = History::default();
    for promotion in &promotions {
        let phase = promotion.status.phase;
        match phase {
            PromotionPhase::Pending => {
                if let Some(count) = queued.get_mut(&promotion.spec.stage) {
                    *count += 1;
                }
            }
            PromotionPhase::Succeeded => {
                if let Some(at) = &promotion.status.finished_at {
                    history.deployments.push(Deployment {
                        stage: promotion.spec.stage.clone(),
                        freight: promotion.spec.freight.clone(),
                        at: at.0,
                    });
                }
            }
            _ => {}
        }
    }
    for (name, status) in stages.iter() {
        let mut seen = BTreeSet::new();
        for run in status
            .verification
            .iter()
            .chain(&status.verification_history)
        {
            let verdict = match run.phase {
                VerificationPhase::Successful => Verdict::Passed,
                VerificationPhase::Failed => Verdict::Failed,
                _ => continue,
            };
            let Some(at) = &run.finish_time else { continue };
            if seen.insert(run.id.clone()) {
                history.verifications.push(Verification {
                    stage: name.clone(),
                    freight: run.freight.clone(),
                    verdict,
                    at: at.0,
                });
            }
        }
    }
    let promoted: Vec<String> = history
        .deployments
        .iter()
        .map(|d| d.freight.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    history.built = built(store, project, &promoted).await?;
    Ok(ProjectNumbers {
        stages: compute(&history, &names, now, days),
        queued,
    })
}

/// Freight id → when its newest image was built, for the Freight that record it.
async fn built(
    store: &dyn Store,
    project: &str,
    ids: &[String],
) -> Result<HashMap<String, Timestamp>, StoreError> {
    Ok(store
        .get_many(Kind::Freight, project, ids)
        .await?
        .iter()
        .filter_map(|stored| {
            let freight: Freight = stored.to_typed().ok()?;
            let newest = freight
                .spec
                .images
                .iter()
                .filter_map(|i| i.created_at.as_ref().map(|t| t.0))
                .max()?;
            Some((freight.metadata.name.clone()?, newest))
        })
        .collect())
}
