//! Gitea (and Forgejo, which sends the same): `X-Gitea-Event: push` names the repository's
//! clone, html and ssh URLs; `pull_request` closed (merged or not) decides a review. Gitea's
//! "Test delivery" is a `push` with the repository's last commit, so it refreshes.

use axum::http::HeaderMap;
use serde_json::Value;

use super::doors::header;
use super::reading::{Reading, git_urls, named};

pub(super) fn read(headers: &HeaderMap, payload: &Value) -> Reading {
    match header(headers, "x-gitea-event").unwrap_or_default() {
        "push" => named(git_urls(
            payload,
            &[
                "/repository/clone_url",
                "/repository/html_url",
                "/repository/ssh_url",
            ],
        )),
        "pull_request" if payload.get("action").and_then(Value::as_str) == Some("closed") => {
            Reading::ReviewDecided
        }
        _ => Reading::Ignored("Gitea event other than push or a closed pull request"),
    }
}
