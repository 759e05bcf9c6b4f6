//! `POST /api/v1/projects/{project}/stages/{stage}/verify` (`{"abort": false}`): re-run the
//! verification of the Stage's current Freight, or (`"abort": true`) stop the running one.
//! Needs the `verify` verb on the Stage; answers the run.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::Verb;
use crate::verification::request::{self, VerifyError};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;

/// The body of `POST …/stages/{stage}/verify`.
#[derive(Deserialize, Debug, Default)]
pub struct VerifyBody {
    /// Stop the running verification instead of starting one.
    #[serde(default)]
    pub abort: bool,
}

/// A refused verification request: a 409 with what to do as the hint (never inside the
/// message).
fn refused(error: VerifyError, project: &str) -> ApiError {
    let hint = error.hint(project);
    let api = match error {
        VerifyError::Store(error) => return error.into(),
        refused => ApiError::new(StatusCode::CONFLICT, "refused", refused.to_string()),
    };
    match hint {
        Some(hint) => api.with_hint(hint),
        None => api,
    }
}

/// `POST /api/v1/projects/{project}/stages/{stage}/verify`.
pub(crate) async fn verify(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    body: Option<Json<VerifyBody>>,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Verify,
            "stages",
            Some(&project),
            Some(&stage),
        )
        .await?;
    let abort = body.is_some_and(|Json(b)| b.abort);
    let store = state.store.as_ref();
    let run = if abort {
        request::abort(store, &project, &stage, &caller.user).await
    } else {
        request::rerun(store, &project, &stage, &caller.user).await
    }
    .map_err(|e| refused(e, &project))?;
    tracing::info!(%project, %stage, by = %caller.user, abort, run = %run.id, "verification requested");
    Ok(Json(json!(run)))
}
