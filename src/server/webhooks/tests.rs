//! The receivers through the router: replays, failed deliveries, weak secrets, and the
//! project-independent receiver.

use axum::body::Body;
use axum::http::{Method, Request};
use hmac::{Hmac, Mac};
use sha2::Sha256;

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
    let (status, body) = apply(&fresh, &format!("{PROJECT}---\n{}", credential(SECRET))).await;
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
    let other =
        json!({"repository": {"clone_url": "https://git.example.com/team/app.git"}, "after": "b"})
            .to_string()
            .into_bytes();
    let (status, answer) = github(&fresh, &other, &sign(SECRET, &other), Some("id-3")).await;
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
