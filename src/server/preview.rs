//! `POST /api/v1/projects/{project}/stages/{stage}/preview`: what promoting a Freight
//! would commit, without writing anything. The body is the promote route's
//! ([`PromoteBody`]); the pipeline authorizes it like a promotion (`promote` on the Stage,
//! `override` with `overrideWindow`), reports the gates' refusals beside the diff, and the
//! engine runs the steps before the first that writes in a throwaway work directory. This
//! module maps that to HTTP: 200 with
//! `{stage, freight, alias, refusals, diff, files: [{checkout, path, status, diff}],
//! stoppedBefore, steps, failed}`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey};
use crate::pipeline::preview::{Preview, PreviewError, preview_promotion};
use crate::pipeline::request::{PromoteError, PromoteRequest};
use crate::promotion::EngineError;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::promotions::PromoteBody;

/// `POST /api/v1/projects/{project}/stages/{stage}/preview`.
pub(crate) async fn preview(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    Json(body): Json<PromoteBody>,
) -> Result<Json<Value>, ApiError> {
    let request = PromoteRequest {
        stage,
        freight: body.freight,
        alias: body.alias,
        override_window: body.override_window,
        name: None,
    };
    let preview = preview_through_door(&state, &caller, &project, request).await?;
    Ok(Json(preview_json(&preview)))
}

/// Every preview — this route and the web UI's confirmation — comes here: the Freight
/// named by id, id prefix or alias, then the pipeline's preview as the caller.
pub(crate) async fn preview_through_door(
    state: &AppState,
    caller: &Caller,
    project: &str,
    mut request: PromoteRequest,
) -> Result<Preview, ApiError> {
    let store = state.store.as_ref();
    let named = super::freight_names::resolve_request(store, project, &mut request).await?;
    let Some(engine) = &state.previews else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this server does not run promotion steps, so it cannot preview one",
        )
        .with_hint("preview on the `dray serve` that runs the controllers"));
    };
    match preview_promotion(store, engine, caller, project, &request).await {
        Ok(preview) => Ok(preview),
        Err(PreviewError::Promote(PromoteError::NoStage { .. })) => {
            let stage = ObjectKey::namespaced(Kind::Stage, project, &request.stage);
            Err(ApiError::missing_from(store, &stage).await)
        }
        Err(PreviewError::Promote(error)) => Err(named.explain(error)),
        Err(PreviewError::Engine(error @ EngineError::PreviewTimedOut { .. })) => Err(
            ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", error.to_string()),
        ),
        Err(PreviewError::Engine(error)) => Err(ApiError::internal(error)),
    }
}

/// The preview as the API answers it: the checkouts' diffs flattened into one unified
/// `diff` and one entry per file.
pub(crate) fn preview_json(preview: &Preview) -> Value {
    let mut diff = String::new();
    let mut files = Vec::new();
    for checkout in &preview.report.checkouts {
        for file in &checkout.files {
            diff.push_str(&file.diff);
            files.push(json!({
                "checkout": checkout.checkout,
                "branch": checkout.branch,
                "path": file.path,
                "status": file.status,
                "diff": file.diff,
            }));
        }
    }
    let mut value = serde_json::to_value(preview).unwrap_or_else(|_| json!({}));
    value["diff"] = json!(diff);
    value["files"] = json!(files);
    value
}
