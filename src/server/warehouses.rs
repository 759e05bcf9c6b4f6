//! Warehouse actions beyond CRUD: refresh now (optionally waiting for the result; needs
//! `update` on the Warehouse), and the hotfix path — Freight assembled by hand from chosen,
//! verified versions, or the newest discovered ones (`newest`, for a `Manual` Warehouse;
//! needs `create` on freight). The route checks who asks, that each digest and commit
//! exists, and what [`super::hotfix`] asks of hand-made Freight (an RFC 1123 alias, every
//! subscription covered once, each tag pointing at its digest now or before); minting is
//! discovery's one path (`discovery::mint::mint`).

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
use crate::discovery::criteria::{self, Candidate};
use crate::discovery::mint::{self, MintError, MintOrigin, MintRequest, Minted};
use crate::expr::exprlang::ExprLanguage;

use super::auth::Caller;
use super::credentials::present;
use super::error::ApiError;
use super::hotfix::{self, TagCheck};
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
    let timeout = Duration::from_secs(params.timeout_seconds.unwrap_or(60));
    if timeout.is_zero() || timeout > refresh::MAX_REFRESH_WAIT {
        return Err(ApiError::bad_request(format!(
            "timeoutSeconds {} is out of range: between 1 and {}",
            timeout.as_secs(),
            refresh::MAX_REFRESH_WAIT.as_secs()
        ))
        .with_hint(format!(
            "wait at most 2 minutes per request; `dray get warehouse {name} -p {project}` shows a longer discovery's progress"
        )));
    }
    let key = ObjectKey::namespaced(Kind::Warehouse, &project, &name);
    let token = refresh::request(state.store.as_ref(), &key).await?;
    if !params.wait {
        return Ok(Json(json!({"refresh": token, "handled": false})));
    }
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
    /// Take the newest discovered artifact of every subscription (from the Warehouse's
    /// status) instead of `images` and `commits`, e.g. for a `Manual` Warehouse.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newest: bool,
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
    if let Some(alias) = &request.alias {
        hotfix::check_alias(alias).map_err(|(message, hint)| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message).with_hint(hint)
        })?;
    }
    let candidate = chosen_artifacts(&warehouse, &request)?;
    let (images, commits) = (&candidate.images, &candidate.commits);
    let services = state.discovery.clone().ok_or_else(|| {
        ApiError::internal(
            "assembling Freight needs registry and git access, which this server lacks",
        )
    })?;
    let existing = state.store.list(Kind::Freight, Some(&project)).await?;
    // `newest` takes one artifact of every subscription from discovery; by hand, each
    // subscription must be named once.
    let mut problems = if request.newest {
        Vec::new()
    } else {
        hotfix::coverage(&warehouse, images, commits)
    };
    let mut warnings = criteria_warnings(&warehouse, &candidate);
    for image in images {
        if !image.digest.starts_with("sha256:") {
            problems.push(format!(
                "image `{}`: the digest must be `sha256:…`, not `{}`",
                image.repo_url, image.digest
            ));
            continue;
        }
        let subscription = image_subscription(&warehouse, &image.repo_url);
        let insecure = subscription.is_some_and(|s| s.insecure);
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
            Ok(true) if request.newest || image.tag.is_empty() => {}
            Ok(true) => {
                let now = services
                    .images
                    .tag_digest(&image.repo_url, insecure, &image.tag, creds.as_ref())
                    .await;
                match now {
                    Ok(now) => {
                        let platform = subscription.is_some_and(|s| s.platform.is_some());
                        let discovered = discovered_images(&warehouse, &image.repo_url);
                        match hotfix::judge_tag(
                            image,
                            now.as_deref(),
                            &discovered,
                            platform,
                            &existing,
                            &request.warehouse,
                        ) {
                            TagCheck::Agrees => {}
                            TagCheck::Moved(warning) => warnings.push(warning),
                            TagCheck::Disagrees(problem) => problems.push(problem),
                        }
                    }
                    Err(error) => problems.push(error.to_string()),
                }
            }
            Ok(false) => problems.push(format!(
                "image `{}@{}` does not exist in the registry",
                image.repo_url, image.digest
            )),
            Err(error) => problems.push(error.to_string()),
        }
    }
    for commit in commits {
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
    let minting = MintRequest {
        project: &project,
        warehouse: &request.warehouse,
        images,
        commits,
        charts: &candidate.charts,
        origin: MintOrigin::Assembled {
            alias: request.alias.clone(),
            warnings,
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

/// The `(tag, digest)` pairs the Warehouse's discovery last found in `repo_url`.
fn discovered_images(warehouse: &Warehouse, repo_url: &str) -> Vec<(String, String)> {
    let Some(status) = &warehouse.status else {
        return Vec::new();
    };
    status
        .subscriptions
        .iter()
        .filter(|s| RepoUrl::new(&s.repo_url) == RepoUrl::new(repo_url))
        .flat_map(|s| &s.images)
        .map(|i| (i.tag.clone(), i.digest.clone()))
        .collect()
}

/// The artifacts to assemble: the request's, or with `newest` the newest discovered
/// artifact of every subscription.
fn chosen_artifacts(
    warehouse: &Warehouse,
    request: &AssembleRequest,
) -> Result<Candidate, ApiError> {
    let name = warehouse.metadata.name.as_deref().unwrap_or_default();
    if !request.newest {
        if request.images.is_empty() && request.commits.is_empty() {
            return Err(
                ApiError::bad_request("Freight needs at least one image or commit").with_hint(
                    "pass --image REPO:TAG@DIGEST and/or --commit REPO@SHA, or --newest for \
                     the newest discovered artifacts",
                ),
            );
        }
        return Ok(Candidate {
            images: request.images.clone(),
            commits: request.commits.clone(),
            // Hand-assembled Freight pins images and commits; charts come with `--newest`.
            charts: Vec::new(),
        });
    }
    if !request.images.is_empty() || !request.commits.is_empty() {
        return Err(ApiError::bad_request(
            "`newest` takes every artifact from discovery; it cannot be combined with images or commits",
        )
        .with_hint("pass either --newest or --image/--commit"));
    }
    let status = warehouse.status.clone().unwrap_or_default();
    criteria::newest(&status.subscriptions)
        .filter(|_| status.subscriptions.len() == warehouse.spec.subscriptions.len())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!(
                    "Warehouse `{name}` has not discovered an artifact for every subscription yet"
                ),
            )
            .with_hint(format!(
                "run `dray refresh warehouse {name}` and check `dray get warehouses` for what \
                 each subscription found"
            ))
        })
}

/// The Warehouse's criteria's objection to `candidate`, recorded on hand-made Freight (a
/// person may mint what the criteria refuse; the Freight says so).
fn criteria_warnings(warehouse: &Warehouse, candidate: &Candidate) -> Vec<String> {
    let language = ExprLanguage::of_annotations(warehouse.metadata.annotations.as_ref());
    match criteria::decide(
        warehouse.spec.freight_creation_criteria.as_ref(),
        language,
        candidate,
    ) {
        criteria::Decision::Refused(why) | criteria::Decision::Failed(why) => {
            vec![format!("criteriaNotMet: {why}")]
        }
        criteria::Decision::NoCriteria | criteria::Decision::Satisfied => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{Method, StatusCode};

    use super::super::auth::AuthMode;
    use super::super::test_support;

    #[tokio::test]
    async fn a_refresh_wait_beyond_its_bound_is_refused_not_shortened() {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let uri = "/api/v1/projects/demo/warehouses/app/refresh?wait=true&timeoutSeconds=500";
        let (status, body) =
            test_support::call(&fresh.state, Some(&fresh.admin), Method::POST, uri, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("timeoutSeconds 500") && message.contains("120"),
            "{message}"
        );
        let uri = "/api/v1/projects/demo/warehouses/app/refresh?wait=true&timeoutSeconds=0";
        let (status, _) =
            test_support::call(&fresh.state, Some(&fresh.admin), Method::POST, uri, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
