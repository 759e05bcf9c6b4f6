//! GitLab: `Push Hook` and `Tag Push Hook` name the project's http, ssh and web URLs; a
//! `Merge Request Hook` merge or close decides a review.

use axum::http::HeaderMap;
use serde_json::Value;

use super::doors::header;
use super::reading::{Reading, git_urls, named};

pub(super) fn read(headers: &HeaderMap, payload: &Value) -> Reading {
    match header(headers, "x-gitlab-event").unwrap_or_default() {
        "Merge Request Hook"
            if matches!(
                payload
                    .pointer("/object_attributes/action")
                    .and_then(Value::as_str),
                Some("merge" | "close")
            ) =>
        {
            Reading::ReviewDecided
        }
        "Push Hook" | "Tag Push Hook" => named(git_urls(
            payload,
            &[
                "/project/git_http_url",
                "/project/git_ssh_url",
                "/project/web_url",
                "/repository/git_http_url",
            ],
        )),
        _ => Reading::Ignored("GitLab event other than a push or a decided merge request"),
    }
}
