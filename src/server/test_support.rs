//! What the route tests (`server::tests`, the token routes' tests, `ui::tests`) share: a
//! server over a fresh SQLite store in a temp dir with its bootstrap admin token, and one
//! request through the whole router with `tower::ServiceExt::oneshot`, no socket.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

use crate::store::SqliteStore;

use super::auth::AuthMode;
use super::{AppState, router, tokens};

/// Project `demo` with Warehouse `app` (an image) and Stages `dev` (from the Warehouse),
/// `staging` (from `dev`) and `prod` (from `staging`, with `requiredSoakTime` when given).
pub(crate) fn three_stages(prod_soak: Option<&str>) -> String {
    let soak = prod_soak
        .map(|soak| format!(", requiredSoakTime: {soak}"))
        .unwrap_or_default();
    format!(
        "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: demo}}
spec:
  subscriptions:
    - image: {{repoURL: 127.0.0.1:5000/demo/app}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: staging, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{stages: [dev]}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: prod, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{stages: [staging]{soak}}}
"
    )
}

/// `three_stages` where `dev` can be promoted to: its template is one `http` gate (at a
/// port nothing listens on, so a promotion that runs fails without reaching anything).
pub(crate) fn three_stages_dev_promotable() -> String {
    three_stages(None).replacen(
        "      sources: {direct: true}",
        "      sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
        - uses: http
          as: gate
          config: {url: 'http://127.0.0.1:9/health'}",
        1,
    )
}

/// Stores Freight `f1` (alias `first`) of Warehouse `app`, verified nowhere: what a test
/// promotes into `dev` and cannot promote further.
pub(crate) async fn store_first_freight(store: &SqliteStore) {
    use crate::store::Store;
    let freight = serde_json::json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
        "metadata": {"name": "f1", "namespace": "demo"},
        "alias": "first", "origin": {"kind": "Warehouse", "name": "app"},
        "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "1.0.0", "digest": "sha256:aa"}]});
    store.create(freight).await.unwrap();
}

/// A JSON API request through the whole router: its status and JSON body.
pub(crate) async fn call(
    state: &AppState,
    token: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let reply = send(state, json_request(token, method, uri, body)).await;
    (reply.status, reply.json())
}

/// A fresh server's state and what the tests reach around it.
pub(crate) struct Fresh {
    pub(crate) state: AppState,
    pub(crate) store: Arc<SqliteStore>,
    /// The bootstrap token: user `admin`, `dray-admin` in every project.
    pub(crate) admin: String,
    pub(crate) dir: tempfile::TempDir,
}

/// A server over an empty store in a new temp dir, authenticating by `mode`.
pub(crate) async fn fresh(mode: AuthMode) -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let (admin, _) = tokens::bootstrap(store.as_ref(), dir.path())
        .await
        .unwrap()
        .unwrap();
    Fresh {
        state: AppState::for_tests(store.clone(), dir.path(), mode),
        store,
        admin,
        dir,
    }
}

/// A response, read whole.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    /// The body as JSON, `null` when it is not JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// The whole router (API and UI) of `state`, composed as `serve` composes it.
pub(crate) fn app(state: &AppState) -> axum::Router {
    router(state.clone(), crate::ui::router())
}

/// Sends `request` through the whole router (API and UI) of `state`.
pub(crate) async fn send(state: &AppState, request: Request<Body>) -> Reply {
    let response = app(state).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

/// A JSON API request, with `token` as bearer token when given.
pub(crate) fn json_request(
    token: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap()
}
