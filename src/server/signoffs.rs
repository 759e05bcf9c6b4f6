//! Signing Freight off for a Stage: `POST …/stages/{stage}/signoffs` (`signoff` on the
//! Stage). Who may sign and what counts is [`crate::pipeline::signoff`]'s; this module
//! turns the request into its call and its answer into JSON.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::Value;

use crate::pipeline::signoff::{self, SignoffError};

use super::AppState;
use super::auth::Caller;
use super::credentials::present;
use super::error::ApiError;

/// The body of `POST …/stages/{stage}/signoffs`: the same as approve's.
pub type SignoffBody = super::gates::ApproveBody;

/// `POST /api/v1/projects/{project}/stages/{stage}/signoffs`: records the caller's
/// sign-off; answers the updated Freight.
pub(crate) async fn sign_off(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    Json(body): Json<SignoffBody>,
) -> Result<Json<Value>, ApiError> {
    let store = state.store.as_ref();
    let (named, which) = body.request(store, &project, &stage).await?;
    let updated =
        match signoff::sign_off(store, &caller, &project, &stage, &which, &body.reason).await {
            Ok(updated) => updated,
            Err(SignoffError::Promote(error)) => return Err(named.explain(error)),
            Err(error) => return Err(refusal(error)),
        };
    tracing::info!(freight = %updated.key, %stage, by = %caller.user, "freight signed off");
    Ok(Json(present(updated.object)))
}

/// A refused sign-off: 403 for a signer outside the groups (or not a person), 409 for a
/// Stage that asks for none.
fn refusal(error: SignoffError) -> ApiError {
    let hint = error.hint();
    let message = error.to_string();
    match error {
        SignoffError::NotInGroups { .. } | SignoffError::NotAPerson { .. } => {
            ApiError::forbidden(message).with_hint(hint)
        }
        SignoffError::NotAsked { .. } => {
            ApiError::new(StatusCode::CONFLICT, "refused", message).with_hint(hint)
        }
        SignoffError::Promote(error) => error.into(),
    }
}
