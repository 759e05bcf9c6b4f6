//! Warehouse actions beyond CRUD: refresh now (optionally waiting for the result; needs
//! `update` on the Warehouse), and the hotfix path — Freight assembled by hand from chosen,
//! verified versions (needs `create` on freight). The route checks who asks and that each
//! digest and commit exists; minting is discovery's one path (`discovery::mint::mint`).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::RepoUrl;
use crate::api::{
    FreightCommit, FreightImage, ImageSubscription, Kind, ObjectKey, Verb, Warehouse,
};
use crate::discovery::credentials;
use crate::discovery::mint::{self, MintError, MintOrigin, MintRequest, Minted};

use super::auth::Caller;
use super::credentials::present;
use super::error::ApiError;
use super::{AppState, refresh};

/// Query of `POST …/warehouses/{name}/refresh`.
#[derive(Deserialize, Debug, Default)]
pub(crate) struct RefreshParams {
    /// Wait until discovery finished (at most `timeoutSeconds`, default 60, at most 120).
    #[serde(default)]
    wait: bool,
    #[serde(default, rename = "timeoutSeconds")]
    timeout_seconds: Option<u64>,
}

/// `POST /api/v1/projects/{project}/warehouses/{name}/refresh[?wait=true]`.
pub(crate) async fn refresh(
    State(state): State<AppState>,
    Path((project, name)): Path<(String, String)>,
    caller: Caller,
    Query(params): Query<RefreshParams>,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Update,
            "warehouses",
            Some(&project),
            Some(&name),
        )
        .await?;
    let key = ObjectKey::namespaced(Kind::Warehouse, &project, &name);
    let token = refresh::request(state.store.as_ref(), &key).await?;
    if !params.wait {
        return Ok(Json(json!({"refresh": token, "handled": false})));
    }
    let timeout =
        Duration::from_secs(params.timeout_seconds.unwrap_or(60)).min(refresh::MAX_REFRESH_WAIT);
    let (warehouse, handled) = refresh::wait(state.store.as_ref(), &key, &token, timeout).await?;
    if !handled {
        return Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!(
                "Warehouse `{name}` did not finish discovery within {}s",
                timeout.as_secs()
            ),
        )
        .with_hint(format!(
            "it may still be running; see `dray get warehouse {name} -o yaml`"
        )));
    }
    Ok(Json(
        json!({"refresh": token, "handled": true, "warehouse": present(warehouse)}),
    ))
}

/// The body of `POST /api/v1/projects/{project}/freight/assemble`.
#[derive(Deserialize, Serialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct AssembleRequest {
    /// The Warehouse the Freight is recorded under (its subscriptions name the repositories).
    pub warehouse: String,
    /// Images pinned by digest.
    #[serde(default)]
    pub images: Vec<FreightImage>,
    /// Config commits by full id.
    #[serde(default)]
    pub commits: Vec<FreightCommit>,
    /// An alias; a friendly one is chosen when absent.
    #[serde(default)]
    pub alias: Option<String>,
}

fn image_subscription<'a>(
    warehouse: &'a Warehouse,
    repo_url: &str,
) -> Option<&'a ImageSubscription> {
    warehouse
        .spec
        .subscriptions
        .iter()
        .filter_map(|s| s.image.as_ref())
        .find(|i| RepoUrl::new(&i.repo_url) == RepoUrl::new(repo_url))
}

/// `POST /api/v1/projects/{project}/freight/assemble`: checks that every digest exists in
/// its registry and every commit in its repository, then creates the Freight.
pub(crate) async fn assemble_freight(
    State(state): State<AppState>,
    Path(project): Path<String>,
    caller: Caller,
    Json(request): Json<AssembleRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Create,
            "freight",
            Some(&project),
            None,
        )
        .await?;
    let key = ObjectKey::namespaced(Kind::Warehouse, &project, &request.warehouse);
    let stored = state.store.get(&key).await?.ok_or_else(|| {
        ApiError::not_found(format!(
            "Warehouse `{}` does not exist in project `{project}`",
            request.warehouse
        ))
        .with_hint(format!("run `dray get warehouses -p {project}`"))
    })?;
    let warehouse: Warehouse = stored.to_typed()?;
    if request.images.is_empty() && request.commits.is_empty() {
        return Err(
            ApiError::bad_request("Freight needs at least one image or commit")
                .with_hint("pass --image REPO:TAG@DIGEST and/or --commit REPO@SHA"),
        );
    }
    let services = state.discovery.clone().ok_or_else(|| {
        ApiError::internal(
            "assembling Freight needs registry and git access, which this server lacks",
        )
    })?;
    let mut problems = Vec::new();
    for image in &request.images {
        if !image.digest.starts_with("sha256:") {
            problems.push(format!(
                "image `{}`: the digest must be `sha256:…`, not `{}`",
                image.repo_url, image.digest
            ));
            continue;
        }
        let insecure = image_subscription(&warehouse, &image.repo_url).is_some_and(|s| s.insecure);
        let creds = credentials::for_registry(
            state.store.as_ref(),
            &state.secret_key,
            &project,
            &image.repo_url,
        )
        .await
        .map_err(ApiError::internal)?;
        match services
            .images
            .digest_exists(&image.repo_url, insecure, &image.digest, creds.as_ref())
            .await
        {
            Ok(true) => {}
            Ok(false) => problems.push(format!(
                "image `{}@{}` does not exist in the registry",
                image.repo_url, image.digest
            )),
            Err(error) => problems.push(error.to_string()),
        }
    }
    for commit in &request.commits {
        let creds = credentials::for_git(
            state.store.as_ref(),
            &state.secret_key,
            &project,
            &commit.repo_url,
        )
        .await
        .map_err(ApiError::internal)?;
        match services
            .mirrors
            .commit_exists(&commit.repo_url, &commit.id, creds.as_ref())
            .await
        {
            Ok(true) => {}
            Ok(false) => problems.push(format!(
                "commit `{}` does not exist in `{}`",
                commit.id, commit.repo_url
            )),
            Err(error) => problems.push(error.to_string()),
        }
    }
    if !problems.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            problems.join("; "),
        )
        .with_hint("check the digests with `skopeo inspect` and the commits with `git log`"));
    }
    let existing = state.store.list(Kind::Freight, Some(&project)).await?;
    let minting = MintRequest {
        project: &project,
        warehouse: &request.warehouse,
        images: &request.images,
        commits: &request.commits,
        charts: &[],
        origin: MintOrigin::Assembled {
            alias: request.alias.clone(),
        },
    };
    let created = match mint::mint(state.store.as_ref(), &minting, &existing).await {
        Ok(Minted::Existing(same)) => return Ok((StatusCode::OK, Json(present(same.object)))),
        Ok(Minted::Created(created)) => created,
        Err(MintError::Store(error)) => return Err(error.into()),
        Err(taken @ MintError::AliasTaken { .. }) => {
            return Err(ApiError::conflict(taken.to_string())
                .with_hint("choose another --alias, or leave it out"));
        }
    };
    let alias = created
        .object
        .get("alias")
        .and_then(Value::as_str)
        .unwrap_or_default();
    tracing::info!(freight = %created.key, %alias, "assembled freight by hand");
    Ok((StatusCode::CREATED, Json(present(created.object))))
}
