//! Test double of the two Kubernetes APIs [`super::KubeAuth`] asks, with the API server's
//! shapes (`authentication.k8s.io/v1` TokenReview, `authorization.k8s.io/v1`
//! SubjectAccessReview: `POST` → `201 Created` with the object and its `status`; a request
//! without a bearer token → `401` with a `Status`). It knows tokens and allowed attributes,
//! and counts the reviews it answered.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

/// `(user, namespace, verb, resource, name)`.
type NamedGrant = (String, String, String, String, String);

/// What the double knows, and what it was asked.
#[derive(Default)]
pub(crate) struct Cluster {
    /// token → (username, groups).
    pub(crate) tokens: Mutex<BTreeMap<String, (String, Vec<String>)>>,
    /// Allowed `(user, namespace, verb, resource)`, for any name (as a RoleBinding of a
    /// ClusterRole without `resourceNames`).
    pub(crate) allowed: Mutex<Vec<(String, String, String, String)>>,
    /// Allowed `(user, namespace, verb, resource, name)` (a Role with `resourceNames`).
    pub(crate) allowed_names: Mutex<Vec<NamedGrant>>,
    /// Answer SubjectAccessReviews with `403`, as when Dray's ServiceAccount may not create
    /// them.
    pub(crate) refuse_access_reviews: std::sync::atomic::AtomicBool,
    pub(crate) token_reviews: AtomicUsize,
    pub(crate) access_reviews: AtomicUsize,
    /// The `status.reason` of a denial; none (as Kubernetes' RBAC authorizer answers when no
    /// rule matches) by default.
    pub(crate) deny_reason: Mutex<Option<String>>,
    /// The last SubjectAccessReview's spec, as sent.
    pub(crate) last_access: Mutex<Value>,
}

impl Cluster {
    pub(crate) fn token(&self, token: &str, user: &str, groups: &[&str]) {
        let groups = groups.iter().map(|g| g.to_string()).collect();
        self.tokens
            .lock()
            .unwrap()
            .insert(token.to_owned(), (user.to_owned(), groups));
    }

    pub(crate) fn allow(&self, user: &str, namespace: &str, verb: &str, resource: &str) {
        self.allowed.lock().unwrap().push((
            user.to_owned(),
            namespace.to_owned(),
            verb.to_owned(),
            resource.to_owned(),
        ));
    }

    pub(crate) fn allow_named(
        &self,
        user: &str,
        namespace: &str,
        verb: &str,
        resource: &str,
        name: &str,
    ) {
        self.allowed_names.lock().unwrap().push((
            user.to_owned(),
            namespace.to_owned(),
            verb.to_owned(),
            resource.to_owned(),
            name.to_owned(),
        ));
    }

    pub(crate) fn token_reviews(&self) -> usize {
        self.token_reviews.load(Ordering::SeqCst)
    }

    pub(crate) fn access_reviews(&self) -> usize {
        self.access_reviews.load(Ordering::SeqCst)
    }
}

/// The double, served on a random loopback port; and a `kube::Client` pointed at it with a
/// bearer token, as Dray's ServiceAccount would have. The server ends with the runtime.
pub(crate) async fn start() -> (Arc<Cluster>, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = Arc::new(Cluster::default());
    let app = Router::new()
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            post(token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(access_review),
        )
        .with_state(cluster.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = kube::Config::new(url.parse().unwrap());
    config.auth_info.token = Some("dray-service-account-token".to_owned().into());
    (cluster, kube::Client::try_from(config).unwrap())
}

fn unauthorized() -> (StatusCode, Json<Value>) {
    (
        StatusCode::UNAUTHORIZED,
        Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
        ),
    )
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.starts_with("Bearer "))
}

async fn token_review(
    State(cluster): State<Arc<Cluster>>,
    headers: HeaderMap,
    Json(mut review): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !has_bearer(&headers) {
        return unauthorized();
    }
    cluster.token_reviews.fetch_add(1, Ordering::SeqCst);
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    let known = cluster.tokens.lock().unwrap().get(token).cloned();
    review["status"] = match known {
        Some((user, groups)) => json!({
            "authenticated": true,
            "user": {"username": user, "uid": "0b9c1c3e", "groups": groups},
            "audiences": ["https://kubernetes.default.svc.cluster.local"],
        }),
        None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
    };
    review["metadata"] = json!({"creationTimestamp": null});
    (StatusCode::CREATED, Json(review))
}

async fn access_review(
    State(cluster): State<Arc<Cluster>>,
    headers: HeaderMap,
    Json(mut review): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !has_bearer(&headers) {
        return unauthorized();
    }
    if cluster.refuse_access_reviews.load(Ordering::SeqCst) {
        return (
            StatusCode::FORBIDDEN,
            Json(
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:dray:dray\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope",
                "reason": "Forbidden", "details": {"group": "authorization.k8s.io", "kind": "subjectaccessreviews"}, "code": 403}),
            ),
        );
    }
    cluster.access_reviews.fetch_add(1, Ordering::SeqCst);
    *cluster.last_access.lock().unwrap() = review["spec"].clone();
    let spec = &review["spec"];
    let attrs = &spec["resourceAttributes"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let asked = (
        text(&spec["user"]),
        text(&attrs["namespace"]),
        text(&attrs["verb"]),
        text(&attrs["resource"]),
    );
    let named = (
        asked.0.clone(),
        asked.1.clone(),
        asked.2.clone(),
        asked.3.clone(),
        text(&attrs["name"]),
    );
    let allowed = attrs["group"] == "dray.dev"
        && (cluster.allowed.lock().unwrap().contains(&asked)
            || cluster.allowed_names.lock().unwrap().contains(&named));
    review["status"] = if allowed {
        json!({"allowed": true, "reason": format!(
            "RBAC: allowed by RoleBinding \"{0}/{1}\" of ClusterRole \"dray-promoter\" to User \"{0}\"",
            asked.0, asked.1)})
    } else {
        match cluster.deny_reason.lock().unwrap().clone() {
            Some(reason) => json!({"allowed": false, "reason": reason}),
            None => json!({"allowed": false}),
        }
    };
    review["metadata"] = json!({"creationTimestamp": null});
    (StatusCode::CREATED, Json(review))
}
