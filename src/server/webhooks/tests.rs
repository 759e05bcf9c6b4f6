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
    refresh_token_of(fresh, "demo").await
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

/// Projects `a` and `b`, each with a Warehouse `app` on the same repository and a
/// `gitea` receiver over its own Credential `hook` (`a`'s secret is `secret_a`).
fn two_projects(secret_a: &str, secret_b: &str) -> String {
    let mut yaml = String::new();
    for (project, secret) in [("a", secret_a), ("b", secret_b)] {
        yaml.push_str(&format!(
            "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: {project}}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: {project}}}
spec:
  interval: 1h
  subscriptions:
    - git: {{repoURL: 'https://git.example.com/team/app.git'}}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: {project}, namespace: {project}}}
spec:
  webhookReceivers:
    - {{name: forge, gitea: {{secretRef: hook}}}}
    - {{name: hub, dockerhub: {{secretRef: hook}}}}
---
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: hook, namespace: {project}}}
spec: {{type: webhook, token: '{secret}'}}
---
"
        ));
    }
    yaml
}

/// Warehouse `app`'s refresh token in `project`.
async fn refresh_token_of(fresh: &Fresh, project: &str) -> Option<String> {
    let key = ObjectKey::namespaced(Kind::Warehouse, project, "app");
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

async fn gitea_shared(fresh: &Fresh, secret: &str, delivery: &str) -> (StatusCode, Value) {
    let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": "https://git.example.com/team/app.git"}, "after": delivery})
        .to_string();
    let signature = sign(secret, body.as_bytes());
    let request = Request::builder()
        .method(Method::POST)
        .uri("/webhooks/-/gitea")
        .header("x-gitea-event", "push")
        .header("x-gitea-delivery", delivery)
        .header("x-gitea-signature", signature.trim_start_matches("sha256="))
        .body(Body::from(body))
        .unwrap();
    let reply = send(&fresh.state, request).await;
    (reply.status, reply.json())
}

#[tokio::test]
async fn the_project_independent_receiver_refreshes_only_the_projects_the_secret_covers() {
    const A: &str = "secret-of-project-a-0123456789";
    const B: &str = "secret-of-project-b-0123456789";
    let fresh = test_support::fresh(crate::server::AuthMode::Token).await;
    let (status, body) = apply(&fresh, &two_projects(A, B)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let before_b = refresh_token_of(&fresh, "b").await;

    // `a`'s secret: `a` is refreshed, `b` is neither refreshed nor named.
    let (status, answer) = gitea_shared(&fresh, A, "d-1").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["refreshed"], 1, "{answer}");
    assert_eq!(answer["projects"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(answer["projects"][0]["project"], "a", "{answer}");
    assert!(!answer.to_string().contains("\"b\""), "{answer}");
    let after_a = refresh_token_of(&fresh, "a").await;
    assert!(after_a.is_some());
    assert_eq!(refresh_token_of(&fresh, "b").await, before_b);

    // The same delivery again is a replay for `a`.
    let (status, answer) = gitea_shared(&fresh, A, "d-1").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["projects"][0]["replay"], true, "{answer}");
    assert_eq!(refresh_token_of(&fresh, "a").await, after_a);

    // A secret no project has: 401, nothing refreshed.
    let (status, answer) = gitea_shared(&fresh, "a-secret-nobody-has-0123", "d-2").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    assert_eq!(refresh_token_of(&fresh, "a").await, after_a);
    assert_eq!(refresh_token_of(&fresh, "b").await, before_b);

    // An unknown kind, and a path-token kind without or with a wrong token: 401.
    for uri in [
        "/webhooks/-/nosuch",
        "/webhooks/-/dockerhub",
        "/webhooks/-/dockerhub/wrong-token-0123456789",
    ] {
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .body(Body::from(
                json!({"repository": {"repo_name": "acme/app"}}).to_string(),
            ))
            .unwrap();
        let reply = send(&fresh.state, request).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    // `b`'s token in the path reaches `b` only.
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/webhooks/-/dockerhub/{B}"))
        .body(Body::from(
            json!({"repository": {"repo_name": "acme/app"}}).to_string(),
        ))
        .unwrap();
    let reply = send(&fresh.state, request).await;
    assert_eq!(reply.status, StatusCode::OK);
    let answer = reply.json();
    assert_eq!(answer["projects"][0]["project"], "b", "{answer}");
    assert_eq!(answer["projects"].as_array().unwrap().len(), 1, "{answer}");
}

#[tokio::test]
async fn one_secret_shared_by_two_projects_refreshes_both() {
    const SHARED: &str = "a-secret-two-projects-share-01";
    let fresh = test_support::fresh(crate::server::AuthMode::Token).await;
    let (status, body) = apply(&fresh, &two_projects(SHARED, SHARED)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, answer) = gitea_shared(&fresh, SHARED, "d-1").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["refreshed"], 2, "{answer}");
    assert!(refresh_token_of(&fresh, "a").await.is_some());
    assert!(refresh_token_of(&fresh, "b").await.is_some());
}

#[tokio::test]
async fn gitea_and_bitbucket_pull_requests_decided_wake_promotions_and_refresh_nothing() {
    let fresh = server().await;
    let config = "apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  webhookReceivers:
    - {name: gitea, gitea: {secretRef: hook}}
    - {name: bitbucket, bitbucket: {secretRef: hook}}
";
    let (status, body) = apply(&fresh, config).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let before = refresh_token(&fresh).await;
    let cases = [
        (
            "/webhooks/demo/gitea",
            "x-gitea-event",
            "pull_request",
            "x-gitea-signature",
            "",
        ),
        (
            "/webhooks/demo/bitbucket",
            "x-event-key",
            "pullrequest:fulfilled",
            "x-hub-signature",
            "sha256=",
        ),
        (
            "/webhooks/demo/bitbucket",
            "x-event-key",
            "pr:declined",
            "x-hub-signature",
            "sha256=",
        ),
    ];
    for (number, (uri, event_header, event, signature_header, prefix)) in
        cases.into_iter().enumerate()
    {
        let body = json!({"action": "closed", "number": number, "pull_request": {"merged": true}, "repository": {"clone_url": "https://git.example.com/team/app.git"}}).to_string();
        let signature = format!(
            "{prefix}{}",
            sign(SECRET, body.as_bytes()).trim_start_matches("sha256=")
        );
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(event_header, event)
            .header(signature_header, signature)
            .body(Body::from(body))
            .unwrap();
        let reply = send(&fresh.state, request).await;
        let answer = reply.json();
        assert_eq!(reply.status, StatusCode::OK, "{event}: {answer}");
        assert_eq!(answer["wokenPromotions"], 0, "{event}: {answer}");
        assert_eq!(answer["refreshed"], 0, "{event}: {answer}");
    }
    assert_eq!(refresh_token(&fresh).await, before);
}

#[test]
fn the_project_independent_receivers_secret_path_segment_is_not_logged() {
    assert_eq!(
        crate::server::loggable_path("/webhooks/-/dockerhub/s3cr3t"),
        "/webhooks/-/dockerhub/<secret>"
    );
}
