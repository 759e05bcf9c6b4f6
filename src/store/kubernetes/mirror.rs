//! The mirror: every Dray object the watches have delivered, and the change log the
//! store's [`crate::store::ChangeFeed`] counts. It is what [`super::KubeStore`] reads
//! from (as kube-runtime's reflector stores are), so reads cost no API call, and what lets
//! the Kubernetes store keep the embedded store's contract: every write appears, in
//! order, on one feed with a local, gap-free revision counter.
//!
//! Kubernetes' `resourceVersion`s are global (etcd's revision) and shared with objects
//! Dray does not watch, so they cannot serve as the feed's revision: the feed numbers the
//! changes it saw, 1, 2, 3…, and each [`StoredObject`] keeps its own `resourceVersion`.
//!
//! Objects in namespaces that are not selected are kept but not shown: when a namespace
//! gets selected (labelled), its objects appear on the feed as created, and vanish as
//! deleted when it stops being selected.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::api::{Kind, ObjectKey};
use crate::store::{Change, ChangeOp, StoredObject, desired_state};

/// How many changes the log keeps; a reader further behind lists again (the embedded
/// counterpart of 410 Gone).
const LOG_LIMIT: usize = 100_000;

type Position = (String, String);

/// Which namespaces Dray's objects are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Namespaces {
    /// All of them.
    All,
    /// Those the namespace watch currently selects.
    Selected(BTreeSet<String>),
}

impl Namespaces {
    fn admits(&self, key: &ObjectKey) -> bool {
        match (self, &key.namespace) {
            (_, None) | (Namespaces::All, _) => true,
            (Namespaces::Selected(set), Some(namespace)) => set.contains(namespace),
        }
    }
}

struct State {
    /// The number of the newest change.
    revision: u64,
    log: VecDeque<(Change, Option<StoredObject>)>,
    objects: HashMap<Kind, BTreeMap<Position, StoredObject>>,
    namespaces: Namespaces,
}

/// The shared mirror (one per store).
pub(super) struct Mirror {
    state: Mutex<State>,
    latest: watch::Sender<u64>,
}

fn position(key: &ObjectKey) -> Position {
    (key.namespace.clone().unwrap_or_default(), key.name.clone())
}

impl Mirror {
    pub(super) fn new(namespaces: Namespaces) -> Self {
        Mirror {
            state: Mutex::new(State {
                revision: 0,
                log: VecDeque::new(),
                objects: HashMap::new(),
                namespaces,
            }),
            latest: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of the newest revision.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// One object, when it is shown.
    pub(super) fn get(&self, key: &ObjectKey) -> Option<StoredObject> {
        let state = self.lock();
        if !state.namespaces.admits(key) {
            return None;
        }
        state.objects.get(&key.kind)?.get(&position(key)).cloned()
    }

    /// Whether `key`'s namespace is selected (cluster-scoped kinds always are).
    pub(super) fn admits(&self, key: &ObjectKey) -> bool {
        self.lock().namespaces.admits(key)
    }

    /// The `resourceVersion` the mirror holds for `key`, shown or not.
    pub(super) fn version_of(&self, key: &ObjectKey) -> Option<u64> {
        let state = self.lock();
        state
            .objects
            .get(&key.kind)?
            .get(&position(key))
            .map(|o| o.resource_version)
    }

    /// The shown objects of a kind, in one namespace or all, by namespace and name.
    pub(super) fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<StoredObject> {
        let state = self.lock();
        let Some(objects) = state.objects.get(&kind) else {
            return Vec::new();
        };
        objects
            .values()
            .filter(|o| namespace.is_none_or(|ns| o.key.namespace.as_deref() == Some(ns)))
            .filter(|o| state.namespaces.admits(&o.key))
            .cloned()
            .collect()
    }

    /// The changes after `revision`, oldest first, at most `limit`; the first one is not
    /// `revision + 1` when the log no longer reaches back that far.
    pub(super) fn since(&self, revision: u64, limit: usize) -> Vec<(Change, Option<StoredObject>)> {
        let state = self.lock();
        let first = state
            .log
            .front()
            .map_or(state.revision + 1, |(c, _)| c.revision);
        let skip = (revision + 1).saturating_sub(first) as usize;
        state.log.iter().skip(skip).take(limit).cloned().collect()
    }

    /// An object the watch delivered (added or changed).
    pub(super) fn applied(&self, object: StoredObject) {
        let mut state = self.lock();
        let kind = object.key.kind;
        let previous = state
            .objects
            .entry(kind)
            .or_default()
            .insert(position(&object.key), object.clone());
        if previous
            .as_ref()
            .is_some_and(|p| p.resource_version == object.resource_version)
        {
            return;
        }
        if state.namespaces.admits(&object.key) {
            let op = match &previous {
                None => ChangeOp::Created,
                Some(p) if desired_state(&p.object) == desired_state(&object.object) => {
                    ChangeOp::StatusUpdated
                }
                Some(_) => ChangeOp::Updated,
            };
            let key = object.key.clone();
            state.record(key, op, Some(object));
        }
        self.announce(&state);
    }

    /// An object the watch saw deleted.
    pub(super) fn deleted(&self, key: &ObjectKey) {
        let mut state = self.lock();
        let removed = state
            .objects
            .get_mut(&key.kind)
            .and_then(|objects| objects.remove(&position(key)));
        if removed.is_some() {
            if state.namespaces.admits(key) {
                state.record(key.clone(), ChangeOp::Deleted, None);
            }
            self.announce(&state);
        }
    }

    /// A watch listed its kind again (at start, or after 410 Gone): what it listed
    /// replaces what the mirror held of `kinds` from that watch (`owns` tells which
    /// objects the watch is responsible for), with the differences on the feed.
    pub(super) fn relisted(
        &self,
        kind: Kind,
        owns: impl Fn(&StoredObject) -> bool,
        listed: Vec<StoredObject>,
    ) {
        let listed: BTreeMap<Position, StoredObject> =
            listed.into_iter().map(|o| (position(&o.key), o)).collect();
        let gone: Vec<ObjectKey> = {
            let state = self.lock();
            state
                .objects
                .get(&kind)
                .map(|objects| {
                    objects
                        .iter()
                        .filter(|(at, o)| owns(o) && !listed.contains_key(*at))
                        .map(|(_, o)| o.key.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        for key in gone {
            self.deleted(&key);
        }
        for object in listed.into_values() {
            self.applied(object);
        }
    }

    /// The selected namespaces changed: objects that became visible are announced as
    /// created, those hidden as deleted.
    pub(super) fn select(&self, namespaces: Namespaces) {
        let mut state = self.lock();
        if state.namespaces == namespaces {
            return;
        }
        let before = std::mem::replace(&mut state.namespaces, namespaces);
        let mut changes = Vec::new();
        for objects in state.objects.values() {
            for object in objects.values() {
                match (
                    before.admits(&object.key),
                    state.namespaces.admits(&object.key),
                ) {
                    (false, true) => {
                        changes.push((ChangeOp::Created, Some(object.clone()), object.key.clone()))
                    }
                    (true, false) => changes.push((ChangeOp::Deleted, None, object.key.clone())),
                    _ => {}
                }
            }
        }
        for (op, object, key) in changes {
            state.record(key, op, object);
        }
        self.announce(&state);
    }

    fn announce(&self, state: &State) {
        self.latest.send_replace(state.revision);
    }

    /// Waits until the mirror holds `key` at `resource_version` or newer (or, with
    /// `gone`, no longer holds that version): a write is on the feed before the store
    /// returns it. `false` when `timeout` passed first.
    pub(super) async fn wait_for(
        &self,
        key: &ObjectKey,
        resource_version: u64,
        gone: bool,
        timeout: Duration,
    ) -> bool {
        let mut latest = self.subscribe();
        let reached = |mirror: &Mirror| match mirror.version_of(key) {
            Some(held) if gone => held > resource_version,
            Some(held) => held >= resource_version,
            None => gone,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if reached(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, latest.changed()).await {
                Ok(Ok(())) => {}
                _ => return reached(self),
            }
        }
    }
}

impl State {
    fn record(&mut self, key: ObjectKey, op: ChangeOp, object: Option<StoredObject>) {
        self.revision += 1;
        let change = Change {
            revision: self.revision,
            key,
            op,
        };
        self.log.push_back((change, object));
        while self.log.len() > LOG_LIMIT {
            self.log.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stage(namespace: &str, name: &str, version: u64, image: &str) -> StoredObject {
        StoredObject {
            key: ObjectKey::namespaced(Kind::Stage, namespace, name),
            resource_version: version,
            object: json!({
                "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": version.to_string()},
                "spec": {"image": image},
                "status": {"version": version},
            }),
        }
    }

    fn ops(mirror: &Mirror, since: u64) -> Vec<(u64, ChangeOp, String)> {
        mirror
            .since(since, 100)
            .into_iter()
            .map(|(c, _)| (c.revision, c.op, c.key.name))
            .collect()
    }

    #[test]
    fn changes_are_numbered_without_gaps_whatever_the_resource_versions() {
        let mirror = Mirror::new(Namespaces::All);
        mirror.applied(stage("demo", "dev", 100, "a"));
        mirror.applied(stage("demo", "dev", 100, "a")); // a resent event: no change
        mirror.applied(stage("demo", "dev", 250, "a")); // only status differs
        mirror.applied(stage("demo", "dev", 900, "b"));
        mirror.deleted(&ObjectKey::namespaced(Kind::Stage, "demo", "dev"));
        assert_eq!(
            ops(&mirror, 0),
            vec![
                (1, ChangeOp::Created, "dev".into()),
                (2, ChangeOp::StatusUpdated, "dev".into()),
                (3, ChangeOp::Updated, "dev".into()),
                (4, ChangeOp::Deleted, "dev".into()),
            ]
        );
        assert_eq!(ops(&mirror, 3).len(), 1);
        assert_eq!(*mirror.subscribe().borrow(), 4);
    }

    #[test]
    fn a_relisting_reports_only_what_changed_while_the_watch_was_away() {
        let mirror = Mirror::new(Namespaces::All);
        mirror.applied(stage("demo", "dev", 1, "a"));
        mirror.applied(stage("demo", "prod", 2, "a"));
        mirror.relisted(
            Kind::Stage,
            |_| true,
            vec![stage("demo", "dev", 1, "a"), stage("demo", "qa", 7, "a")],
        );
        assert_eq!(
            ops(&mirror, 2),
            vec![
                (3, ChangeOp::Deleted, "prod".into()),
                (4, ChangeOp::Created, "qa".into())
            ]
        );
    }

    #[test]
    fn objects_appear_and_vanish_with_their_namespace_selection() {
        let mirror = Mirror::new(Namespaces::Selected(BTreeSet::new()));
        mirror.applied(stage("demo", "dev", 1, "a"));
        assert!(
            mirror
                .get(&ObjectKey::namespaced(Kind::Stage, "demo", "dev"))
                .is_none()
        );
        assert!(ops(&mirror, 0).is_empty());
        mirror.select(Namespaces::Selected(BTreeSet::from(["demo".to_owned()])));
        assert_eq!(ops(&mirror, 0), vec![(1, ChangeOp::Created, "dev".into())]);
        assert_eq!(mirror.list(Kind::Stage, Some("demo")).len(), 1);
        mirror.select(Namespaces::Selected(BTreeSet::new()));
        assert_eq!(ops(&mirror, 1), vec![(2, ChangeOp::Deleted, "dev".into())]);
    }

    #[tokio::test]
    async fn a_writer_waits_until_the_watch_delivered_its_write() {
        let mirror = std::sync::Arc::new(Mirror::new(Namespaces::All));
        let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
        let waiting = {
            let (mirror, key) = (mirror.clone(), key.clone());
            tokio::spawn(async move {
                mirror
                    .wait_for(&key, 5, false, Duration::from_secs(30))
                    .await
            })
        };
        mirror.applied(stage("demo", "dev", 3, "a"));
        mirror.applied(stage("demo", "dev", 5, "b"));
        assert!(waiting.await.unwrap());
        assert!(
            !mirror
                .wait_for(&key, 6, false, Duration::from_millis(1))
                .await
        );
    }
}
