//! Promotion actions: request one (`POST …/stages/{stage}/promote`, or a Promotion document
//! on the generic routes; both go through the pipeline's one door, which asks for `promote`
//! on the Stage, and `override` too through a closed window), abort one
//! (`POST …/promotions/{name}/abort`, `abort` on the Promotion), and read a Stage's audit
//! trail from git (`GET …/stages/{stage}/audit`, `get` on the Stage). The decisions are the
//! pipeline's; this module maps them to HTTP. The actor is the authenticated user.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, Verb};
use crate::discovery::credentials;
use crate::pipeline::request::{self, AbortOutcome, PromoteError, PromoteRequest};
use crate::promotion::audit::{self, AuditEntry};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, list_them};
use super::gates::load_stage;

/// The body of `POST …/stages/{stage}/promote`.
#[derive(Deserialize, Serialize, Debug, Clone, Default)]
pub struct PromoteBody {
    /// The Freight: its id, a unique id prefix (7 characters or more) or its alias.
    #[serde(default)]
    pub freight: Option<String>,
    /// The Freight, named the same ways (kept for clients that name it by alias).
    #[serde(default)]
    pub alias: Option<String>,
    /// Promote through a closed promotion window, for this reason.
    #[serde(
        default,
        rename = "overrideWindow",
        skip_serializing_if = "Option::is_none"
    )]
    pub override_window: Option<String>,
}

impl From<PromoteError> for ApiError {
    fn from(error: PromoteError) -> Self {
        let message = error.to_string();
        match error {
            PromoteError::NoStage { project, .. } => {
                ApiError::not_found(message).with_hint(list_them(Kind::Stage, &project))
            }
            PromoteError::NoFreight { project, .. } => {
                ApiError::not_found(message).with_hint(list_them(Kind::Freight, &project))
            }
            PromoteError::Forbidden { message, hint } => {
                ApiError::forbidden(message).with_hint(hint)
            }
            PromoteError::Ambiguous => ApiError::bad_request(message)
                .with_hint("pass either `freight` (the id) or `alias`, not both"),
            PromoteError::Refused {
                project,
                freight,
                stage,
                reasons,
            } => {
                // The reasons, each with what lifts it, are the details: said once.
                let headline = format!("Freight `{freight}` may not be promoted to `{stage}`");
                let mut api = ApiError::new(StatusCode::CONFLICT, "refused", headline).with_hint(
                    format!(
                        "run `dray get freight --stage {stage} -p {project}` to see which Freight may go"
                    ),
                );
                api.set_details(json!(reasons));
                api
            }
            PromoteError::Plan(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
                    .with_hint("fix the Stage's promotionTemplate and apply it again")
            }
            // A name already taken is a 409, a vanished resource a 404, as for any write.
            PromoteError::Store(store) => ApiError::from(store),
        }
    }
}

/// `POST /api/v1/projects/{project}/stages/{stage}/promote`.
pub(crate) async fn promote(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    Json(body): Json<PromoteBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request = PromoteRequest {
        stage,
        freight: body.freight,
        alias: body.alias,
        override_window: body.override_window,
        name: None,
    };
    let created = request_through_door(&state, &caller, &project, request).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Every way a client asks for a Promotion — this route, the web UI's Promote button, a
/// Promotion document on the generic routes — comes here: the pipeline's one door, asked
/// as the authenticated caller, with the Freight named by id, id prefix or alias
/// ([`super::freight_names`]).
pub(crate) async fn request_through_door(
    state: &AppState,
    caller: &Caller,
    project: &str,
    mut request: PromoteRequest,
) -> Result<Value, ApiError> {
    let store = state.store.as_ref();
    let named = super::freight_names::resolve_request(store, project, &mut request).await?;
    let created = match request::request_promotion(store, caller, project, &request).await {
        Ok(created) => created,
        // A Stage of a project that does not exist: say the project does not.
        Err(PromoteError::NoStage { .. }) => {
            let stage = ObjectKey::namespaced(Kind::Stage, project, &request.stage);
            return Err(ApiError::missing_from(store, &stage).await);
        }
        Err(error) => return Err(named.explain(error)),
    };
    tracing::info!(promotion = %created.key, actor = %caller.user, "promotion requested");
    Ok(created.object)
}

/// `POST /api/v1/projects/{project}/promotions/{name}/abort`.
pub(crate) async fn abort(
    State(state): State<AppState>,
    Path((project, name)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Abort,
            "promotions",
            Some(&project),
            Some(&name),
        )
        .await?;
    let key = ObjectKey::namespaced(Kind::Promotion, &project, &name);
    let outcome = request::abort_promotion(state.store.as_ref(), &key, &caller.user).await?;
    let (result, message) = match outcome {
        AbortOutcome::Aborted => ("aborted", "the promotion had not started; it is aborted".to_owned()),
        AbortOutcome::Requested => (
            "requested",
            "the promotion is running; it stops at its next safe point and reports anything already pushed"
                .to_owned(),
        ),
        AbortOutcome::AlreadyFinished(phase) => ("finished", format!("the promotion already ended: {phase:?}")),
    };
    Ok(Json(json!({"result": result, "message": message})))
}

/// Query of the audit route.
#[derive(Deserialize, Debug, Default)]
pub(crate) struct AuditParams {
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/v1/projects/{project}/stages/{stage}/audit`: the stage branch's history.
pub(crate) async fn audit_trail(
    State(state): State<AppState>,
    Path((project, stage_name)): Path<(String, String)>,
    caller: Caller,
    Query(params): Query<AuditParams>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
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
    let Some(branch) = stage
        .status
        .and_then(|s| s.branch)
        .filter(|b| !b.repo_url.is_empty())
    else {
        return Err(
            ApiError::not_found(format!("Stage `{stage_name}` has no branch yet")).with_hint(
                format!(
                    "promote Freight to it first: `dray promote --stage {stage_name} --alias …`"
                ),
            ),
        );
    };
    let services = state.discovery.clone().ok_or_else(|| {
        ApiError::internal("reading git needs the mirror cache, which this server lacks")
    })?;
    let creds = credentials::for_git(
        state.store.as_ref(),
        &state.secret_key,
        &project,
        &branch.repo_url,
    )
    .await
    .map_err(ApiError::internal)?;
    let limit = params.limit.unwrap_or(100).clamp(1, 1000);
    let log = services
        .mirrors
        .branch_log(&branch.repo_url, &branch.name, creds.as_ref(), limit)
        .await
        .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, "git", e.to_string()))?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "branch `{}` does not exist in `{}`",
                branch.name, branch.repo_url
            ))
            .with_hint(format!(
                "it was deleted or never pushed; promote Freight to Stage `{stage_name}` again to write it"
            ))
        })?;
    if let Some(head) = log.first() {
        let truth = crate::promotion::StageTruth::new(
            state.store.clone(),
            services.mirrors.clone(),
            state.secret_key.clone(),
        );
        if let Err(error) = truth.record(&key, head).await {
            tracing::warn!(stage = %key, %error, "cannot record the stage branch head");
        }
    }
    Ok(Json(log.iter().map(audit::entry).collect()))
}
