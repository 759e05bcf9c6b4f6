//! Webhook receivers: CI systems, forges and registries tell Dray that something changed,
//! and Dray refreshes only the Warehouses subscribed to the repositories named.
//!
//! This module authenticates a delivery and reads what it names; which Warehouses that
//! refreshes is discovery's decision (`discovery::webhook_match`, comparing repositories
//! as `api::RepoUrl`s, one normalisation for git URLs, image references and OCI charts).
//!
//! Receivers are configured in ProjectConfig `webhookReceivers[]`; each names a
//! Credential of type `webhook` whose `token` is the shared secret:
//!
//! | kind | route | authentication | delivery id (replays) |
//! |---|---|---|---|
//! | `github` | `POST /webhooks/{project}/{receiver}` | `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>` | `X-GitHub-Delivery`, body digest |
//! | `gitlab` | `POST /webhooks/{project}/{receiver}` | `X-Gitlab-Token` equals the secret | – |
//! | `gitea` | `POST /webhooks/{project}/{receiver}` | `X-Gitea-Signature: <hex HMAC-SHA256 of the body>` (or its `X-Hub-Signature-256`) | `X-Gitea-Delivery`, body digest |
//! | `bitbucket` | `POST /webhooks/{project}/{receiver}` | `X-Hub-Signature: sha256=<HMAC-SHA256 of the body>` (Cloud and Server) | `X-Request-UUID` (Cloud), `X-Request-Id` (Server), body digest |
//! | `azure` | `POST /webhooks/{project}/{receiver}/{secret}` | the secret in the path (ACR and Azure DevOps sign nothing) | – |
//! | `dockerhub` | `POST /webhooks/{project}/{receiver}/{secret}` | the secret in the path (Docker Hub signs nothing) | – |
//! | `quay` | `POST /webhooks/{project}/{receiver}/{secret}` | the secret in the path (Quay signs nothing) | – |
//! | `harbor` | `POST /webhooks/{project}/{receiver}` | `Authorization` equals the secret (Harbor's "Auth Header") | – |
//! | `artifactory` | `POST /webhooks/{project}/{receiver}` | `X-JFrog-Event-Auth` equals the secret, or is its hex HMAC-SHA256 of the body | body digest |
//! | `registry` | `POST /webhooks/{project}/{receiver}` | `Authorization: Bearer <secret>` | – |
//! | `generic` | `POST /webhooks/{project}/{receiver}/{secret}` | the secret in the path | – |
//!
//! The project-independent receiver, `POST /webhooks/-/{kind}` (`/webhooks/-/{kind}/{secret}`
//! for the kinds above that take the secret in the path; `-` is never a project's name),
//! authenticates a delivery against every project's receivers of that kind and refreshes
//! the matching Warehouses in each project whose receiver it authenticated, and in no
//! other. Every receiver of the kind is tried, whatever matched before; a delivery that
//! authenticates nowhere gets 401. Its answer lists only those projects.
//!
//! What each payload names is read by the provider's module (`github`, `gitlab`, `gitea`,
//! `bitbucket`, `azure`, `registries`); the shared doors are `doors` (authentication,
//! constant-time) and `replay` (the delivery log). Forge events that decide a review
//! (GitHub `pull_request` closed, GitLab `Merge Request Hook` merge/close, Gitea
//! `pull_request` closed, Bitbucket `pullrequest:fulfilled`/`rejected` and
//! `pr:merged`/`declined`/`deleted`, Azure DevOps `git.pullrequest.merged`) wake the
//! project's running promotions, so `git-wait-for-pr` moves on at once; polling is only
//! the fallback. Test deliveries (GitHub `ping`, Bitbucket Server `diagnostics:ping`, ACR
//! `ping`) answer 200 and change nothing.
//!
//! The doors, in order:
//! - A secret shorter than [`webhook_secret::MIN_BYTES`] bytes (or empty) authenticates
//!   nothing: `dray apply` refuses it, and one stored before that rule makes the receiver
//!   answer 401 to every request, logging how to fix it (never the secret).
//! - Every comparison is constant-time, whatever the lengths (`doors`). An empty header,
//!   signature or path token never matches.
//! - A forged, unsigned or unknown request gets 401 and changes nothing; the answer never
//!   says which part was wrong beyond "not authenticated".
//! - Once a delivery is authenticated, its delivery id and, for signed bodies, the digest
//!   of its body are remembered in the store for [`REPLAY_WINDOW`] (so a restart does not
//!   reopen it); the same id, or the same signed body under another id or none, within
//!   the window answers 200 with `replay: true` and does nothing. A delivery that fails
//!   is forgotten again, so the sender may redeliver it.

mod azure;
mod bitbucket;
mod doors;
mod gitea;
mod github;
mod gitlab;
mod reading;
mod registries;
mod replay;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, ProjectConfig, WebhookProvider, WebhookReceiverConfig};
use crate::config::webhook_secret;
use crate::discovery::credentials;
use crate::discovery::webhook_match::Announced;

use super::error::ApiError;
use super::{AppState, refresh};
use doors::Door;
pub use reading::Reading;
pub use replay::REPLAY_WINDOW;

/// The path segment of the project-independent receiver (no project is named `-`).
pub const SHARED_SEGMENT: &str = "-";

/// The path a receiver listens on (the kinds that take the secret in the path append it).
pub fn receiver_path(project: &str, receiver: &WebhookReceiverConfig) -> String {
    let base = format!("/webhooks/{project}/{}", receiver.name);
    match receiver.provider() {
        Some((provider, secret)) if Door::of(provider).takes_path_token() => {
            format!("{base}/<token of Credential {secret}>")
        }
        _ => base,
    }
}

fn unauthenticated() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "the webhook request is not authenticated",
    )
    .with_hint("check the receiver's secret in the forge or registry settings")
}

/// One receiver a delivery may be for.
struct Target {
    project: String,
    receiver: WebhookReceiverConfig,
    provider: WebhookProvider,
    secret_ref: String,
}

impl Target {
    fn of(project: &str, receiver: &WebhookReceiverConfig) -> Option<Self> {
        let (provider, secret_ref) = receiver.provider()?;
        Some(Target {
            project: project.to_owned(),
            receiver: receiver.clone(),
            provider,
            secret_ref: secret_ref.to_owned(),
        })
    }
}

/// The receivers a ProjectConfig of `project` configures.
fn targets_in(project: &str, config: &ProjectConfig) -> Vec<Target> {
    config
        .spec
        .webhook_receivers
        .iter()
        .filter_map(|r| Target::of(project, r))
        .collect()
}

/// The receivers of `project`'s ProjectConfig.
async fn receivers_of(state: &AppState, project: &str) -> Result<Vec<Target>, ApiError> {
    let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let config: Option<ProjectConfig> =
        state.store.get(&key).await?.and_then(|c| c.to_typed().ok());
    Ok(config.map(|c| targets_in(project, &c)).unwrap_or_default())
}

/// Every project's receivers of `provider` (a project's ProjectConfig is named like it).
async fn receivers_of_kind(
    state: &AppState,
    provider: WebhookProvider,
) -> Result<Vec<Target>, ApiError> {
    let mut targets = Vec::new();
    for stored in state.store.list(Kind::ProjectConfig, None).await? {
        let Some(project) = stored.key.namespace.clone() else {
            continue;
        };
        if stored.key.name != project {
            continue;
        }
        let Ok(config) = stored.to_typed::<ProjectConfig>() else {
            continue;
        };
        targets.extend(
            targets_in(&project, &config)
                .into_iter()
                .filter(|t| t.provider == provider),
        );
    }
    Ok(targets)
}

/// The receiver's secret, if it has one strong enough to authenticate anything (a missing
/// or weak one is logged with how to fix it, never quoted).
async fn usable_secret(state: &AppState, target: &Target) -> Result<Option<String>, ApiError> {
    let (project, receiver, credential) =
        (&target.project, &target.receiver.name, &target.secret_ref);
    let secret =
        credentials::webhook_secret(state.store.as_ref(), &state.secret_key, project, credential)
            .await
            .map_err(ApiError::internal)?;
    let Some(secret) = secret else {
        tracing::warn!(%project, %receiver, %credential, "webhook receiver has no secret");
        return Ok(None);
    };
    if let Some(weak) = webhook_secret::check(&secret) {
        tracing::warn!(
            %project,
            %receiver,
            %credential,
            "webhook receiver refuses every request: {weak} (Credential `{project}/{credential}`); {}, then `dray apply` the Credential",
            webhook_secret::HINT
        );
        return Ok(None);
    }
    Ok(Some(secret))
}

/// Whether the delivery passes `target`'s door.
async fn admits(
    state: &AppState,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    path_token: Option<&str>,
) -> Result<bool, ApiError> {
    Ok(match usable_secret(state, target).await? {
        Some(secret) => doors::authenticate(target.provider, &secret, headers, body, path_token),
        None => false,
    })
}

/// A delivery's body as JSON (an empty body is `{}`).
fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the webhook body is not JSON: {e}"))
            .with_hint("configure the sender to deliver JSON (content type `application/json`)")
    })
}

/// What each receiver kind reads from an authenticated delivery of `event` (the value of
/// every event header the kinds read: `X-GitHub-Event`, `X-Gitlab-Event`, `X-Gitea-Event`,
/// `X-Event-Key`) with `body`. No authentication, no side effect: the fuzzing entry point
/// (`crate::fuzzing::webhook_payload`).
#[doc(hidden)]
pub fn read_payload(event: &str, body: &[u8]) -> Vec<Reading> {
    let Ok(payload) = parse_body(body) else {
        return Vec::new();
    };
    let mut headers = HeaderMap::new();
    if let Ok(value) = axum::http::HeaderValue::from_str(event) {
        for name in [
            "x-github-event",
            "x-gitlab-event",
            "x-gitea-event",
            "x-event-key",
        ] {
            headers.insert(name, value.clone());
        }
    }
    let receiver = WebhookReceiverConfig::default();
    WebhookProvider::ALL
        .into_iter()
        .map(|provider| reading::read(provider, &receiver, &headers, &payload))
        .collect()
}

/// An authenticated delivery to `target`: unless it is a replay, what it asks is done.
async fn take(
    state: &AppState,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, ApiError> {
    let (project, receiver) = (&target.project, &target.receiver.name);
    let delivery = replay::delivery(target.provider, project, receiver, headers, body)?;
    if let Some(delivery) = &delivery
        && !replay::claim(state.store.as_ref(), delivery).await?
    {
        tracing::info!(%project, %receiver, delivery = %delivery.id, "ignored a replayed webhook delivery");
        let message = format!(
            "delivery `{}` (or its body) was already received in the last {} minutes; a replay changes nothing",
            delivery.id,
            REPLAY_WINDOW.as_secs() / 60
        );
        return Ok(json!({"refreshed": 0, "warehouses": [], "replay": true, "message": message}));
    }
    let outcome = act(state, target, headers, body).await;
    if outcome.is_err()
        && let Some(delivery) = &delivery
        && let Err(e) = replay::release(state.store.as_ref(), delivery).await
    {
        tracing::warn!(%project, %receiver, delivery = %delivery.id, "could not forget a failed delivery, so a redelivery within the replay window will be ignored: {e}");
    }
    outcome
}

/// What an authenticated, new delivery does.
async fn act(
    state: &AppState,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, ApiError> {
    let (project, receiver) = (&target.project, &target.receiver.name);
    let payload = parse_body(body)?;
    let announced = match reading::read(target.provider, &target.receiver, headers, &payload) {
        Reading::ReviewDecided => {
            let woken =
                crate::pipeline::request::wake_running(state.store.as_ref(), project).await?;
            tracing::info!(%project, %receiver, promotions = woken, "review webhook woke waiting promotions");
            return Ok(json!({"refreshed": 0, "warehouses": [], "wokenPromotions": woken}));
        }
        Reading::Ping => {
            return Ok(
                json!({"refreshed": 0, "warehouses": [], "message": "test delivery received; the receiver is configured correctly"}),
            );
        }
        Reading::Ignored(why) => {
            return Ok(
                json!({"refreshed": 0, "warehouses": [], "message": format!("event ignored: {why}")}),
            );
        }
        Reading::Named(repos) => Announced::Repositories(repos),
        Reading::Everything => Announced::Everything,
        Reading::Warehouses(names) => Announced::Warehouses(names),
    };
    let refreshed = refresh::refresh_subscribers(state.store.as_ref(), project, &announced).await?;
    tracing::info!(%project, %receiver, warehouses = ?refreshed, "webhook refreshed warehouses");
    Ok(json!({"refreshed": refreshed.len(), "warehouses": refreshed}))
}

/// A delivery to one project's receiver.
async fn receive(
    state: AppState,
    project: String,
    receiver_name: String,
    path_token: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let targets = receivers_of(&state, &project).await?;
    let Some(target) = targets.iter().find(|t| t.receiver.name == receiver_name) else {
        return Err(unauthenticated());
    };
    if !admits(&state, target, &headers, &body, path_token.as_deref()).await? {
        tracing::warn!(%project, receiver = %receiver_name, "rejected an unauthenticated webhook");
        return Err(unauthenticated());
    }
    let answer = take(&state, target, &headers, &body).await?;
    Ok((StatusCode::OK, Json(answer)))
}

/// A delivery to the project-independent receiver of `kind`: every project's receiver of
/// that kind is tried (all of them, whatever matched before), and each that the delivery
/// authenticates takes it.
async fn receive_shared(
    state: AppState,
    kind: String,
    path_token: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Some(provider) = WebhookProvider::from_field(&kind) else {
        return Err(unauthenticated());
    };
    let mut admitted = Vec::new();
    for target in receivers_of_kind(&state, provider).await? {
        if admits(&state, &target, &headers, &body, path_token.as_deref()).await? {
            admitted.push(target);
        }
    }
    if admitted.is_empty() {
        tracing::warn!(%kind, "rejected an unauthenticated webhook to the project-independent receiver");
        return Err(unauthenticated());
    }
    let mut projects = Vec::new();
    let mut total = 0;
    for target in &admitted {
        let mut answer = take(&state, target, &headers, &body).await?;
        total += answer["refreshed"].as_u64().unwrap_or(0);
        answer["project"] = json!(target.project);
        answer["receiver"] = json!(target.receiver.name);
        projects.push(answer);
    }
    Ok((
        StatusCode::OK,
        Json(json!({"refreshed": total, "projects": projects})),
    ))
}

/// `POST /webhooks/{project}/{receiver}`.
pub(crate) async fn signed(
    State(state): State<AppState>,
    Path((project, receiver)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    receive(state, project, receiver, None, headers, body).await
}

/// `POST /webhooks/{project}/{receiver}/{token}`.
pub(crate) async fn with_token(
    State(state): State<AppState>,
    Path((project, receiver, token)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    receive(state, project, receiver, Some(token), headers, body).await
}

/// `POST /webhooks/-/{kind}`.
pub(crate) async fn shared_signed(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    receive_shared(state, kind, None, headers, body).await
}

/// `POST /webhooks/-/{kind}/{token}`.
pub(crate) async fn shared_with_token(
    State(state): State<AppState>,
    Path((kind, token)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    receive_shared(state, kind, Some(token), headers, body).await
}

#[cfg(test)]
mod tests;
