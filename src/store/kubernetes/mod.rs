//! The Kubernetes store: Dray's resources as custom resources in a cluster (the CRDs in
//! `crds/`), behind the same [`Store`] trait as the embedded SQLite store, so every
//! controller, the API and the UI run unchanged on etcd.
//!
//! - Reads come from the [`mirror`]: one kube-runtime `watcher` per kind (and for the
//!   labelled Secrets that stand for Credentials, [`secrets`]) keeps it current, as a
//!   kube-runtime reflector store would. A watch that breaks resumes from its last
//!   `resourceVersion`; one that answers 410 Gone lists again, and the differences reach
//!   the feed as changes, so nothing is lost.
//! - Writes go to the API server: create (POST), update (PUT, with the `resourceVersion`
//!   precondition when the caller names one: 409 is [`StoreError::Conflict`], never a
//!   blind overwrite), status through the `status` subresource, delete with preconditions.
//!   A write returns once its watch delivered it, so the feed holds every write its
//!   writer saw succeed (the embedded store's contract, `super`).
//! - Unlike SQLite, Kubernetes has no multi-object transactions: a [`Store::commit`] of
//!   several writes applies them in order and stops at the first failure (as `kubectl
//!   apply -f` of several files does). The writes Dray batches are idempotent (`dray
//!   apply` of many documents), so applying again completes them.
//! - Webhook deliveries (replay protection) are remembered in the local SQLite store of the
//!   replica that received them, not in the cluster.

mod errors;
mod mirror;
mod resources;
pub(crate) mod secrets;
mod watches;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use serde_json::Value;

use crate::api::{Kind, ObjectKey};
use crate::secrets::SecretKey;

use super::{
    Change, ChangeFeed, DeliveryLog, SqliteStore, Store, StoreError, StoredObject, Write, key_of,
    resource_version_of,
};

pub use watches::{NamespaceSelection, PROJECT_LABEL};

use mirror::Mirror;
use resources::{api_resource, dynamic, stored};

/// How long a write waits for its watch to deliver it before it returns anyway.
const DELIVERED: Duration = Duration::from_secs(10);
/// How often a status write without a `resourceVersion` is retried after a conflict.
const STATUS_RETRIES: usize = 5;

/// Where a [`KubeStore`] reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// The watch-fed mirror: no API call per read, and as current as the watches — what
    /// controllers want (they are woken by the same watches).
    Watched,
    /// The API server, every time: each read sees every write acknowledged before it, in
    /// every kind — what the API and the UI want (`dray refresh --wait` then `dray get
    /// freight` must show the new Freight, although Freight and Warehouses are separate
    /// watches).
    Api,
}

/// Dray's resources in a Kubernetes cluster.
pub struct KubeStore {
    client: kube::Client,
    mirror: Arc<Mirror>,
    reads: Reads,
    secret_key: Arc<SecretKey>,
    /// Where webhook deliveries are remembered (the replica's own data directory).
    deliveries: Arc<SqliteStore>,
    watches: tokio::task::JoinSet<()>,
}

/// How [`KubeStore::connect`] reads the cluster.
pub struct KubeStoreOptions {
    /// The namespaces whose Dray objects are read.
    pub namespaces: NamespaceSelection,
    /// Seals the secrets of Credentials as they are read.
    pub secret_key: Arc<SecretKey>,
    /// The local store for what is not a resource (webhook deliveries).
    pub local: Arc<SqliteStore>,
    /// How long to wait for the first listing of every kind.
    pub sync_timeout: Duration,
    /// Where reads come from.
    pub reads: Reads,
}

impl KubeStore {
    /// Starts the watches and returns once every kind has been listed (at most
    /// `sync_timeout`, then an error naming the kinds still missing).
    pub async fn connect(
        client: kube::Client,
        options: KubeStoreOptions,
    ) -> Result<KubeStore, StoreError> {
        let mirror = Arc::new(Mirror::new(options.namespaces.initial()));
        let (watches, synced) = watches::start(
            client.clone(),
            mirror.clone(),
            options.namespaces,
            options.secret_key.clone(),
        );
        synced.wait(options.sync_timeout).await?;
        Ok(KubeStore {
            client,
            mirror,
            reads: options.reads,
            secret_key: options.secret_key,
            deliveries: options.local,
            watches,
        })
    }

    /// One object, from where the store reads.
    async fn read(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        if self.reads == Reads::Watched {
            return Ok(self.mirror.get(key));
        }
        if !self.mirror.admits(key) {
            return Ok(None);
        }
        let what = format!("read {key}");
        let fail = |e| errors::store_error(e, &what, key, None, || None);
        if let Some(object) = self.api(key).get_opt(&key.name).await.map_err(fail)? {
            return Ok(watches::typed_object(key.kind, &object, &self.secret_key));
        }
        if key.kind != Kind::Credential {
            return Ok(None);
        }
        let namespace = key.namespace.as_deref().unwrap_or_default();
        let secrets = Api::<Secret>::namespaced(self.client.clone(), namespace);
        let Some(secret) = secrets.get_opt(&key.name).await.map_err(fail)? else {
            return Ok(None);
        };
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        Ok(watches::CREDENTIAL_LABELS
            .into_iter()
            .find(|label| labels.contains_key(*label))
            .and_then(|label| watches::secret_credential(&secret, label, &self.secret_key)))
    }

    /// A kind's objects, from the API server (with the labelled Secrets, for Credentials).
    async fn list_api(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let resource = api_resource(kind);
        let what = format!("list {}", kind.plural());
        let key = ObjectKey {
            kind,
            namespace: namespace.map(str::to_owned),
            name: String::new(),
        };
        let fail = |e| errors::store_error(e, &what, &key, None, || None);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let listed = api.list(&ListParams::default()).await.map_err(fail)?;
        let mut objects: Vec<StoredObject> = listed
            .items
            .iter()
            .filter_map(|o| watches::typed_object(kind, o, &self.secret_key))
            .collect();
        if kind == Kind::Credential {
            let secrets: Api<Secret> = match namespace {
                Some(ns) => Api::namespaced(self.client.clone(), ns),
                None => Api::all(self.client.clone()),
            };
            for label in watches::CREDENTIAL_LABELS {
                let found = secrets
                    .list(&ListParams::default().labels(label))
                    .await
                    .map_err(fail)?;
                objects.extend(
                    found
                        .items
                        .iter()
                        .filter_map(|s| watches::secret_credential(s, label, &self.secret_key)),
                );
            }
        }
        objects.retain(|o| self.mirror.admits(&o.key));
        objects
            .sort_by(|a, b| (&a.key.namespace, &a.key.name).cmp(&(&b.key.namespace, &b.key.name)));
        Ok(objects)
    }

    /// The client the store writes with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self, key: &ObjectKey) -> Api<DynamicObject> {
        let resource = api_resource(key.kind);
        match &key.namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Waits for the watch to deliver a write, so that it is on the feed.
    async fn delivered(&self, object: &StoredObject) {
        let seen = self
            .mirror
            .wait_for(&object.key, object.resource_version, false, DELIVERED)
            .await;
        if !seen {
            tracing::warn!(object = %object.key, resource_version = object.resource_version,
                "the watch has not delivered a write after {}s; controllers may see it late", DELIVERED.as_secs());
        }
    }

    async fn create(&self, mut object: Value) -> Result<StoredObject, StoreError> {
        let key = key_of(&object)?;
        // The API server refuses a create that names a `resourceVersion` ("should not be set
        // on objects to be created"); the embedded store ignores one. A create is a create.
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        let status = match resources::has_status_subresource(key.kind) {
            true => object.as_object_mut().and_then(|m| m.remove("status")),
            false => None,
        };
        let what = format!("create {key}");
        let created = self
            .api(&key)
            .create(&PostParams::default(), &dynamic(&object)?)
            .await
            .map_err(|e| errors::store_error(e, &what, &key, None, || None))?;
        let created = stored(key.kind, &created)?;
        // The API server drops `status` on create when the kind has a status subresource;
        // the embedded store keeps it, so it is written next.
        let Some(status) = status.filter(|s| !s.is_null()) else {
            self.delivered(&created).await;
            return Ok(created);
        };
        let mut version = created.resource_version;
        for _ in 0..STATUS_RETRIES {
            match self
                .update_status(&key, status.clone(), Some(version))
                .await
            {
                Err(StoreError::Conflict { .. }) => {
                    let current =
                        resources::stored_value(self.fetch(&self.api(&key), &key).await?)?;
                    let has_status = current
                        .object
                        .get("status")
                        .is_some_and(|s| s.as_object().is_some_and(|o| !o.is_empty()));
                    if has_status {
                        // A controller saw the new object and wrote its status first (a
                        // Promotion the queue picked up at once): that status is newer than
                        // the one it was created with, so it stays.
                        self.delivered(&current).await;
                        return Ok(current);
                    }
                    // Someone changed the object itself (a label): write the status on it.
                    version = current.resource_version;
                }
                written => return written,
            }
        }
        Err(StoreError::Conflict {
            key: key.clone(),
            expected: version,
            actual: self.mirror.version_of(&key).unwrap_or_default(),
        })
    }

    async fn update(&self, object: Value) -> Result<StoredObject, StoreError> {
        let key = key_of(&object)?;
        let expected = resource_version_of(&object)?;
        let what = format!("update {key}");
        let updated = self
            .api(&key)
            .replace(&key.name, &PostParams::default(), &dynamic(&object)?)
            .await
            .map_err(|e| {
                errors::store_error(e, &what, &key, expected, || self.mirror.version_of(&key))
            })?;
        let updated = stored(key.kind, &updated)?;
        self.delivered(&updated).await;
        Ok(updated)
    }

    async fn update_status(
        &self,
        key: &ObjectKey,
        status: Value,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, StoreError> {
        let api = self.api(key);
        let what = format!("update the status of {key}");
        let mut current = match self.read(key).await? {
            Some(current) => current.object,
            None => self.fetch(&api, key).await?,
        };
        for attempt in 0.. {
            let mut body = current.clone();
            body["status"] = status.clone();
            if let Some(version) = resource_version {
                body["metadata"]["resourceVersion"] = Value::String(version.to_string());
            }
            let body = dynamic(&body)?;
            let written = match resources::has_status_subresource(key.kind) {
                true => {
                    api.replace_status(&key.name, &PostParams::default(), &body)
                        .await
                }
                // Without the subresource, status is part of the object.
                false => api.replace(&key.name, &PostParams::default(), &body).await,
            };
            match written {
                Ok(written) => {
                    let written = stored(key.kind, &written)?;
                    self.delivered(&written).await;
                    return Ok(written);
                }
                Err(kube::Error::Api(response))
                    if response.code == 409
                        && resource_version.is_none()
                        && attempt < STATUS_RETRIES =>
                {
                    // No version was named: the caller replaces the status whatever the
                    // object is now, so read it again and retry.
                    current = self.fetch(&api, key).await?;
                }
                Err(error) => {
                    return Err(errors::store_error(
                        error,
                        &what,
                        key,
                        resource_version,
                        || self.mirror.version_of(key),
                    ));
                }
            }
        }
        unreachable!("the retry loop returns")
    }

    async fn fetch(&self, api: &Api<DynamicObject>, key: &ObjectKey) -> Result<Value, StoreError> {
        let what = format!("read {key}");
        let object = api
            .get(&key.name)
            .await
            .map_err(|e| errors::store_error(e, &what, key, None, || None))?;
        Ok(stored(key.kind, &object)?.object)
    }

    async fn delete(
        &self,
        key: &ObjectKey,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, StoreError> {
        let before = match self.read(key).await? {
            Some(before) => before,
            None => resources::stored_value(self.fetch(&self.api(key), key).await?)?,
        };
        let params = DeleteParams {
            preconditions: resource_version.map(|v| Preconditions {
                resource_version: Some(v.to_string()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let what = format!("delete {key}");
        self.api(key)
            .delete(&key.name, &params)
            .await
            .map_err(|e| {
                errors::store_error(e, &what, key, resource_version, || {
                    self.mirror.version_of(key)
                })
            })?;
        if !self
            .mirror
            .wait_for(key, before.resource_version, true, DELIVERED)
            .await
        {
            tracing::warn!(object = %key, "the watch has not delivered a delete after {}s", DELIVERED.as_secs());
        }
        Ok(before)
    }
}

impl Drop for KubeStore {
    fn drop(&mut self) {
        self.watches.abort_all();
    }
}

#[async_trait]
impl Store for KubeStore {
    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        self.read(key).await
    }

    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        match self.reads {
            Reads::Watched => Ok(self.mirror.list(kind, namespace)),
            Reads::Api => self.list_api(kind, namespace).await,
        }
    }

    async fn commit(&self, writes: Vec<Write>) -> Result<Vec<StoredObject>, StoreError> {
        let mut done = Vec::with_capacity(writes.len());
        for write in writes {
            done.push(match write {
                Write::Create(object) => self.create(object).await?,
                Write::Update(object) => self.update(object).await?,
                Write::UpdateStatus {
                    key,
                    status,
                    resource_version,
                } => self.update_status(&key, status, resource_version).await?,
                Write::Delete {
                    key,
                    resource_version,
                } => self.delete(&key, resource_version).await?,
            });
        }
        Ok(done)
    }

    fn changes(&self) -> ChangeFeed {
        ChangeFeed::new(self.mirror.subscribe())
    }

    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        Ok(self
            .mirror
            .since(revision, limit)
            .into_iter()
            .map(|(change, _)| change)
            .collect())
    }

    async fn changed_objects_since(
        &self,
        revision: u64,
        limit: usize,
    ) -> Result<Vec<(Change, Option<StoredObject>)>, StoreError> {
        Ok(self.mirror.since(revision, limit))
    }
}

#[async_trait]
impl DeliveryLog for KubeStore {
    async fn claim_delivery(
        &self,
        receiver: &str,
        keys: &[String],
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.deliveries
            .claim_delivery(receiver, keys, now, expires_at)
            .await
    }

    async fn release_delivery(&self, receiver: &str, keys: &[String]) -> Result<(), StoreError> {
        self.deliveries.release_delivery(receiver, keys).await
    }
}

impl KubeStore {
    /// Makes sure a Project's namespace exists and carries [`PROJECT_LABEL`] (so that the
    /// default selection reads it), as Kargo's project controller does: created when
    /// missing, labelled when not.
    pub async fn ensure_project_namespace(&self, project: &str) -> Result<(), StoreError> {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::api::{Patch, PatchParams};

        let api = Api::<Namespace>::all(self.client.clone());
        let key = ObjectKey::cluster(Kind::Project, project);
        let what = format!("create or label the namespace of Project `{project}`");
        let fail = |e| errors::store_error(e, &what, &key, None, || None);
        match api.get_opt(project).await.map_err(fail)? {
            Some(namespace)
                if namespace
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.get(PROJECT_LABEL).map(String::as_str) == Some(project)) =>
            {
                Ok(())
            }
            Some(_) => {
                let patch = serde_json::json!({"metadata": {"labels": {PROJECT_LABEL: project}}});
                api.patch(project, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(fail)?;
                Ok(())
            }
            None => {
                let namespace: Namespace = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": project, "labels": {PROJECT_LABEL: project}}
                }))
                .map_err(|e| StoreError::Internal(e.to_string()))?;
                match api.create(&PostParams::default(), &namespace).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(fail(e)),
                }
            }
        }
    }
}
