//! The one door, tried from every route a client has: the generic resource routes, the
//! status routes, `apply` and the promote route, as a promoter (`dray-promoter`, no
//! `override`) and as the admin. Each test checks what was refused *and* that nothing was
//! stored, with a positive control where a refusal could pass vacuously.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey};
use crate::store::Store;

use super::auth::AuthMode;
use super::test_support::{self, Fresh};

/// `three_stages` plus a render-like template on `dev`, Freight `f1` (not verified
/// anywhere) and a promoter `pat` (dray-promoter in `demo`, no override).
struct World {
    fresh: Fresh,
    promoter: String,
}

impl World {
    async fn new(extra: &str) -> Self {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let stages = test_support::three_stages_dev_promotable();
        let world = World {
            fresh,
            promoter: String::new(),
        };
        let (status, body) = world
            .admin(
                Method::POST,
                "/api/v1/apply",
                Some(apply_body(&(stages + extra))),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        test_support::store_first_freight(&world.fresh.store).await;
        let body = json!({"user": "pat", "role": "dray-promoter", "project": "demo"});
        let (status, made) = world
            .admin(Method::POST, "/api/v1/tokens", Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        World {
            promoter: made["token"].as_str().unwrap().to_owned(),
            ..world
        }
    }

    async fn admin(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        test_support::call(
            &self.fresh.state,
            Some(&self.fresh.admin),
            method,
            uri,
            body,
        )
        .await
    }

    async fn promoter(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        test_support::call(&self.fresh.state, Some(&self.promoter), method, uri, body).await
    }

    async fn promotions(&self) -> Vec<Value> {
        let stored = self.fresh.store.list(Kind::Promotion, Some("demo")).await;
        stored.unwrap().into_iter().map(|p| p.object).collect()
    }
}

fn apply_body(yaml: &str) -> Value {
    json!({"files": [{"path": "door.yaml", "content": yaml}]})
}

fn promotion(name: &str, stage: &str, extra: Value) -> Value {
    let mut object = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"stage": stage, "freight": "f1"}});
    if let (Some(spec), Some(extra)) = (object["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    object
}

/// A Deny window over `dev` that started an hour ago and lasts two hours.
fn freeze() -> String {
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let dtstart = start.strftime("%Y%m%dT%H%M%SZ");
    format!(
        "---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: demo, namespace: demo}}
spec:
  promotionWindows:
    - name: freeze
      kind: Deny
      rrule: \"DTSTART:{dtstart}\\nRRULE:FREQ=DAILY;COUNT=1\"
      duration: 2h
      stageSelector: {{name: dev}}
"
    )
}

const PROMOTIONS: &str = "/api/v1/projects/demo/promotions";

#[tokio::test]
async fn a_promotion_posted_with_its_own_steps_is_refused_and_nothing_runs() {
    let world = World::new("").await;
    let steps = json!({"steps": [
        {"uses": "git-clone", "config": {"repoURL": "http://127.0.0.1:1/x.git", "checkout": [{"branch": "main", "path": "./src"}]}},
        {"uses": "git-push", "config": {"path": "./src", "targetBranch": "stage/prod"}}]});
    for who in ["promoter", "admin"] {
        let body = Some(promotion("sneaky", "dev", steps.clone()));
        let (status, body) = match who {
            "promoter" => world.promoter(Method::POST, PROMOTIONS, body).await,
            _ => world.admin(Method::POST, PROMOTIONS, body).await,
        };
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{who}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("spec.steps"), "{who}: {message}");
        assert!(
            body["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("dray promote"),
            "{who}: {body}"
        );
    }
    assert_eq!(world.promotions().await, Vec::<Value>::new());
}

#[tokio::test]
async fn a_promotion_document_goes_through_the_gates_and_gets_the_stages_steps_and_actor() {
    let world = World::new("").await;
    // Not verified in staging: refused with the gate's reason, nothing stored.
    let (status, body) = world
        .promoter(
            Method::POST,
            PROMOTIONS,
            Some(promotion("to-prod", "prod", json!({}))),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "refused", "{body}");
    assert!(world.promotions().await.is_empty());

    // Into dev (direct): made, with dev's template and the caller as actor.
    let (status, made) = world
        .promoter(
            Method::POST,
            PROMOTIONS,
            Some(promotion("to-dev", "dev", json!({}))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["metadata"]["name"], "to-dev");
    assert_eq!(made["metadata"]["annotations"]["dray.dev/actor"], "pat");
    assert_eq!(made["spec"]["steps"][0]["uses"], "http", "{made}");
    assert_eq!(world.promotions().await.len(), 1);
}

#[tokio::test]
async fn a_closed_window_holds_on_every_route_and_only_override_passes_it() {
    let world = World::new(&freeze()).await;
    let (status, body) = world
        .promoter(
            Method::POST,
            PROMOTIONS,
            Some(promotion("frozen", "dev", json!({}))),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["details"][0]
            .as_str()
            .unwrap()
            .contains("freeze"),
        "{body}"
    );

    // Said once, with what lets it through.
    let promote = "/api/v1/projects/demo/stages/dev/promote";
    let (status, body) = world
        .promoter(Method::POST, promote, Some(json!({"freight": "f1"})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"]["message"], "Freight `first` may not be promoted to `dev`",
        "{body}"
    );
    let details = body["error"]["details"].as_array().unwrap();
    assert_eq!(details.len(), 1, "{body}");
    let reason = details[0].as_str().unwrap();
    assert!(
        reason.starts_with("frozen by window `freeze` until ")
            && reason.ends_with(
                "— wait until it opens, or ask someone with `override` on stages/dev to run \
                 `dray promote -p demo --stage dev --alias first` with `--override-window REASON`"
            ),
        "{reason}"
    );

    let through = json!({"freight": "f1", "overrideWindow": "hotfix"});
    let (status, body) = world
        .promoter(Method::POST, promote, Some(through.clone()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["error"]["message"],
        "user `pat` may not override stages/dev in project `demo`"
    );
    assert!(world.promotions().await.is_empty());

    // The admin may override, and the override is on the record with who did it.
    let (status, made) = world.admin(Method::POST, promote, Some(through)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let recorded = &made["metadata"]["annotations"]["dray.dev/window-override"];
    assert_eq!(recorded, "admin: hotfix (window `freeze`)");
}

#[tokio::test]
async fn a_promotion_is_never_changed_and_deleted_only_once_ended() {
    let world = World::new("").await;
    let (status, made) = world
        .promoter(
            Method::POST,
            PROMOTIONS,
            Some(promotion("p1", "dev", json!({}))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let uri = format!("{PROMOTIONS}/p1");
    let mut changed = made.clone();
    changed["metadata"]["annotations"]["dray.dev/actor"] = json!("someone-else");
    let (status, body) = world.admin(Method::PUT, &uri, Some(changed)).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("dray abort p1"),
        "{body}"
    );

    let (status, body) = world.admin(Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let key = ObjectKey::namespaced(Kind::Promotion, "demo", "p1");
    let kept = world.fresh.store.get(&key).await.unwrap().unwrap();
    assert_eq!(
        kept.object["metadata"]["annotations"]["dray.dev/actor"],
        "pat"
    );

    let (status, body) = world
        .promoter(Method::POST, &format!("{uri}/abort"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = world.admin(Method::DELETE, &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn freight_is_never_written_by_a_client_nor_any_status() {
    let world = World::new("").await;
    let freight = "/api/v1/projects/demo/freight";
    let forged = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
        "metadata": {"name": "f2", "namespace": "demo"},
        "alias": "forged", "origin": {"kind": "Warehouse", "name": "app"},
        "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "6.6.6", "digest": "sha256:bb"}],
        "status": {"verifiedIn": {"staging": {}}}});
    let (status, body) = world.admin(Method::POST, freight, Some(forged)).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("dray freight create"),
        "{body}"
    );

    let (_, mut f1) = world
        .admin(Method::GET, &format!("{freight}/f1"), None)
        .await;
    f1["alias"] = json!("renamed");
    let (status, body) = world
        .admin(Method::PUT, &format!("{freight}/f1"), Some(f1))
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");

    for (who, expected) in [
        ("promoter", StatusCode::FORBIDDEN),
        ("admin", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let verified = Some(json!({"status": {"verifiedIn": {"staging": {}}}}));
        let uri = format!("{freight}/f1/status");
        let (status, body) = match who {
            "promoter" => world.promoter(Method::PUT, &uri, verified).await,
            _ => world.admin(Method::PUT, &uri, verified).await,
        };
        assert_eq!(status, expected, "{who}: {body}");
    }
    let key = ObjectKey::namespaced(Kind::Freight, "demo", "f1");
    let stored = world.fresh.store.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.object["alias"], "first");
    assert!(
        stored
            .object
            .pointer("/status/verifiedIn/staging")
            .is_none(),
        "{}",
        stored.object
    );
    // Still not available to prod: the forged verification did not land.
    let (status, _) = world
        .promoter(
            Method::POST,
            PROMOTIONS,
            Some(promotion("to-prod", "prod", json!({}))),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn apply_refuses_promotions_and_freight_and_drops_a_written_status() {
    let world = World::new("").await;
    let documents = "\
apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata: {name: p1, namespace: demo}
spec: {stage: dev, freight: f1}
---
apiVersion: dray.dev/v1alpha1
kind: Freight
metadata: {name: f3, namespace: demo}
alias: applied
origin: {kind: Warehouse, name: app}
images: [{repoURL: 127.0.0.1:5000/demo/app, tag: 1.0.1, digest: 'sha256:cc'}]
";
    let (status, body) = world
        .admin(Method::POST, "/api/v1/apply", Some(apply_body(documents)))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let details = body["error"]["details"].as_array().unwrap();
    assert_eq!(details.len(), 2, "{body}");
    assert_eq!(details[0]["kind"], "Promotion");
    assert_eq!(details[0]["line"], 1);
    assert!(
        details[0]["hint"]
            .as_str()
            .unwrap()
            .contains("dray promote -p demo"),
        "{body}"
    );
    assert_eq!(details[1]["kind"], "Freight");
    assert!(world.promotions().await.is_empty());

    let stage = "\
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
status:
  currentFreight: {name: f1}
";
    let (status, body) = world
        .admin(Method::POST, "/api/v1/apply", Some(apply_body(stage)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let key = ObjectKey::namespaced(Kind::Stage, "demo", "qa");
    let stored = world.fresh.store.get(&key).await.unwrap().unwrap();
    assert!(
        stored.object.pointer("/status/currentFreight").is_none(),
        "{}",
        stored.object
    );
}

#[tokio::test]
async fn no_token_user_may_be_named_like_the_auth_none_actor() {
    let world = World::new("").await;
    let body = json!({"user": "anonymous", "role": "dray-admin"});
    let (status, body) = world
        .admin(Method::POST, "/api/v1/tokens", Some(body))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reserved"),
        "{body}"
    );
}

/// Auto-promotion on for `dev`.
const AUTO_DEV: &str = "---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionPolicies:
    - stageSelector: {name: dev}
      autoPromotionEnabled: true
";

impl World {
    /// Stores Freight `f2` (newer than `f1`), and puts `f2` in `dev` when `in_dev`.
    async fn newer_freight(&self, in_dev: bool) {
        let freight = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": "f2", "namespace": "demo"},
            "alias": "second", "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "1.1.0", "digest": "sha256:bb"}]});
        self.fresh.store.create(freight).await.unwrap();
        if in_dev {
            let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
            let status = json!({"currentFreight": {"name": "f2", "alias": "second"}});
            self.fresh
                .store
                .update_status(&key, status, None)
                .await
                .unwrap();
        }
    }

    async fn hold(&self) -> Value {
        let (_, stage) = self
            .admin(Method::GET, "/api/v1/projects/demo/stages/dev", None)
            .await;
        stage["status"]["hold"].clone()
    }

    /// Promotes `f1` (older than `f2`) into `dev` as the admin; the promotion's name.
    async fn roll_back(&self) -> String {
        let promote = "/api/v1/projects/demo/stages/dev/promote";
        let (status, made) = self
            .admin(Method::POST, promote, Some(json!({"freight": "f1"})))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        made["metadata"]["name"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn a_hold_needs_auto_promotion_and_something_rolled_back_and_goes_with_its_abort() {
    // The first promotion into a Stage rolls nothing back: no hold.
    let world = World::new(AUTO_DEV).await;
    world.newer_freight(false).await;
    world.roll_back().await;
    assert_eq!(world.hold().await, Value::Null, "first promotion held");

    // Older Freight over newer, with auto-promotion on: a hold, gone with its abort.
    let world = World::new(AUTO_DEV).await;
    world.newer_freight(true).await;
    let name = world.roll_back().await;
    assert_eq!(world.hold().await["freight"], "f1");
    let abort = format!("/api/v1/projects/demo/promotions/{name}/abort");
    let (status, body) = world.admin(Method::POST, &abort, None).await;
    assert!(status.is_success(), "{body}");
    assert_eq!(world.hold().await, Value::Null, "the abort left its hold");

    // Lifting a hold that is not there says so.
    let lift = "/api/v1/projects/demo/stages/dev/hold/lift";
    let (status, body) = world.admin(Method::POST, lift, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lifted"], false, "{body}");
    assert_eq!(body["message"], "Stage `dev` had no hold: nothing to lift");
    world.roll_back().await;
    let (_, body) = world.admin(Method::POST, lift, None).await;
    assert_eq!(body["lifted"], true, "{body}");

    // Without auto-promotion there is nothing to hold.
    let world = World::new("").await;
    world.newer_freight(true).await;
    world.roll_back().await;
    assert_eq!(
        world.hold().await,
        Value::Null,
        "held without auto-promotion"
    );
}

#[tokio::test]
async fn a_preview_needs_promote_shows_the_gates_refusals_and_stores_nothing() {
    let world = World::new(&freeze()).await;
    let preview = "/api/v1/projects/demo/stages/dev/preview";

    // A viewer may not preview: it shows what the steps render.
    let body = json!({"user": "vic", "role": "dray-viewer", "project": "demo"});
    let (status, made) = world
        .admin(Method::POST, "/api/v1/tokens", Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let viewer = made["token"].as_str().unwrap();
    let ask = Some(json!({"freight": "f1"}));
    let (status, body) = test_support::call(
        &world.fresh.state,
        Some(viewer),
        Method::POST,
        preview,
        ask.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["error"]["message"],
        "user `vic` may not promote stages/dev in project `demo`"
    );

    // A promoter previews through the closed window: the refusal is shown beside what the
    // steps did (dev's `http` gate reads, so it ran, and failed against a closed port).
    let (status, body) = world.promoter(Method::POST, preview, ask).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refusals = body["refusals"].as_array().unwrap();
    assert_eq!(refusals.len(), 1, "{body}");
    assert!(
        refusals[0]
            .as_str()
            .unwrap()
            .starts_with("frozen by window `freeze`"),
        "{body}"
    );
    assert_eq!(body["steps"][0]["alias"], "gate", "{body}");
    assert!(
        body["failed"].as_str().unwrap().contains("`gate`"),
        "{body}"
    );
    assert_eq!(body["stoppedBefore"], Value::Null, "{body}");
    assert_eq!(body["files"], json!([]), "{body}");

    // Overriding the window in a preview needs `override`, as promoting does.
    let through = json!({"freight": "f1", "overrideWindow": "hotfix"});
    let (status, body) = world.promoter(Method::POST, preview, Some(through)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["error"]["message"],
        "user `pat` may not override stages/dev in project `demo`"
    );

    // Nothing stored, nothing left in the work directory.
    assert!(world.promotions().await.is_empty());
    let previews = world.fresh.dir.path().join("work").join(".previews");
    let left: Vec<_> = std::fs::read_dir(&previews)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
