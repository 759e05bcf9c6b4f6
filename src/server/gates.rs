//! The gates, as the API shows them: which Freight may enter a Stage and why not
//! (`GET …/stages/{stage}/freight`, needing `list` on freight), the Stage's promotion
//! windows now (`GET …/stages/{stage}/window`, and `status.window` on Stages as listed),
//! and approving Freight for a Stage (`POST …/stages/{stage}/approve`, `approve` on the
//! Stage). What the gates and windows say is [`crate::pipeline::board`]'s; this module
//! only turns it into JSON — the Freight listing names a closed window as promote does.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{Freight, Kind, ObjectKey, ResourceBody as _, Stage, Verb};
use crate::pipeline::board::{self, StageWindow};
use crate::pipeline::request::{self, PromoteRequest};
use crate::pipeline::signoff;

use super::AppState;
use super::auth::Caller;
use super::credentials::present;
use super::error::ApiError;

/// The body of `POST …/stages/{stage}/approve` and `…/signoffs`: the Freight, and why.
#[derive(Deserialize, Serialize, Debug, Clone, Default)]
pub struct ApproveBody {
    /// The Freight: its id, a unique id prefix (7 characters or more) or its alias.
    #[serde(default)]
    pub freight: Option<String>,
    /// The Freight, named the same ways.
    #[serde(default)]
    pub alias: Option<String>,
    /// Why it is approved or signed off (kept on the record, and in the sign-off's
    /// trailer).
    #[serde(default)]
    pub reason: String,
}

impl ApproveBody {
    /// The request for `stage` naming the body's Freight, resolved as every route does.
    pub(super) async fn request(
        &self,
        store: &dyn crate::store::Store,
        project: &str,
        stage: &str,
    ) -> Result<(super::freight_names::Resolved, PromoteRequest), ApiError> {
        let mut which = PromoteRequest {
            stage: stage.to_owned(),
            freight: self.freight.clone(),
            alias: self.alias.clone(),
            ..Default::default()
        };
        let named = super::freight_names::resolve_request(store, project, &mut which).await?;
        Ok((named, which))
    }
}

/// `POST /api/v1/projects/{project}/stages/{stage}/approve`.
pub(crate) async fn approve(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    Json(body): Json<ApproveBody>,
) -> Result<Json<Value>, ApiError> {
    let store = state.store.as_ref();
    let (named, which) = body.request(store, &project, &stage).await?;
    let updated = request::approve(store, &caller, &project, &stage, &which, &body.reason)
        .await
        .map_err(|e| named.explain(e))?;
    tracing::info!(freight = %updated.key, %stage, by = %caller.user, "freight approved");
    Ok(Json(present(updated.object)))
}

/// `GET /api/v1/projects/{project}/stages/{stage}/freight`: every Freight, newest first,
/// with `available` or the reasons it is not.
pub(crate) async fn stage_freight(
    State(state): State<AppState>,
    Path((project, stage_name)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Vec<Value>>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::List,
            "freight",
            Some(&project),
            None,
        )
        .await?;
    let key = ObjectKey::namespaced(Kind::Stage, &project, &stage_name);
    let stage = load_stage(&state, &key).await?;
    let windows = board::project_windows(state.store.as_ref(), &project).await?;
    let (objects, freight): (Vec<Value>, Vec<Freight>) = state
        .store
        .list(Kind::Freight, Some(&project))
        .await?
        .into_iter()
        .filter_map(|stored| {
            let freight = stored.to_typed::<Freight>().ok()?;
            Some((stored.object, freight))
        })
        .unzip();
    let refs: Vec<&Freight> = freight.iter().collect();
    let stage_board = board::stage_board(&stage, &refs, &windows, jiff::Timestamp::now());
    let window = window_refusal(&stage_board.window);
    let mut listed = Vec::new();
    for ((object, typed), entry) in objects.into_iter().zip(&freight).zip(&stage_board.freight) {
        let gates = &entry.availability;
        let mut reasons: Vec<String> = gates.reasons.iter().map(ToString::to_string).collect();
        reasons.extend(window.clone());
        let mut object = present(object);
        object["availability"] = json!({
            "available": reasons.is_empty(),
            "reasons": reasons,
            "soakEndsAt": gates.soak_ends_at.map(|t| t.to_string()),
            "approvedBy": gates.approved_by,
        });
        if let Some(policy) = &stage.spec.signoff {
            let signed = signoff::counted(policy, signoff::signoffs(typed, &stage_name), None);
            object["availability"]["signoffs"] = json!({
                "required": policy.required,
                "signedOffBy": signed.iter().map(|s| s.user.as_str()).collect::<Vec<_>>(),
                "groups": policy.groups,
            });
        }
        listed.push(object);
    }
    listed
        .sort_by_key(|f| std::cmp::Reverse(f.creation_timestamp().unwrap_or_default().to_owned()));
    Ok(Json(listed))
}

/// What the Stage's windows add to every Freight's reasons, as promote says it: the closed
/// window with when it opens, or why the windows cannot be evaluated (which keeps Freight
/// out too).
fn window_refusal(window: &StageWindow) -> Option<String> {
    if let Some(reason) = window.reason() {
        return Some(reason.to_string());
    }
    window
        .error()
        .map(|error| format!("{error}; hint: {}", error.hint()))
}

/// `GET /api/v1/projects/{project}/stages/{stage}/window`: whether the Stage's promotion
/// windows are open now, which one blocks, and when that changes.
pub(crate) async fn stage_window(
    State(state): State<AppState>,
    Path((project, stage_name)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Get,
            "stages",
            Some(&project),
            Some(&stage_name),
        )
        .await?;
    let key = ObjectKey::namespaced(Kind::Stage, &project, &stage_name);
    let stage = load_stage(&state, &key).await?;
    let windows = board::project_windows(state.store.as_ref(), &project).await?;
    let stage_board = board::stage_board(&stage, &[], &windows, jiff::Timestamp::now());
    match stage_board.window.0 {
        Ok(window) => Ok(Json(json!(window))),
        Err(error) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            error.to_string(),
        )
        .with_hint(error.hint())),
    }
}

/// The Stage `key`, or a 404 that says how to list Stages.
pub(crate) async fn load_stage(state: &AppState, key: &ObjectKey) -> Result<Stage, ApiError> {
    let Some(stored) = state.store.get(key).await? else {
        return Err(ApiError::missing_from(state.store.as_ref(), key).await);
    };
    Ok(stored.to_typed()?)
}

/// Adds `status.window` (open, which window blocks, when that changes) to Stages as the
/// API shows them. It is computed on read from the project's windows — one ProjectConfig
/// read per call, whatever the number of Stages — so it is never stale in the store.
pub(crate) async fn add_window_state(
    state: &AppState,
    project: &str,
    stages: &mut [Value],
) -> Result<(), ApiError> {
    let windows = board::project_windows(state.store.as_ref(), project).await?;
    if windows.is_empty() {
        return Ok(());
    }
    let now = jiff::Timestamp::now();
    for stage in stages.iter_mut() {
        let name = stage.name().unwrap_or_default().to_owned();
        let labels = stage.labels();
        let window = match StageWindow::of(&windows, &name, &labels, now).0 {
            Ok(window) => json!(window),
            Err(error) => json!({"open": false, "error": error.to_string()}),
        };
        if let Some(status) = stage
            .as_object_mut()
            .map(|o| o.entry("status").or_insert_with(|| json!({})))
        {
            status["window"] = window;
        }
    }
    Ok(())
}
