//! The notifier against a real store, real caches and a real HTTP receiver on
//! 127.0.0.1: signed deliveries, retries, and give-ups on the ProjectConfig's status.
//! Retries wait zero seconds here (the backoff is the notifier's to choose), and each
//! reconcile is called by the test, so nothing sleeps.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::api::{Kind, ObjectKey, ProjectConfig, ProjectConfigStatus};
use crate::runtime::{Cache, Kinds, reflector};
use crate::secrets::{self, SecretKey};
use crate::store::{SqliteStore, Store};

use super::{Backoff, Notifier, NotifyContext, reconcile};

const SECRET: &str = "a-signing-secret-of-32-bytes-ok!";

/// What the receiver saw, and what it answers next (200 once the script is used up).
#[derive(Default)]
struct Receiver {
    seen: Mutex<Vec<(HeaderMap, Vec<u8>)>>,
    answers: Mutex<VecDeque<StatusCode>>,
}

async fn receiver(answers: &[StatusCode]) -> (String, Arc<Receiver>) {
    let state = Arc::new(Receiver {
        answers: Mutex::new(answers.iter().copied().collect()),
        ..Receiver::default()
    });
    let shared = state.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let state = shared.clone();
            async move {
                state.seen.lock().unwrap().push((headers, body.to_vec()));
                state
                    .answers
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(StatusCode::OK)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

struct World {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    cache: Cache,
    context: Arc<NotifyContext>,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn world(notifications: Value, backoff: Backoff) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let key = Arc::new(SecretKey::load(dir.path()).unwrap());
    store
        .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                       "metadata": {"name": "demo"}, "spec": {}}))
        .await
        .unwrap();
    let mut credential = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
        "metadata": {"name": "hook-secret", "namespace": "demo"},
        "spec": {"type": "webhook", "token": SECRET}});
    secrets::seal_credential(&key, &mut credential, None).unwrap();
    store.create(credential).await.unwrap();
    store
        .create(
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
            "metadata": {"name": "demo", "namespace": "demo"},
            "spec": {"notifications": notifications}}),
        )
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
        .await
        .unwrap();
    let notifier = Notifier::new(store.clone(), key, "https://dray.example.com")
        .unwrap()
        .with_backoff(backoff);
    let context = Arc::new(NotifyContext::new(notifier, cache.clone()));
    World {
        _dir: dir,
        store,
        cache,
        context,
        shutdown,
    }
}

impl World {
    /// One reconcile of the project's ProjectConfig, on caches that hold every write.
    async fn reconcile(&self) {
        assert!(
            self.cache.catch_up(Duration::from_secs(10)).await,
            "the caches did not catch up with the store within 10s"
        );
        let config = self.cache.get::<ProjectConfig>("demo", "demo").unwrap();
        reconcile(config, self.context.clone()).await.unwrap();
    }

    async fn status(&self) -> ProjectConfigStatus {
        let key = ObjectKey::namespaced(Kind::ProjectConfig, "demo", "demo");
        let stored = self.store.get(&key).await.unwrap().unwrap();
        serde_json::from_value(stored.object["status"].clone()).unwrap()
    }

    /// A Promotion of `f1` to `prod` that ended `phase` a second after the outbox began.
    async fn promotion_ended(&self, name: &str, phase: &str) {
        let since = self.status().await.outbox.unwrap().since.unwrap().0;
        let finished = since
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap();
        self.store
            .create(
                json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
                "metadata": {"name": name, "namespace": "demo"},
                "spec": {"stage": "prod", "freight": "f1", "steps": []}}),
            )
            .await
            .unwrap();
        let key = ObjectKey::namespaced(Kind::Promotion, "demo", name);
        self.store
            .update_status(
                &key,
                json!({"phase": phase, "message": "the gate said so",
                       "finishedAt": finished.to_string()}),
                None,
            )
            .await
            .unwrap();
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn a_signed_delivery_is_retried_after_a_500_and_recorded_when_it_lands() {
    let (url, receiver) = receiver(&[StatusCode::INTERNAL_SERVER_ERROR]).await;
    let world = world(
        json!([{"name": "ci", "webhook": {"url": url, "secretRef": "hook-secret"},
                "events": ["PromotionSucceeded", "PromotionFailed"]}]),
        Backoff {
            first: Duration::ZERO,
            attempts: 5,
        },
    )
    .await;
    world.reconcile().await; // the outbox starts: nothing from before is sent
    assert!(receiver.seen.lock().unwrap().is_empty());
    world.promotion_ended("p1", "Succeeded").await;
    world.reconcile().await; // taken, attempted: 500
    let status = world.status().await;
    let pending = &status.outbox.as_ref().unwrap().pending;
    assert_eq!(pending.len(), 1, "a failed attempt stays in the outbox");
    assert_eq!(pending[0].attempts, 1);
    assert!(
        pending[0]
            .last_error
            .as_deref()
            .unwrap()
            .ends_with("answered 500"),
        "{:?}",
        pending[0].last_error
    );
    world.reconcile().await; // attempted again: 200
    let status = world.status().await;
    assert!(status.outbox.unwrap().pending.is_empty());
    let record = &status.notifications[0];
    assert_eq!(record.name, "ci");
    assert_eq!(record.failures, 0);
    assert_eq!(record.last_error, None);
    assert!(record.last_delivered_at.is_some());

    let seen = receiver.seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one failed attempt and one that landed");
    let (headers, body) = &seen[1];
    assert_eq!(header(headers, "x-dray-event"), "PromotionSucceeded");
    assert_eq!(
        header(&seen[0].0, "x-dray-delivery"),
        header(headers, "x-dray-delivery"),
        "a retry is the same delivery"
    );
    // The receiver checks the signature as GitHub's receivers do.
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let expected = header(headers, "x-dray-signature-256")
        .strip_prefix("sha256=")
        .unwrap();
    let expected: Vec<u8> = (0..expected.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&expected[i..i + 2], 16).unwrap())
        .collect();
    mac.verify_slice(&expected)
        .expect("the body is signed with the Credential's token");
    let payload: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(payload["event"], "PromotionSucceeded");
    assert_eq!(payload["project"], "demo");
    assert_eq!(payload["stage"], "prod");
    assert_eq!(payload["freight"]["name"], "f1");
    assert_eq!(payload["promotion"], "p1");
    assert_eq!(payload["phase"], "Succeeded");
    assert_eq!(payload["message"], "the gate said so");
    assert_eq!(
        payload["url"],
        "https://dray.example.com/projects/demo/stages/prod"
    );
    assert!(payload["at"].is_string());
}

#[tokio::test]
async fn a_delivery_that_keeps_failing_gives_up_on_the_status_without_the_secret_url() {
    let (url, receiver) = receiver(&[StatusCode::BAD_GATEWAY; 4]).await;
    let slack_url = format!("{url}?token=slack-secret-in-url");
    let world = world(
        json!([
            {"name": "chat", "slack": {"url": slack_url}, "events": ["PromotionFailed"]},
            {"name": "quiet", "webhook": {"url": url}, "events": ["FreightVerified"]},
        ]),
        Backoff {
            first: Duration::ZERO,
            attempts: 2,
        },
    )
    .await;
    world.reconcile().await;
    world.promotion_ended("p2", "Failed").await;
    world.reconcile().await;
    world.reconcile().await;
    let status = world.status().await;
    assert!(status.outbox.unwrap().pending.is_empty(), "it gave up");
    assert_eq!(
        status.notifications.len(),
        1,
        "`quiet` wants no PromotionFailed"
    );
    let record = &status.notifications[0];
    assert_eq!((record.name.as_str(), record.failures), ("chat", 1));
    assert_eq!(record.last_delivered_at, None);
    let error = record.last_error.clone().unwrap();
    assert!(
        error.contains("PromotionFailed for `f1` in `prod`: gave up after 2 attempts")
            && error.ends_with("answered 502"),
        "{error}"
    );
    assert!(
        !error.contains("slack-secret-in-url") && !error.contains("127.0.0.1"),
        "{error}"
    );
    // Slack got its incoming-webhook shape, twice.
    let seen = receiver.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let message: Value = serde_json::from_slice(&seen[0].1).unwrap();
    assert_eq!(
        message["text"],
        ":x: `f1` failed to promote to `prod` in `demo`: the gate said so"
    );
    assert_eq!(message["blocks"][0]["type"], "section");
    assert!(
        seen[0].0.get("x-dray-signature-256").is_none(),
        "no secret, no signature"
    );
}

#[tokio::test]
async fn a_rejection_and_a_project_freeze_are_each_delivered_once_signed() {
    let (url, receiver) = receiver(&[]).await;
    let world = world(
        json!([{"name": "levers", "webhook": {"url": url, "secretRef": "hook-secret"},
                "events": ["FreightRejected", "StageFrozen"]}]),
        Backoff {
            first: Duration::ZERO,
            attempts: 5,
        },
    )
    .await;
    world.reconcile().await; // the outbox starts
    let since = world.status().await.outbox.unwrap().since.unwrap().0;
    let later = |seconds: i64| {
        since
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .unwrap()
            .to_string()
    };
    world
        .store
        .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": "f1", "namespace": "demo"}, "alias": "frosty-otter",
            "origin": {"kind": "Warehouse", "name": "app"}}))
        .await
        .unwrap();
    world
        .store
        .update_status(
            &ObjectKey::namespaced(Kind::Freight, "demo", "f1"),
            json!({"rejectedFor": {"prod": {"by": "ann", "reason": "CVE-2026-1",
                                            "rejectedAt": later(1)}}}),
            None,
        )
        .await
        .unwrap();
    world
        .store
        .update_status(
            &ObjectKey::cluster(Kind::Project, "demo"),
            json!({"freeze": {"by": "bob", "reason": "incident 42", "since": later(2)}}),
            None,
        )
        .await
        .unwrap();
    world.reconcile().await;
    world.reconcile().await; // nothing new: nothing sent again
    // Deliveries go out side by side, so they may land in either order.
    let seen = receiver.seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one delivery per event");
    let delivered = |event: &str| -> Value {
        let (headers, body) = seen
            .iter()
            .find(|(headers, _)| header(headers, "x-dray-event") == event)
            .unwrap_or_else(|| panic!("no {event} delivery"));
        assert!(header(headers, "x-dray-signature-256").starts_with("sha256="));
        serde_json::from_slice(body).unwrap()
    };
    let rejected = delivered("FreightRejected");
    assert_eq!(rejected["stage"], "prod");
    assert_eq!(rejected["freight"]["alias"], "frosty-otter");
    assert_eq!(rejected["message"], "rejected by ann: CVE-2026-1");
    let frozen = delivered("StageFrozen");
    assert_eq!(frozen["stage"], "*");
    assert_eq!(frozen["message"], "frozen by bob: incident 42");
    assert_eq!(frozen["url"], "https://dray.example.com/projects/demo");
}
