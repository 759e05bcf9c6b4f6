//! The create-only review kinds: `authentication.k8s.io/v1` TokenReview (from the tokens
//! the test registered) and `authorization.k8s.io/v1` SubjectAccessReview (decided by the
//! RBAC authorizer over the stored RBAC objects), shaped as the real server answers them.
//!
//! It owns the review answers; the caller's own right to create them is checked by routes.

use serde_json::{Value, json};

use super::rbac::{self, Attributes, UserInfo};
use super::state::Inner;

fn reviewed(body: &Value, api_version: &str, kind: &str) -> Value {
    let mut review = body.clone();
    review["apiVersion"] = json!(api_version);
    review["kind"] = json!(kind);
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review
}

/// Answers a TokenReview: `status.authenticated` and `status.user` for a known token;
/// for an unknown one `authenticated` is absent (false) and `error` says why.
pub(crate) fn token_review(inner: &Inner, body: &Value) -> Value {
    let mut review = reviewed(body, "authentication.k8s.io/v1", "TokenReview");
    let token = body["spec"]["token"].as_str().unwrap_or_default();
    let audiences = body["spec"]["audiences"].clone();
    review["status"] = match inner.tokens.get(token) {
        Some(user) => {
            let mut status = json!({
                "authenticated": true,
                "user": {"username": user.username, "uid": user.uid, "groups": user.groups},
            });
            if audiences.is_array() {
                status["audiences"] = audiences;
            }
            status
        }
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    review
}

const DISCOVERY_PATHS: [&str; 7] = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/version",
    "/openapi/*",
    "/healthz",
];

/// Answers a SubjectAccessReview with `status.allowed` and, when allowed by RBAC,
/// `status.reason` worded as RBAC's (`RBAC: allowed by RoleBinding "b/ns" of Role …`).
pub(crate) fn subject_access_review(inner: &Inner, body: &Value) -> Value {
    let mut review = reviewed(body, "authorization.k8s.io/v1", "SubjectAccessReview");
    let spec = &body["spec"];
    let user = UserInfo {
        username: spec["user"].as_str().unwrap_or_default().to_owned(),
        uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
        groups: spec["groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(|g| g.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let decision = if spec["resourceAttributes"].is_object() {
        let attrs = &spec["resourceAttributes"];
        rbac::authorize(
            &inner.store,
            &user,
            &Attributes {
                verb: text(&attrs["verb"]),
                group: text(&attrs["group"]),
                resource: text(&attrs["resource"]),
                subresource: text(&attrs["subresource"]),
                namespace: text(&attrs["namespace"]),
                name: text(&attrs["name"]),
            },
        )
    } else {
        let path = text(&spec["nonResourceAttributes"]["path"]);
        let discovery = DISCOVERY_PATHS
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == *pattern,
            });
        let masters = user.groups.iter().any(|g| g == "system:masters");
        let authenticated = user.groups.iter().any(|g| g == "system:authenticated");
        rbac::Decision {
            allowed: masters || (discovery && authenticated),
            reason: if discovery && authenticated && !masters {
                "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"".into()
            } else {
                String::new()
            },
        }
    };
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    review["status"] = status;
    review
}
