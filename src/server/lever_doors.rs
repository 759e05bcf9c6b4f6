//! The levers' doors: reject, unreject, freeze and unfreeze, each tried as a viewer (refused,
//! with a reason naming the verb, and nothing written) and as a promoter and the admin; and
//! what each lever does to the promote route and to a Promotion document — refused with
//! `rejected by …` / `frozen by …`, passed by `override` on the record, and let through
//! again once lifted.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey};
use crate::store::Store;

use super::auth::AuthMode;
use super::test_support::{self, Fresh};

struct World {
    fresh: Fresh,
    viewer: String,
    promoter: String,
}

impl World {
    async fn new() -> World {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let files = json!({"files": [{"path": "p.yaml",
            "content": test_support::three_stages_dev_promotable()}]});
        let admin = fresh.admin.clone();
        let (status, body) = test_support::call(
            &fresh.state,
            Some(&admin),
            Method::POST,
            "/api/v1/apply",
            Some(files),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        test_support::store_first_freight(&fresh.store).await;
        let mut tokens = Vec::new();
        for (user, role) in [("vic", "dray-viewer"), ("pat", "dray-promoter")] {
            let body = json!({"user": user, "role": role, "project": "demo"});
            let (status, made) = test_support::call(
                &fresh.state,
                Some(&admin),
                Method::POST,
                "/api/v1/tokens",
                Some(body),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{made}");
            tokens.push(made["token"].as_str().unwrap().to_owned());
        }
        World {
            fresh,
            promoter: tokens.pop().unwrap(),
            viewer: tokens.pop().unwrap(),
        }
    }

    async fn as_(&self, who: &str, uri: &str, body: Value) -> (StatusCode, Value) {
        let token = match who {
            "vic" => &self.viewer,
            "pat" => &self.promoter,
            _ => &self.fresh.admin,
        };
        test_support::call(
            &self.fresh.state,
            Some(token),
            Method::POST,
            uri,
            Some(body),
        )
        .await
    }

    async fn status_of(&self, key: ObjectKey) -> Value {
        let stored = self.fresh.store.get(&key).await.unwrap().unwrap();
        stored.object.get("status").cloned().unwrap_or(Value::Null)
    }

    async fn promotions(&self) -> usize {
        let stored = self.fresh.store.list(Kind::Promotion, Some("demo")).await;
        stored.unwrap().len()
    }
}

const REJECT: &str = "/api/v1/projects/demo/freight/first/reject";
const UNREJECT: &str = "/api/v1/projects/demo/freight/first/unreject";
const FREEZE: &str = "/api/v1/projects/demo/freeze";
const UNFREEZE: &str = "/api/v1/projects/demo/unfreeze";
const PROMOTE: &str = "/api/v1/projects/demo/stages/dev/promote";
const PROMOTIONS: &str = "/api/v1/projects/demo/promotions";

fn freight_key() -> ObjectKey {
    ObjectKey::namespaced(Kind::Freight, "demo", "f1")
}

fn stage_key() -> ObjectKey {
    ObjectKey::namespaced(Kind::Stage, "demo", "dev")
}

fn details(body: &Value) -> String {
    body["error"]["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_viewer_is_refused_every_lever_with_the_verb_named_and_nothing_is_written() {
    let world = World::new().await;
    let tries = [
        (REJECT, json!({"reason": "no"}), "reject"),
        (REJECT, json!({"reason": "no", "stage": "dev"}), "reject"),
        (UNREJECT, json!({}), "reject"),
        (FREEZE, json!({"reason": "no"}), "freeze"),
        (FREEZE, json!({"reason": "no", "stage": "dev"}), "freeze"),
        (UNFREEZE, json!({"stage": "dev"}), "freeze"),
        (UNFREEZE, json!({}), "freeze"),
    ];
    for (uri, body, verb) in tries {
        let (status, answer) = world.as_("vic", uri, body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri} {body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`vic`") && message.contains(verb),
            "{uri}: {message}"
        );
        assert!(
            answer["error"]["hint"]
                .as_str()
                .is_some_and(|h| !h.is_empty()),
            "{answer}"
        );
    }
    assert_eq!(world.status_of(freight_key()).await, Value::Null);
    assert!(world.status_of(stage_key()).await.get("freeze").is_none());
    let project = world
        .status_of(ObjectKey::cluster(Kind::Project, "demo"))
        .await;
    assert!(project.get("freeze").is_none(), "{project}");
    // The positive control: the promoter may pull each lever.
    for (uri, body) in [
        (REJECT, json!({"reason": "ok"})),
        (FREEZE, json!({"reason": "ok"})),
    ] {
        let (status, answer) = world.as_("pat", uri, body).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {answer}");
    }
}

#[tokio::test]
async fn rejected_freight_is_refused_on_every_promote_route_until_unrejected() {
    let world = World::new().await;
    let (status, body) = world.as_("admin", REJECT, json!({"stage": "dev"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no reason: {body}");
    let (status, body) = world
        .as_(
            "pat",
            REJECT,
            json!({"stage": "dev", "reason": "leaks memory"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["rejectedFor"]["dev"]["by"], "pat", "{body}");

    let (status, body) = world.as_("pat", PROMOTE, json!({"freight": "first"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let said = details(&body);
    assert!(said.contains("rejected by pat: leaks memory"), "{said}");
    assert!(
        said.contains("dray freight unreject first -p demo --stage dev"),
        "{said}"
    );
    let document = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
        "metadata": {"name": "sneak", "namespace": "demo"}, "spec": {"stage": "dev", "freight": "f1"}});
    let (status, body) = world.as_("admin", PROMOTIONS, document).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        details(&body).contains("rejected by pat: leaks memory"),
        "{body}"
    );
    assert_eq!(world.promotions().await, 0);

    let (status, body) = world.as_("pat", UNREJECT, json!({"stage": "dev"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lifted"], true, "{body}");
    let (status, body) = world.as_("pat", PROMOTE, json!({"freight": "first"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_freeze_refuses_promotion_and_only_override_passes_it_on_the_record() {
    let world = World::new().await;
    let (status, body) = world
        .as_(
            "admin",
            FREEZE,
            json!({"stage": "dev", "reason": "incident 42", "until": "tomorrow"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = world
        .as_(
            "pat",
            FREEZE,
            json!({"stage": "dev", "reason": "incident 42"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["freeze"]["by"], "pat", "{body}");

    let (status, body) = world.as_("pat", PROMOTE, json!({"freight": "first"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        details(&body).contains("frozen by pat: incident 42"),
        "{body}"
    );
    let through = json!({"freight": "first", "overrideWindow": "hotfix"});
    let (status, body) = world.as_("pat", PROMOTE, through.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no override: {body}");
    assert_eq!(world.promotions().await, 0);

    let (status, made) = world.as_("admin", PROMOTE, through).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["metadata"]["annotations"]["dray.dev/freeze-override"],
        "frozen by pat: incident 42 (Stage `dev`); overridden by admin: hotfix"
    );

    // A project-wide freeze gates too; lifting both lets the promoter through.
    let (status, body) = world
        .as_("admin", FREEZE, json!({"reason": "release week"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = world.as_("pat", UNFREEZE, json!({"stage": "dev"})).await;
    assert_eq!(
        (status, &body["lifted"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );
    let (status, body) = world.as_("pat", PROMOTE, json!({"freight": "first"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        details(&body).contains("frozen by admin: release week (project `demo`)"),
        "{body}"
    );
    let (status, body) = world.as_("pat", UNFREEZE, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = world.as_("pat", PROMOTE, json!({"freight": "first"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
