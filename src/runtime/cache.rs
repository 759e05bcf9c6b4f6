//! The caches: an in-memory copy of every object of the kinds controllers read, kept
//! current by the reflector ([`super::reflector`]) from the store's change feed. Reads are
//! lock-and-clone-an-`Arc` cheap, so a reconciler reads what it needs here instead of
//! listing whole kinds from the store after every write.
//!
//! Each object is kept twice: as stored (JSON, with its revision) and typed (parsed once,
//! when it changed). An object that does not parse as its kind is kept as stored only and
//! left out of typed reads (with one warning when it arrives).

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::api::{Kind, ObjectKey};
use crate::store::{Store, StoredObject};

use super::Resource;
use super::reflector::Event;

type Typed = Arc<dyn Any + Send + Sync>;
type Parse = fn(&StoredObject) -> Option<Typed>;

/// One cached object.
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) stored: Arc<StoredObject>,
    typed: Option<Typed>,
}

/// The objects of one kind, by (namespace, name).
pub(super) struct KindCache {
    parse: Parse,
    pub(super) objects: BTreeMap<(String, String), Entry>,
}

impl KindCache {
    pub(super) fn entry(&self, stored: StoredObject) -> Entry {
        let typed = (self.parse)(&stored);
        if typed.is_none() {
            tracing::warn!(object = %stored.key, "a stored object does not match its kind; controllers leave it alone");
        }
        Entry {
            stored: Arc::new(stored),
            typed,
        }
    }
}

fn parse_as<K: Resource>(stored: &StoredObject) -> Option<Typed> {
    stored
        .to_typed::<K>()
        .ok()
        .map(|typed| Arc::new(typed) as Typed)
}

/// The map position of a key.
pub(super) fn position(key: &ObjectKey) -> (String, String) {
    (key.namespace.clone().unwrap_or_default(), key.name.clone())
}

pub(super) struct State {
    pub(super) kinds: HashMap<Kind, KindCache>,
}

/// A shared handle on the caches (cheap to clone).
#[derive(Clone)]
pub struct Cache {
    pub(super) state: Arc<RwLock<State>>,
    pub(super) events: broadcast::Sender<Arc<Event>>,
    pub(super) revision: watch::Receiver<u64>,
    pub(super) store: Arc<dyn Store>,
}

/// Which kinds a cache holds, and how each is typed.
#[derive(Default)]
pub struct Kinds {
    pub(super) parsers: Vec<(Kind, Parse)>,
}

impl Kinds {
    /// Every kind Dray stores.
    pub fn all() -> Self {
        use crate::api::*;
        Kinds::default()
            .with::<Project>()
            .with::<ProjectConfig>()
            .with::<Credential>()
            .with::<Role>()
            .with::<RoleBinding>()
            .with::<Warehouse>()
            .with::<Freight>()
            .with::<Stage>()
            .with::<PromotionTask>()
            .with::<Promotion>()
            .with::<AnalysisTemplate>()
    }

    /// Adds a typed kind.
    pub fn with<K: Resource>(mut self) -> Self {
        self.parsers.push((K::KIND, parse_as::<K>));
        self
    }

    pub(super) fn empty_state(&self) -> State {
        State {
            kinds: self
                .parsers
                .iter()
                .map(|(kind, parse)| {
                    (
                        *kind,
                        KindCache {
                            parse: *parse,
                            objects: BTreeMap::new(),
                        },
                    )
                })
                .collect(),
        }
    }
}

impl Cache {
    fn read<T>(&self, work: impl FnOnce(&State) -> T) -> T {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        work(&state)
    }

    fn objects<T>(
        &self,
        kind: Kind,
        work: impl FnOnce(&BTreeMap<(String, String), Entry>) -> T,
    ) -> T {
        static EMPTY: BTreeMap<(String, String), Entry> = BTreeMap::new();
        self.read(|state| match state.kinds.get(&kind) {
            Some(cache) => work(&cache.objects),
            None => {
                debug_assert!(false, "the runtime's cache does not hold {kind:?}");
                tracing::error!(
                    ?kind,
                    "the runtime's cache does not hold this kind; add it to `Kinds`"
                );
                work(&EMPTY)
            }
        })
    }

    /// One object, typed.
    pub fn get<K: Resource>(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.objects(K::KIND, |objects| {
            objects
                .get(&(namespace.to_owned(), name.to_owned()))
                .and_then(typed::<K>)
        })
    }

    /// One object, typed, by key.
    pub fn get_key<K: Resource>(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.objects(K::KIND, |objects| {
            objects.get(&position(key)).and_then(typed::<K>)
        })
    }

    /// One object as stored.
    pub fn get_stored(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.objects(key.kind, |objects| {
            objects.get(&position(key)).map(|e| e.stored.clone())
        })
    }

    /// Every object of a kind in one project (or every project with `None`), typed,
    /// ordered by project and name.
    pub fn list<K: Resource>(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        self.objects(K::KIND, |objects| {
            in_namespace(objects, namespace)
                .filter_map(typed::<K>)
                .collect()
        })
    }

    /// Every object of a kind in one project (or every project), as stored.
    pub fn list_stored(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<StoredObject>> {
        self.objects(kind, |objects| {
            in_namespace(objects, namespace)
                .map(|e| e.stored.clone())
                .collect()
        })
    }

    /// The keys of every object of a kind.
    pub fn keys(&self, kind: Kind) -> Vec<ObjectKey> {
        self.objects(kind, |objects| {
            objects.values().map(|e| e.stored.key.clone()).collect()
        })
    }

    /// The newest store revision the caches reflect.
    pub fn revision(&self) -> u64 {
        *self.revision.borrow()
    }

    /// The store behind the caches (for writes, and reads of kinds not cached).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Waits until the caches reflect every write the store had acknowledged when this
    /// was called, at most `timeout`; false when the timeout passed first. A reconciler
    /// that just wrote calls this (through the controller) so that its next run reads
    /// its own writes.
    pub async fn catch_up(&self, timeout: Duration) -> bool {
        let target = self.store.changes().latest();
        let mut revision = self.revision.clone();
        let reached = revision.wait_for(|seen| *seen >= target);
        matches!(tokio::time::timeout(timeout, reached).await, Ok(Ok(_)))
    }

    /// A subscription to the changes of cached kinds, each delivered after the cache
    /// holds it.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }
}

fn typed<K: Resource>(entry: &Entry) -> Option<Arc<K>> {
    entry.typed.clone()?.downcast::<K>().ok()
}

fn in_namespace<'a>(
    objects: &'a BTreeMap<(String, String), Entry>,
    namespace: Option<&str>,
) -> Box<dyn Iterator<Item = &'a Entry> + 'a> {
    match namespace {
        None => Box::new(objects.values()),
        Some(namespace) => {
            let start = (namespace.to_owned(), String::new());
            let namespace = namespace.to_owned();
            Box::new(
                objects
                    .range((Bound::Included(start), Bound::Unbounded))
                    .take_while(move |((ns, _), _)| *ns == namespace)
                    .map(|(_, e)| e),
            )
        }
    }
}
