//! Route tests: the whole router against a real SQLite store in a temp dir, through
//! `tower::ServiceExt::oneshot`, no socket.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::auth::AuthMode;
use super::{AppState, test_support, tokens};

struct TestServer {
    state: AppState,
    store: std::sync::Arc<crate::store::SqliteStore>,
    /// The bootstrap token: user `admin`, `dray-admin` in every project.
    admin: String,
    dir: tempfile::TempDir,
}

impl TestServer {
    async fn new() -> Self {
        Self::with_auth(AuthMode::Token).await
    }

    async fn with_auth(mode: AuthMode) -> Self {
        let fresh = test_support::fresh(mode).await;
        TestServer {
            state: fresh.state,
            store: fresh.store,
            admin: fresh.admin,
            dir: fresh.dir,
        }
    }

    async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call_as(Some(&self.admin.clone()), method, uri, body)
            .await
    }

    /// A request with `token` as bearer token, or without one.
    async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        test_support::call(&self.state, token, method, uri, body).await
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
    let server = TestServer::new().await;
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
    let server = TestServer::new().await;
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
    let server = TestServer::new().await;
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
    let server = TestServer::new().await;
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
async fn a_cluster_task_is_promoted_with_and_kept_while_a_stage_uses_it() {
    let server = TestServer::new().await;
    let shared = "---
apiVersion: dray.dev/v1alpha1
kind: ClusterPromotionTask
metadata: {name: gate}
spec:
  vars: [{name: url}]
  steps:
    - {uses: http, as: check, config: {url: '${{ vars.url }}'}}
";
    let uses = PIPELINE.to_owned()
        + "  promotionTemplate:
    spec:
      steps:
        - task: {name: gate, kind: ClusterPromotionTask}
          vars: [{name: url, value: 'http://127.0.0.1:9/'}]
";
    let (status, body) = server.apply(&(uses.clone() + shared)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, listed) = server
        .call(Method::GET, "/api/v1/clusterpromotiontasks", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed[0]["metadata"]["name"], "gate", "{listed}");
    assert!(listed[0]["metadata"].get("namespace").is_none(), "{listed}");
    test_support::store_first_freight(&server.store).await;
    let promote = Some(json!({"freight": "f1"}));
    let uri = "/api/v1/projects/demo/stages/dev/promote";
    let (status, made) = server.call(Method::POST, uri, promote).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["spec"]["steps"][0]["as"], "gate::check", "{made}");
    assert_eq!(made["spec"]["steps"][0]["uses"], "http", "{made}");
    let (status, body) = server
        .call(Method::DELETE, "/api/v1/clusterpromotiontasks/gate", None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stage `demo/dev`"),
        "{body}"
    );
    let (status, body) = server
        .call(Method::GET, "/api/v1/clusterpromotiontasks/gat", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.to_string().contains("did you mean `gate`"), "{body}");
}

#[tokio::test]
async fn a_status_is_drays_to_write_and_unknown_routes_answer_json() {
    let server = TestServer::new().await;
    server.apply(PIPELINE).await;
    let status_body = json!({"status": {"lastPromotion": "p-1"}});
    let (status, body) = server
        .call(
            Method::PUT,
            "/api/v1/projects/demo/stages/dev/status",
            Some(status_body),
        )
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(
        body["error"]["message"],
        "the status of Stage demo/dev is written by Dray's controllers only"
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("promote")),
        "{body}"
    );
    let (_, stage) = server
        .call(Method::GET, "/api/v1/projects/demo/stages/dev", None)
        .await;
    assert!(stage["status"].get("lastPromotion").is_none(), "{stage}");

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

#[tokio::test]
async fn malformed_bodies_are_400s_that_say_what_to_send() {
    let server = TestServer::new().await;
    server.apply(PIPELINE).await;
    let mut stage = server
        .call(Method::GET, "/api/v1/projects/demo/stages/dev", None)
        .await
        .1;
    stage["metadata"]["name"] = json!("elsewhere");
    let (status, body) = server
        .call(Method::PUT, "/api/v1/projects/demo/stages/dev", Some(stage))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("match the URL")),
        "{body}"
    );
}

/// Projects `demo` (three Stages) and `other`, and a `deployer` Role that may promote
/// into `dev` and `staging` only.
fn rbac() -> String {
    format!(
        "{}---
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: other}}
---
apiVersion: dray.dev/v1alpha1
kind: Role
metadata: {{name: deployer, namespace: demo}}
rules:
  - {{resources: ['*'], verbs: [get, list]}}
  - {{resources: [stages], resourceNames: [dev, staging], verbs: [promote]}}
",
        test_support::three_stages(None)
    )
}

impl TestServer {
    /// Makes a token through the API (as admin) and returns it.
    async fn token(&self, user: &str, role: &str, project: Option<&str>) -> String {
        let body = json!({"user": user, "role": role, "project": project});
        let (status, made) = self.call(Method::POST, "/api/v1/tokens", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        made["token"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn the_api_needs_a_valid_token_but_health_and_webhooks_do_not() {
    let server = TestServer::new().await;
    for token in [None, Some("dray_not-a-real-token")] {
        let (status, body) = server
            .call_as(token, Method::GET, "/api/v1/projects", None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body["error"]["code"], "unauthenticated");
        assert_eq!(
            body["error"]["hint"],
            "pass --token or set DRAY_TOKEN (create one with `dray token create`)"
        );
    }
    let (status, _) = server.call_as(None, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server
        .call_as(None, Method::POST, "/webhooks/demo/github", Some(json!({})))
        .await;
    // The receiver answers by its own rules (here: no such receiver, so no secret matches).
    assert_eq!(
        body["error"]["message"], "the webhook request is not authenticated",
        "{status}: {body}"
    );
    let (status, _) = server.call(Method::GET, "/api/v1/projects", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_role_for_dev_and_staging_may_not_promote_to_prod() {
    let server = TestServer::new().await;
    let (status, body) = server.apply(&rbac()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ann = server.token("ann", "deployer", Some("demo")).await;
    let promote = |stage: &str| format!("/api/v1/projects/demo/stages/{stage}/promote");
    let body = || Some(json!({"alias": "frosty-otter"}));

    let (status, answer) = server
        .call_as(Some(&ann), Method::POST, &promote("prod"), body())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(answer["error"]["code"], "forbidden");
    assert_eq!(
        answer["error"]["message"],
        "user `ann` may not promote stages/prod in project `demo`"
    );
    assert!(
        answer["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("dray get rolebindings -p demo"),
        "{answer}"
    );
    for stage in ["dev", "staging"] {
        let (status, answer) = server
            .call_as(Some(&ann), Method::POST, &promote(stage), body())
            .await;
        // Allowed: what stops it is the missing Freight.
        assert_eq!(status, StatusCode::NOT_FOUND, "{stage}: {answer}");
    }
    let (status, answer) = server
        .call_as(
            Some(&ann),
            Method::POST,
            &promote("dev"),
            Some(json!({"alias": "frosty-otter", "overrideWindow": "outage"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "user `ann` may not override stages/dev in project `demo`"
    );

    // The binding made with the token, and the built-in roles, are visible.
    let (_, bindings) = server
        .call(Method::GET, "/api/v1/projects/demo/rolebindings", None)
        .await;
    assert_eq!(
        bindings[0]["metadata"]["name"], "deployer-ann",
        "{bindings}"
    );
    assert_eq!(
        bindings[0]["subjects"],
        json!([{"kind": "User", "name": "ann"}])
    );
    let (_, roles) = server
        .call_as(Some(&ann), Method::GET, "/api/v1/projects/demo/roles", None)
        .await;
    let names: Vec<_> = roles
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["dray-admin", "dray-promoter", "dray-viewer", "deployer"]
    );
    // Ann sees only the project she is bound in.
    let (_, projects) = server
        .call_as(Some(&ann), Method::GET, "/api/v1/projects", None)
        .await;
    assert_eq!(projects.as_array().unwrap().len(), 1, "{projects}");
    let (status, _) = server
        .call_as(
            Some(&ann),
            Method::GET,
            "/api/v1/projects/other/stages",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A Role stays while a binding gives it.
    let (status, answer) = server
        .call(Method::DELETE, "/api/v1/projects/demo/roles/deployer", None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rolebinding `deployer-ann`"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_viewer_reads_but_may_not_approve_apply_or_make_tokens() {
    let server = TestServer::new().await;
    server.apply(&rbac()).await;
    let vic = server.token("vic", "dray-viewer", None).await;
    let (status, stages) = server
        .call_as(
            Some(&vic),
            Method::GET,
            "/api/v1/projects/demo/stages",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stages}");
    assert_eq!(stages.as_array().unwrap().len(), 3);

    let approve = json!({"alias": "frosty-otter", "reason": "hotfix"});
    let (status, answer) = server
        .call_as(
            Some(&vic),
            Method::POST,
            "/api/v1/projects/demo/stages/prod/approve",
            Some(approve),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "user `vic` may not approve stages/prod in project `demo`"
    );

    let apply = json!({"files": [{"path": "test.yaml", "content": rbac()}]});
    let (status, answer) = server
        .call_as(Some(&vic), Method::POST, "/api/v1/apply", Some(apply))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "user `vic` may not update projects/demo"
    );

    let token = json!({"user": "vic", "role": "dray-admin"});
    let (status, answer) = server
        .call_as(Some(&vic), Method::POST, "/api/v1/tokens", Some(token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "user `vic` may not create tokens"
    );
}

#[tokio::test]
async fn tokens_are_kept_only_as_hashes() {
    let server = TestServer::new().await;
    server.apply(&rbac()).await;
    let token = server.token("ann", "dray-promoter", Some("demo")).await;
    let (status, _) = server
        .call_as(
            Some(&token),
            Method::GET,
            "/api/v1/projects/demo/stages",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(server.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(crate::store::DATABASE_FILE) {
            stored.extend(std::fs::read(&path).unwrap());
        }
    }
    let contains = |needle: &str| stored.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains(&tokens::hash(&token)), "the hash is stored");
    assert!(!contains(&token), "the token itself is not");
    assert!(!contains(&server.admin), "nor the bootstrap token");
}

#[tokio::test]
async fn without_auth_everyone_is_anonymous_with_every_right() {
    let server = TestServer::with_auth(AuthMode::None).await;
    let (status, body) = server.apply(PIPELINE).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .call_as(None, Method::GET, "/api/v1/projects/demo/stages", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .call_as(
            None,
            Method::POST,
            "/api/v1/projects/demo/stages/dev/promote",
            Some(json!({"alias": "frosty-otter"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn roles_are_validated_with_hints() {
    let server = TestServer::new().await;
    let rbac = rbac();
    let bad = format!(
        "{rbac}---
apiVersion: dray.dev/v1alpha1
kind: Role
metadata: {{name: typo, namespace: demo}}
rules:
  - {{resources: [stagse], verbs: [promot]}}
---
apiVersion: dray.dev/v1alpha1
kind: RoleBinding
metadata: {{name: typo, namespace: demo}}
roleRef: {{name: dray-viewr}}
subjects: [{{kind: User, name: ann}}]
"
    );
    let (status, body) = server.apply(&bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let details = body["error"]["details"].as_array().unwrap();
    let found: Vec<(&str, &str)> = details
        .iter()
        .map(|d| (d["message"].as_str().unwrap(), d["hint"].as_str().unwrap()))
        .collect();
    assert!(
        found.contains(&("unknown verb `promot`", "did you mean `promote`?")),
        "{found:#?}"
    );
    assert!(
        found.contains(&("unknown resource `stagse`", "did you mean `stages`?")),
        "{found:#?}"
    );
    assert!(
        found.contains(&(
            "role `dray-viewr` is neither built in nor a Role in project `demo`",
            "did you mean `dray-viewer`?"
        )),
        "{found:#?}"
    );
}

#[test]
fn webhook_secrets_in_paths_are_not_logged() {
    assert_eq!(
        super::loggable_path("/webhooks/demo/ci/s3cr3t"),
        "/webhooks/demo/ci/<secret>"
    );
    assert_eq!(
        super::loggable_path("/webhooks/demo/github"),
        "/webhooks/demo/github"
    );
    assert_eq!(super::loggable_path("/api/v1/projects"), "/api/v1/projects");
}

/// Every route answers a missing resource alike: ``<Kind> `name` does not exist in project
/// `P` ``, "did you mean" the closest name, and a hint with the command that lists them.
#[tokio::test]
async fn missing_resources_are_answered_in_one_shape_with_did_you_mean() {
    let server = TestServer::new().await;
    let (status, body) = server.apply(PIPELINE).await;
    assert!(status.is_success(), "{body}");
    let cases = [
        (
            Method::GET,
            "/api/v1/projects/demo/stages/dve",
            None,
            "Stage `dve` does not exist in project `demo`; did you mean `dev`?",
            "run `dray get stages -p demo` to list them",
        ),
        (
            Method::GET,
            "/api/v1/projects/demo/warehouses/ap",
            None,
            "Warehouse `ap` does not exist in project `demo`; did you mean `app`?",
            "run `dray get warehouses -p demo` to list them",
        ),
        (
            Method::POST,
            "/api/v1/projects/demo/stages/deb/promote",
            Some(json!({"alias": "x"})),
            "Stage `deb` does not exist in project `demo`; did you mean `dev`?",
            "run `dray get stages -p demo` to list them",
        ),
        (
            Method::POST,
            "/api/v1/projects/demo/stages/dev/promote",
            Some(json!({"alias": "nope"})),
            "Freight `nope` does not exist in project `demo` (by id, id prefix or alias)",
            "run `dray get freight -p demo` to list them",
        ),
    ];
    let cases = cases.into_iter().chain([
        (
            Method::POST,
            "/api/v1/projects/dmeo/stages/dev/promote",
            Some(json!({"alias": "x"})),
            "Project `dmeo` does not exist; did you mean `demo`?",
            "run `dray get projects` to list them",
        ),
        (
            Method::GET,
            "/api/v1/projects/dmeo/stages",
            None,
            "Project `dmeo` does not exist; did you mean `demo`?",
            "run `dray get projects` to list them",
        ),
    ]);
    for (method, uri, request, message, hint) in cases {
        let (status, body) = server.call(method, uri, request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {body}");
        assert_eq!(body["error"]["message"], message, "{uri}");
        assert_eq!(body["error"]["hint"], hint, "{uri}");
        assert!(!message.contains("; hint:"));
    }
}

/// A refresh marks the Warehouse with an annotation of Dray's own; applying the same YAML
/// again is still `unchanged`.
#[tokio::test]
async fn a_reapply_after_a_refresh_is_unchanged() {
    let server = TestServer::new().await;
    let (status, body) = server.apply(PIPELINE).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .call(
            Method::POST,
            "/api/v1/projects/demo/warehouses/app/refresh",
            Some(json!({})),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let (_, warehouse) = server
        .call(Method::GET, "/api/v1/projects/demo/warehouses/app", None)
        .await;
    assert!(
        warehouse["metadata"]["annotations"]["dray.dev/refresh"].is_string(),
        "the refresh left no mark to ignore: {warehouse}"
    );
    let (_, body) = server.apply(PIPELINE).await;
    let actions: Vec<_> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].clone(), r["action"].clone()))
        .collect();
    assert!(
        actions.iter().all(|(_, action)| action == "unchanged"),
        "{actions:?}"
    );
}

/// A refused `dray verify` says what is wrong in the message and what to do in the hint,
/// not both on one line.
#[tokio::test]
async fn a_refused_verify_puts_its_hint_in_the_hint() {
    let server = TestServer::new().await;
    let (status, body) = server.apply(PIPELINE).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let verify = "/api/v1/projects/demo/stages/dev/verify";
    let (status, body) = server.call(Method::POST, verify, Some(json!({}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Stage `dev` holds no Freight yet, so there is nothing to verify"
    );
    assert_eq!(
        body["error"]["hint"],
        "promote Freight into it first: `dray promote -p demo --stage dev --alias ALIAS`"
    );
}
