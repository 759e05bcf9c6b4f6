//! Route tests of listing and revoking API tokens: the whole router against a real SQLite
//! store in a temp dir, through `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::store::{SqliteStore, TokenDetails, TokenRecord, TokenStore};

use super::super::auth::AuthMode;
use super::super::{AppState, test_support};
use super::hash;

struct Server {
    state: AppState,
    store: Arc<SqliteStore>,
    admin: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn new() -> Self {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let server = Server {
            state: fresh.state,
            store: fresh.store,
            admin: fresh.admin,
            _dir: fresh.dir,
        };
        let project = "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {name: demo}\n";
        let body = json!({"files": [{"path": "p.yaml", "content": project}]});
        let (status, answer) = server
            .as_admin(Method::POST, "/api/v1/apply", Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        server
    }

    async fn send(&self, request: Request<Body>) -> (StatusCode, Value, String) {
        let reply = test_support::send(&self.state, request).await;
        let location = reply
            .headers
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (reply.status, reply.json(), location)
    }

    async fn call(
        &self,
        token: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        test_support::call(&self.state, token, method, uri, body).await
    }

    /// A request with the bootstrap admin's token.
    async fn as_admin(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call(Some(&self.admin), method, uri, body).await
    }

    /// Makes a token as admin; returns the token and its id.
    async fn token(&self, user: &str, role: &str, project: Option<&str>) -> (String, String) {
        let body = json!({"user": user, "role": role, "project": project,
            "description": format!("{user}'s token")});
        let (status, made) = self
            .as_admin(Method::POST, "/api/v1/tokens", Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        (
            made["token"].as_str().unwrap().to_owned(),
            made["id"].as_str().unwrap().to_owned(),
        )
    }

    async fn list(&self, token: &str) -> Vec<Value> {
        let (status, body) = self
            .call(Some(token), Method::GET, "/api/v1/tokens", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["items"].as_array().unwrap().clone()
    }

    async fn projects_status(&self, token: &str) -> (StatusCode, Value) {
        self.call(Some(token), Method::GET, "/api/v1/projects", None)
            .await
    }
}

/// The users of listed tokens, sorted (tokens made in the same second have no order).
fn users(items: &[Value]) -> Vec<&str> {
    let mut users: Vec<_> = items.iter().map(|t| t["user"].as_str().unwrap()).collect();
    users.sort();
    users
}

/// The listed token of `user`.
fn of<'a>(items: &'a [Value], user: &str) -> &'a Value {
    items.iter().find(|t| t["user"] == user).unwrap()
}

#[tokio::test]
async fn a_listing_shows_who_and_when_but_never_a_token_or_its_hash() {
    let server = Server::new().await;
    let (ann, ann_id) = server.token("ann", "dray-viewer", Some("demo")).await;
    let (vic, _) = server.token("vic", "dray-viewer", None).await;

    let items = server.list(&server.admin).await;
    assert_eq!(users(&items), ["admin", "ann", "vic"]);
    assert_eq!(of(&items, "admin")["bootstrap"], true);
    assert_eq!(of(&items, "admin")["createdBy"], "system:bootstrap");
    let ann_item = of(&items, "ann");
    assert_eq!(ann_item["id"], ann_id.as_str());
    assert_eq!(ann_item["createdBy"], "admin");
    assert_eq!(ann_item["description"], "ann's token");
    assert_eq!(ann_item["expiresAt"], Value::Null);
    let text = Value::Array(items.clone()).to_string();
    for secret in [&server.admin, &ann, &vic] {
        assert!(!text.contains(secret.as_str()), "a token in {text}");
        assert!(!text.contains(&hash(secret)), "a hash in {text}");
        assert!(
            !text.contains(&hash(secret)[..12]),
            "part of a hash in {text}"
        );
    }
    for item in &items {
        let keys: Vec<_> = item.as_object().unwrap().keys().collect();
        assert!(
            !keys
                .iter()
                .any(|k| k.contains("token") || k.contains("hash")),
            "{keys:?}"
        );
    }

    // `list` on `tokens` cluster-wide (vic, a viewer everywhere) sees all of them; ann,
    // a viewer only in `demo`, sees her own.
    assert_eq!(users(&server.list(&vic).await), ["admin", "ann", "vic"]);
    assert_eq!(users(&server.list(&ann).await), ["ann"]);
}

#[tokio::test]
async fn a_revoked_token_is_refused_at_once_and_others_may_revoke_only_with_delete() {
    let server = Server::new().await;
    let (ann, _) = server.token("ann", "dray-viewer", Some("demo")).await;
    let (ann2, ann2_id) = server.token("ann", "dray-viewer", Some("demo")).await;
    let (vic, vic_id) = server.token("vic", "dray-viewer", None).await;
    let admin_id = of(&server.list(&server.admin).await, "admin")["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A viewer may not revoke someone else's token, nor learn whether an id exists.
    for (token, id) in [
        (&ann, &vic_id),
        (&vic, &admin_id),
        (&ann, &"000000000000".to_owned()),
    ] {
        let (status, body) = server
            .call(
                Some(token),
                Method::DELETE,
                &format!("/api/v1/tokens/{id}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("may not delete tokens/{id}")),
            "{body}"
        );
    }
    assert_eq!(server.projects_status(&vic).await.0, StatusCode::OK);

    // ...but may revoke their own, which is refused from the next request on.
    assert_eq!(server.projects_status(&ann2).await.0, StatusCode::OK);
    let (status, body) = server
        .call(
            Some(&ann),
            Method::DELETE,
            &format!("/api/v1/tokens/{ann2_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["revoked"]["id"], ann2_id.as_str());
    assert_eq!(body["warning"], Value::Null);
    let (status, body) = server.projects_status(&ann2).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoked"),
        "{body}"
    );
    assert_eq!(server.projects_status(&ann).await.0, StatusCode::OK);

    // An admin may revoke anyone's; a second time it is gone.
    let uri = format!("/api/v1/tokens/{vic_id}");
    let (status, _) = server.as_admin(Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        server.projects_status(&vic).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, body) = server.as_admin(Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(users(&server.list(&server.admin).await), ["admin", "ann"]);
}

#[tokio::test]
async fn revoking_the_bootstrap_token_warns_how_to_get_admin_back() {
    let server = Server::new().await;
    let (other_admin, _) = server.token("root", "dray-admin", None).await;
    let bootstrap_id = of(&server.list(&other_admin).await, "admin")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = server
        .call(
            Some(&other_admin),
            Method::DELETE,
            &format!("/api/v1/tokens/{bootstrap_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let warning = body["warning"].as_str().unwrap();
    assert!(warning.contains("bootstrap token"), "{warning}");
    assert!(warning.contains("--role dray-admin"), "{warning}");
    let (status, _) = server.projects_status(&server.admin).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(server.projects_status(&other_admin).await.0, StatusCode::OK);
}

#[tokio::test]
async fn revoking_a_token_ends_the_web_sessions_made_with_it() {
    let server = Server::new().await;
    let (ann, ann_id) = server.token("ann", "dray-viewer", Some("demo")).await;
    let (id, _) = server
        .state
        .sessions
        .create_for_token(&hash(&ann), "ann")
        .await
        .unwrap();
    let with_cookie = |uri: &str| {
        Request::builder()
            .uri(uri)
            .header("cookie", format!("dray_session={id}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, body, _) = server.send(with_cookie("/api/v1/projects")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, _) = server.send(with_cookie("/")).await;
    assert!(status.is_success() || status.is_redirection(), "{status}");

    let (status, _) = server
        .as_admin(Method::DELETE, &format!("/api/v1/tokens/{ann_id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, body, _) = server.send(with_cookie("/api/v1/projects")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _, location) = server.send(with_cookie("/")).await;
    assert!(status.is_redirection(), "{status}");
    assert_eq!(location, "/login");
}

#[tokio::test]
async fn an_expired_token_is_refused_naming_its_expiry() {
    let server = Server::new().await;
    let record = TokenRecord {
        hash: hash("dray_expired"),
        user: "ann".into(),
        groups: vec![],
        created_at: "2019-01-01T00:00:00Z".into(),
    };
    let details = TokenDetails {
        created_by: Some("admin".into()),
        description: None,
        expires_at: Some("2020-01-01T00:00:00Z".into()),
    };
    let id = server.store.add_token(record, details, None).await.unwrap();
    let (status, body) = server.projects_status("dray_expired").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{id}`")) && message.contains("expired at 2020-01-01T00:00:00Z"),
        "{message}"
    );

    // One made with an expiry works until then, and says when that is.
    let body = json!({"user": "bob", "role": "dray-viewer", "expiresIn": "30d"});
    let (status, made) = server
        .as_admin(Method::POST, "/api/v1/tokens", Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let at: jiff::Timestamp = made["expiresAt"].as_str().unwrap().parse().unwrap();
    let days = at.duration_since(jiff::Timestamp::now()).as_secs_f64() / 86_400.0;
    assert!((29.9..=30.001).contains(&days), "{days}");
    let bob = made["token"].as_str().unwrap();
    assert_eq!(server.projects_status(bob).await.0, StatusCode::OK);

    let body = json!({"user": "bob", "role": "dray-viewer", "expiresIn": "30 days"});
    let (status, refused) = server
        .as_admin(Method::POST, "/api/v1/tokens", Some(body))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expiresIn"),
        "{refused}"
    );
}

#[tokio::test]
async fn last_use_is_recorded_at_most_once_a_minute() {
    let server = Server::new().await;
    let (ann, ann_id) = server.token("ann", "dray-viewer", Some("demo")).await;
    let last_used = || async {
        let info = server.store.token_by_id(&ann_id).await.unwrap().unwrap();
        info.last_used_at
    };
    assert_eq!(last_used().await, None, "made, never used");
    assert_eq!(server.projects_status(&ann).await.0, StatusCode::OK);
    let first = last_used().await.expect("recorded on first use");
    assert_eq!(server.list(&ann).await[0]["lastUsedAt"], first.as_str());

    // Used 30 s ago: another request does not write.
    let now = jiff::Timestamp::now();
    let recent = (now - jiff::SignedDuration::from_secs(30)).to_string();
    server
        .store
        .touch_token(&hash(&ann), &recent)
        .await
        .unwrap();
    assert_eq!(server.projects_status(&ann).await.0, StatusCode::OK);
    assert_eq!(last_used().await.as_deref(), Some(recent.as_str()));

    // Used two minutes ago: the next request records itself.
    let old = (now - jiff::SignedDuration::from_secs(120)).to_string();
    server.store.touch_token(&hash(&ann), &old).await.unwrap();
    assert_eq!(server.projects_status(&ann).await.0, StatusCode::OK);
    let newer: jiff::Timestamp = last_used().await.unwrap().parse().unwrap();
    assert!(newer > old.parse().unwrap(), "{newer} after {old}");
}

#[tokio::test]
async fn the_last_admin_token_is_not_revoked_and_the_bootstrap_file_goes_with_its_token() {
    let server = Server::new().await;
    let file = server._dir.path().join(super::BOOTSTRAP_TOKEN_FILE);
    assert!(file.exists(), "the bootstrap file is written");
    let bootstrap_id = of(&server.list(&server.admin).await, "admin")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let uri = format!("/api/v1/tokens/{bootstrap_id}");
    // A viewer everywhere and an admin of one project do not administer Dray.
    server.token("vic", "dray-viewer", None).await;
    server.token("pam", "dray-admin", Some("demo")).await;
    let (status, body) = server.as_admin(Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "API token `{bootstrap_id}` of user `admin` is the last one with role `dray-admin` in every project"
        )),
        "{message}"
    );
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("--all-projects") && hint.contains("dray serve --data-dir DIR --reset-admin"),
        "{hint}"
    );
    assert_eq!(
        server.projects_status(&server.admin).await.0,
        StatusCode::OK
    );
    assert!(file.exists(), "kept while its token works");

    let (root, _) = server.token("root", "dray-admin", None).await;
    let (status, body) = server.call(Some(&root), Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!file.exists(), "the file never holds a revoked token");
    let warning = body["warning"].as_str().unwrap();
    assert!(warning.contains("is removed"), "{warning}");
    // Now root is the last admin.
    let root_id = of(&server.list(&root).await, "root")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = server
        .call(
            Some(&root),
            Method::DELETE,
            &format!("/api/v1/tokens/{root_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn a_listing_shows_each_tokens_roles_and_where_they_hold() {
    let server = Server::new().await;
    server.token("ann", "dray-viewer", Some("demo")).await;
    server.token("vic", "dray-promoter", None).await;
    let items = server.list(&server.admin).await;
    assert_eq!(
        of(&items, "ann")["grants"],
        json!([{"role": "dray-viewer", "project": "demo"}])
    );
    assert_eq!(
        of(&items, "vic")["grants"],
        json!([{"role": "dray-promoter"}])
    );
    assert_eq!(
        of(&items, "admin")["grants"],
        json!([{"role": "dray-admin"}])
    );

    let (status, body) = server
        .as_admin(Method::GET, "/api/v1/clusterrolebindings", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["items"],
        json!([{"kind": "User", "name": "admin", "role": "dray-admin"},
               {"kind": "User", "name": "vic", "role": "dray-promoter"}])
    );
}

/// A slip in a role's or a project's name gets "did you mean", in a project and cluster-wide.
#[tokio::test]
async fn misspelt_roles_and_projects_get_did_you_mean() {
    let server = Server::new().await;
    let ask = |role: &str, project: Option<&str>| json!({"user": "ann", "role": role, "project": project});
    let (status, refused) = server
        .as_admin(
            Method::POST,
            "/api/v1/tokens",
            Some(ask("dray-promotr", Some("demo"))),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with("did you mean `dray-promoter`?"),
        "{message}"
    );

    let (status, refused) = server
        .as_admin(Method::POST, "/api/v1/tokens", Some(ask("dray-admn", None)))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let hint = refused["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.starts_with("did you mean `dray-admin`?"), "{hint}");

    let (status, refused) = server
        .as_admin(
            Method::POST,
            "/api/v1/tokens",
            Some(ask("dray-viewer", Some("dmeo"))),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("did you mean `demo`?"), "{message}");
}

/// A cascade removes only what its caller may delete: `delete` on Warehouses alone does
/// not take the Warehouse's Freight with it.
#[tokio::test]
async fn a_cascade_needs_delete_on_every_kind_it_removes() {
    let server = Server::new().await;
    let docs = "apiVersion: dray.dev/v1alpha1
kind: Role
metadata: {name: warehouse-keeper, namespace: demo}
rules:
  - {resources: ['*'], verbs: [get, list]}
  - {resources: [warehouses], verbs: [delete]}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec:
  subscriptions:
    - image: {repoURL: 127.0.0.1:5000/demo/app}
";
    let body = json!({"files": [{"path": "w.yaml", "content": docs}]});
    let (status, answer) = server
        .as_admin(Method::POST, "/api/v1/apply", Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    test_support::store_first_freight(server.store.as_ref()).await;
    let (keeper, _) = server.token("kim", "warehouse-keeper", Some("demo")).await;
    let uri = "/api/v1/projects/demo/warehouses/app?cascade=true";
    let (status, refused) = server.call(Some(&keeper), Method::DELETE, uri, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let (status, removed) = server.as_admin(Method::DELETE, uri, None).await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    assert_eq!(
        removed["removed"].as_array().map(Vec::len),
        Some(2),
        "{removed}"
    );
}
