//! GitHub's commit statuses, as "Create a commit status" documents them
//! (<https://docs.github.com/rest/commits/statuses#create-a-commit-status>):
//! `POST /repos/{owner}/{repo}/statuses/{sha}` with `state` (required: `error`, `failure`,
//! `pending`, `success`), `target_url`, `description` and `context` (default `default`)
//! answers `201 Created` with the status (`id`, `node_id`, `state`, `description`,
//! `target_url`, `context`, `created_at`, `updated_at`, `creator`, `url`). An unknown
//! repository is 404; a bad `state` or a SHA that names no commit in the repository is 422.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, error, now, repo_name, user_json};

const DOCS: &str = "https://docs.github.com/rest/commits/statuses#create-a-commit-status";
const STATES: [&str; 4] = ["error", "failure", "pending", "success"];

/// `POST /repos/{owner}/{repo}/statuses/{sha}`.
pub(super) async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, sha)): UrlPath<(String, String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let full = repo_name(&owner, &repo);
    let Some(bare) = state.lock().repos.get(&full).cloned() else {
        return error(StatusCode::NOT_FOUND, "Not Found", DOCS);
    };
    let wanted = body["state"].as_str().unwrap_or_default();
    if !STATES.contains(&wanted) {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({
                "message": "Validation Failed",
                "errors": [{"resource": "Status", "field": "state", "code": "custom",
                            "message": format!("state is not included in the list")}],
                "documentation_url": DOCS,
            })),
        )
            .into_response();
    }
    let is_commit = crate::git_repo::git(&state.world)
        .arg("--git-dir")
        .arg(&bare)
        .args(["cat-file", "-t", &sha])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "commit");
    if !is_commit {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
            DOCS,
        );
    }
    let at = now();
    let status = {
        let mut inner = state.lock();
        let id = inner.statuses.len() as u64 + 1;
        let status = json!({
            "url": format!("{}/repos/{full}/statuses/{sha}", state.base_url),
            "avatar_url": "https://github.com/images/error/hubot_happy.gif",
            "id": id,
            "node_id": format!("SC_{id}"),
            "state": wanted,
            "description": body["description"].as_str(),
            "target_url": body["target_url"].as_str(),
            "context": body["context"].as_str().unwrap_or("default"),
            "created_at": at,
            "updated_at": at,
        });
        inner.statuses.push((full, sha, status.clone()));
        status
    };
    let mut status = status;
    status["creator"] = user_json(&state, "dray-bot");
    (StatusCode::CREATED, axum::Json(status)).into_response()
}
