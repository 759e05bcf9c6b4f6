//! Feedback to CI: which commit statuses an occurrence asks for, and posting one.
//!
//! A Freight's commit of a git subscription with `commitStatuses: true` (in the Warehouse
//! the Freight came from) gets one status per Stage, named `dray/<project>/<stage>`:
//! `pending` when a promotion of it into the Stage succeeded, `success` when it was
//! verified there, `failure` when a verification of it there failed. Images carry no
//! commit Dray records (discovery does not read `org.opencontainers.image.revision`), so
//! only git subscriptions post statuses. The token is the project's `git` Credential
//! for the repository.

use crate::api::{
    CommitState, CommitStatusDelivery, ForgeProvider, Freight, NotificationEvent, PendingDelivery,
    RepoUrl, Warehouse,
};
use crate::discovery::credentials;
use crate::secrets::SecretKey;
use crate::store::Store;

use super::events::Occurrence;

/// The commit statuses `occurrence` asks for.
pub fn plan(
    occurrence: &Occurrence,
    freight: &[impl AsRef<Freight>],
    warehouses: &[impl AsRef<Warehouse>],
) -> Vec<CommitStatusDelivery> {
    let state = match occurrence.payload.event {
        NotificationEvent::PromotionSucceeded => CommitState::Pending,
        NotificationEvent::FreightVerified => CommitState::Success,
        NotificationEvent::VerificationFailed => CommitState::Failure,
        _ => return Vec::new(),
    };
    let Some(f) = freight
        .iter()
        .map(AsRef::as_ref)
        .find(|f| f.metadata.name.as_deref() == Some(occurrence.payload.freight.name.as_str()))
    else {
        return Vec::new();
    };
    let Some(warehouse) = warehouses
        .iter()
        .map(AsRef::as_ref)
        .find(|w| w.metadata.name.as_deref() == Some(f.spec.origin.name.as_str()))
    else {
        return Vec::new();
    };
    let wanted: Vec<RepoUrl> = warehouse
        .spec
        .subscriptions
        .iter()
        .filter_map(|s| s.git.as_ref())
        .filter(|g| g.commit_statuses)
        .map(|g| RepoUrl::new(&g.repo_url))
        .collect();
    f.spec
        .commits
        .iter()
        .filter(|c| wanted.contains(&RepoUrl::new(&c.repo_url)))
        .map(|c| CommitStatusDelivery {
            repo_url: c.repo_url.clone(),
            sha: c.id.clone(),
            state,
        })
        .collect()
}

/// Why a commit status could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum CommitStatusError {
    /// The forge is not known.
    #[error("cannot post a commit status to `{repo}`: {cause}")]
    Forge {
        /// The repository.
        repo: String,
        /// Why.
        cause: String,
    },
    /// The Credential could not be read.
    #[error("cannot read the `git` Credential for `{repo}`: {cause}")]
    Credential {
        /// The repository.
        repo: String,
        /// Why.
        cause: String,
    },
    /// The forge said no, or did not answer.
    #[error("posting the commit status on `{sha}` of `{repo}` failed: {cause}")]
    Post {
        /// The repository.
        repo: String,
        /// The commit.
        sha: String,
        /// The forge's answer.
        cause: dray_steps::forge::ForgeError,
    },
}

/// Posts the commit status of `delivery` (which has one).
pub async fn post(
    store: &dyn Store,
    key: &SecretKey,
    warehouses: &[impl AsRef<Warehouse>],
    delivery: &PendingDelivery,
    status: &CommitStatusDelivery,
) -> Result<(), CommitStatusError> {
    use dray_steps::forge::commit_status::{self, CommitStatus, StatusState};
    let event = &delivery.event;
    let wanted = RepoUrl::new(&status.repo_url);
    let forge = warehouses
        .iter()
        .flat_map(|w| w.as_ref().spec.subscriptions.iter())
        .filter_map(|s| s.git.as_ref())
        .find(|g| RepoUrl::new(&g.repo_url) == wanted)
        .and_then(|g| g.forge.clone())
        .unwrap_or_default();
    let provider = forge.provider.map(|p| match p {
        ForgeProvider::Github => dray_steps::forge::Provider::Github,
        ForgeProvider::Gitlab => dray_steps::forge::Provider::Gitlab,
    });
    let target = dray_steps::forge::target(&status.repo_url, provider, forge.api_url.as_deref())
        .map_err(|cause| CommitStatusError::Forge {
            repo: status.repo_url.clone(),
            cause,
        })?;
    let token = credentials::find(store, key, &event.project, "git", &status.repo_url)
        .await
        .map_err(|e| CommitStatusError::Credential {
            repo: status.repo_url.clone(),
            cause: e.to_string(),
        })?
        .and_then(|c| c.secrets.password_or_token().map(str::to_owned));
    let (state, description) = match status.state {
        CommitState::Pending => (
            StatusState::Pending,
            format!("promoted to {}, verifying", event.stage),
        ),
        CommitState::Success => (StatusState::Success, format!("verified in {}", event.stage)),
        CommitState::Failure => (
            StatusState::Failure,
            format!("verification failed in {}", event.stage),
        ),
    };
    let status_to_post = CommitStatus {
        state,
        context: format!("dray/{}/{}", event.project, event.stage),
        target_url: event.url.clone(),
        description,
    };
    commit_status::post(&target, token, &status.sha, &status_to_post)
        .await
        .map_err(|cause| CommitStatusError::Post {
            repo: status.repo_url.clone(),
            sha: status.sha.clone(),
            cause,
        })
}
