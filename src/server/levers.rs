//! The levers a person pulls by hand, as routes; what they do is the pipeline's
//! ([`crate::pipeline::reject`], [`crate::pipeline::freeze`]), which also authorizes:
//!
//! - `POST /api/v1/projects/{project}/freight/{name}/reject` `{reason, stage?}` and
//!   `…/unreject` `{stage?}`: `reject` on the Freight (named by id, id prefix or alias);
//! - `POST /api/v1/projects/{project}/freeze` `{reason, stage?, until?}` and
//!   `…/unfreeze` `{stage?}`: `freeze` on the Stage, or on the project without one.
//!
//! The web UI's Reject and Freeze buttons call these same routes (with the session's CSRF
//! token), and the CLI's `dray freight reject`, `dray freeze` do too.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::Kind;
use crate::pipeline::lever::LeverError;
use crate::pipeline::{freeze, reject};

use super::AppState;
use super::auth::Caller;
use super::credentials::present;
use super::error::{ApiError, list_them};

impl From<LeverError> for ApiError {
    fn from(error: LeverError) -> Self {
        let message = error.to_string();
        match error {
            LeverError::Forbidden { message, hint } => ApiError::forbidden(message).with_hint(hint),
            LeverError::NoStage { project, .. } => {
                ApiError::not_found(message).with_hint(list_them(Kind::Stage, &project))
            }
            LeverError::NoFreight { project, .. } => {
                ApiError::not_found(message).with_hint(list_them(Kind::Freight, &project))
            }
            LeverError::NoProject { .. } => {
                ApiError::not_found(message).with_hint("run `dray get projects` to list them")
            }
            LeverError::NoReason { .. } => {
                ApiError::bad_request(message).with_hint("say why with `--reason TEXT`")
            }
            LeverError::Store(store) => store.into(),
        }
    }
}

/// The body of `…/reject` and `…/unreject`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RejectBody {
    /// Only for this Stage; everywhere when absent.
    #[serde(default)]
    pub stage: Option<String>,
    /// Why (required to reject).
    #[serde(default)]
    pub reason: String,
}

/// The body of `…/freeze` and `…/unfreeze`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct FreezeBody {
    /// Only this Stage; the whole project when absent.
    #[serde(default)]
    pub stage: Option<String>,
    /// Why (required to freeze).
    #[serde(default)]
    pub reason: String,
    /// When it lifts by itself (RFC 3339, or a duration from now such as `2h`); never
    /// when absent.
    #[serde(default)]
    pub until: Option<String>,
}

/// `body` as `T`; an empty body is `T::default()`.
fn parse<T: DeserializeOwned + Default>(body: &Bytes, what: &str) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid",
            format!("the body of {what} is not valid: {e}"),
        )
        .with_hint("send `{\"reason\": \"...\", \"stage\": \"...\"}` (stage optional)")
    })
}

/// `POST …/freight/{name}/reject`: answers the Freight as stored.
pub(crate) async fn reject_freight(
    State(state): State<AppState>,
    Path((project, name)): Path<(String, String)>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: RejectBody = parse(&body, "reject")?;
    let store = state.store.as_ref();
    let freight = super::freight_names::resolve(store, &project, &name).await?;
    let id = freight.key.name.clone();
    let stage = body.stage.as_deref();
    let written = reject::reject(store, &caller, &project, &id, stage, &body.reason).await?;
    tracing::info!(%project, freight = %id, ?stage, by = %caller.user, "freight rejected");
    Ok(Json(present(written.object)))
}

/// `POST …/freight/{name}/unreject`: answers `{freight, lifted, message}`.
pub(crate) async fn unreject_freight(
    State(state): State<AppState>,
    Path((project, name)): Path<(String, String)>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: RejectBody = parse(&body, "unreject")?;
    let store = state.store.as_ref();
    let freight = super::freight_names::resolve(store, &project, &name).await?;
    let id = freight.key.name.clone();
    let stage = body.stage.as_deref();
    let done = reject::unreject(store, &caller, &project, &id, stage).await?;
    let alias = done
        .freight
        .object
        .get("alias")
        .and_then(Value::as_str)
        .unwrap_or(id.as_str())
        .to_owned();
    let place = stage.map_or_else(|| "everywhere".to_owned(), |s| format!("for Stage `{s}`"));
    let message = if done.lifted {
        tracing::info!(%project, freight = %id, ?stage, by = %caller.user, "rejection lifted");
        format!("Freight `{alias}`: rejection lifted {place}")
    } else {
        format!("Freight `{alias}` was not rejected {place}: nothing to lift")
    };
    Ok(Json(
        json!({"freight": present(done.freight.object), "lifted": done.lifted, "message": message}),
    ))
}

/// `until` as a time: RFC 3339, or a duration from now (`2h`, `90m`).
fn until_of(text: &str) -> Result<jiff::Timestamp, ApiError> {
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(at);
    }
    crate::api::parse_duration(text)
        .ok()
        .and_then(|d| jiff::SignedDuration::try_from(d).ok())
        .and_then(|d| jiff::Timestamp::now().checked_add(d).ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`until` is neither an RFC 3339 time nor a duration: `{text}`"
            ))
            .with_hint("send e.g. `2026-12-24T18:00:00Z`, or `2h` from now")
        })
}

/// `POST …/freeze`: answers `{scope, stage, freeze}`.
pub(crate) async fn freeze_line(
    State(state): State<AppState>,
    Path(project): Path<String>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: FreezeBody = parse(&body, "freeze")?;
    let until = match body
        .until
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        None => None,
        Some(text) => Some(until_of(text)?),
    };
    let store = state.store.as_ref();
    let stage = body.stage.as_deref();
    let frozen = freeze::freeze(store, &caller, &project, stage, &body.reason, until).await?;
    tracing::info!(%project, ?stage, by = %caller.user, "line frozen");
    Ok(Json(json!({
        "scope": if stage.is_some() { "stage" } else { "project" },
        "stage": stage,
        "freeze": frozen,
    })))
}

/// `POST …/unfreeze`: answers `{scope, stage, lifted, freeze: null, message}`.
pub(crate) async fn unfreeze_line(
    State(state): State<AppState>,
    Path(project): Path<String>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: FreezeBody = parse(&body, "unfreeze")?;
    let store = state.store.as_ref();
    let stage = body.stage.as_deref();
    let before = freeze::unfreeze(store, &caller, &project, stage).await?;
    let place = stage.map_or_else(
        || format!("project `{project}`"),
        |s| format!("Stage `{s}`"),
    );
    let message = match &before {
        Some(_) => {
            tracing::info!(%project, ?stage, by = %caller.user, "line unfrozen");
            format!("{place}: freeze lifted; promotions go ahead")
        }
        None => format!("{place} was not frozen: nothing to lift"),
    };
    Ok(Json(json!({
        "scope": if stage.is_some() { "stage" } else { "project" },
        "stage": stage,
        "lifted": before.is_some(),
        "freeze": null,
        "message": message,
    })))
}
