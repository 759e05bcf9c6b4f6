//! Garbage collection as the real garbage collector does it for `propagationPolicy`
//! Background (the default): when an owner goes, its dependents (objects whose
//! `metadata.ownerReferences` name the owner's uid) are deleted, or marked for deletion
//! when they have finalizers, and so on down; Orphan removes the owner reference instead.
//! Synchronous here, where the real collector is eventually consistent.
//!
//! It owns the owner → dependents walk; the verbs call it after a delete.

use serde_json::{Value, json};

use super::store::{ObjKey, Store};

fn dependents(store: &Store, uid: &str) -> Vec<(ObjKey, Value)> {
    store.matching(|object| {
        object["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
    })
}

/// Deletes (or orphans) what `removed` owned.
pub(crate) fn collect(store: &mut Store, removed: &Value, orphan: bool) {
    let mut pending: Vec<String> = removed["metadata"]["uid"]
        .as_str()
        .map(|uid| vec![uid.to_owned()])
        .unwrap_or_default();
    while let Some(uid) = pending.pop() {
        for (key, mut object) in dependents(store, &uid) {
            if orphan {
                if let Some(refs) = object["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"] != uid.as_str());
                }
                store.put(key, object);
                continue;
            }
            let held = object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if held {
                if object["metadata"]["deletionTimestamp"].is_null() {
                    object["metadata"]["deletionTimestamp"] = json!(super::objects::now());
                    object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    store.put(key, object);
                }
                continue;
            }
            if let Some(gone) = store.remove(&key)
                && let Some(uid) = gone["metadata"]["uid"].as_str()
            {
                pending.push(uid.to_owned());
            }
        }
    }
}
