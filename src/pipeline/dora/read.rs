//! Reading a project's DORA history from the store, in a bounded number of reads: its
//! Stages (each with its verification history), its newest [`PROMOTION_LIMIT`]
//! Promotions, and the Freight those promoted (one batched read). Also counts the
//! Promotions waiting in each Stage's queue, which `GET /metrics` exports beside.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;

use super::{Deployment, History, StageNumbers, Verdict, Verification, compute};
use crate::api::{Freight, Kind, Promotion, PromotionPhase, Stage, VerificationPhase};
use crate::store::{Store, StoreError};

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

/// The numbers of every Stage of `project` over the `days` up to `now`.
pub async fn project_numbers(
    store: &dyn Store,
    project: &str,
    now: Timestamp,
    days: u32,
) -> Result<ProjectNumbers, StoreError> {
    let stages: Vec<Stage> = store
        .list(Kind::Stage, Some(project))
        .await?
        .iter()
        .filter_map(|s| s.to_typed().ok())
        .collect();
    let names: Vec<String> = stages
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    let promotions: Vec<Promotion> = store
        .list_newest(Kind::Promotion, project, PROMOTION_LIMIT, None)
        .await?
        .iter()
        .filter_map(|p| p.to_typed().ok())
        .collect();

    let mut queued: BTreeMap<String, u32> = names.iter().map(|n| (n.clone(), 0)).collect();
    let mut history = History::default();
    for promotion in &promotions {
        let phase = promotion
            .status
            .as_ref()
            .map(|s| s.phase)
            .unwrap_or_default();
        match phase {
            PromotionPhase::Pending => {
                if let Some(count) = queued.get_mut(&promotion.spec.stage) {
                    *count += 1;
                }
            }
            PromotionPhase::Succeeded => {
                if let Some(at) = promotion
                    .status
                    .as_ref()
                    .and_then(|s| s.finished_at.as_ref())
                {
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
    for stage in &stages {
        let name = stage.metadata.name.clone().unwrap_or_default();
        let Some(status) = &stage.status else {
            continue;
        };
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
