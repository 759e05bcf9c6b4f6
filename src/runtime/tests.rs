//! The runtime against a real SQLite store: caches follow writes, a write wakes only the
//! objects it maps to, requeues and triggers wake what they name.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::api::{Freight, Kind, ObjectKey, Stage};
use crate::store::{SqliteStore, Store};

/// How long a test waits for something the runtime must do; a failure names what.
const WAIT: Duration = Duration::from_secs(20);

fn stage(project: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
           "metadata": {"name": name, "namespace": project},
           "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                          "sources": {"direct": true}}]}})
}

fn freight(project: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
           "metadata": {"name": name, "namespace": project},
           "origin": {"kind": "Warehouse", "name": "app"}})
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    cache: Cache,
    shutdown: CancellationToken,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
    for project in ["small", "big"] {
        store
            .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                           "metadata": {"name": project}, "spec": {}}))
            .await
            .unwrap();
    }
    let shutdown = CancellationToken::new();
    let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        store,
        cache,
        shutdown,
    }
}

/// Receives the next reconciled key, failing with `what` when none comes in time.
async fn next(seen: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    match tokio::time::timeout(WAIT, seen.recv()).await {
        Ok(Some(name)) => name,
        _ => panic!("waited {WAIT:?} for {what}; nothing was reconciled"),
    }
}

/// Starts a Stage controller that reports each reconcile's `project/name` and answers
/// `action`; Freight changes wake the Stages of the Freight's project.
fn start_stage_controller(
    fixture: &Fixture,
    action: Action,
    triggers: Option<Triggers>,
) -> mpsc::UnboundedReceiver<String> {
    let (report, seen) = mpsc::unbounded_channel::<String>();
    let mut controller = Controller::<Stage>::for_kind("test-stages", &fixture.cache)
        .only_when(|before, _| before.is_none())
        .watches(Kind::Freight, |changed, cache| {
            let project = changed.change.key.namespace.clone().unwrap_or_default();
            cache
                .list::<Stage>(Some(&project))
                .iter()
                .map(|s| s.key_of())
                .collect()
        });
    if let Some(triggers) = triggers {
        controller = controller.triggered_by(triggers);
    }
    tokio::spawn(controller.run(
        move |stage: Arc<Stage>, report: Arc<mpsc::UnboundedSender<String>>| async move {
            let _ = report.send(format!("{}/{}", stage.project(), stage.name()));
            Ok::<_, String>(action)
        },
        |_, _, _| Action::await_change(),
        Arc::new(report),
        fixture.shutdown.clone(),
    ));
    seen
}

#[tokio::test]
async fn the_cache_follows_writes_and_types_them() {
    let fixture = fixture().await;
    let mut events = fixture.cache.subscribe();
    fixture.store.create(stage("small", "dev")).await.unwrap();
    let event = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event for the new Stage")
        .unwrap();
    let Event::Changed(changed) = event.as_ref() else {
        panic!("expected a change, got {event:?}");
    };
    assert_eq!(
        changed.change.key,
        ObjectKey::namespaced(Kind::Stage, "small", "dev")
    );
    assert!(changed.previous.is_none());
    let cached = fixture
        .cache
        .get::<Stage>("small", "dev")
        .expect("the event comes after the cache holds the Stage");
    assert_eq!(cached.name(), "dev");
    assert_eq!(fixture.cache.list::<Stage>(Some("big")).len(), 0);
    fixture
        .store
        .delete(&ObjectKey::namespaced(Kind::Stage, "small", "dev"), None)
        .await
        .unwrap();
    assert!(fixture.cache.catch_up(WAIT).await, "the cache catches up");
    assert!(fixture.cache.get::<Stage>("small", "dev").is_none());
    fixture.shutdown.cancel();
}

#[tokio::test]
async fn a_write_wakes_only_the_objects_mapped_from_it() {
    let fixture = fixture().await;
    fixture.store.create(stage("small", "dev")).await.unwrap();
    for name in ["a", "b", "c"] {
        fixture.store.create(stage("big", name)).await.unwrap();
    }
    assert!(fixture.cache.catch_up(WAIT).await);
    let mut seen = start_stage_controller(&fixture, Action::await_change(), None);
    let mut first: Vec<String> = Vec::new();
    for _ in 0..4 {
        first.push(next(&mut seen, "the first look at every Stage").await);
    }
    first.sort();
    assert_eq!(first, ["big/a", "big/b", "big/c", "small/dev"]);

    fixture.store.create(freight("small", "f1")).await.unwrap();
    assert_eq!(
        next(&mut seen, "the Stage fed by the new Freight").await,
        "small/dev"
    );
    // A marker write in the big project: whatever comes before it was woken by the
    // small project's Freight, and only `small/dev` may be.
    fixture.store.create(freight("big", "f2")).await.unwrap();
    let mut after: Vec<String> = Vec::new();
    for _ in 0..3 {
        after.push(next(&mut seen, "the big project's Stages").await);
    }
    after.sort();
    assert_eq!(after, ["big/a", "big/b", "big/c"]);
    fixture.shutdown.cancel();
}

#[tokio::test]
async fn requeues_and_triggers_wake_what_they_name() {
    let fixture = fixture().await;
    fixture.store.create(stage("small", "dev")).await.unwrap();
    fixture.store.create(stage("small", "prod")).await.unwrap();
    assert!(fixture.cache.catch_up(WAIT).await);
    let mut seen =
        start_stage_controller(&fixture, Action::requeue(Duration::from_millis(10)), None);
    let mut dev_looks = 0;
    while dev_looks < 3 {
        if next(&mut seen, "requeued looks at dev").await == "small/dev" {
            dev_looks += 1;
        }
    }
    assert_eq!(
        dev_looks, 3,
        "a requeue brings the Stage back without any write"
    );
    drop(seen);

    let (trigger, triggers) = trigger();
    let mut seen = start_stage_controller(&fixture, Action::await_change(), Some(triggers));
    for _ in 0..2 {
        next(&mut seen, "the first looks").await;
    }
    trigger.reconcile(ObjectKey::namespaced(Kind::Stage, "small", "prod"));
    assert_eq!(next(&mut seen, "the triggered Stage").await, "small/prod");
    fixture.store.create(freight("small", "f1")).await.unwrap();
    let mut woken = vec![
        next(&mut seen, "Stages woken by Freight").await,
        next(&mut seen, "Stages woken by Freight").await,
    ];
    woken.sort();
    assert_eq!(woken, ["small/dev", "small/prod"]);
    fixture.shutdown.cancel();
}

#[tokio::test]
async fn changed_objects_come_with_the_feed_in_one_read() {
    let fixture = fixture().await;
    let start = fixture.store.changes().latest();
    fixture.store.create(freight("small", "f1")).await.unwrap();
    fixture
        .store
        .delete(&ObjectKey::namespaced(Kind::Freight, "small", "f1"), None)
        .await
        .unwrap();
    let batch = fixture
        .store
        .changed_objects_since(start, 10)
        .await
        .unwrap();
    assert_eq!(batch.len(), 2);
    assert!(
        batch.iter().all(|(_, object)| object.is_none()),
        "a deleted object comes back as gone, whichever write named it"
    );
    assert!(fixture.cache.catch_up(WAIT).await, "the cache catches up");
    let typed: Option<Freight> = fixture
        .cache
        .get::<Freight>("small", "f1")
        .map(|f| (*f).clone());
    assert!(
        typed.is_none(),
        "the cache applied the delete after the create"
    );
    fixture.shutdown.cancel();
}
