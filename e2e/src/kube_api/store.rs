//! The in-memory store under the double: objects by (group, plural, namespace, name), one
//! global increasing revision (like etcd's) stamped as `resourceVersion`, the event history
//! since the last compaction, and the open watches that events are fanned out to in
//! revision order.
//!
//! It owns persistence and ordering; validation, defaults and authorisation live elsewhere.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;
use tokio::sync::mpsc;

/// Where an object lives; `namespace` is empty for cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjKey {
    pub(crate) group: String,
    pub(crate) plural: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, at revision `rv`.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) kind: EventType,
    pub(crate) key: ObjKey,
    pub(crate) object: Value,
}

/// What a watch stream receives.
#[derive(Debug, Clone)]
pub(crate) enum WatchMsg {
    Event(EventType, Value),
    /// A bookmark at this revision; `initial_end` marks the end of initial events.
    Bookmark {
        rv: u64,
        initial_end: bool,
    },
}

/// Which objects a watch wants.
#[derive(Clone)]
pub(crate) struct WatchFilter {
    pub(crate) group: String,
    pub(crate) plural: String,
    pub(crate) namespace: Option<String>,
    /// Decides on the object (label and field selectors).
    pub(crate) matches: std::sync::Arc<dyn Fn(&Value) -> bool + Send + Sync>,
}

impl std::fmt::Debug for WatchFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchFilter")
            .field("group", &self.group)
            .field("plural", &self.plural)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl WatchFilter {
    pub(crate) fn wants(&self, key: &ObjKey, object: &Value) -> bool {
        key.group == self.group
            && key.plural == self.plural
            && self
                .namespace
                .as_ref()
                .is_none_or(|namespace| *namespace == key.namespace)
            && (self.matches)(object)
    }
}

#[derive(Debug)]
struct Watcher {
    filter: WatchFilter,
    bookmarks: bool,
    tx: mpsc::UnboundedSender<WatchMsg>,
}

/// The store.
#[derive(Debug, Default)]
pub(crate) struct Store {
    rv: u64,
    objects: BTreeMap<ObjKey, Value>,
    history: VecDeque<Event>,
    /// Revisions up to and including this one are forgotten.
    compacted: u64,
    watchers: Vec<Watcher>,
}

/// Asked for history that compaction forgot: (requested, oldest kept).
#[derive(Debug)]
pub(crate) struct Gone(pub u64, pub u64);

impl Store {
    /// The current revision.
    pub(crate) fn revision(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, key: &ObjKey) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of `group/plural` (in `namespace` when given), in key order.
    pub(crate) fn list(&self, group: &str, plural: &str, namespace: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|(key, _)| {
                key.group == group
                    && key.plural == plural
                    && namespace.is_none_or(|namespace| key.namespace == namespace)
            })
            .map(|(_, object)| object)
            .collect()
    }

    /// Writes `object` at the next revision (stamping `metadata.resourceVersion`) and
    /// tells the watches; returns the stored object.
    pub(crate) fn put(&mut self, key: ObjKey, mut object: Value) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        let kind = if self.objects.contains_key(&key) {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.objects.insert(key.clone(), object.clone());
        self.record(kind, key, object.clone());
        object
    }

    /// Removes the object at the next revision; the DELETED event carries that revision.
    pub(crate) fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let object = self.objects.get(key)?.clone();
        self.remove_as(key, object)
    }

    /// Removes the object, its last state being `object` (an update that removed the last
    /// finalizer deletes at once: one DELETED event, no MODIFIED before it).
    pub(crate) fn remove_as(&mut self, key: &ObjKey, mut object: Value) -> Option<Value> {
        self.objects.remove(key)?;
        self.rv += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        self.record(EventType::Deleted, key.clone(), object.clone());
        Some(object)
    }

    fn record(&mut self, kind: EventType, key: ObjKey, object: Value) {
        self.watchers.retain(|watcher| {
            if !watcher.filter.wants(&key, &object) {
                return !watcher.tx.is_closed();
            }
            watcher
                .tx
                .send(WatchMsg::Event(kind, object.clone()))
                .is_ok()
        });
        self.history.push_back(Event {
            rv: self.rv,
            kind,
            key,
            object,
        });
    }

    /// Opens a watch: the events after `from` (history), then live ones, in order.
    /// `from = None` starts at the current revision.
    pub(crate) fn watch(
        &mut self,
        filter: WatchFilter,
        from: Option<u64>,
        bookmarks: bool,
        initial: Vec<WatchMsg>,
    ) -> Result<mpsc::UnboundedReceiver<WatchMsg>, Gone> {
        let (tx, rx) = mpsc::unbounded_channel();
        for msg in initial {
            let _ = tx.send(msg);
        }
        if let Some(from) = from {
            if from < self.compacted {
                return Err(Gone(from, self.compacted));
            }
            for event in self.history.iter().filter(|event| event.rv > from) {
                if filter.wants(&event.key, &event.object) {
                    let _ = tx.send(WatchMsg::Event(event.kind, event.object.clone()));
                }
            }
        }
        self.watchers.push(Watcher {
            filter,
            bookmarks,
            tx,
        });
        Ok(rx)
    }

    /// The newest revision compaction forgot.
    pub(crate) fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Whether a list or watch from `rv` asks for forgotten history.
    pub(crate) fn check_not_compacted(&self, rv: u64) -> Result<(), Gone> {
        if rv < self.compacted {
            Err(Gone(rv, self.compacted))
        } else {
            Ok(())
        }
    }

    /// Sends a bookmark at the current revision to every watch that asked for them.
    pub(crate) fn bookmark_all(&mut self) {
        let rv = self.rv;
        self.watchers.retain(|watcher| {
            if !watcher.bookmarks {
                return !watcher.tx.is_closed();
            }
            watcher
                .tx
                .send(WatchMsg::Bookmark {
                    rv,
                    initial_end: false,
                })
                .is_ok()
        });
    }

    /// Forgets the history up to now: watches from an older revision get 410 Gone.
    pub(crate) fn compact(&mut self) {
        self.compacted = self.rv;
        self.history.clear();
    }

    /// Closes every open watch stream.
    pub(crate) fn break_watches(&mut self) {
        self.watchers.clear();
    }

    /// All objects (for the RBAC authorizer and webhook lookups).
    pub(crate) fn all(&self, group: &str, plural: &str) -> Vec<(ObjKey, Value)> {
        self.objects
            .iter()
            .filter(|(key, _)| key.group == group && key.plural == plural)
            .map(|(key, object)| (key.clone(), object.clone()))
            .collect()
    }
}

impl Store {
    /// The keys of every namespaced object in `namespace` (a namespace's deletion).
    pub(crate) fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjKey> {
        self.objects
            .keys()
            .filter(|key| key.namespace == namespace)
            .cloned()
            .collect()
    }
}

impl Store {
    /// Every object `wanted` accepts, with its key.
    pub(crate) fn matching(&self, wanted: impl Fn(&Value) -> bool) -> Vec<(ObjKey, Value)> {
        self.objects
            .iter()
            .filter(|(_, object)| wanted(object))
            .map(|(key, object)| (key.clone(), object.clone()))
            .collect()
    }
}
