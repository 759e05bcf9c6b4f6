//! What an authenticated delivery says: [`Reading`], read by the provider's own module
//! from its payload and headers. No authentication and no side effect here.

use axum::http::HeaderMap;
use serde_json::Value;

use crate::api::{RepoUrl, WebhookProvider, WebhookReceiverConfig};

use super::{azure, bitbucket, gitea, github, gitlab, registries};

/// What a delivery asks of Dray.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Refresh the Warehouses subscribed to these repositories (git, image or chart).
    Named(Vec<RepoUrl>),
    /// Refresh every Warehouse of the project (a generic call naming nothing).
    Everything,
    /// A pull or merge request was merged or closed: wake the project's running
    /// promotions so that `git-wait-for-pr` looks now.
    ReviewDecided,
    /// The sender's test delivery: answered 200, nothing changes.
    Ping,
    /// An event that changes nothing here, and why.
    Ignored(&'static str),
}

/// `urls` as a reading: naming none is an event ignored (only `generic` refreshes
/// everything when it names nothing).
pub(super) fn named(urls: Vec<RepoUrl>) -> Reading {
    let urls: Vec<RepoUrl> = urls
        .into_iter()
        .filter(|u| !u.as_str().is_empty())
        .collect();
    if urls.is_empty() {
        Reading::Ignored("the delivery names no repository")
    } else {
        Reading::Named(urls)
    }
}

/// The strings at `pointers` in `value` (missing and empty ones skipped).
pub(super) fn strings<'a>(value: &'a Value, pointers: &[&str]) -> Vec<&'a str> {
    pointers
        .iter()
        .filter_map(|p| value.pointer(p).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .collect()
}

/// The git repositories at `pointers` in `value`.
pub(super) fn git_urls(value: &Value, pointers: &[&str]) -> Vec<RepoUrl> {
    strings(value, pointers)
        .into_iter()
        .map(RepoUrl::new)
        .collect()
}

/// What `receiver` (a `provider` block) reads from a delivery.
pub(super) fn read(
    provider: WebhookProvider,
    receiver: &WebhookReceiverConfig,
    headers: &HeaderMap,
    payload: &Value,
) -> Reading {
    match provider {
        WebhookProvider::GitHub => github::read(headers, payload),
        WebhookProvider::GitLab => gitlab::read(headers, payload),
        WebhookProvider::Gitea => gitea::read(headers, payload),
        WebhookProvider::Bitbucket => bitbucket::read(headers, payload),
        WebhookProvider::Azure => azure::read(payload),
        WebhookProvider::DockerHub => registries::dockerhub(payload),
        WebhookProvider::Quay => registries::quay(payload),
        WebhookProvider::Harbor => registries::harbor(payload),
        WebhookProvider::Artifactory => registries::artifactory(
            payload,
            receiver
                .artifactory
                .as_ref()
                .and_then(|a| a.virtual_repo_name.as_deref()),
        ),
        WebhookProvider::Registry => registries::distribution(payload),
        WebhookProvider::Generic => generic(payload),
    }
}

/// A generic call: `repoURL` and `repoURLs[]` name repositories; naming none refreshes
/// every Warehouse of the project.
fn generic(payload: &Value) -> Reading {
    let mut repos: Vec<&str> = strings(payload, &["/repoURL"]);
    if let Some(list) = payload.get("repoURLs").and_then(Value::as_array) {
        repos.extend(list.iter().filter_map(Value::as_str));
    }
    if repos.is_empty() {
        Reading::Everything
    } else {
        Reading::Named(repos.into_iter().map(RepoUrl::new).collect())
    }
}
