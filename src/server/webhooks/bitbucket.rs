//! Bitbucket Cloud and Bitbucket Server (Data Center), told apart by `X-Event-Key`:
//! - Cloud `repo:push` names `repository.links.html.href` (Cloud's repository entity has
//!   no clone links) and any `links.clone[]`; `pullrequest:fulfilled` / `rejected`
//!   decide a review;
//! - Server `repo:refs_changed` names `repository.links.clone[].href` (its http link is
//!   under `/scm/`, its ssh link on port 7999: a Warehouse may subscribe to either);
//!   `pr:merged` / `pr:declined` / `pr:deleted` decide a review; `diagnostics:ping` is
//!   its "Test connection".

use axum::http::HeaderMap;
use serde_json::Value;

use super::doors::header;
use super::reading::{Reading, git_urls, named};
use crate::api::RepoUrl;

pub(super) fn read(headers: &HeaderMap, payload: &Value) -> Reading {
    match header(headers, "x-event-key").unwrap_or_default() {
        "diagnostics:ping" => Reading::Ping,
        "pullrequest:fulfilled"
        | "pullrequest:rejected"
        | "pr:merged"
        | "pr:declined"
        | "pr:deleted" => Reading::ReviewDecided,
        "repo:push" | "repo:refs_changed" => {
            let mut urls = git_urls(payload, &["/repository/links/html/href"]);
            urls.extend(clone_links(payload));
            named(urls)
        }
        _ => Reading::Ignored("Bitbucket event other than a push or a decided pull request"),
    }
}

/// `repository.links.clone[].href`.
fn clone_links(payload: &Value) -> Vec<RepoUrl> {
    payload
        .pointer("/repository/links/clone")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|link| link.get("href").and_then(Value::as_str))
        .map(RepoUrl::new)
        .collect()
}
