//! Azure: one receiver for Azure Container Registry and Azure DevOps service hooks, told
//! apart by the payload's shape (neither signs; both carry the secret in the URL path):
//! - ACR (`action`): `push` and `chart_push` name `request.host/target.repository`;
//!   `ping` is the portal's "Ping";
//! - Azure DevOps (`eventType`): `git.push` names `resource.repository.remoteUrl` (and its
//!   `sshUrl`, `webUrl` when present); `git.pullrequest.merged`, and
//!   `git.pullrequest.updated` to `completed` or `abandoned`, decide a review.

use serde_json::Value;

use super::reading::{Reading, git_urls, named, strings};
use crate::api::RepoUrl;

pub(super) fn read(payload: &Value) -> Reading {
    if let Some(event) = payload.get("eventType").and_then(Value::as_str) {
        return devops(event, payload);
    }
    match payload.get("action").and_then(Value::as_str) {
        Some("ping") => Reading::Ping,
        Some("push" | "chart_push") => {
            match strings(payload, &["/request/host", "/target/repository"]).as_slice() {
                [host, repository] => named(vec![RepoUrl::image(&format!("{host}/{repository}"))]),
                _ => Reading::Ignored("the registry event names no host and repository"),
            }
        }
        _ => Reading::Ignored("Azure Container Registry event other than a push"),
    }
}

fn devops(event: &str, payload: &Value) -> Reading {
    match event {
        "git.push" => named(git_urls(
            payload,
            &[
                "/resource/repository/remoteUrl",
                "/resource/repository/sshUrl",
                "/resource/repository/webUrl",
            ],
        )),
        "git.pullrequest.merged" => Reading::ReviewDecided,
        "git.pullrequest.updated"
            if matches!(
                payload.pointer("/resource/status").and_then(Value::as_str),
                Some("completed" | "abandoned")
            ) =>
        {
            Reading::ReviewDecided
        }
        _ => Reading::Ignored("Azure DevOps event other than a git push or a decided pull request"),
    }
}
