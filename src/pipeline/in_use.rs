//! What may not be deleted, and why: [`check_delete`] is the one rule Dray's doors ask
//! before any delete — the API's delete route (so `dray delete`) and the Kubernetes
//! admission webhook (so `kubectl delete`) — in the same words. A Freight is held by a Stage
//! it is current in and by a Promotion that names it and has not ended (`Pending` or
//! `Running`); a Warehouse, Stage, (cluster) PromotionTask, AnalysisTemplate or Role by
//! whoever still refers to it ([`super::referrers`]); a Warehouse by the Freight it minted; a
//! Project by everything in it.
//!
//! A Stage's earlier Freight is not held: a rollback promotes it again only while it
//! exists, and the ended Promotions that recorded it stay (they name its id). Deleting old
//! Freight is how a project is tidied; deleting the Freight a Stage runs, or one about to be
//! promoted, is never what was meant.

use serde_json::Value;

use crate::api::{Kind, ObjectKey, PromotionPhase, ResourceBody as _};
use crate::store::{Store, StoreError};

use super::promotion_phase;

/// Something that holds a Freight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FreightHolder {
    /// The Freight is current in this Stage.
    CurrentIn {
        /// The Stage.
        stage: String,
    },
    /// This Promotion, not ended yet, promotes the Freight.
    Promoting {
        /// The Promotion.
        promotion: String,
        /// Its Stage.
        stage: String,
        /// `Pending` or `Running`.
        phase: PromotionPhase,
    },
}

impl std::fmt::Display for FreightHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FreightHolder::CurrentIn { stage } => write!(f, "is current in Stage `{stage}`"),
            FreightHolder::Promoting {
                promotion,
                stage,
                phase,
            } => write!(
                f,
                "is being promoted to Stage `{stage}` by Promotion `{promotion}` ({phase:?})"
            ),
        }
    }
}

/// A Freight that may not be deleted, and who holds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Freight `{freight}` {}", holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and "))]
pub struct FreightInUse {
    /// The Freight's alias (its id when it has none).
    pub freight: String,
    /// Who holds it; never empty.
    pub holders: Vec<FreightHolder>,
}

impl FreightInUse {
    /// What to do first.
    pub fn hint(&self) -> String {
        let mut steps = Vec::new();
        for holder in &self.holders {
            match holder {
                FreightHolder::CurrentIn { stage } => {
                    steps.push(format!("promote other Freight to Stage `{stage}` first"));
                }
                FreightHolder::Promoting { promotion, .. } => steps.push(format!(
                    "wait for Promotion `{promotion}` to end, or `dray abort promotion {promotion}`"
                )),
            }
        }
        format!("{}; then delete it again", steps.join("; "))
    }
}

/// Why a resource may not be deleted now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeleteRefused {
    /// A Stage or an unfinished Promotion holds the Freight.
    #[error(transparent)]
    FreightInUse(#[from] FreightInUse),
    /// The Project still holds objects.
    #[error("project `{project}` still holds {}", held.join(", "))]
    ProjectNotEmpty {
        /// The Project.
        project: String,
        /// What it holds (`3 stages`).
        held: Vec<String>,
    },
    /// The Warehouse's Freight would be left without it.
    #[error("{key} still has {count} Freight, which would be left without its Warehouse")]
    WarehouseHasFreight {
        /// The Warehouse.
        key: ObjectKey,
        /// How many Freight it minted.
        count: usize,
    },
    /// Others still refer to it.
    #[error("{key} is still used by {}", by.join(", "))]
    Referenced {
        /// The resource.
        key: ObjectKey,
        /// Who refers to it (`stage \`dev\``).
        by: Vec<String>,
    },
}

impl DeleteRefused {
    /// What to do first.
    pub fn hint(&self) -> String {
        match self {
            DeleteRefused::FreightInUse(in_use) => in_use.hint(),
            DeleteRefused::ProjectNotEmpty { project, .. } => format!(
                "delete those first, or delete the project with everything it holds: `dray delete project {project} --cascade`"
            ),
            DeleteRefused::WarehouseHasFreight { key, .. } => format!(
                "delete the warehouse with its Freight: `dray delete warehouse {} -p {} --cascade`",
                key.name,
                key.namespace.as_deref().unwrap_or_default()
            ),
            DeleteRefused::Referenced { .. } => "delete or change those first".into(),
        }
    }
}

/// The refusal to delete `key` now, if any: the one rule for every door (see the module
/// doc). A cascading delete removes what belongs to the resource with it and asks
/// [`super::cascade`] instead.
pub async fn check_delete(
    store: &dyn Store,
    key: &ObjectKey,
) -> Result<Result<(), DeleteRefused>, StoreError> {
    if let Err(in_use) = check_freight_delete(store, key).await? {
        return Ok(Err(in_use.into()));
    }
    let by = super::referrers::referrers(store, key).await?;
    if key.kind == Kind::Project {
        return Ok(match by.is_empty() {
            true => Ok(()),
            false => Err(DeleteRefused::ProjectNotEmpty {
                project: key.name.clone(),
                held: by,
            }),
        });
    }
    if !by.is_empty() {
        return Ok(Err(DeleteRefused::Referenced {
            key: key.clone(),
            by,
        }));
    }
    if key.kind == Kind::Warehouse {
        let project = key.namespace.as_deref().unwrap_or_default();
        let freight = store.list(Kind::Freight, Some(project)).await?;
        let count = super::cascade::owned_freight(&freight, &key.name).count();
        if count > 0 {
            return Ok(Err(DeleteRefused::WarehouseHasFreight {
                key: key.clone(),
                count,
            }));
        }
    }
    Ok(Ok(()))
}

/// Who holds `freight` (a stored Freight's key) in its project; empty when it may go.
pub async fn freight_holders(
    store: &dyn Store,
    freight: &ObjectKey,
) -> Result<Vec<FreightHolder>, StoreError> {
    let Some(project) = freight.namespace.as_deref() else {
        return Ok(Vec::new());
    };
    let stages = store.list(Kind::Stage, Some(project)).await?;
    let promotions = store.list(Kind::Promotion, Some(project)).await?;
    Ok(holders(
        &freight.name,
        stages.iter().map(|s| &s.object),
        promotions.iter().map(|p| &p.object),
    ))
}

/// The refusal to delete `freight`, when something holds it.
pub async fn check_freight_delete(
    store: &dyn Store,
    freight: &ObjectKey,
) -> Result<Result<(), FreightInUse>, StoreError> {
    if freight.kind != Kind::Freight {
        return Ok(Ok(()));
    }
    let holders = freight_holders(store, freight).await?;
    if holders.is_empty() {
        return Ok(Ok(()));
    }
    let alias = store
        .get(freight)
        .await?
        .and_then(|f| {
            f.object
                .get("alias")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| freight.name.clone());
    Ok(Err(FreightInUse {
        freight: alias,
        holders,
    }))
}

/// The holders of Freight `id` among these Stages and Promotions (stored objects).
fn holders<'a>(
    id: &str,
    stages: impl Iterator<Item = &'a Value>,
    promotions: impl Iterator<Item = &'a Value>,
) -> Vec<FreightHolder> {
    let mut held = Vec::new();
    for stage in stages {
        if stage
            .pointer("/status/currentFreight/name")
            .and_then(Value::as_str)
            == Some(id)
        {
            held.push(FreightHolder::CurrentIn {
                stage: stage.name().unwrap_or_default().to_owned(),
            });
        }
    }
    for promotion in promotions {
        let phase = promotion_phase(promotion);
        if promotion.pointer("/spec/freight").and_then(Value::as_str) == Some(id)
            && !phase.is_terminal()
        {
            held.push(FreightHolder::Promoting {
                promotion: promotion.name().unwrap_or_default().to_owned(),
                stage: promotion
                    .pointer("/spec/stage")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                phase,
            });
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stage(name: &str, current: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"currentFreight": {"name": current}}})
    }

    fn promotion(name: &str, freight: &str, phase: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"stage": "prod", "freight": freight},
               "status": {"phase": phase}})
    }

    #[test]
    fn current_freight_and_unfinished_promotions_hold_it() {
        let stages = [stage("dev", "f1"), stage("prod", "f1"), stage("qa", "f2")];
        let promotions = [
            promotion("prod-a", "f1", "Running"),
            promotion("prod-b", "f1", "Succeeded"),
            promotion("prod-c", "f2", "Pending"),
        ];
        let held = holders("f1", stages.iter(), promotions.iter());
        assert_eq!(
            held,
            vec![
                FreightHolder::CurrentIn {
                    stage: "dev".into()
                },
                FreightHolder::CurrentIn {
                    stage: "prod".into()
                },
                FreightHolder::Promoting {
                    promotion: "prod-a".into(),
                    stage: "prod".into(),
                    phase: PromotionPhase::Running
                },
            ]
        );
        let refusal = FreightInUse {
            freight: "fresh-otter".into(),
            holders: held,
        };
        assert_eq!(
            refusal.to_string(),
            "Freight `fresh-otter` is current in Stage `dev` and is current in Stage `prod` and is being promoted to Stage `prod` by Promotion `prod-a` (Running)"
        );
        assert!(
            refusal
                .hint()
                .starts_with("promote other Freight to Stage `dev` first;"),
            "{}",
            refusal.hint()
        );
        assert!(holders("f3", stages.iter(), promotions.iter()).is_empty());
        // A promotion without a status has not started: Pending holds.
        let fresh = [json!({"metadata": {"name": "p"}, "spec": {"stage": "s", "freight": "f3"}})];
        assert_eq!(holders("f3", stages.iter(), fresh.iter()).len(), 1);
    }
}
