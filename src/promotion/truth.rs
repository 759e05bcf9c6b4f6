//! Git is the truth: a Stage's current Freight is what the head of its branch says. This
//! compares the branch head with what Dray last pushed; when they differ it reads the
//! head's trailers — another Dray promotion moves `currentFreight` to the Freight it
//! names, anything else marks the Stage `drift`ed with that commit instead of showing
//! stale state. It runs for every Stage once a minute and whenever the audit trail is read.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::{Kind, ObjectKey, Stage, StageDrift, StageFreightRef, Time};
use crate::discovery::credentials;
use crate::discovery::git::{LoggedCommit, MirrorCache, is_dray_commit};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError};

use super::audit::{freight_id, trailers};

const PERIOD: Duration = Duration::from_secs(60);

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

    /// Checks every Stage once a minute until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            match self.store.list(Kind::Stage, None).await {
                Ok(stages) => {
                    for stage in stages {
                        if let Err(error) = self.check(&stage.key).await {
                            tracing::debug!(stage = %stage.key, %error, "cannot compare the stage branch");
                        }
                    }
                }
                Err(error) => tracing::error!(%error, "cannot list stages"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(PERIOD) => {}
            }
        }
    }

    /// Reads the head of the Stage's branch and records what it says.
    pub async fn check(&self, key: &ObjectKey) -> Result<(), String> {
        let Some(stored) = self.store.get(key).await.map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let stage: Stage = stored.to_typed().map_err(|e| e.to_string())?;
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
