//! Persistence behind one trait, [`Store`]: the embedded SQLite store today
//! ([`SqliteStore`]), a Kubernetes-backed store later. API tokens and cluster-wide role
//! bindings, which are not resources, sit behind a second, small trait, [`TokenStore`]. The store remembers; it does not
//! decide (validation lives in `config`, decisions in `pipeline`).
//!
//! The contract every implementation keeps:
//! - every write gets a new, globally increasing `resourceVersion` (like etcd's revision);
//! - an update that names a `resourceVersion` other than the stored one is refused with
//!   [`StoreError::Conflict`], never applied over a newer write;
//! - [`Store::commit`] applies a batch atomically: all writes or none;
//! - an acknowledged write is durable (it survives `kill -9`);
//! - every write appears, in order, on the [`ChangeFeed`], which controllers wait on
//!   instead of polling.

mod error;
mod feed;
mod object;
mod sqlite;
mod tokens;

pub use error::StoreError;
pub use feed::{Change, ChangeFeed, ChangeOp};
pub use object::{StoredObject, Write, desired_state, key_of, resource_version_of};
pub use sqlite::{DATABASE_FILE, SqliteStore};
pub use tokens::{ClusterBinding, TokenRecord, TokenStore};

use async_trait::async_trait;

use crate::api::{Kind, ObjectKey};

/// Where Dray keeps its resources.
#[async_trait]
pub trait Store: Send + Sync + 'static {
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

fn single(mut objects: Vec<StoredObject>) -> Result<StoredObject, StoreError> {
    objects
        .pop()
        .ok_or_else(|| StoreError::Internal("a write returned no object".into()))
}
