//! The engine's order of writes at a promotion's end.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Engine, EngineParts};
use crate::api::{Kind, ObjectKey, PromotionPhase};
use crate::store::{SqliteStore, Store};

/// A succeeded promotion is on its Stage (`lastPromotion`, `currentFreight`) and its
/// Freight (`currentlyIn`) before it says Succeeded: whoever sees it ended sees them.
#[tokio::test]
async fn a_promotion_says_succeeded_only_after_its_stage_and_freight_record_it() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let store: Arc<dyn Store> = sqlite.clone();
    let objects = [
        json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
        json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
               "metadata": {"name": "dev", "namespace": "demo"},
               "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                        "sources": {"direct": true}}]}}),
        json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
               "metadata": {"name": "f1", "namespace": "demo"},
               "alias": "one", "origin": {"kind": "Warehouse", "name": "app"},
               "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}]}),
        json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
               "metadata": {"name": "dev-one", "namespace": "demo",
                            "annotations": {"dray.dev/actor": "ann"}},
               "spec": {"stage": "dev", "freight": "f1",
                        "steps": [{"uses": "compose-output", "as": "out", "config": {"a": "b"}}]}}),
    ];
    for object in objects {
        store.create(object).await.unwrap();
    }
    let secret_key = Arc::new(crate::secrets::SecretKey::load(dir.path()).unwrap());
    let engine = Engine::new(EngineParts {
        store: store.clone(),
        steps: dray_steps::builtin_steps(),
        work_root: dir.path().join("work"),
        repos: Arc::new(crate::promotion::SharedMirrors(Arc::new(
            crate::discovery::git::MirrorCache::new(dir.path()),
        ))),
        secret_key,
        tools: Default::default(),
    })
    .unwrap();
    let promotion = ObjectKey::namespaced(Kind::Promotion, "demo", "dev-one");
    let phase = engine
        .run(&promotion, CancellationToken::new())
        .await
        .unwrap();
    let said = store.get(&promotion).await.unwrap().unwrap();
    assert_eq!(
        phase,
        PromotionPhase::Succeeded,
        "{:#}",
        said.object["status"]
    );

    let changes = store.changes_since(0, 1000).await.unwrap();
    let last_write = |key: &ObjectKey| {
        changes
            .iter()
            .filter(|c| &c.key == key)
            .map(|c| c.revision)
            .max()
            .unwrap()
    };
    let stage = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
    let freight = ObjectKey::namespaced(Kind::Freight, "demo", "f1");
    let recorded = store.get(&stage).await.unwrap().unwrap();
    assert_eq!(recorded.object["status"]["lastPromotion"], "dev-one");
    assert_eq!(recorded.object["status"]["currentFreight"]["name"], "f1");
    let ended = last_write(&promotion);
    assert!(
        last_write(&stage) < ended && last_write(&freight) < ended,
        "the Stage (revision {}) and the Freight ({}) before the Promotion's end ({ended}): {changes:?}",
        last_write(&stage),
        last_write(&freight)
    );
}
