//! The double's shared state behind one lock: the store, the served types (rebuilt when a
//! CRD changes), the registered tokens and service endpoints, and what tests assert on
//! (requests seen, admission calls made). Never held across an `.await`.
//!
//! It owns the bookkeeping; the HTTP verbs live in [`super::verbs`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::rbac::UserInfo;
use super::resources::{self, ResourceType};
use super::store::{ObjKey, Store};

/// One request the double served: its Kubernetes verb (or HTTP method for non-resource
/// paths), its path and the authenticated user.
pub type RequestRecord = (String, String, Option<String>);

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) types: Vec<ResourceType>,
    pub(crate) tokens: HashMap<String, UserInfo>,
    pub(crate) services: HashMap<(String, String), SocketAddr>,
    pub(crate) admission_calls: Vec<Value>,
    pub(crate) requests: Vec<RequestRecord>,
    /// Server-side apply: each manager's last applied configuration per object.
    pub(crate) applied: HashMap<(ObjKey, String), Value>,
    /// Server-side apply: who owns which field of each object.
    pub(crate) owners: HashMap<ObjKey, super::managed::Owners>,
}

impl Inner {
    /// Rebuilds the served types from the stored CRDs.
    pub(crate) fn refresh_types(&mut self) {
        let crds: Vec<Value> = self
            .store
            .list("apiextensions.k8s.io", "customresourcedefinitions", None)
            .into_iter()
            .cloned()
            .collect();
        self.types = resources::served(&crds);
    }

    pub(crate) fn find_type(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|ty| ty.group == group && ty.version == version && ty.plural == plural)
            .cloned()
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    /// `127.0.0.1:PORT`, for `/api`'s serverAddressByClientCIDRs.
    pub(crate) server_address: Mutex<String>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        let mut inner = Inner {
            store: Store::default(),
            types: Vec::new(),
            tokens: HashMap::new(),
            services: HashMap::new(),
            admission_calls: Vec::new(),
            requests: Vec::new(),
            applied: HashMap::new(),
            owners: HashMap::new(),
        };
        inner.refresh_types();
        Self {
            inner: Mutex::new(inner),
            server_address: Mutex::new(String::new()),
        }
    }

    /// The state; a poisoned lock (a panicking test thread) is taken over, not propagated.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
