//! Who holds a Freight, so that it is not deleted from under them: a Stage it is current
//! in, and a Promotion that names it and has not ended (`Pending` or `Running`). Both of
//! Dray's doors ask it before a Freight is deleted: the API's delete route and the
//! Kubernetes admission webhook.
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
