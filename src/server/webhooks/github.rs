//! GitHub: `push` names the repository's clone, html and ssh URLs; `package` /
//! `registry_package` the package as `owner/name`; `pull_request` closed decides a review;
//! `ping` is GitHub's test delivery.

use axum::http::HeaderMap;
use serde_json::Value;

use super::doors::header;
use super::reading::{Reading, git_urls, named};
use crate::api::RepoUrl;

pub(super) fn read(headers: &HeaderMap, payload: &Value) -> Reading {
    match header(headers, "x-github-event").unwrap_or_default() {
        "ping" => Reading::Ping,
        "pull_request" if payload.get("action").and_then(Value::as_str) == Some("closed") => {
            Reading::ReviewDecided
        }
        "push" => named(git_urls(
            payload,
            &[
                "/repository/clone_url",
                "/repository/html_url",
                "/repository/ssh_url",
                "/repository/url",
            ],
        )),
        "package" | "registry_package" => {
            let package = payload
                .get("package")
                .or_else(|| payload.get("registry_package"));
            let name = package.and_then(|p| p.get("name")).and_then(Value::as_str);
            let owner = package.and_then(|p| {
                p.get("namespace")
                    .and_then(Value::as_str)
                    .or_else(|| p.pointer("/owner/login").and_then(Value::as_str))
            });
            match (owner, name) {
                (Some(owner), Some(name)) => named(vec![RepoUrl::new(&format!("{owner}/{name}"))]),
                _ => Reading::Ignored("the package event names no package"),
            }
        }
        _ => Reading::Ignored("GitHub event other than push, package or a closed pull request"),
    }
}
