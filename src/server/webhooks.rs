//! Webhook receivers: CI systems, forges and registries tell Dray that something changed,
//! and Dray refreshes only the Warehouses subscribed to the repositories named.
//!
//! This module authenticates a delivery and reads what it names; which Warehouses that
//! refreshes is discovery's decision (`discovery::webhook_match`, comparing repositories
//! as `api::RepoUrl`s).
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
//! The doors, in order:
//! - A secret shorter than [`webhook_secret::MIN_BYTES`] bytes (or empty) authenticates
//!   nothing: `dray apply` refuses it, and one stored before that rule makes the receiver
//!   answer 401 to every request, logging how to fix it (never the secret).
//! - Every comparison is constant-time, whatever the lengths: tokens are compared as
//!   SHA-256 digests of both sides, GitHub signatures by the HMAC's own verification. An
//!   empty header or path token never matches.
//! - A forged, unsigned or unknown request gets 401 and changes nothing; the answer never
//!   says which part was wrong beyond "not authenticated".
//! - Once a GitHub delivery is authenticated, its `X-GitHub-Delivery` id and the digest of
//!   its body are remembered in the store for [`REPLAY_WINDOW`] (so a restart does not
//!   reopen it); the same id, or the same signed body under another id or none (the header
//!   is not signed), within the window answers 200 with `replay: true` and does nothing.
//!   A delivery that fails is forgotten again, so GitHub may redeliver it.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::{Kind, ObjectKey, ProjectConfig, WebhookReceiverConfig};
use crate::config::webhook_secret;
use crate::discovery::credentials;
use crate::discovery::webhook_match::Announced;

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

/// How long a GitHub delivery is remembered: a replay within it does nothing.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The longest `X-GitHub-Delivery` taken (GitHub's are 36-character GUIDs).
const MAX_DELIVERY_ID: usize = 128;

/// Whether a token a caller gave equals the secret, in constant time whatever either's
/// length: both are hashed first, so the comparison always covers 32 bytes. An empty
/// token never matches.
fn token_matches(given: &str, secret: &str) -> bool {
    if given.is_empty() || secret.is_empty() {
        return false;
    }
    let given = Sha256::digest(given.as_bytes());
    let secret = Sha256::digest(secret.as_bytes());
    bool::from(given.ct_eq(&secret))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `X-Hub-Signature-256` is the HMAC-SHA256 of `body` under `secret`. The MAC's
/// own verification compares in constant time; a signature of the wrong length (an empty
/// one included) fails before any byte is compared, and its length is no secret.
fn github_signature_valid(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    if secret.is_empty() {
        return false;
    }
    let Some(signature) =
        header(headers, "x-hub-signature-256").and_then(|s| s.strip_prefix("sha256="))
    else {
        return false;
    };
    let Some(given) = decode_hex(signature).filter(|g| !g.is_empty()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = header(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
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
        ReceiverKind::GitLab => {
            header(headers, "x-gitlab-token").is_some_and(|t| token_matches(t, secret))
        }
        ReceiverKind::Registry => bearer_token(headers).is_some_and(|t| token_matches(t, secret)),
        ReceiverKind::Generic => path_token.is_some_and(|t| token_matches(t, secret)),
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

/// A GitHub delivery, as remembered against replays.
struct Delivery {
    /// `X-GitHub-Delivery`.
    id: String,
    /// Whose deliveries: `project/receiver`.
    receiver: String,
    /// What a replay would repeat: the id, and the digest of the signed body.
    keys: Vec<String>,
}

/// What a GitHub delivery would repeat if replayed: its `X-GitHub-Delivery` id (GitHub
/// sends one with every delivery, and the same one when it redelivers) and the digest of
/// its body (the header is not signed, so a replay may change it).
fn github_delivery(
    project: &str,
    receiver: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Delivery, ApiError> {
    let id = header(headers, "x-github-delivery")
        .map(str::trim)
        .unwrap_or_default();
    if id.len() > MAX_DELIVERY_ID {
        return Err(ApiError::bad_request(format!(
            "`X-GitHub-Delivery` is longer than {MAX_DELIVERY_ID} bytes; GitHub sends a GUID"
        ))
        .with_hint("send the headers GitHub sends; Dray uses the id to ignore replays"));
    }
    let mut keys = vec![format!("body:{:x}", Sha256::digest(body))];
    if !id.is_empty() {
        keys.push(format!("delivery:{id}"));
    }
    Ok(Delivery {
        id: if id.is_empty() { "(no id)" } else { id }.to_owned(),
        receiver: format!("{project}/{receiver}"),
        keys,
    })
}

fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
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
    if let Some(weak) = webhook_secret::check(&secret) {
        tracing::warn!(
            %project,
            receiver = %receiver_name,
            credential = %secret_ref,
            "webhook receiver refuses every request: {weak} (Credential `{project}/{secret_ref}`); {}, then `dray apply` the Credential",
            webhook_secret::HINT
        );
        return Err(unauthenticated());
    }
    if !authenticate(kind, &secret, &headers, &body, path_token.as_deref()) {
        tracing::warn!(%project, receiver = %receiver_name, "rejected an unauthenticated webhook");
        return Err(unauthenticated());
    }
    let delivery = match kind {
        ReceiverKind::GitHub => Some(github_delivery(&project, &receiver_name, &headers, &body)?),
        _ => None,
    };
    if let Some(delivery) = &delivery {
        let now = unix_now();
        let until = now.saturating_add(REPLAY_WINDOW.as_secs().try_into().unwrap_or(i64::MAX));
        if !state
            .store
            .claim_delivery(&delivery.receiver, &delivery.keys, now, until)
            .await?
        {
            tracing::info!(%project, receiver = %receiver_name, delivery = %delivery.id, "ignored a replayed webhook delivery");
            let message = format!(
                "delivery `{}` (or its body) was already received in the last {} minutes; a replay changes nothing",
                delivery.id,
                REPLAY_WINDOW.as_secs() / 60
            );
            return Ok((
                StatusCode::OK,
                Json(json!({"refreshed": 0, "warehouses": [], "replay": true, "message": message})),
            ));
        }
    }
    let outcome = handle(&state, kind, &project, &receiver_name, &headers, &body).await;
    if outcome.is_err()
        && let Some(delivery) = &delivery
        && let Err(e) = state
            .store
            .release_delivery(&delivery.receiver, &delivery.keys)
            .await
    {
        tracing::warn!(%project, receiver = %receiver_name, delivery = %delivery.id, "could not forget a failed delivery, so a redelivery within the replay window will be ignored: {e}");
    }
    outcome
}

/// What an authenticated, new delivery does.
async fn handle(
    state: &AppState,
    kind: ReceiverKind,
    project: &str,
    receiver_name: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let payload = parse_body(body)?;
    if is_review_decision(kind, headers, &payload) {
        let woken = crate::pipeline::request::wake_running(state.store.as_ref(), project).await?;
        tracing::info!(%project, receiver = %receiver_name, promotions = woken, "review webhook woke waiting promotions");
        return Ok((
            StatusCode::OK,
            Json(json!({"refreshed": 0, "warehouses": [], "wokenPromotions": woken})),
        ));
    }
    let Some(repos) = repositories(kind, headers, &payload) else {
        return Ok((
            StatusCode::OK,
            Json(json!({"refreshed": 0, "warehouses": [], "message": "event ignored"})),
        ));
    };
    let announced = Announced::from_urls(&repos);
    let refreshed = refresh::refresh_subscribers(state.store.as_ref(), project, &announced).await?;
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
    fn an_empty_token_never_matches_and_lengths_do_not_shortcut() {
        assert!(token_matches("a-secret-of-16-by", "a-secret-of-16-by"));
        assert!(!token_matches("", ""));
        assert!(!token_matches("", "a-secret-of-16-by"));
        assert!(!token_matches("a-secret-of-16-b", "a-secret-of-16-by"));
        assert!(!token_matches("a-secret-of-16-byX", "a-secret-of-16-by"));
        let secret = "a-secret-of-16-by";
        let mut headers = HeaderMap::new();
        headers.insert("x-gitlab-token", "".parse().unwrap());
        headers.insert("authorization", "Bearer ".parse().unwrap());
        headers.insert("x-hub-signature-256", "sha256=".parse().unwrap());
        for kind in [
            ReceiverKind::GitHub,
            ReceiverKind::GitLab,
            ReceiverKind::Registry,
        ] {
            assert!(
                !authenticate(kind, secret, &headers, b"{}", None),
                "{kind:?}"
            );
        }
        assert!(!authenticate(
            ReceiverKind::Generic,
            secret,
            &headers,
            b"{}",
            Some("")
        ));
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("bearer {secret}").parse().unwrap());
        assert!(authenticate(
            ReceiverKind::Registry,
            secret,
            &headers,
            b"",
            None
        ));
    }

    #[test]
    fn an_empty_secret_verifies_no_signature() {
        // An HMAC under the empty key is computable by anyone.
        let body = b"{}";
        let mut mac = Hmac::<Sha256>::new_from_slice(b"").unwrap();
        mac.update(body);
        let signature: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-hub-signature-256",
            format!("sha256={signature}").parse().unwrap(),
        );
        assert!(!github_signature_valid("", &headers, body));
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

    mod routes {
        use axum::body::Body;
        use axum::http::{Method, Request};

        use super::*;
        use crate::discovery::controller::REFRESH_ANNOTATION;
        use crate::server::test_support::{self, Fresh, call, send};

        const SECRET: &str = "a-webhook-secret-of-32-bytes-ok!";

        /// Project `demo`, Warehouse `app` (subscribed to `GIT`), receivers `github` and
        /// `gitlab` over the Credential `hook`.
        const PROJECT: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec:
  interval: 1h
  subscriptions:
    - git: {repoURL: 'https://git.example.com/team/app.git'}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  webhookReceivers:
    - {name: github, github: {secretRef: hook}}
    - {name: gitlab, gitlab: {secretRef: hook}}
";

        fn credential(token: &str) -> String {
            format!(
                "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: hook, namespace: demo}}\nspec: {{type: webhook, token: '{token}'}}\n"
            )
        }

        async fn apply(fresh: &Fresh, content: &str) -> (StatusCode, Value) {
            let body = json!({"files": [{"path": "hook.yaml", "content": content}]});
            call(
                &fresh.state,
                Some(&fresh.admin),
                Method::POST,
                "/api/v1/apply",
                Some(body),
            )
            .await
        }

        async fn server() -> Fresh {
            let fresh = test_support::fresh(crate::server::AuthMode::Token).await;
            let (status, body) =
                apply(&fresh, &format!("{PROJECT}---\n{}", credential(SECRET))).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            fresh
        }

        /// The Warehouse's refresh token: a new value is what a refresh is.
        async fn refresh_token(fresh: &Fresh) -> Option<String> {
            let key = ObjectKey::namespaced(Kind::Warehouse, "demo", "app");
            let stored = fresh.state.store.get(&key).await.unwrap().unwrap();
            stored
                .object
                .pointer(&format!(
                    "/metadata/annotations/{}",
                    REFRESH_ANNOTATION.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                .map(str::to_owned)
        }

        fn push_body() -> Vec<u8> {
            json!({"ref": "refs/heads/main", "repository": {"clone_url": "https://git.example.com/team/app.git"}})
                .to_string()
                .into_bytes()
        }

        fn sign(secret: &str, body: &[u8]) -> String {
            let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
            mac.update(body);
            let hex: String = mac
                .finalize()
                .into_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("sha256={hex}")
        }

        async fn github(
            fresh: &Fresh,
            body: &[u8],
            signature: &str,
            delivery: Option<&str>,
        ) -> (StatusCode, Value) {
            let mut request = Request::builder()
                .method(Method::POST)
                .uri("/webhooks/demo/github")
                .header("content-type", "application/json")
                .header("x-github-event", "push")
                .header("x-hub-signature-256", signature);
            if let Some(delivery) = delivery {
                request = request.header("x-github-delivery", delivery);
            }
            let reply = send(
                &fresh.state,
                request.body(Body::from(body.to_vec())).unwrap(),
            )
            .await;
            (reply.status, reply.json())
        }

        #[tokio::test]
        async fn a_replayed_github_delivery_does_nothing_and_a_forgery_poisons_no_id() {
            let fresh = server().await;
            let body = push_body();
            let good = sign(SECRET, &body);
            let before = refresh_token(&fresh).await;

            // A forged request naming an id is refused and not remembered...
            let (status, _) = github(
                &fresh,
                &body,
                &sign("not-the-secret-at-all", &body),
                Some("id-1"),
            )
            .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert_eq!(refresh_token(&fresh).await, before);
            // ...so the genuine delivery with that id still refreshes.
            let (status, answer) = github(&fresh, &body, &good, Some("id-1")).await;
            assert_eq!(
                (status, &answer["refreshed"]),
                (StatusCode::OK, &json!(1)),
                "{answer}"
            );
            let after_first = refresh_token(&fresh).await;
            assert_ne!(after_first, before);

            // The same id again, and the same signed body under a new id: replays.
            for id in ["id-1", "id-2"] {
                let (status, answer) = github(&fresh, &body, &good, Some(id)).await;
                assert_eq!(status, StatusCode::OK, "{answer}");
                assert_eq!(answer["replay"], true, "{answer}");
                assert_eq!(answer["refreshed"], 0, "{answer}");
                assert_eq!(refresh_token(&fresh).await, after_first, "{id}");
            }
            // Without an id, the body still gives the replay away.
            let (status, answer) = github(&fresh, &body, &good, None).await;
            assert_eq!(
                (status, &answer["replay"]),
                (StatusCode::OK, &json!(true)),
                "{answer}"
            );
            assert_eq!(refresh_token(&fresh).await, after_first);

            // A new body under a new id is new.
            let other = json!({"repository": {"clone_url": "https://git.example.com/team/app.git"}, "after": "b"})
                .to_string()
                .into_bytes();
            let (status, answer) =
                github(&fresh, &other, &sign(SECRET, &other), Some("id-3")).await;
            assert_eq!(
                (status, &answer["refreshed"]),
                (StatusCode::OK, &json!(1)),
                "{answer}"
            );
            assert_ne!(refresh_token(&fresh).await, after_first);
        }

        #[tokio::test]
        async fn a_delivery_naming_the_url_without_git_refreshes_the_subscriber() {
            let fresh = server().await;
            let before = refresh_token(&fresh).await;
            // The Warehouse subscribes to `https://git.example.com/team/app.git`.
            let body = json!({"repository": {"clone_url": "https://git.example.com/team/app"}})
                .to_string()
                .into_bytes();
            let (status, answer) = github(&fresh, &body, &sign(SECRET, &body), Some("id-1")).await;
            assert_eq!(
                (status, &answer["warehouses"]),
                (StatusCode::OK, &json!(["app"])),
                "{answer}"
            );
            assert_ne!(refresh_token(&fresh).await, before);
        }

        #[tokio::test]
        async fn a_failed_delivery_is_forgotten_so_it_can_be_redelivered() {
            let fresh = server().await;
            let body = b"not json".to_vec();
            let signature = sign(SECRET, &body);
            for _ in 0..2 {
                let (status, answer) = github(&fresh, &body, &signature, Some("id-9")).await;
                assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
            }
        }

        #[tokio::test]
        async fn a_short_secret_stored_before_the_rule_authenticates_nothing() {
            let fresh = server().await;
            // Stored past `dray apply`'s check, as an older Dray could have stored it.
            let short = "hunter2";
            let key = ObjectKey::namespaced(Kind::Credential, "demo", "hook");
            let current = fresh.state.store.get(&key).await.unwrap().unwrap();
            let mut object: Value = serde_yaml_ng::from_str(&credential(short)).unwrap();
            crate::server::credentials::seal(&fresh.state.secret_key, &mut object, None).unwrap();
            object["metadata"]["resourceVersion"] = json!(current.resource_version.to_string());
            fresh.state.store.update(object).await.unwrap();
            let before = refresh_token(&fresh).await;
            let body = push_body();
            let request = Request::builder()
                .method(Method::POST)
                .uri("/webhooks/demo/gitlab")
                .header("x-gitlab-event", "Push Hook")
                .header("x-gitlab-token", short)
                .body(Body::from(
                    json!({"project": {"git_http_url": "https://git.example.com/team/app.git"}})
                        .to_string(),
                ))
                .unwrap();
            let reply = send(&fresh.state, request).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
            assert!(!String::from_utf8_lossy(&reply.body).contains(short));
            let (status, _) = github(&fresh, &body, &sign(short, &body), Some("id-1")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert_eq!(refresh_token(&fresh).await, before);
        }

        #[tokio::test]
        async fn apply_refuses_a_short_or_empty_webhook_secret_with_a_hint() {
            let fresh = server().await;
            for token in ["", "hunter2"] {
                let (status, body) = apply(&fresh, &credential(token)).await;
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
                let text = body.to_string();
                assert!(text.contains("spec.token"), "{text}");
                assert!(text.contains("Credential"), "{text}");
                assert!(text.contains("openssl rand -hex 32"), "{text}");
                assert!(token.is_empty() || !text.contains(token), "{text}");
            }
            // The stored secret is untouched: the receiver still takes it.
            let body = push_body();
            let (status, answer) = github(&fresh, &body, &sign(SECRET, &body), Some("id-1")).await;
            assert_eq!(
                (status, &answer["refreshed"]),
                (StatusCode::OK, &json!(1)),
                "{answer}"
            );
        }
    }
}
