//! `GET /api/v1/projects/{project}/dora[?days=N]`: the four DORA numbers of each Stage of
//! a project over the last `N` days (default 30), and each Stage's deployments per day for
//! the chart. Authorized as `get` on the project; the numbers are `pipeline::dora`'s.

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};

use super::{ApiError, AppState, Caller};
use crate::api::{Kind, ObjectKey, Verb};
use crate::pipeline::dora::{self, StageNumbers};

/// The longest window one may ask for, in days.
pub const MAX_DAYS: u32 = 90;

/// The query.
#[derive(Deserialize, Debug)]
pub(crate) struct DoraParams {
    /// The window, in days (1 to [`MAX_DAYS`]).
    #[serde(default = "default_days")]
    days: u32,
}

fn default_days() -> u32 {
    30
}

/// The answer.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DoraBody {
    project: String,
    days: u32,
    stages: Vec<StageNumbers>,
}

/// `GET /api/v1/projects/{project}/dora`.
pub(crate) async fn project_dora(
    State(state): State<AppState>,
    Path(project): Path<String>,
    Query(params): Query<DoraParams>,
    caller: Caller,
) -> Result<Json<DoraBody>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Get,
            "projects",
            None,
            Some(&project),
        )
        .await?;
    if !(1..=MAX_DAYS).contains(&params.days) {
        return Err(ApiError::bad_request(format!(
            "`days` is {}, and must be from 1 to {MAX_DAYS}",
            params.days
        ))
        .with_hint("ask for `?days=7` or `?days=30`"));
    }
    if state
        .store
        .get(&ObjectKey::cluster(Kind::Project, &project))
        .await?
        .is_none()
    {
        return Err(
            ApiError::not_found(format!("project `{project}` does not exist"))
                .with_hint("run `dray get projects` to list projects"),
        );
    }
    let numbers = dora::read::project_numbers(
        state.store.as_ref(),
        &project,
        jiff::Timestamp::now(),
        params.days,
    )
    .await?;
    Ok(Json(DoraBody {
        project,
        days: params.days,
        stages: numbers.stages,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use serde_json::Value;
    use tower::ServiceExt;

    use crate::server::test_support;
    use crate::server::{AppState, AuthMode};
    use crate::store::SqliteStore;

    async fn get(state: &AppState, uri: &str) -> (StatusCode, Value) {
        let response = test_support::app(state)
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    /// The route answers each Stage's numbers for the window asked; a window out of
    /// bounds and a project that does not exist are refused with what to do.
    #[tokio::test]
    async fn answers_each_stages_numbers_and_refuses_bad_windows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let state = AppState::for_tests(store.clone(), dir.path(), AuthMode::None);
        crate::server::metrics::tests::plant_history(store.as_ref(), "demo").await;

        let (status, body) = get(&state, "/api/v1/projects/demo/dora?days=7").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["days"], 7);
        let prod = &body["stages"][0];
        assert_eq!(prod["stage"], "prod", "{body}");
        assert_eq!(prod["deployments"], 2);
        assert_eq!(prod["deploymentFrequency"], 2.0 / 7.0);
        assert_eq!(prod["leadTimeSeconds"], 5.0 * 3600.0);
        assert_eq!(prod["changeFailureRatio"], 0.5);
        assert_eq!(prod["daily"].as_array().unwrap().len(), 14);
        assert_eq!(prod["daily"][13], 1, "f2, 10 hours ago, is today's: {body}");

        let (status, body) = get(&state, "/api/v1/projects/demo/dora?days=0").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.to_string().contains("?days=7"), "{body}");
        let (status, body) = get(&state, "/api/v1/projects/nope/dora").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
}
