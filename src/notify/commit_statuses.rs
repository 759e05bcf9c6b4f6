//! Feedback to CI: which commit statuses an occurrence asks for, and posting one.
//!
//! A Freight's commit gets one status per Stage, named `dray/<project>/<stage>`:
//! `pending` when a promotion of it into the Stage succeeded, `success` when it was
//! verified there, `failure` when a verification of it there failed. Two kinds of
//! subscription (of the Warehouse the Freight came from) name commits, one path for both:
//! - a git subscription with `commitStatuses: true`: the Freight's commit of it;
//! - an image subscription with `commitStatuses: true`: the commit the Freight's image
//!   was built from, as its `org.opencontainers.image.source` and `…revision` labels (or
//!   annotations) say; an image without both posts nothing.
//!
//! The forge is the subscription's `forge`, else told by the repository's host; the token
//! is the project's `git` Credential for the repository. An image's labels are the image
//! builder's word: its statuses are posted only with such a Credential, never without a
//! token.

use crate::api::{
    CommitState, CommitStatusDelivery, ForgeProvider, ForgeRef, Freight, NotificationEvent,
    PendingDelivery, RepoUrl, Warehouse,
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
    let subscriptions = &warehouse.spec.subscriptions;
    let git: Vec<RepoUrl> = subscriptions
        .iter()
        .filter_map(|s| s.git.as_ref())
        .filter(|g| g.commit_statuses)
        .map(|g| RepoUrl::new(&g.repo_url))
        .collect();
    let commits = f
        .spec
        .commits
        .iter()
        .filter(|c| git.contains(&RepoUrl::new(&c.repo_url)))
        .map(|c| (c.repo_url.clone(), c.id.clone(), None));
    let images = f.spec.images.iter().filter_map(|i| {
        let sub = subscriptions
            .iter()
            .filter_map(|s| s.image.as_ref())
            .find(|s| s.commit_statuses && s.repo_url == i.repo_url)?;
        match (&i.source, &i.revision) {
            (Some(source), Some(revision)) => {
                Some((source.clone(), revision.clone(), Some(sub.repo_url.clone())))
            }
            _ => {
                tracing::debug!(
                    freight = %occurrence.payload.freight.name, image = %i.repo_url,
                    "no commit status for the image: it names no source repository and \
                     revision (`org.opencontainers.image.source`/`.revision` labels)"
                );
                None
            }
        }
    });
    let mut planned: Vec<CommitStatusDelivery> = Vec::new();
    for (repo_url, sha, image) in commits.chain(images) {
        // One status per commit, however many subscriptions name it.
        let seen = planned
            .iter()
            .any(|p| p.sha == sha && RepoUrl::new(&p.repo_url) == RepoUrl::new(&repo_url));
        if !seen {
            planned.push(CommitStatusDelivery {
                repo_url,
                sha,
                state,
                image,
            });
        }
    }
    planned
}

/// The forge settings for `status`: those of the image subscription that named its
/// commit, or of the git subscription of its repository; default when neither sets any.
fn forge_of(warehouses: &[impl AsRef<Warehouse>], status: &CommitStatusDelivery) -> ForgeRef {
    let wanted = RepoUrl::new(&status.repo_url);
    let subscriptions = || {
        warehouses
            .iter()
            .flat_map(|w| w.as_ref().spec.subscriptions.iter())
    };
    let forge = match &status.image {
        Some(image) => subscriptions()
            .filter_map(|s| s.image.as_ref())
            .find(|i| &i.repo_url == image)
            .and_then(|i| i.forge.clone()),
        None => None,
    };
    forge
        .or_else(|| {
            subscriptions()
                .filter_map(|s| s.git.as_ref())
                .find(|g| RepoUrl::new(&g.repo_url) == wanted)
                .and_then(|g| g.forge.clone())
        })
        .unwrap_or_default()
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
    /// An image's labels named a repository no `git` Credential of the project covers.
    #[error(
        "cannot post a commit status to `{repo}` (named by the image of `{image}`): no `git` \
         Credential of the project covers it; add one whose token may write commit statuses"
    )]
    NoCredential {
        /// The repository the image's labels name.
        repo: String,
        /// The image subscription.
        image: String,
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
    let forge = forge_of(warehouses, status);
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
    // An image's labels are the image builder's word, not the Warehouse's: Dray posts for
    // them only to repositories the project holds a Credential for.
    if let (Some(image), None) = (&status.image, &token) {
        return Err(CommitStatusError::NoCredential {
            repo: status.repo_url.clone(),
            image: image.clone(),
        });
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::{
        EventFreight, EventPayload, FreightCommit, FreightFields, FreightImage, FreightOrigin,
        GitSubscription, ImageSubscription, RepoSubscription, Time, WarehouseSpec,
    };

    const SOURCE: &str = "https://github.com/acme/app";

    fn occurrence(event: NotificationEvent) -> Occurrence {
        Occurrence {
            id: "o".into(),
            payload: EventPayload {
                event,
                project: "demo".into(),
                stage: "dev".into(),
                freight: EventFreight {
                    name: "f1".into(),
                    alias: "frosty-otter".into(),
                },
                promotion: None,
                phase: "Succeeded".into(),
                message: String::new(),
                at: Time(jiff::Timestamp::UNIX_EPOCH),
                url: "http://x/projects/demo/stages/dev".into(),
            },
        }
    }

    fn image(repo: &str, source: Option<&str>, revision: Option<&str>) -> FreightImage {
        FreightImage {
            repo_url: repo.into(),
            tag: "1.0.0".into(),
            digest: "sha256:aa".into(),
            source: source.map(str::to_owned),
            revision: revision.map(str::to_owned),
            ..FreightImage::default()
        }
    }

    fn freight(images: Vec<FreightImage>, commits: Vec<FreightCommit>) -> Freight {
        Freight::new(
            "f1",
            FreightFields {
                origin: FreightOrigin {
                    name: "app".into(),
                    ..FreightOrigin::default()
                },
                images,
                commits,
                ..FreightFields::default()
            },
        )
    }

    fn warehouse(subscriptions: Vec<RepoSubscription>) -> Warehouse {
        Warehouse::new(
            "app",
            WarehouseSpec {
                subscriptions,
                ..WarehouseSpec::default()
            },
        )
    }

    fn image_sub(repo: &str, commit_statuses: bool) -> RepoSubscription {
        RepoSubscription {
            image: Some(ImageSubscription {
                repo_url: repo.into(),
                commit_statuses,
                forge: Some(ForgeRef {
                    provider: Some(ForgeProvider::Github),
                    api_url: Some("http://127.0.0.1:1/api".into()),
                }),
                ..ImageSubscription::default()
            }),
            ..RepoSubscription::default()
        }
    }

    #[test]
    fn an_image_with_source_and_revision_gets_a_status_on_that_commit() {
        let f = freight(
            vec![
                image("reg/app", Some(SOURCE), Some("0123abc")),
                image("reg/quiet", Some(SOURCE), Some("4567def")),
            ],
            vec![],
        );
        let w = warehouse(vec![
            image_sub("reg/app", true),
            image_sub("reg/quiet", false),
        ]);
        let planned = plan(
            &occurrence(NotificationEvent::FreightVerified),
            &[Arc::new(f)],
            &[Arc::new(w.clone())],
        );
        assert_eq!(
            planned,
            vec![CommitStatusDelivery {
                repo_url: SOURCE.into(),
                sha: "0123abc".into(),
                state: CommitState::Success,
                image: Some("reg/app".into()),
            }]
        );
        let forge = forge_of(&[Arc::new(w.clone())], &planned[0]);
        assert_eq!(forge.provider, Some(ForgeProvider::Github));
        assert_eq!(forge.api_url.as_deref(), Some("http://127.0.0.1:1/api"));
    }

    #[test]
    fn an_image_without_both_labels_posts_nothing() {
        let f = freight(
            vec![
                image("reg/app", Some(SOURCE), None),
                image("reg/other", None, Some("0123abc")),
            ],
            vec![],
        );
        let w = warehouse(vec![
            image_sub("reg/app", true),
            image_sub("reg/other", true),
        ]);
        let planned = plan(
            &occurrence(NotificationEvent::PromotionSucceeded),
            &[Arc::new(f)],
            &[Arc::new(w.clone())],
        );
        assert_eq!(planned, vec![]);
    }

    #[test]
    fn a_commit_named_by_a_git_and_an_image_subscription_gets_one_status() {
        let commit = FreightCommit {
            repo_url: format!("{SOURCE}.git"),
            id: "0123abc".into(),
            ..FreightCommit::default()
        };
        let f = freight(
            vec![image("reg/app", Some(SOURCE), Some("0123abc"))],
            vec![commit],
        );
        let git = RepoSubscription {
            git: Some(GitSubscription {
                repo_url: format!("{SOURCE}.git"),
                commit_statuses: true,
                ..GitSubscription::default()
            }),
            ..RepoSubscription::default()
        };
        let w = warehouse(vec![image_sub("reg/app", true), git]);
        let planned = plan(
            &occurrence(NotificationEvent::VerificationFailed),
            &[Arc::new(f)],
            &[Arc::new(w.clone())],
        );
        assert_eq!(planned.len(), 1, "{planned:?}");
        assert_eq!(planned[0].state, CommitState::Failure);
        assert_eq!(planned[0].image, None, "the git subscription's comes first");
        assert_eq!(
            forge_of(&[Arc::new(w.clone())], &planned[0]),
            ForgeRef::default()
        );
    }
}
