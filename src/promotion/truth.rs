//! Git is the truth: a Stage's current Freight is what the head of its branch says. This
//! compares the branch head with what Dray last pushed; when they differ it reads the
//! head's trailers — another Dray promotion moves `currentFreight` to the Freight it
//! names, anything else marks the Stage `drift`ed with that commit instead of showing
//! stale state.
//!
//! Contract of [`reconcile`], a reconciler of Stages: reads the Stage (store) and the head
//! of its branch (through the mirror); writes the Stage's `status.currentFreight`,
//! `status.branch` and `status.drift`; wakes when the Stage's `status.branch` changes and
//! requeues every minute (a branch moved outside Dray says nothing to Dray). The audit
//! trail's reads call [`StageTruth::check`] directly.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::{
    ObjectKey, ResourceBody as _, Stage, StageDrift, StageFreightRef, StageStatus, Time,
};
use crate::discovery::credentials;
use crate::discovery::git::{LoggedCommit, MirrorCache, is_dray_commit};
use crate::runtime::{Action, Cache, Controller, Resource};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError, StoredObject};

use super::audit::{freight_id, trailers};

const PERIOD: Duration = Duration::from_secs(60);

/// Compares the Stage's branch head with what Dray wrote; see the module doc.
pub async fn reconcile(stage: Arc<Stage>, truth: Arc<StageTruth>) -> Result<Action, String> {
    truth.check_stage(&stage.key_of(), &stage).await?;
    Ok(Action::requeue(PERIOD))
}

/// Compares Stage branches with what Dray wrote.
#[derive(Clone)]
pub struct StageTruth {
    store: Arc<dyn Store>,
    mirrors: Arc<MirrorCache>,
    secret_key: Arc<SecretKey>,
}

impl StageTruth {
    /// A checker over `store`, reading git through `mirrors`.
    pub fn new(
        store: Arc<dyn Store>,
        mirrors: Arc<MirrorCache>,
        secret_key: Arc<SecretKey>,
    ) -> Self {
        StageTruth {
            store,
            mirrors,
            secret_key,
        }
    }

    /// Checks every Stage in `cache` once a minute, and when its branch changes, until
    /// `shutdown`.
    pub async fn run(self, cache: Cache, shutdown: CancellationToken) {
        Controller::<Stage>::for_kind("stage-truth", &cache)
            .only_when(|before, after| {
                let branch = |o: &StoredObject| {
                    o.object
                        .status::<StageStatus>()
                        .and_then(|status| status.branch)
                };
                before.map(branch) != Some(branch(after))
            })
            .concurrency(4)
            .run(
                reconcile,
                |_, error: &String, _| {
                    tracing::debug!(%error, "cannot compare the stage branch");
                    Action::requeue(PERIOD)
                },
                Arc::new(self),
                shutdown,
            )
            .await;
    }

    /// Reads the head of the Stage's branch and records what it says.
    pub async fn check(&self, key: &ObjectKey) -> Result<(), String> {
        let Some(stored) = self.store.get(key).await.map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let stage: Stage = stored.to_typed().map_err(|e| e.to_string())?;
        self.check_stage(key, &stage).await
    }

    /// [`StageTruth::check`] of a Stage already read (from the caches, by [`reconcile`]).
    async fn check_stage(&self, key: &ObjectKey, stage: &Stage) -> Result<(), String> {
        let Some(branch) = stage.status.as_ref().and_then(|s| s.branch.clone()) else {
            return Ok(());
        };
        if branch.repo_url.is_empty() {
            return Ok(());
        }
        let project = key.namespace.clone().unwrap_or_default();
        let creds = credentials::for_git(
            self.store.as_ref(),
            &self.secret_key,
            &project,
            &branch.repo_url,
        )
        .await
        .map_err(|e| e.to_string())?;
        let log = self
            .mirrors
            .branch_log(&branch.repo_url, &branch.name, creds.as_ref(), 1)
            .await
            .map_err(|e| e.to_string())?;
        match log.and_then(|mut l| (!l.is_empty()).then(|| l.remove(0))) {
            Some(head) => self.record(key, &head).await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Records the branch head `head` on the Stage.
    pub async fn record(&self, key: &ObjectKey, head: &LoggedCommit) -> Result<(), StoreError> {
        let recorded = crate::store::modify_typed_status(
            self.store.as_ref(),
            key,
            |_: &Stage, status: &mut crate::api::StageStatus| {
                let Some(branch) = status.branch.clone() else {
                    return Ok(None);
                };
                let before = status.clone();
                if head.id == branch.commit {
                    status.drift = None;
                } else if is_dray_commit(&head.message) {
                    let named = trailers(&head.message)
                        .into_iter()
                        .find(|(k, _)| k == "Dray-Freight")
                        .map(|(_, v)| v);
                    if let Some(named) = named {
                        let id = freight_id(&named).to_owned();
                        let alias = named
                            .split_once('(')
                            .map(|(_, rest)| rest.trim_end_matches(')').to_owned())
                            .unwrap_or_default();
                        if status.current_freight.as_ref().map(|c| c.name.as_str())
                            != Some(id.as_str())
                        {
                            status.current_freight = Some(StageFreightRef {
                                name: id,
                                alias,
                                since: Some(Time(head.committed_at)),
                            });
                        }
                    }
                    status.branch = Some(crate::api::StageBranch {
                        commit: head.id.clone(),
                        ..branch
                    });
                    status.drift = None;
                } else if status.drift.as_ref().map(|d| d.commit.as_str()) != Some(head.id.as_str())
                {
                    status.drift = Some(StageDrift {
                        commit: head.id.clone(),
                        message: head.message.lines().next().unwrap_or_default().to_owned(),
                        author: head.author.clone(),
                        detected_at: Some(Time(jiff::Timestamp::now())),
                    });
                }
                Ok((*status != before).then(|| status.drift.clone()))
            },
        )
        .await;
        match recorded {
            Ok(Some(Some(drift))) => {
                tracing::warn!(stage = %key, commit = %drift.commit, "the stage branch moved outside Dray");
                Ok(())
            }
            Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
