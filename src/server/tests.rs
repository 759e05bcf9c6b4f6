//! Route tests: the whole router against a real SQLite store in a temp dir, through
//! `tower::ServiceExt::oneshot`, no socket.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::secrets::SecretKey;
use crate::store::SqliteStore;

use super::{AppState, router};

struct TestServer {
    state: AppState,
    _dir: tempfile::TempDir,
}

impl TestServer {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let secret_key = Arc::new(SecretKey::load(dir.path()).unwrap());
        TestServer {
            state: AppState {
                store: Arc::new(store),
                secret_key,
                discovery: None,
            },
            _dir: dir,
        }
    }

    async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(
                body.map(|b| Body::from(b.to_string()))
                    .unwrap_or_else(Body::empty),
            )
            .unwrap();
        let response = router(self.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn apply(&self, content: &str) -> (StatusCode, Value) {
        let body = json!({"files": [{"path": "test.yaml", "content": content}]});
        self.call(Method::POST, "/api/v1/apply", Some(body)).await
    }
}

const PIPELINE: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec:
  subscriptions:
    - image: {repoURL: 127.0.0.1:5000/demo/app}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
";

#[tokio::test]
async fn apply_creates_then_reports_unchanged_then_configured() {
    let server = TestServer::new();
    let (status, body) = server.apply(PIPELINE).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let actions: Vec<_> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].clone())
        .collect();
    assert_eq!(
        actions,
        [json!("created"), json!("created"), json!("created")]
    );

    let (_, body) = server.apply(PIPELINE).await;
    assert!(
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["action"] == "unchanged"),
        "{body}"
    );

    let changed = format!("{PIPELINE}  queuePolicy: Queue\n");
    let (_, body) = server.apply(&changed).await;
    let stage = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Stage")
        .unwrap();
    assert_eq!(stage["action"], "configured");

    let (status, stage) = server
        .call(Method::GET, "/api/v1/projects/demo/stages/dev", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stage["spec"]["queuePolicy"], "Queue");
    assert_eq!(stage["metadata"]["generation"], 2);
}

#[tokio::test]
async fn a_stale_put_is_a_conflict_naming_both_versions() {
    let server = TestServer::new();
    server.apply(PIPELINE).await;
    let (_, original) = server
        .call(Method::GET, "/api/v1/projects/demo/stages/dev", None)
        .await;
    let mut first = original.clone();
    first["spec"]["queuePolicy"] = json!("Queue");
    let (status, _) = server
        .call(Method::PUT, "/api/v1/projects/demo/stages/dev", Some(first))
        .await;
    assert_eq!(status, StatusCode::OK);

    let mut stale = original.clone();
    stale["spec"]["queuePolicy"] = json!("Supersede");
    let (status, body) = server
        .call(Method::PUT, "/api/v1/projects/demo/stages/dev", Some(stale))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Stage demo/dev was changed by someone else"),
        "{message}"
    );

    let (_, now) = server
        .call(Method::GET, "/api/v1/projects/demo/stages/dev", None)
        .await;
    assert_eq!(
        now["spec"]["queuePolicy"], "Queue",
        "the stale write must not land"
    );
}

#[tokio::test]
async fn an_invalid_apply_answers_422_with_every_error_and_stores_nothing() {
    let server = TestServer::new();
    let broken = PIPELINE
        .replace("name: dev", "name: Dev_1")
        .replace("direct: true", "direkt: true");
    let (status, body) = server.apply(&broken).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid");
    let details = body["error"]["details"].as_array().unwrap();
    assert!(details.len() >= 2, "{body}");
    assert!(
        details
            .iter()
            .all(|d| d["file"] == "test.yaml" && d["line"].is_number()),
        "{body}"
    );
    let (_, projects) = server.call(Method::GET, "/api/v1/projects", None).await;
    assert_eq!(projects, json!([]));
}

#[tokio::test]
async fn deletes_refuse_while_something_still_refers_to_the_resource() {
    let server = TestServer::new();
    server.apply(PIPELINE).await;
    let (status, body) = server
        .call(Method::DELETE, "/api/v1/projects/demo/warehouses/app", None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stage `dev`"),
        "{body}"
    );
    let (status, body) = server
        .call(Method::DELETE, "/api/v1/projects/demo", None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    let (status, _) = server
        .call(Method::DELETE, "/api/v1/projects/demo/stages/dev", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .call(Method::DELETE, "/api/v1/projects/demo/warehouses/app", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .call(Method::DELETE, "/api/v1/projects/demo", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn status_updates_keep_the_spec_and_unknown_routes_answer_json() {
    let server = TestServer::new();
    server.apply(PIPELINE).await;
    let status_body = json!({"status": {"lastPromotion": "p-1"}});
    let (status, body) = server
        .call(
            Method::PUT,
            "/api/v1/projects/demo/stages/dev/status",
            Some(status_body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["lastPromotion"], "p-1");
    assert_eq!(body["spec"]["requestedFreight"][0]["origin"]["name"], "app");

    let (status, body) = server
        .call(Method::GET, "/api/v1/projects/demo/gizmos", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"]["hint"].as_str().unwrap().contains("stages"),
        "{body}"
    );
    let (status, body) = server.call(Method::GET, "/nowhere", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
}
