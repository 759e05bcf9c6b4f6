//! The webhook through its router, with reviews shaped as the API server sends them: each
//! rule denied for a user and allowed for Dray's ServiceAccount, what is always allowed,
//! and malformed bodies.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::server::apply::{ApplyFile, ApplyRequest, apply};
use crate::server::test_support;
use crate::store::{SqliteStore, Store};

use super::admission_router;

const DRAY: &str = "system:serviceaccount:dray:dray";

struct Hook {
    store: Arc<SqliteStore>,
    _dir: tempfile::TempDir,
}

/// `three_stages_dev_promotable` and Freight `f1` (verified nowhere).
async fn hook() -> Hook {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let key = crate::secrets::SecretKey::load(dir.path()).unwrap();
    let request = ApplyRequest {
        files: vec![ApplyFile {
            path: "stages.yaml".into(),
            content: test_support::three_stages_dev_promotable(),
        }],
        default_project: None,
    };
    apply(store.as_ref(), &key, request, None).await.unwrap();
    test_support::store_first_freight(&store).await;
    Hook { store, _dir: dir }
}

impl Hook {
    async fn post(&self, body: Vec<u8>) -> (StatusCode, Value) {
        let router = admission_router(self.store.clone() as Arc<dyn Store>, DRAY.to_owned());
        let request = Request::post("/admission/validate")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// The `response` of the review of `request`, which must be answered with 200.
    async fn judge(&self, request: Value) -> Value {
        let uid = request["uid"].clone();
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let (status, body) = self.post(review.to_string().into_bytes()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(body["kind"], "AdmissionReview");
        assert_eq!(body["response"]["uid"], uid, "the same uid");
        body["response"].clone()
    }
}

/// A request as the API server sends it for `operation` on `resource` by `user`.
fn request(operation: &str, kind: &str, resource: &str, user: &str, object: Value) -> Value {
    json!({
        "uid": format!("705ab4f5-6393-11e8-b7cc-{}", user.len()),
        "kind": {"group": "dray.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "dray.dev", "version": "v1alpha1", "resource": resource},
        "requestKind": {"group": "dray.dev", "version": "v1alpha1", "kind": kind},
        "requestResource": {"group": "dray.dev", "version": "v1alpha1", "resource": resource},
        "name": object["metadata"]["name"],
        "namespace": "demo",
        "operation": operation,
        "userInfo": {"username": user, "uid": "014fbff9a07c", "groups": ["system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })
}

fn promotion(stage: &str, spec_extra: Value) -> Value {
    let mut spec = json!({"stage": stage, "freight": "f1"});
    spec.as_object_mut()
        .unwrap()
        .extend(spec_extra.as_object().unwrap().clone());
    json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
           "metadata": {"name": "by-hand", "namespace": "demo"}, "spec": spec})
}

fn denial(response: &Value) -> (u64, String, String) {
    assert_eq!(response["allowed"], false, "{response}");
    (
        response["status"]["code"].as_u64().unwrap(),
        response["status"]["reason"].as_str().unwrap().to_owned(),
        response["status"]["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_user_creating_a_promotion_is_sent_to_the_promote_path_and_dray_is_not() {
    let hook = hook().await;
    let by_user = hook
        .judge(request(
            "CREATE",
            "Promotion",
            "promotions",
            "ann",
            promotion("prod", json!({})),
        ))
        .await;
    let (code, reason, message) = denial(&by_user);
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert!(message.starts_with("Promotion `by-hand` cannot be created through the Kubernetes API: a Promotion comes into being only through Dray's promote path"), "{message}");
    assert!(
        message.contains("Freight `first` may not be promoted to `prod`"),
        "the gates' reasons: {message}"
    );
    assert!(
        message.contains("hint: run `dray promote --stage prod --freight f1 -p demo`"),
        "{message}"
    );

    let mut dry = request(
        "CREATE",
        "Promotion",
        "promotions",
        "ann",
        promotion("prod", json!({})),
    );
    dry["dryRun"] = json!(true);
    assert_eq!(
        denial(&hook.judge(dry).await).2,
        message,
        "a dry run is answered the same"
    );

    let by_dray = hook
        .judge(request(
            "CREATE",
            "Promotion",
            "promotions",
            DRAY,
            promotion("prod", json!({})),
        ))
        .await;
    assert_eq!(by_dray, json!({"uid": by_dray["uid"], "allowed": true}));
}

#[tokio::test]
async fn a_promotion_with_its_own_steps_gets_the_doors_refusal() {
    let hook = hook().await;
    let steps = json!({"steps": [{"uses": "git-push", "config": {"path": "."}}]});
    let response = hook
        .judge(request(
            "CREATE",
            "Promotion",
            "promotions",
            "ann",
            promotion("dev", steps),
        ))
        .await;
    let (code, reason, message) = denial(&response);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "Promotion `by-hand` sets `spec.steps`: a Promotion's steps and vars come from its Stage's promotionTemplate, never from the request; hint: leave out spec.steps, spec.vars and dray.dev/ keys, or use `dray promote --stage STAGE --alias ALIAS`"
    );
}

#[tokio::test]
async fn status_is_written_by_drays_service_account_only() {
    let hook = hook().await;
    let stage = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                       "metadata": {"name": "prod", "namespace": "demo"}, "spec": {},
                       "status": {"currentFreight": {"name": "f1"}}});
    for user in ["ann", "system:serviceaccount:demo:ci"] {
        let mut write = request("UPDATE", "Stage", "stages", user, stage.clone());
        write["subResource"] = json!("status");
        write["oldObject"] = stage.clone();
        let (code, reason, message) = denial(&hook.judge(write).await);
        assert_eq!((code, reason.as_str()), (405, "MethodNotAllowed"));
        assert!(
            message.starts_with(
                "the status of Stage demo/prod is written by Dray's controllers only; hint:"
            ),
            "{message}"
        );
    }
    let mut by_dray = request("UPDATE", "Stage", "stages", DRAY, stage.clone());
    by_dray["subResource"] = json!("status");
    assert_eq!(hook.judge(by_dray).await["allowed"], true);
}

#[tokio::test]
async fn a_promotions_spec_never_changes_but_its_labels_may() {
    let hook = hook().await;
    let old = promotion("dev", json!({}));
    let mut changed = old.clone();
    changed["spec"]["freight"] = json!("f2");
    let mut update = request("UPDATE", "Promotion", "promotions", "ann", changed.clone());
    update["oldObject"] = old.clone();
    let (code, _, message) = denial(&hook.judge(update).await);
    assert_eq!(code, 405);
    assert!(message.starts_with("Promotion `by-hand` cannot be changed once it is requested; hint: to stop it: `dray abort by-hand`"), "{message}");

    let mut labelled = old.clone();
    labelled["metadata"]["labels"] = json!({"team": "payments"});
    let mut update = request("UPDATE", "Promotion", "promotions", "ann", labelled);
    update["oldObject"] = old.clone();
    assert_eq!(hook.judge(update).await["allowed"], true);

    let mut by_dray = request("UPDATE", "Promotion", "promotions", DRAY, changed);
    by_dray["oldObject"] = old;
    assert_eq!(hook.judge(by_dray).await["allowed"], true);
}

#[tokio::test]
async fn freight_is_never_written_and_a_running_promotion_never_deleted_by_a_user() {
    let hook = hook().await;
    let freight = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                         "metadata": {"name": "forged", "namespace": "demo"},
                         "origin": {"kind": "Warehouse", "name": "app"}});
    for operation in ["CREATE", "UPDATE"] {
        let asked = request(operation, "Freight", "freight", "ann", freight.clone());
        let (code, _, message) = denial(&hook.judge(asked.clone()).await);
        assert_eq!(code, 405, "{operation}: {message}");
        assert!(message.contains("Freight `forged`"), "{message}");
        let mut by_dray = asked;
        by_dray["userInfo"]["username"] = json!(DRAY);
        assert_eq!(
            hook.judge(by_dray).await["allowed"],
            true,
            "Dray mints Freight"
        );
    }
    let mut running = promotion("dev", json!({}));
    running["status"] = json!({"phase": "Running"});
    let mut delete = request("DELETE", "Promotion", "promotions", "ann", Value::Null);
    delete["name"] = json!("by-hand");
    delete["oldObject"] = running.clone();
    let (code, _, message) = denial(&hook.judge(delete.clone()).await);
    assert_eq!(code, 409, "{message}");
    assert!(message.contains("by-hand"), "{message}");
    running["status"] = json!({"phase": "Succeeded"});
    delete["oldObject"] = running;
    assert_eq!(
        hook.judge(delete).await["allowed"],
        true,
        "an ended Promotion may be deleted"
    );
}

#[tokio::test]
async fn everything_else_is_allowed() {
    let hook = hook().await;
    let stage = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                       "metadata": {"name": "qa", "namespace": "demo"}, "spec": {}});
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let response = hook
            .judge(request(operation, "Stage", "stages", "ann", stage.clone()))
            .await;
        assert_eq!(response["allowed"], true, "{operation}: {response}");
        assert!(response.get("status").is_none(), "{response}");
    }
    let mut pod = request(
        "CREATE",
        "Pod",
        "pods",
        "ann",
        json!({"metadata": {"name": "p"}}),
    );
    pod["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    pod["resource"] = json!({"group": "", "version": "v1", "resource": "pods"});
    assert_eq!(hook.judge(pod).await["allowed"], true);
}

#[tokio::test]
async fn a_malformed_review_is_a_400_saying_what_is_wrong() {
    let hook = hook().await;
    let cases: [(Vec<u8>, &str); 5] = [
        (b"[1, 2]".to_vec(), "the body is not an AdmissionReview"),
        (b"{not json".to_vec(), "the body is not an AdmissionReview"),
        (json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string().into_bytes(),
         "has no `request`"),
        (json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}).to_string().into_bytes(),
         "not an `admission.k8s.io/v1` `AdmissionReview`"),
        (json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}).to_string().into_bytes(),
         "the AdmissionReview's `request` is malformed: missing field `kind`"),
    ];
    for (body, expected) in cases {
        let (status, answer) = hook.post(body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
        assert!(answer["error"]["hint"].is_string(), "{answer}");
    }
}

#[tokio::test]
async fn freight_a_stage_holds_is_not_deleted_through_the_kubernetes_api() {
    let hook = hook().await;
    let freight = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                         "metadata": {"name": "f1", "namespace": "demo"}});
    let mut delete = request("DELETE", "Freight", "freight", "ann", Value::Null);
    delete["name"] = json!("f1");
    delete["oldObject"] = freight;
    assert_eq!(
        hook.judge(delete.clone()).await["allowed"],
        true,
        "Freight no one holds may be deleted"
    );
    let key = crate::api::ObjectKey::namespaced(crate::api::Kind::Stage, "demo", "dev");
    hook.store
        .update_status(&key, json!({"currentFreight": {"name": "f1"}}), None)
        .await
        .unwrap();
    let (code, reason, message) = denial(&hook.judge(delete.clone()).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        message,
        "Freight `first` is current in Stage `dev`; hint: promote other Freight to Stage `dev` first; then delete it again"
    );
    delete["userInfo"]["username"] = json!(DRAY);
    assert_eq!(hook.judge(delete).await["allowed"], true, "Dray itself may");
}
