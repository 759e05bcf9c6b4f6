//! `GET /api/v1/projects/{project}/freight/{name}/diff?to=OTHER`: what differs from one
//! Freight to another (artifacts, the config commits in between, the rendered manifests),
//! as [`crate::promotion::freight_diff`] finds it. Both are named as every route names
//! Freight (id, id prefix or alias). Reading it needs `get` on Freight and on Stages (the
//! manifests come from a stage branch, as the audit trail does).

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;

use crate::api::{Freight, Verb};
use crate::promotion::freight_diff::{self, FreightDiff};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::freight_names;

/// The query of the diff route.
#[derive(Debug, Deserialize)]
pub(crate) struct DiffParams {
    /// The newer Freight.
    pub(crate) to: Option<String>,
}

/// The handler.
pub(crate) async fn freight_diff(
    State(state): State<AppState>,
    Path((project, name)): Path<(String, String)>,
    caller: Caller,
    Query(params): Query<DiffParams>,
) -> Result<Json<FreightDiff>, ApiError> {
    for plural in ["freight", "stages"] {
        caller
            .authorize(
                state.store.as_ref(),
                Verb::Get,
                plural,
                Some(&project),
                None,
            )
            .await?;
    }
    let Some(to) = params.to.filter(|t| !t.trim().is_empty()) else {
        return Err(
            ApiError::bad_request("the query parameter `to` is missing").with_hint(format!(
                "name the newer Freight: `…/freight/{name}/diff?to=ALIAS`"
            )),
        );
    };
    let (from, to) = freight_names::resolve_two(state.store.as_ref(), &project, &name, &to).await?;
    let (from, to): (Freight, Freight) = (from.to_typed()?, to.to_typed()?);
    let mirrors = state.discovery.as_ref().map(|d| d.mirrors.as_ref());
    let diff = freight_diff::freight_diff(
        state.store.as_ref(),
        mirrors,
        &state.secret_key,
        &project,
        &from,
        &to,
    )
    .await;
    Ok(Json(diff))
}
