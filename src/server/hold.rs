//! `POST /api/v1/projects/{project}/stages/{stage}/hold/set` places a hold on a Stage by
//! hand, so auto-promotion leaves it alone until the hold is lifted; `…/hold/lift` lifts
//! it (or says there was none). Both need `promote` on the Stage; what a hold records is
//! [`crate::pipeline::hold`]'s.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, Verb};
use crate::pipeline::hold::place_hold;
use crate::pipeline::request;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::gates::load_stage;

/// The body of `POST …/stages/{stage}/hold/set` (optional).
#[derive(Deserialize, Serialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct HoldBody {
    /// Why the hold is placed (recorded on the Stage).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Places a hold on the Stage and answers `{"stage": …, "hold": {by, freight, reason, since}}`.
pub(crate) async fn set_hold(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    stage_to_hold(&state, &caller, &project, &stage).await?;
    let body: HoldBody = if body.iter().all(u8::is_ascii_whitespace) {
        HoldBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("the body of hold/set for Stage `{project}/{stage}` is not valid: {e}"),
            )
            .with_hint("send `{\"reason\": \"...\"}` or no body")
        })?
    };
    let reason = body.reason;
    let hold = place_hold(
        state.store.as_ref(),
        &project,
        &stage,
        &caller.user,
        reason.as_deref(),
    )
    .await?;
    tracing::info!(%project, %stage, by = %caller.user, "hold placed");
    Ok(Json(json!({"stage": stage, "hold": hold})))
}

/// `POST /api/v1/projects/{project}/stages/{stage}/hold/lift`: lets auto-promotion act on
/// the Stage again. Answers `{stage, hold: null, lifted, message}`: `lifted` says whether
/// there was a hold to lift.
pub(crate) async fn lift_hold(
    State(state): State<AppState>,
    Path((project, stage)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    stage_to_hold(&state, &caller, &project, &stage).await?;
    let lifted = request::set_hold(state.store.as_ref(), &project, &stage, None).await?;
    let message = if lifted.is_some() {
        tracing::info!(%project, %stage, by = %caller.user, "hold lifted");
        format!("Stage `{stage}`: hold lifted; auto-promotion resumes")
    } else {
        format!("Stage `{stage}` had no hold: nothing to lift")
    };
    Ok(Json(
        json!({"stage": stage, "hold": null, "lifted": lifted.is_some(), "message": message}),
    ))
}

/// Authorizes `promote` on the Stage, and answers 404 when it does not exist.
async fn stage_to_hold(
    state: &AppState,
    caller: &Caller,
    project: &str,
    stage: &str,
) -> Result<(), ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Promote,
            "stages",
            Some(project),
            Some(stage),
        )
        .await?;
    load_stage(state, &ObjectKey::namespaced(Kind::Stage, project, stage)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::{Method, StatusCode};

    use crate::api::{Kind, ObjectKey, Stage};
    use crate::server::auth::AuthMode;
    use crate::server::test_support;
    use crate::store::Store as _;

    #[tokio::test]
    async fn set_places_a_hold_that_lift_takes_away() {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let call = |method, uri: &'static str, body| {
            test_support::call(&fresh.state, Some(&fresh.admin), method, uri, body)
        };
        let files = serde_json::json!({"files": [{"path": "p.yaml",
            "content": test_support::three_stages(None)}]});
        let (status, body) = call(Method::POST, "/api/v1/apply", Some(files)).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let (status, body) = call(
            Method::POST,
            "/api/v1/projects/demo/stages/staging/hold/set",
            Some(serde_json::json!({"reason": "db migration"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["hold"]["reason"], "db migration");
        assert_eq!(body["hold"]["by"], "admin");
        let key = ObjectKey::namespaced(Kind::Stage, "demo", "staging");
        let held = |stored: Option<crate::store::StoredObject>| {
            stored
                .and_then(|s| s.to_typed::<Stage>().ok())
                .and_then(|s| s.status)
                .and_then(|s| s.hold)
        };
        let hold = held(fresh.store.get(&key).await.unwrap()).expect("no hold was stored");
        assert_eq!(hold.reason, "db migration");

        let (status, body) = call(
            Method::POST,
            "/api/v1/projects/demo/stages/staging/hold/lift",
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(held(fresh.store.get(&key).await.unwrap()), None);
    }

    #[tokio::test]
    async fn set_on_a_missing_stage_is_a_404_and_a_bad_body_a_400() {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let files = serde_json::json!({"files": [{"path": "p.yaml",
            "content": test_support::three_stages(None)}]});
        let call = |method, uri: &'static str, body| {
            test_support::call(&fresh.state, Some(&fresh.admin), method, uri, body)
        };
        call(Method::POST, "/api/v1/apply", Some(files)).await;
        let (status, body) = call(
            Method::POST,
            "/api/v1/projects/demo/stages/nope/hold/set",
            None,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        let (status, body) = call(
            Method::POST,
            "/api/v1/projects/demo/stages/dev/hold/set",
            Some(serde_json::json!({"why": "typo"})),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("demo/dev"),
            "{body}"
        );
    }
}
