//! Kubernetes mode through the whole router, against the TokenReview/SubjectAccessReview
//! double (`stub`): who a token is, what Kubernetes RBAC lets them do, what a refusal says,
//! and that answers are kept rather than asked again.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api::Kind;
use crate::server::apply::{ApplyFile, ApplyRequest, apply};
use crate::server::auth::AuthMode;
use crate::server::test_support::{self, Fresh};
use crate::store::Store;

use super::{KubeAuth, stub};

/// A server in Kubernetes mode over `three_stages_dev_promotable` and Freight `f1`, and the
/// double it asks; `ann-token` is user `ann` in group `dev-team`.
async fn world() -> (Fresh, Arc<stub::Cluster>) {
    let (cluster, client) = stub::start().await;
    let kube = Arc::new(KubeAuth::new(client));
    let fresh = test_support::fresh(AuthMode::Kubernetes(kube)).await;
    let request = ApplyRequest {
        files: vec![ApplyFile {
            path: "stages.yaml".into(),
            content: test_support::three_stages_dev_promotable(),
        }],
        default_project: None,
    };
    apply(
        fresh.state.store.as_ref(),
        &fresh.state.secret_key,
        request,
        None,
    )
    .await
    .unwrap();
    test_support::store_first_freight(&fresh.store).await;
    cluster.token("ann-token", "ann", &["dev-team"]);
    (fresh, cluster)
}

async fn call(
    fresh: &Fresh,
    token: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    test_support::call(&fresh.state, token, method, uri, body).await
}

#[tokio::test]
async fn an_unknown_token_is_a_401_saying_why_without_the_token() {
    let (fresh, cluster) = world().await;
    let (status, body) = call(
        &fresh,
        Some("not-a-real-token-4711"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("invalid bearer token"), "{message}");
    assert!(
        !body.to_string().contains("not-a-real-token-4711"),
        "{body}"
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("kubectl create token")
    );
    let (status, _) = call(
        &fresh,
        Some("not-a-real-token-4711"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(cluster.token_reviews(), 2, "a refusal is not kept");
    let (status, body) = call(
        &fresh,
        None,
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(cluster.access_reviews(), 0, "no one was authorized");
}

#[tokio::test]
async fn a_user_kubernetes_allows_lists_stages_and_the_answers_are_kept() {
    let (fresh, cluster) = world().await;
    cluster.allow("ann", "demo", "list", "stages");
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body.as_array().map(Vec::len), Some(3), "{body}");
    assert_eq!(
        *cluster.last_access.lock().unwrap(),
        json!({"user": "ann", "groups": ["dev-team"],
               "resourceAttributes": {"group": "dray.dev", "namespace": "demo", "resource": "stages", "verb": "list"}})
    );
    let (status, _) = call(
        &fresh,
        Some("ann-token"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cluster.token_reviews(), 1, "the accepted review was kept");
    assert_eq!(cluster.access_reviews(), 1, "the answer was kept");
}

#[tokio::test]
async fn a_promote_kubernetes_denies_is_a_403_naming_user_verb_stage_and_the_binding_to_make() {
    let (fresh, cluster) = world().await;
    let promote = json!({"freight": "f1"});
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::POST,
        "/api/v1/projects/demo/stages/dev/promote",
        Some(promote.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["error"]["message"],
        "user `ann` may not promote stages/dev in project `demo` (Kubernetes RBAC: no RoleBinding or ClusterRoleBinding allows it)"
    );
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("kubectl create rolebinding ann-dray-promoter --clusterrole=dray-promoter --user=ann -n demo"),
        "{hint}"
    );
    assert_eq!(
        cluster.last_access.lock().unwrap()["resourceAttributes"]["name"],
        "dev"
    );
    *cluster.deny_reason.lock().unwrap() = Some("denied by policy `freeze`".into());
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::POST,
        "/api/v1/projects/demo/stages/prod/approve",
        Some(json!({"freight": "f1"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["error"]["message"],
        "user `ann` may not approve stages/prod in project `demo` (Kubernetes RBAC: denied by policy `freeze`)"
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--clusterrole=dray-approver")
    );
    assert!(
        fresh
            .store
            .list(Kind::Promotion, Some("demo"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_promote_kubernetes_allows_goes_through_the_door_with_the_reviewed_user_as_actor() {
    let (fresh, cluster) = world().await;
    cluster.allow("ann", "demo", "promote", "stages");
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::POST,
        "/api/v1/projects/demo/stages/dev/promote",
        Some(json!({"freight": "f1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let promotions = fresh
        .store
        .list(Kind::Promotion, Some("demo"))
        .await
        .unwrap();
    assert_eq!(promotions.len(), 1);
    assert_eq!(
        promotions[0].object["metadata"]["annotations"]["dray.dev/actor"],
        "ann"
    );
}

#[tokio::test]
async fn a_permission_snapshot_asks_a_fixed_set_once_and_then_answers_from_memory() {
    let (fresh, cluster) = world().await;
    cluster.allow("ann", "demo", "promote", "stages");
    let reviewed = fresh_caller(&fresh, "ann-token").await;
    let perms = reviewed
        .permissions(fresh.state.store.as_ref(), "demo")
        .await
        .unwrap();
    let asked = cluster.access_reviews();
    assert!(perms.allows(crate::api::Verb::Promote, "stages", Some("prod")));
    assert!(!perms.allows(crate::api::Verb::Approve, "stages", Some("prod")));
    assert!(
        perms
            .refusal(crate::api::Verb::Abort, "promotions", Some("p1"))
            .is_some()
    );
    let again = reviewed
        .permissions(fresh.state.store.as_ref(), "demo")
        .await
        .unwrap();
    assert!(again.allows(crate::api::Verb::Promote, "stages", None));
    assert_eq!(
        cluster.access_reviews(),
        asked,
        "the second snapshot asked nothing"
    );
    // 15 for any name, then approve, override, get, verify, signoff and freeze per Stage
    // (3 Stages).
    assert_eq!(asked, 15 + 6 * 3);
}

#[tokio::test]
async fn a_role_limited_to_one_stage_shows_for_that_stage_only() {
    use crate::api::Verb;
    let (fresh, cluster) = world().await;
    cluster.allow("ann", "demo", "get", "stages");
    cluster.allow_named("ann", "demo", "promote", "stages", "dev");
    let reviewed = fresh_caller(&fresh, "ann-token").await;
    let perms = reviewed
        .permissions(fresh.state.store.as_ref(), "demo")
        .await
        .unwrap();
    assert!(perms.allows(Verb::Promote, "stages", Some("dev")));
    assert!(!perms.allows(Verb::Promote, "stages", Some("prod")));
    assert!(!perms.allows(Verb::Promote, "stages", None));
    assert!(perms.allows(Verb::Get, "stages", Some("prod")));
}

/// The caller the middleware makes of `token`.
async fn fresh_caller(fresh: &Fresh, token: &str) -> crate::server::Caller {
    let AuthMode::Kubernetes(kube) = &fresh.state.auth.mode else {
        unreachable!("world() is in Kubernetes mode");
    };
    let reviewed = kube.review_token(token).await.unwrap();
    crate::server::Caller::kubernetes(reviewed.user, reviewed.groups, kube.clone())
}

#[tokio::test]
async fn an_oidc_session_is_authorized_by_kubernetes_rbac_as_its_user_and_groups() {
    use crate::server::auth::sessions::{COOKIE_NAME, Identity, SESSION_TTL};
    let (fresh, cluster) = world().await;
    let identity = Identity::Oidc {
        user: "bob@example.com".into(),
        groups: vec!["release-managers".into()],
    };
    let (id, _) = fresh
        .state
        .sessions
        .create(identity, "bob@example.com", SESSION_TTL)
        .await
        .unwrap();
    let request = axum::http::Request::get("/api/v1/projects/demo/stages")
        .header("cookie", format!("{COOKIE_NAME}={id}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = test_support::send(&fresh.state, request).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{:?}", reply.json());
    assert_eq!(
        reply.json()["error"]["message"],
        "user `bob@example.com` may not list stages in project `demo` (Kubernetes RBAC: no RoleBinding or ClusterRoleBinding allows it)"
    );
    let asked = cluster.last_access.lock().unwrap().clone();
    assert_eq!(asked["user"], "bob@example.com");
    assert_eq!(asked["groups"], json!(["release-managers"]));
    assert_eq!(
        cluster.token_reviews(),
        0,
        "a session is not a bearer token"
    );

    cluster.allow("bob@example.com", "demo", "list", "stages");
    let request = axum::http::Request::get("/api/v1/projects/demo/stages")
        .header("cookie", format!("{COOKIE_NAME}={id}"))
        .body(axum::body::Body::empty())
        .unwrap();
    // A denial is kept for ACCESS_TTL too: the new binding counts from the next question.
    let reply = test_support::send(&fresh.state, request).await;
    assert_eq!(
        reply.status,
        StatusCode::FORBIDDEN,
        "a kept answer, not asked again"
    );
    assert_eq!(cluster.access_reviews(), 1);
}

#[tokio::test]
async fn an_unreachable_kubernetes_api_is_a_502_for_tokens_without_the_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut config = kube::Config::new(url.parse().unwrap());
    config.connect_timeout = Some(std::time::Duration::from_secs(5));
    let kube = Arc::new(KubeAuth::new(kube::Client::try_from(config).unwrap()));
    let fresh = test_support::fresh(AuthMode::Kubernetes(kube)).await;
    let (status, body) = call(
        &fresh,
        Some("secret-token-0815"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("to create a TokenReview"),
        "{body}"
    );
    assert!(!body.to_string().contains("secret-token-0815"), "{body}");
}

#[test]
fn a_service_account_is_bound_as_one_and_cluster_questions_by_a_clusterrolebinding() {
    use super::{cluster_role_for, rolebinding_hint};
    use crate::api::Verb;
    let hint = rolebinding_hint(
        "system:serviceaccount:ci:deployer",
        Verb::Abort,
        Some("demo"),
    );
    assert!(
        hint.ends_with("`kubectl create rolebinding deployer-dray-promoter --clusterrole=dray-promoter --serviceaccount=ci:deployer -n demo`"),
        "{hint}"
    );
    let hint = rolebinding_hint("Ann.Lee@example.com", Verb::Create, None);
    assert!(
        hint.ends_with("`kubectl create clusterrolebinding ann-lee-example-com-dray-project-admin --clusterrole=dray-project-admin --user=Ann.Lee@example.com`"),
        "{hint}"
    );
    assert_eq!(cluster_role_for(Verb::Override), "dray-approver");
    assert_eq!(cluster_role_for(Verb::Signoff), "dray-approver");
    assert_eq!(cluster_role_for(Verb::List), "dray-viewer");
}

#[test]
fn every_verb_the_api_checks_is_the_kubernetes_verb_of_the_same_name() {
    use crate::api::Verb;
    let asked: Vec<&str> = Verb::ALL
        .iter()
        .map(|&v| super::kubernetes_verb(v))
        .collect();
    assert_eq!(
        asked,
        [
            "get", "list", "create", "update", "delete", "promote", "approve", "abort", "override",
            "verify", "signoff", "reject", "freeze"
        ]
    );
}

#[tokio::test]
async fn abort_is_asked_as_abort_on_promotions() {
    let (fresh, cluster) = world().await;
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::POST,
        "/api/v1/projects/demo/promotions/p1/abort",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        cluster.last_access.lock().unwrap()["resourceAttributes"],
        json!({"group": "dray.dev", "namespace": "demo", "resource": "promotions", "verb": "abort", "name": "p1"})
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--clusterrole=dray-promoter"),
        "{body}"
    );
}

#[tokio::test]
async fn a_subject_access_review_dray_may_not_make_is_a_502_saying_what_to_grant() {
    let (fresh, cluster) = world().await;
    cluster
        .refuse_access_reviews
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = call(
        &fresh,
        Some("ann-token"),
        Method::GET,
        "/api/v1/projects/demo/stages",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the Kubernetes API answered 403 to create a SubjectAccessReview (may `ann` list stages):"),
        "{message}"
    );
    assert!(message.contains("grant Dray's ServiceAccount"), "{message}");
}

#[tokio::test]
async fn a_ui_login_with_a_kubernetes_token_is_a_session_asked_about_by_kubernetes_rbac() {
    use crate::server::auth::login::{TokenLoginError, with_token};
    use crate::server::auth::sessions::COOKIE_NAME;
    let (fresh, cluster) = world().await;
    let refused = with_token(&fresh.state.auth, &fresh.state.sessions, "not-a-token-7").await;
    match refused {
        Err(error @ TokenLoginError::Kubernetes(_)) => {
            assert_eq!(error.status(), StatusCode::UNAUTHORIZED);
            assert!(!error.to_string().contains("not-a-token-7"), "{error}");
        }
        other => panic!("an unknown token makes no session: {other:?}"),
    }
    let login = with_token(&fresh.state.auth, &fresh.state.sessions, " ann-token ")
        .await
        .unwrap();
    cluster.allow("ann", "demo", "list", "stages");
    let request = axum::http::Request::get("/api/v1/projects/demo/stages")
        .header("cookie", format!("{COOKIE_NAME}={}", login.id))
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = test_support::send(&fresh.state, request).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.json());
    let asked = cluster.last_access.lock().unwrap().clone();
    assert_eq!(asked["user"], "ann");
    assert_eq!(asked["groups"], json!(["dev-team"]));
    assert_eq!(
        cluster.token_reviews(),
        2,
        "the refused login and ann's: the session's request reviews no token"
    );
}

#[tokio::test]
async fn the_login_page_asks_for_a_kubernetes_token_in_kubernetes_mode() {
    let (fresh, _) = world().await;
    let request = axum::http::Request::get("/login")
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = test_support::send(&fresh.state, request).await;
    assert_eq!(reply.status, StatusCode::OK);
    let page = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(page.contains("Kubernetes token"), "{page}");
    assert!(page.contains("kubectl create token"), "{page}");
    assert!(!page.contains("dray token create"), "{page}");
}
