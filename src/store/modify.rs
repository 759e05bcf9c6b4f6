//! Read-modify-write of one resource's status with optimistic concurrency: read it, let the
//! caller change the status, write it back against the version read, and start over when
//! another writer got there first. Every controller and request that edits a status goes
//! through here rather than keeping its own retry loop.

use serde_json::{Value, json};

use crate::api::ObjectKey;

use super::{Store, StoreError, StoredObject};

/// How many times a write is tried against a resource that keeps changing.
const ATTEMPTS: usize = 8;

/// Edits the status of `key`: `change` gets the stored object and its status (`{}` when it
/// has none) and answers whether there is anything to write. Returns the written object, or
/// `None` when `change` wrote nothing. A missing resource is [`StoreError::NotFound`].
pub async fn modify_status(
    store: &dyn Store,
    key: &ObjectKey,
    mut change: impl FnMut(&StoredObject, &mut Value) -> Result<bool, StoreError>,
) -> Result<Option<StoredObject>, StoreError> {
    for _ in 0..ATTEMPTS {
        let current = store
            .get(key)
            .await?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        let mut status = current
            .object
            .get("status")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !change(&current, &mut status)? {
            return Ok(None);
        }
        match store
            .update_status(key, status, Some(current.resource_version))
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return Err(error),
        }
    }
    Err(StoreError::Internal(format!(
        "{key} kept changing: its status was not written after {ATTEMPTS} attempts; try again"
    )))
}

/// Edits the metadata or spec of the stored `current` (e.g. an annotation): `change` gets the
/// object as it would be written back (without `status`, with the version read) and answers
/// whether there is anything to write; on a conflict the fresh object is read and `change`
/// runs again. Returns the written object, or `None` when nothing was written or the resource
/// is gone.
pub async fn modify_object(
    store: &dyn Store,
    current: StoredObject,
    mut change: impl FnMut(&StoredObject, &mut Value) -> Result<bool, StoreError>,
) -> Result<Option<StoredObject>, StoreError> {
    let mut current = current;
    for _ in 0..ATTEMPTS {
        let mut object = super::desired_state(&current.object);
        object["metadata"]["resourceVersion"] = json!(current.resource_version.to_string());
        if !change(&current, &mut object)? {
            return Ok(None);
        }
        match store.update(object).await {
            Ok(written) => return Ok(Some(written)),
            Err(StoreError::Conflict { .. }) => match store.get(&current.key).await? {
                Some(fresh) => current = fresh,
                None => return Ok(None),
            },
            Err(error) => return Err(error),
        }
    }
    Err(StoreError::Internal(format!(
        "{} kept changing: it was not written after {ATTEMPTS} attempts; try again",
        current.key
    )))
}

/// [`modify_status`] with types: `change` gets the resource as `R` and its status as `S`
/// (`S::default()` when it has none) and returns `Some(answer)` to write, `None` for nothing.
pub async fn modify_typed_status<R, S, T>(
    store: &dyn Store,
    key: &ObjectKey,
    mut change: impl FnMut(&R, &mut S) -> Result<Option<T>, StoreError>,
) -> Result<Option<T>, StoreError>
where
    R: serde::de::DeserializeOwned,
    S: serde::Serialize + serde::de::DeserializeOwned + Default,
{
    let mut answer = None;
    modify_status(store, key, |current, status| {
        let resource: R = current.to_typed()?;
        let mut typed: S = if status.as_object().is_some_and(|s| s.is_empty()) {
            S::default()
        } else {
            S::deserialize(&*status).map_err(|e| {
                StoreError::Invalid(format!("the status of {key} does not match its kind: {e}"))
            })?
        };
        answer = change(&resource, &mut typed)?;
        if answer.is_none() {
            return Ok(false);
        }
        *status = serde_json::to_value(&typed).map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(true)
    })
    .await?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::Kind;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn a_write_that_lost_a_race_is_made_again_on_the_fresh_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        store
            .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}}))
            .await
            .unwrap();
        let key = ObjectKey::cluster(Kind::Project, "demo");
        let mut calls = 0;
        let written = modify_status(store.as_ref(), &key, |_, status| {
            calls += 1;
            if calls == 1 {
                // Another writer lands between this read and this write.
                let racing = store.clone();
                let key = key.clone();
                std::thread::spawn(move || {
                    tokio::runtime::Runtime::new().unwrap().block_on(async {
                        racing.update_status(&key, json!({"other": 1}), None).await
                    })
                })
                .join()
                .unwrap()
                .unwrap();
            }
            status["mine"] = json!(calls);
            Ok(true)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(calls, 2, "the conflicting write was not retried");
        assert_eq!(written.object["status"], json!({"other": 1, "mine": 2}));
        // Nothing to write: nothing written, no revision spent.
        let before = store.changes().latest();
        let none = modify_status(store.as_ref(), &key, |_, _| Ok(false))
            .await
            .unwrap();
        assert!(none.is_none());
        assert_eq!(store.changes().latest(), before);
    }
}
