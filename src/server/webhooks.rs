//! Webhook receivers: CI systems, forges and registries tell Dray that something changed,
//! and Dray refreshes only the Warehouses subscribed to the repositories named.
//!
//! Receivers are configured in ProjectConfig `webhookReceivers[]`; each names a
//! Credential of type `webhook` whose `token` is the shared secret:
//!
//! | kind | route | authentication |
//! |---|---|---|
//! | `github` | `POST /webhooks/{project}/{receiver}` | `X-Hub-Signature-256` HMAC-SHA256 of the body |
//! | `gitlab` | `POST /webhooks/{project}/{receiver}` | `X-Gitlab-Token` equals the secret |
//! | `registry` | `POST /webhooks/{project}/{receiver}` | `Authorization: Bearer <secret>` |
//! | `generic` | `POST /webhooks/{project}/{receiver}/{secret}` | the secret in the path |
//!
//! Forge events that decide a review (GitHub `pull_request` closed, GitLab `Merge Request
//! Hook` merge/close) wake the project's running promotions, so `git-wait-for-pr` moves on
//! at once; polling is only the fallback.
//!
//! Every comparison is constant-time. A forged, unsigned or unknown request gets 401 and
//! changes nothing; the answer never says which part was wrong beyond "not authenticated".

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::api::{Kind, ObjectKey, ProjectConfig, WebhookReceiverConfig};
use crate::discovery::credentials;

use super::error::ApiError;
use super::{AppState, refresh};

/// The kinds of receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReceiverKind {
    GitHub,
    GitLab,
    Registry,
    Generic,
}

fn kind_and_secret(receiver: &WebhookReceiverConfig) -> Option<(ReceiverKind, &str)> {
    if let Some(r) = &receiver.github {
        return Some((ReceiverKind::GitHub, &r.secret_ref));
    }
    if let Some(r) = &receiver.gitlab {
        return Some((ReceiverKind::GitLab, &r.secret_ref));
    }
    if let Some(r) = &receiver.registry {
        return Some((ReceiverKind::Registry, &r.secret_ref));
    }
    receiver
        .generic
        .as_ref()
        .map(|r| (ReceiverKind::Generic, r.secret_ref.as_str()))
}

/// The path a receiver listens on (generic receivers append their secret).
pub fn receiver_path(project: &str, receiver: &WebhookReceiverConfig) -> String {
    let base = format!("/webhooks/{project}/{}", receiver.name);
    match kind_and_secret(receiver) {
        Some((ReceiverKind::Generic, secret)) => {
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

fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn github_signature_valid(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(signature) =
        header(headers, "x-hub-signature-256").and_then(|s| s.strip_prefix("sha256="))
    else {
        return false;
    };
    let Some(expected) = decode_hex(signature) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn authenticate(
    kind: ReceiverKind,
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    path_token: Option<&str>,
) -> bool {
    match kind {
        ReceiverKind::GitHub => github_signature_valid(secret, headers, body),
        ReceiverKind::GitLab => header(headers, "x-gitlab-token")
            .is_some_and(|t| equal(t.as_bytes(), secret.as_bytes())),
        ReceiverKind::Registry => header(headers, "authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
            .is_some_and(|t| equal(t.as_bytes(), secret.as_bytes())),
        ReceiverKind::Generic => path_token.is_some_and(|t| equal(t.as_bytes(), secret.as_bytes())),
    }
}

fn strings(value: &Value, pointers: &[&str]) -> Vec<String> {
    pointers
        .iter()
        .filter_map(|p| value.pointer(p).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A pull or merge request was merged or closed: promotions waiting on it look again now
/// instead of at their next poll.
fn is_review_decision(kind: ReceiverKind, headers: &HeaderMap, payload: &Value) -> bool {
    match kind {
        ReceiverKind::GitHub => {
            header(headers, "x-github-event") == Some("pull_request")
                && payload.get("action").and_then(Value::as_str) == Some("closed")
        }
        ReceiverKind::GitLab => {
            header(headers, "x-gitlab-event") == Some("Merge Request Hook")
                && matches!(
                    payload
                        .pointer("/object_attributes/action")
                        .and_then(Value::as_str),
                    Some("merge" | "close")
                )
        }
        _ => false,
    }
}

/// What the payload is about: `None` for events that refresh nothing (e.g. `ping`).
fn repositories(kind: ReceiverKind, headers: &HeaderMap, payload: &Value) -> Option<Vec<String>> {
    match kind {
        ReceiverKind::GitHub => match header(headers, "x-github-event").unwrap_or_default() {
            "push" => Some(strings(
                payload,
                &[
                    "/repository/clone_url",
                    "/repository/html_url",
                    "/repository/ssh_url",
                    "/repository/url",
                ],
            )),
            "package" | "registry_package" => {
                let package = payload
                    .get("package")
                    .or_else(|| payload.get("registry_package"))?;
                let name = package.get("name").and_then(Value::as_str)?;
                let owner = package
                    .get("namespace")
                    .and_then(Value::as_str)
                    .or_else(|| package.pointer("/owner/login").and_then(Value::as_str))?;
                Some(vec![format!("{owner}/{name}")])
            }
            _ => None,
        },
        ReceiverKind::GitLab => match header(headers, "x-gitlab-event").unwrap_or_default() {
            "Push Hook" | "Tag Push Hook" => Some(strings(
                payload,
                &[
                    "/project/git_http_url",
                    "/project/git_ssh_url",
                    "/project/web_url",
                    "/repository/git_http_url",
                ],
            )),
            _ => None,
        },
        ReceiverKind::Registry => {
            let events = payload.get("events").and_then(Value::as_array)?;
            let repos: Vec<String> = events
                .iter()
                .filter(|e| e.get("action").and_then(Value::as_str) == Some("push"))
                .filter_map(|e| {
                    let repo = e.pointer("/target/repository").and_then(Value::as_str)?;
                    Some(match e.pointer("/request/host").and_then(Value::as_str) {
                        Some(host) => format!("{host}/{repo}"),
                        None => repo.to_owned(),
                    })
                })
                .collect();
            (!repos.is_empty()).then_some(repos)
        }
        ReceiverKind::Generic => {
            let mut repos = strings(payload, &["/repoURL"]);
            if let Some(list) = payload.get("repoURLs").and_then(Value::as_array) {
                repos.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            Some(repos)
        }
    }
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

/// What each receiver kind reads from an authenticated delivery of `event` (the
/// `X-GitHub-Event` / `X-Gitlab-Event` value) with `body`: whether it decides a review, and
/// the repositories it names. No authentication, no side effect: the fuzzing entry point
/// (`crate::fuzzing::webhook_payload`).
#[doc(hidden)]
pub fn read_payload(event: &str, body: &[u8]) -> Vec<(bool, Option<Vec<String>>)> {
    let Ok(payload) = parse_body(body) else {
        return Vec::new();
    };
    let mut headers = HeaderMap::new();
    if let Ok(value) = axum::http::HeaderValue::from_str(event) {
        headers.insert("x-github-event", value.clone());
        headers.insert("x-gitlab-event", value);
    }
    [
        ReceiverKind::GitHub,
        ReceiverKind::GitLab,
        ReceiverKind::Registry,
        ReceiverKind::Generic,
    ]
    .into_iter()
    .map(|kind| {
        (
            is_review_decision(kind, &headers, &payload),
            repositories(kind, &headers, &payload),
        )
    })
    .collect()
}

async fn receive(
    state: AppState,
    project: String,
    receiver_name: String,
    path_token: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let config_key = ObjectKey::namespaced(Kind::ProjectConfig, &project, &project);
    let config: Option<ProjectConfig> = state
        .store
        .get(&config_key)
        .await?
        .and_then(|c| c.to_typed().ok());
    let receiver = config.as_ref().and_then(|c| {
        c.spec
            .webhook_receivers
            .iter()
            .find(|r| r.name == receiver_name)
    });
    let Some((kind, secret_ref)) = receiver.and_then(kind_and_secret) else {
        return Err(unauthenticated());
    };
    let secret = credentials::webhook_secret(
        state.store.as_ref(),
        &state.secret_key,
        &project,
        secret_ref,
    )
    .await
    .map_err(ApiError::internal)?;
    let Some(secret) = secret else {
        tracing::warn!(%project, receiver = %receiver_name, credential = %secret_ref, "webhook receiver has no secret");
        return Err(unauthenticated());
    };
    if !authenticate(kind, &secret, &headers, &body, path_token.as_deref()) {
        tracing::warn!(%project, receiver = %receiver_name, "rejected an unauthenticated webhook");
        return Err(unauthenticated());
    }
    let payload = parse_body(&body)?;
    if is_review_decision(kind, &headers, &payload) {
        let woken = crate::pipeline::request::wake_running(state.store.as_ref(), &project).await?;
        tracing::info!(%project, receiver = %receiver_name, promotions = woken, "review webhook woke waiting promotions");
        return Ok((
            StatusCode::OK,
            Json(json!({"refreshed": 0, "warehouses": [], "wokenPromotions": woken})),
        ));
    }
    let Some(repos) = repositories(kind, &headers, &payload) else {
        return Ok((
            StatusCode::OK,
            Json(json!({"refreshed": 0, "warehouses": [], "message": "event ignored"})),
        ));
    };
    let refreshed = refresh::refresh_subscribers(state.store.as_ref(), &project, &repos).await?;
    tracing::info!(%project, receiver = %receiver_name, warehouses = ?refreshed, "webhook refreshed warehouses");
    Ok((
        StatusCode::OK,
        Json(json!({"refreshed": refreshed.len(), "warehouses": refreshed})),
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
pub(crate) async fn generic(
    State(state): State<AppState>,
    Path((project, receiver, token)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    receive(state, project, receiver, Some(token), headers, body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_signatures_are_checked_in_full() {
        // GitHub's documented test vector.
        let secret = "It's a Secret to Everybody";
        let body = b"Hello, World!";
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-hub-signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
                .parse()
                .unwrap(),
        );
        assert!(github_signature_valid(secret, &headers, body));
        assert!(!github_signature_valid("wrong", &headers, body));
        assert!(!github_signature_valid(secret, &headers, b"Hello, World?"));
        assert!(!github_signature_valid(secret, &HeaderMap::new(), body));
    }

    #[test]
    fn payloads_name_their_repositories() {
        // Real payloads from the forges' and the registry's documentation.
        let github: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/webhooks/github-push.json"
        ))
        .unwrap();
        let gitlab: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/webhooks/gitlab-push.json"
        ))
        .unwrap();
        let registry: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/webhooks/registry-push.json"
        ))
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-github-event", "push".parse().unwrap());
        let repos = repositories(ReceiverKind::GitHub, &headers, &github).unwrap();
        assert!(
            repos.contains(&"https://github.com/jessesuen/test-repo.git".to_owned()),
            "{repos:?}"
        );
        let mut headers = HeaderMap::new();
        headers.insert("x-gitlab-event", "Push Hook".parse().unwrap());
        let repos = repositories(ReceiverKind::GitLab, &headers, &gitlab).unwrap();
        assert!(
            repos.contains(&"http://example.com/mike/diaspora.git".to_owned()),
            "{repos:?}"
        );
        let repos = repositories(ReceiverKind::Registry, &HeaderMap::new(), &registry).unwrap();
        assert_eq!(repos[0], "registrycluster.local/library/test");
        let mut headers = HeaderMap::new();
        headers.insert("x-github-event", "ping".parse().unwrap());
        assert!(repositories(ReceiverKind::GitHub, &headers, &json!({})).is_none());
    }
}
