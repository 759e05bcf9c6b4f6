//! Persistence behind one trait, [`Store`]: the embedded SQLite store ([`SqliteStore`])
//! and the Kubernetes store ([`kubernetes::KubeStore`], custom resources in a cluster). API tokens and cluster-wide role
//! bindings, which are not resources, sit behind a second, small trait, [`TokenStore`];
//! the webhook deliveries receivers have taken behind [`DeliveryLog`], which every
//! [`Store`] also is. The store remembers; it does not
//! decide (validation lives in `config`, decisions in `pipeline`).
//!
//! The contract every implementation keeps:
//! - every write gets a new, globally increasing `resourceVersion` (like etcd's revision);
//! - an update that names a `resourceVersion` other than the stored one is refused with
//!   [`StoreError::Conflict`], never applied over a newer write;
//! - [`Store::commit`] applies a batch atomically: all writes or none;
//! - an acknowledged write is durable (it survives `kill -9`);
//! - every write appears, in order, on the [`ChangeFeed`], which controllers wait on
//!   instead of polling, and only once it is visible: a read that starts after the feed
//!   announced a revision sees that write;
//! - reads do not wait for writes in progress (they see the last committed state).

mod deliveries;
mod error;
mod feed;
mod kept_by;
pub mod kubernetes;
mod modify;
mod object;
mod picked_cache;
mod pool;
mod sessions;
mod sqlite;
pub mod stats;
mod tokens;

pub use deliveries::DeliveryLog;
pub use error::StoreError;
pub use feed::{Change, ChangeFeed, ChangeOp};
pub use kept_by::KeptBy;
pub use modify::{modify_object, modify_status, modify_typed_status};
pub use object::{
    ObjectFields, Picked, StoredObject, Write, desired_state, key_of, resource_version_of,
};
pub use sessions::{SessionRecord, SessionStore};
pub use sqlite::{DATABASE_FILE, SqliteStore};
pub use tokens::{
    BOOTSTRAP_CREATOR, ClusterBinding, RevokedToken, TokenDetails, TokenInfo, TokenRecord,
    TokenStore,
};

use std::sync::Arc;

use async_trait::async_trait;

use crate::api::{Kind, ObjectKey, ResourceBody as _};

/// Where Dray keeps its resources (and, as a [`DeliveryLog`], which webhook deliveries
/// were taken).
#[async_trait]
pub trait Store: DeliveryLog + Send + Sync + 'static {
    /// One resource, or `None` when it does not exist.
    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError>;

    /// All resources of a kind, in one project or (with `None`) in every project,
    /// ordered by namespace and name.
    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredObject>, StoreError>;

    /// Applies writes atomically, in order; returns the stored objects (for deletes, the
    /// object as it was).
    async fn commit(&self, writes: Vec<Write>) -> Result<Vec<StoredObject>, StoreError>;

    /// The change feed: a revision counter to wait on.
    fn changes(&self) -> ChangeFeed;

    /// The writes after `revision`, oldest first (at most `limit`).
    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError>;

    /// The writes after `revision`, oldest first (at most `limit`), each with the object
    /// as it is now (`None` once deleted): one read for a batch of writes, for the
    /// runtime's caches.
    async fn changed_objects_since(
        &self,
        revision: u64,
        limit: usize,
    ) -> Result<Vec<(Change, Option<StoredObject>)>, StoreError> {
        let mut out = Vec::new();
        for change in self.changes_since(revision, limit).await? {
            let object = self.get(&change.key).await?;
            out.push((change, object));
        }
        Ok(out)
    }

    /// The newest `limit` resources of a kind in one project, newest first (by
    /// `metadata.creationTimestamp`, then name, descending); with `before` (a
    /// `(creationTimestamp, name)` cursor) only those older than it. For pages that show
    /// the head of a long list (the UI's Freight timeline) without reading all of it.
    async fn list_newest(
        &self,
        kind: Kind,
        namespace: &str,
        limit: usize,
        before: Option<(&str, &str)>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let mut all = self.list(kind, Some(namespace)).await?;
        all.sort_by_cached_key(|o| std::cmp::Reverse(newest_key(o)));
        Ok(all
            .into_iter()
            .filter(|o| match before {
                Some((ts, name)) => {
                    newest_key(o) < (ts.trim_end_matches('Z').to_owned(), name.to_owned())
                }
                None => true,
            })
            .take(limit)
            .collect())
    }

    /// [`Store::list_newest`] narrowed to the resources whose `origin.name` is `origin`
    /// (Freight of one Warehouse: the UI's Freight lanes).
    async fn list_newest_of_origin(
        &self,
        kind: Kind,
        namespace: &str,
        origin: &str,
        limit: usize,
        before: Option<(&str, &str)>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let all = self
            .list_newest(kind, namespace, usize::MAX, before)
            .await?;
        Ok(all
            .into_iter()
            .filter(|o| o.object.pointer("/origin/name").and_then(|v| v.as_str()) == Some(origin))
            .take(limit)
            .collect())
    }

    /// A few fields (JSON pointers whose steps are plain names, `/spec/requestedFreight`)
    /// of every resource of a kind in one project, ordered by name: for pages that need a
    /// little of each of thousands of resources (the project page's outline of its
    /// Stages) without reading and typing them whole.
    ///
    /// The answer is shared: a store may keep it and hand out the same [`Picked`] again
    /// while nothing it read changed, so that a caller can keep what it derives from it
    /// under its identity ([`KeptBy`]).
    async fn list_fields(
        &self,
        kind: Kind,
        namespace: &str,
        pointers: &[&'static str],
    ) -> Result<Picked, StoreError> {
        Ok(Arc::new(
            self.list(kind, Some(namespace))
                .await?
                .iter()
                .map(|o| ObjectFields::of(o, pointers))
                .collect(),
        ))
    }

    /// A few fields (JSON pointers) of the newest `limit` resources of a kind in one
    /// project, in [`Store::list_newest`]'s order: for reads that need a little of each
    /// of thousands of resources (the DORA numbers from a project's Promotions).
    async fn list_newest_fields(
        &self,
        kind: Kind,
        namespace: &str,
        limit: usize,
        pointers: &[&'static str],
    ) -> Result<Picked, StoreError> {
        Ok(Arc::new(
            self.list_newest(kind, namespace, limit, None)
                .await?
                .iter()
                .map(|o| ObjectFields::of(o, pointers))
                .collect(),
        ))
    }

    /// The resources of a kind in one project with these names (missing ones are left
    /// out), in one read rather than one per name.
    async fn get_many(
        &self,
        kind: Kind,
        namespace: &str,
        names: &[String],
    ) -> Result<Vec<StoredObject>, StoreError> {
        let mut found = Vec::new();
        for name in names {
            if let Some(object) = self
                .get(&ObjectKey::namespaced(kind, namespace, name))
                .await?
            {
                found.push(object);
            }
        }
        Ok(found)
    }

    /// A few fields (JSON pointers, as in [`Store::list_fields`]) of the resources of a kind
    /// in one project with these names (missing ones are left out), ordered by name: for
    /// reads that show a little of each of thousands of named resources (the release
    /// board's Freight, without the `verifiedIn` history of each).
    async fn get_many_fields(
        &self,
        kind: Kind,
        namespace: &str,
        names: &[String],
        pointers: &[&'static str],
    ) -> Result<Vec<ObjectFields>, StoreError> {
        let mut found: Vec<ObjectFields> = self
            .get_many(kind, namespace, names)
            .await?
            .iter()
            .map(|o| ObjectFields::of(o, pointers))
            .collect();
        found.sort_by(|a, b| a.key.name.cmp(&b.key.name));
        Ok(found)
    }

    /// Creates a resource; [`StoreError::AlreadyExists`] when it exists.
    async fn create(&self, object: serde_json::Value) -> Result<StoredObject, StoreError> {
        single(self.commit(vec![Write::Create(object)]).await?)
    }

    /// Replaces a resource's metadata and spec, keeping its status. When
    /// `metadata.resourceVersion` is set it must match the stored one.
    async fn update(&self, object: serde_json::Value) -> Result<StoredObject, StoreError> {
        single(self.commit(vec![Write::Update(object)]).await?)
    }

    /// Replaces a resource's status only.
    async fn update_status(
        &self,
        key: &ObjectKey,
        status: serde_json::Value,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, StoreError> {
        let write = Write::UpdateStatus {
            key: key.clone(),
            status,
            resource_version,
        };
        single(self.commit(vec![write]).await?)
    }

    /// Deletes a resource; [`StoreError::NotFound`] when it does not exist.
    async fn delete(
        &self,
        key: &ObjectKey,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, StoreError> {
        single(
            self.commit(vec![Write::Delete {
                key: key.clone(),
                resource_version,
            }])
            .await?,
        )
    }
}

/// The order of [`Store::list_newest`]: `(creationTimestamp, name)`.
fn newest_key(object: &StoredObject) -> (String, String) {
    let created = object.object.creation_timestamp().unwrap_or_default();
    // RFC 3339 in UTC with a trimmed fraction sorts as text once the `Z` is dropped.
    (
        created.trim_end_matches('Z').to_owned(),
        object.key.name.clone(),
    )
}

fn single(mut objects: Vec<StoredObject>) -> Result<StoredObject, StoreError> {
    objects
        .pop()
        .ok_or_else(|| StoreError::Internal("a write returned no object".into()))
}
