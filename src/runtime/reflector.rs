//! The reflector: lists every cached kind once, then follows the store's change feed,
//! applying each write to the caches and announcing it as an [`Event`] — after the cache
//! holds it, so whoever reacts reads at least that state.
//!
//! It reads the feed together with the changed objects (one store read per batch of
//! writes, [`crate::store::Store::changed_objects_since`]). When the feed has been trimmed
//! past the revision it last saw (it fell too far behind), it lists again and announces
//! [`Event::Relisted`], on which every controller looks at all its objects again — the
//! embedded counterpart of a Kubernetes watch answering 410 Gone.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::api::Kind;
use crate::store::{Change, ChangeOp, Store, StoreError, StoredObject};

use super::cache::{Cache, Kinds, State, position};

/// How many events a slow subscriber may fall behind before it resyncs.
const EVENTS_BUFFERED: usize = 16_384;
/// How many feed rows one read takes.
const BATCH: usize = 1_000;
/// The longest the reflector waits on the feed before looking again.
const FEED_WAIT: Duration = Duration::from_secs(60);
/// How long it waits before reading again after the store failed.
const RETRY: Duration = Duration::from_secs(1);

/// What the caches just took in.
#[derive(Debug)]
pub enum Event {
    /// One write to a cached kind.
    Changed(Changed),
    /// The caches were listed again from scratch: anything may have changed.
    Relisted,
}

/// One write to a cached kind, with the object before and after.
#[derive(Debug)]
pub struct Changed {
    /// The write.
    pub change: Change,
    /// The object now (`None` once deleted).
    pub object: Option<Arc<StoredObject>>,
    /// The object as the cache held it before (`None` when new to it).
    pub previous: Option<Arc<StoredObject>>,
}

impl Changed {
    /// The kind written.
    pub fn kind(&self) -> Kind {
        self.change.key.kind
    }

    /// The object now, or as it was when it was deleted.
    pub fn latest(&self) -> Option<&StoredObject> {
        self.object.as_deref().or(self.previous.as_deref())
    }

    /// The object before and after, typed (each `None` when absent or unreadable).
    pub fn typed<K: serde::de::DeserializeOwned>(&self) -> (Option<K>, Option<K>) {
        let read = |o: &Option<Arc<StoredObject>>| o.as_ref().and_then(|s| s.to_typed().ok());
        (read(&self.previous), read(&self.object))
    }
}

/// Lists the kinds, starts following the feed (until `shutdown`) and returns the caches.
pub async fn start(
    store: Arc<dyn Store>,
    kinds: Kinds,
    shutdown: CancellationToken,
) -> Result<Cache, StoreError> {
    let state = Arc::new(RwLock::new(kinds.empty_state()));
    let seen = list_all(store.as_ref(), &state).await?;
    let (revision_tx, revision) = watch::channel(seen);
    let (events, _) = broadcast::channel(EVENTS_BUFFERED);
    let cache = Cache {
        state,
        events,
        revision,
        store,
    };
    tokio::spawn(follow(cache.clone(), revision_tx, seen, shutdown));
    Ok(cache)
}

/// Fills every cached kind from the store; returns the revision the listing reflects at
/// least (taken before listing, so no write after it is missed).
async fn list_all(store: &dyn Store, state: &RwLock<State>) -> Result<u64, StoreError> {
    let revision = store.changes().latest();
    let kinds: Vec<Kind> = state
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .kinds
        .keys()
        .copied()
        .collect();
    for kind in kinds {
        let listed = store.list(kind, None).await?;
        let mut state = state.write().unwrap_or_else(PoisonError::into_inner);
        let Some(cache) = state.kinds.get_mut(&kind) else {
            continue;
        };
        cache.objects = listed
            .into_iter()
            .map(|stored| (position(&stored.key), cache.entry(stored)))
            .collect();
    }
    Ok(revision)
}

async fn follow(
    cache: Cache,
    revision: watch::Sender<u64>,
    mut seen: u64,
    shutdown: CancellationToken,
) {
    let mut feed = cache.store.changes();
    loop {
        if feed.latest() <= seen {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = feed.wait_past(seen, FEED_WAIT) => {}
            }
            continue;
        }
        match cache.store.changed_objects_since(seen, BATCH).await {
            Ok(batch) if batch.first().is_some_and(|(c, _)| c.revision > seen + 1) => {
                tracing::warn!(
                    seen,
                    "the change feed was trimmed past what the caches had seen; listing again"
                );
                match list_all(cache.store.as_ref(), &cache.state).await {
                    Ok(listed) => {
                        seen = listed;
                        let _ = revision.send(seen);
                        let _ = cache.events.send(Arc::new(Event::Relisted));
                    }
                    Err(error) => wait_after(&error, &shutdown).await,
                }
            }
            Ok(batch) if batch.is_empty() => {
                // Nothing to read past `seen` although the counter moved: the rows are
                // not visible yet; look again when the next write lands.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = feed.wait_past(feed.latest(), RETRY) => {}
                }
            }
            Ok(batch) => {
                for (change, object) in batch {
                    seen = change.revision;
                    if let Some(event) = apply(&cache, change, object) {
                        let _ = cache.events.send(Arc::new(event));
                    }
                }
                let _ = revision.send(seen);
            }
            Err(error) => wait_after(&error, &shutdown).await,
        }
    }
}

async fn wait_after(error: &StoreError, shutdown: &CancellationToken) {
    tracing::error!(%error, "the runtime cannot read the change feed; trying again");
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(RETRY) => {}
    }
}

/// Applies one write to the caches; the event to announce, when the kind is cached.
fn apply(cache: &Cache, change: Change, object: Option<StoredObject>) -> Option<Event> {
    let mut state = cache.state.write().unwrap_or_else(PoisonError::into_inner);
    let kind_cache = state.kinds.get_mut(&change.key.kind)?;
    let at = position(&change.key);
    let object = object.filter(|_| change.op != ChangeOp::Deleted);
    let (previous, now) = match object {
        Some(stored) => {
            let entry = kind_cache.entry(stored);
            let now = entry.stored.clone();
            (kind_cache.objects.insert(at, entry), Some(now))
        }
        None => (kind_cache.objects.remove(&at), None),
    };
    Some(Event::Changed(Changed {
        change,
        object: now,
        previous: previous.map(|e| e.stored),
    }))
}
