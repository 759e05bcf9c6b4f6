//! Auto-promotion: Stages selected by a ProjectConfig `promotionPolicies[]` entry with
//! `autoPromotionEnabled: true` promote by themselves as soon as Freight becomes available
//! to them — including the moment a soak completes: the loop sleeps until the earliest
//! soak end it knows of, not until a periodic resync.
//!
//! It leaves a Stage alone while it runs or queues a promotion, while a person's rollback
//! holds it (`status.hold`), and for Freight whose promotion into the Stage already failed
//! (it would fail again; a person decides).

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{Freight, Kind, ProjectConfig, PromotionPhase, SelectionPolicy, Stage};
use crate::store::{Store, StoreError, StoredObject};

use super::availability::availability;
use super::door::AutoPromotion;
use super::request::{self, PromoteRequest};
use super::windows;

const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Promotes Stages by policy.
pub struct AutoPromoter {
    store: std::sync::Arc<dyn Store>,
}

fn created(object: &Value) -> String {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl AutoPromoter {
    /// An auto-promoter over `store`.
    pub fn new(store: std::sync::Arc<dyn Store>) -> Self {
        AutoPromoter { store }
    }

    /// Runs until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut feed = self.store.changes();
        loop {
            let seen = feed.latest();
            let sleep = match self.pass().await {
                Ok(Some(next)) => {
                    let wait = next
                        .duration_since(jiff::Timestamp::now())
                        .as_millis()
                        .max(0) as u64;
                    Duration::from_millis(wait + 50).min(MAX_SLEEP)
                }
                Ok(None) => MAX_SLEEP,
                Err(error) => {
                    tracing::error!(%error, "auto-promotion pass failed");
                    MAX_SLEEP
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = feed.wait_past(seen, sleep) => {}
            }
        }
    }

    /// One look at every project; returns the earliest time something will change by
    /// itself (a soak ending, a window opening).
    pub async fn pass(&self) -> Result<Option<jiff::Timestamp>, StoreError> {
        let mut next: Option<jiff::Timestamp> = None;
        for stored in self.store.list(Kind::ProjectConfig, None).await? {
            let Ok(config) = stored.to_typed::<ProjectConfig>() else {
                continue;
            };
            if !config
                .spec
                .promotion_policies
                .iter()
                .any(|p| p.auto_promotion_enabled)
            {
                continue;
            }
            let project = stored.key.namespace.clone().unwrap_or_default();
            if let Some(at) = self.project(&project, &config).await? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next)
    }

    async fn project(
        &self,
        project: &str,
        config: &ProjectConfig,
    ) -> Result<Option<jiff::Timestamp>, StoreError> {
        let stages = self.store.list(Kind::Stage, Some(project)).await?;
        let freight: Vec<(StoredObject, Freight)> = self
            .store
            .list(Kind::Freight, Some(project))
            .await?
            .into_iter()
            .filter_map(|f| {
                let typed = f.to_typed().ok()?;
                Some((f, typed))
            })
            .collect();
        let promotions = self.store.list(Kind::Promotion, Some(project)).await?;
        let now = jiff::Timestamp::now();
        let mut next: Option<jiff::Timestamp> = None;
        for stored in &stages {
            let Ok(stage) = stored.to_typed::<Stage>() else {
                continue;
            };
            let name = stored.key.name.clone();
            let labels = stage.metadata.labels.clone().unwrap_or_default();
            let Some(policy) = config
                .spec
                .promotion_policies
                .iter()
                .find(|p| windows::matches(&p.stage_selector, &name, &labels))
            else {
                continue;
            };
            if !policy.auto_promotion_enabled {
                continue;
            }
            let status = stage.status.clone().unwrap_or_default();
            if status.hold.is_some() {
                continue;
            }
            let in_this_stage: Vec<&StoredObject> = promotions
                .iter()
                .filter(|p| {
                    p.object.pointer("/spec/stage").and_then(Value::as_str) == Some(name.as_str())
                })
                .collect();
            if in_this_stage
                .iter()
                .any(|p| !super::promotion_phase(&p.object).is_terminal())
            {
                continue;
            }
            let failed_before = |id: &str| {
                in_this_stage.iter().any(|p| {
                    p.object.pointer("/spec/freight").and_then(Value::as_str) == Some(id)
                        && matches!(
                            super::promotion_phase(&p.object),
                            PromotionPhase::Failed | PromotionPhase::Errored
                        )
                })
            };
            let mut candidates: Vec<&(StoredObject, Freight)> = freight.iter().collect();
            candidates.sort_by_key(|(stored, _)| std::cmp::Reverse(created(&stored.object)));
            let wanted = match policy.selection_policy {
                SelectionPolicy::NewestFreight => candidates.iter().find(|(_, f)| {
                    let gates = availability(&stage, f, now);
                    if let Some(end) = gates.soak_ends_at {
                        next = Some(next.map_or(end, |n| n.min(end)));
                    }
                    gates.is_available()
                }),
                SelectionPolicy::MatchUpstream => {
                    let upstream = stage
                        .spec
                        .requested_freight
                        .iter()
                        .flat_map(|r| r.sources.stages.iter())
                        .next()
                        .cloned();
                    let upstream_current = upstream.and_then(|up| {
                        stages.iter().find(|s| s.key.name == up).and_then(|s| {
                            s.object
                                .pointer("/status/currentFreight/name")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                    });
                    candidates.iter().find(|(s, f)| {
                        Some(s.key.name.as_str()) == upstream_current.as_deref() && {
                            let gates = availability(&stage, f, now);
                            if let Some(end) = gates.soak_ends_at {
                                next = Some(next.map_or(end, |n| n.min(end)));
                            }
                            gates.is_available()
                        }
                    })
                }
            };
            let Some((stored_freight, _)) = wanted else {
                continue;
            };
            let id = stored_freight.key.name.clone();
            let current = status.current_freight.as_ref().map(|c| c.name.as_str());
            if current == Some(id.as_str()) || failed_before(&id) {
                continue;
            }
            let request = PromoteRequest {
                stage: name.clone(),
                freight: Some(id.clone()),
                ..Default::default()
            };
            let store = self.store.as_ref();
            match request::request_promotion(store, &AutoPromotion, project, &request).await {
                Ok(created) => {
                    tracing::info!(promotion = %created.key, freight = %id, "auto-promotion requested")
                }
                Err(request::PromoteError::Refused { reasons, .. }) => {
                    tracing::debug!(stage = %name, freight = %id, ?reasons, "auto-promotion refused")
                }
                Err(error) => tracing::warn!(stage = %name, %error, "auto-promotion failed"),
            }
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::store::SqliteStore;

    /// Auto-promotion must wake when a soak completes, not at the next periodic pass: a
    /// pass over Freight that is still soaking reports exactly when the soak ends.
    #[tokio::test]
    async fn a_pass_reports_when_the_soak_ends() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let since = jiff::Timestamp::now().round(jiff::Unit::Second).unwrap();
        let objects = [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
                   "metadata": {"name": "demo", "namespace": "demo"},
                   "spec": {"promotionPolicies": [{"stageSelector": {"name": "staging"}, "autoPromotionEnabled": true}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                   "metadata": {"name": "staging", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                            "sources": {"stages": ["dev"], "requiredSoakTime": "10m"}}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                   "metadata": {"name": "f1", "namespace": "demo"},
                   "alias": "frosty-otter", "origin": {"kind": "Warehouse", "name": "app"},
                   "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}],
                   "status": {"currentlyIn": {"dev": {"since": since.to_string()}},
                              "verifiedIn": {"dev": {"verifiedAt": since.to_string()}}}}),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        let wake = AutoPromoter::new(store.clone()).pass().await.unwrap();
        assert_eq!(wake, Some(since + jiff::SignedDuration::from_mins(10)));
        let promotions = store.list(Kind::Promotion, Some("demo")).await.unwrap();
        assert!(
            promotions.is_empty(),
            "nothing is promoted while the Freight soaks"
        );
    }
}
