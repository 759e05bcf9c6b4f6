//! GitLab's commit statuses, as "Set the pipeline status of a commit" documents them
//! (<https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>):
//! `POST /api/v4/projects/:id/statuses/:sha` with `state` (required: `pending`,
//! `running`, `success`, `failed`, `canceled`, `skipped`), `name` (or `context`, default
//! `default`), `ref`, `target_url`, `description`, as a form or JSON, answers
//! `201 Created` with the status (`id`, `sha`, `ref`, `status`, `name`, `target_url`,
//! `description`, `created_at`, `started_at`, `finished_at`, `allow_failure`, `coverage`,
//! `author`). An unknown project is `404 Project Not Found`; a missing or unknown `state`
//! is 400; a SHA that names no commit of the project is `404 Commit Not Found`.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{AppState, message, now, params, project_path, user_json};

const STATES: [&str; 6] = [
    "pending", "running", "success", "failed", "canceled", "skipped",
];

/// `POST /api/v4/projects/:id/statuses/:sha`.
pub(super) async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath((id, sha)): UrlPath<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(project) = project_path(&state, &id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    let p = params(&headers, &body);
    let wanted = p.get("state").cloned().unwrap_or_default();
    if !STATES.contains(&wanted.as_str()) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "state does not have a valid value"})),
        )
            .into_response();
    }
    let bare = state.lock().projects[&project].bare.clone();
    let is_commit = crate::git_repo::git(&state.world)
        .arg("--git-dir")
        .arg(&bare)
        .args(["cat-file", "-t", &sha])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "commit");
    if !is_commit {
        return message(StatusCode::NOT_FOUND, "404 Commit Not Found");
    }
    let name = p
        .get("name")
        .or_else(|| p.get("context"))
        .cloned()
        .unwrap_or_else(|| "default".to_owned());
    let at = now();
    let finished = matches!(
        wanted.as_str(),
        "success" | "failed" | "canceled" | "skipped"
    );
    let status = {
        let mut inner = state.lock();
        inner.next_global += 1;
        let status = json!({
            "id": inner.next_global,
            "sha": sha,
            "ref": p.get("ref"),
            "status": wanted,
            "name": name,
            "target_url": p.get("target_url"),
            "description": p.get("description"),
            "created_at": at,
            "started_at": if wanted == "pending" { None } else { Some(&at) },
            "finished_at": if finished { Some(&at) } else { None },
            "allow_failure": false,
            "coverage": null,
            "pipeline_id": inner.next_global,
        });
        inner.statuses.push((project, sha, status.clone()));
        status
    };
    let mut status = status;
    status["author"] = user_json(&state, "dray-bot");
    (StatusCode::CREATED, axum::Json(status)).into_response()
}
