//! `Controller::for_kind::<K>()`: runs a reconciler over every object of one kind, as
//! kube-runtime's `Controller` does — the same `reconcile(Arc<K>, Arc<Ctx>) ->
//! Result<Action, E>` and `error_policy(Arc<K>, &E, Arc<Ctx>) -> Action` functions.
//!
//! What wakes an object:
//! - it is new to the controller (every object once, at start), or it changed (narrowed
//!   with [`Controller::only_when`]);
//! - a change to another kind that a [`Controller::watches`] mapper maps to it (a Freight
//!   change → the Stages it feeds);
//! - a key sent through its [`Trigger`] (work the controller started elsewhere ended);
//! - the time its last [`Action`] asked for.
//!
//! An object never reconciles beside itself: asked for while it runs, it runs again right
//! after. At most `concurrency` objects reconcile at once. Before an object's next
//! reconcile, the caches catch up with the writes its last one made, so a reconciler
//! always reads its own writes. A write to one project wakes only the objects mapped from
//! it; nothing polls.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{Kind, ObjectKey};
use crate::store::StoredObject;

use super::reflector::{Changed, Event};
use super::scheduler::Scheduler;
use super::{Action, Cache, Resource, metrics};

/// How long after a reconcile the controller waits for the caches to hold its writes.
const CATCH_UP: Duration = Duration::from_secs(10);
/// When a reconcile panicked, how long until it is tried again.
const AFTER_PANIC: Duration = Duration::from_secs(30);
/// The longest the loop sleeps with nothing due (it then just looks again).
const IDLE: Duration = Duration::from_secs(600);

type Mapper = Box<dyn Fn(&Changed, &Cache) -> Vec<ObjectKey> + Send + Sync>;
type Predicate = Box<dyn Fn(Option<&StoredObject>, &StoredObject) -> bool + Send + Sync>;

/// Sends keys to a controller from outside its watches.
#[derive(Clone, Debug)]
pub struct Trigger(mpsc::UnboundedSender<ObjectKey>);

/// The receiving end of a [`Trigger`], given to [`Controller::triggered_by`].
pub struct Triggers(mpsc::UnboundedReceiver<ObjectKey>);

/// A trigger and its receiving end.
pub fn trigger() -> (Trigger, Triggers) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (Trigger(sender), Triggers(receiver))
}

impl Trigger {
    /// Asks for `key` to reconcile now (nothing happens once the controller stopped).
    pub fn reconcile(&self, key: ObjectKey) {
        let _ = self.0.send(key);
    }
}

/// A controller of kind `K`, being built.
pub struct Controller<K: Resource> {
    name: &'static str,
    cache: Cache,
    only_when: Option<Predicate>,
    watches: HashMap<Kind, Vec<Mapper>>,
    triggers: Option<Triggers>,
    concurrency: usize,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource> Controller<K> {
    /// A controller named `name` (in logs and metrics) over the objects of `K` in `cache`.
    pub fn for_kind(name: &'static str, cache: &Cache) -> Self {
        Controller {
            name,
            cache: cache.clone(),
            only_when: None,
            watches: HashMap::new(),
            triggers: None,
            concurrency: 16,
            kind: PhantomData,
        }
    }

    /// Wakes an object on its own changes only when `predicate(before, after)` holds
    /// (e.g. only when its spec or an annotation changed, not on its own status writes).
    pub fn only_when(
        mut self,
        predicate: impl Fn(Option<&StoredObject>, &StoredObject) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.only_when = Some(Box::new(predicate));
        self
    }

    /// Wakes the objects `mapper` names when an object of `kind` changes.
    pub fn watches(
        mut self,
        kind: Kind,
        mapper: impl Fn(&Changed, &Cache) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.watches.entry(kind).or_default().push(Box::new(mapper));
        self
    }

    /// Wakes the objects sent through the trigger.
    pub fn triggered_by(mut self, triggers: Triggers) -> Self {
        self.triggers = Some(triggers);
        self
    }

    /// At most `n` objects reconcile at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The keys an event wakes.
    fn woken(&self, changed: &Changed) -> Vec<ObjectKey> {
        let mut keys = Vec::new();
        if changed.kind() == K::KIND {
            if let Some(now) = changed.object.as_deref() {
                let wanted = self
                    .only_when
                    .as_ref()
                    .is_none_or(|p| p(changed.previous.as_deref(), now));
                if wanted {
                    keys.push(changed.change.key.clone());
                }
            }
        }
        for mapper in self.watches.get(&changed.kind()).into_iter().flatten() {
            keys.extend(mapper(changed, &self.cache));
        }
        keys.retain(|k| k.kind == K::KIND);
        keys
    }

    /// Runs until `shutdown`; reconciles in flight are then dropped (a reconcile must be
    /// safe to stop at any await and to run again).
    pub async fn run<C, E, F, Fut, P>(
        mut self,
        reconcile: F,
        error_policy: P,
        context: Arc<C>,
        shutdown: CancellationToken,
    ) where
        C: Send + Sync + 'static,
        E: Display + Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(Arc<K>, &E, Arc<C>) -> Action + Send + Sync + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let error_policy = Arc::new(error_policy);
        let counter = metrics::reconciles(self.name);
        let mut events = self.cache.subscribe();
        let mut triggers = self.triggers.take();
        let mut scheduler = Scheduler::default();
        let mut tasks: JoinSet<(ObjectKey, Option<Duration>)> = JoinSet::new();
        let mut in_flight: HashMap<tokio::task::Id, ObjectKey> = HashMap::new();
        let everything = |scheduler: &mut Scheduler| {
            let now = Instant::now();
            for key in self.cache.keys(K::KIND) {
                scheduler.schedule(key, now);
            }
        };
        everything(&mut scheduler);
        loop {
            let now = Instant::now();
            while scheduler.running() < self.concurrency {
                let Some(key) = scheduler.take_due(now) else {
                    break;
                };
                let Some(object) = self.cache.get_key::<K>(&key) else {
                    scheduler.finished(&key);
                    continue;
                };
                let (reconcile, error_policy) = (reconcile.clone(), error_policy.clone());
                let (context, cache, name) = (context.clone(), self.cache.clone(), self.name);
                let (task_key, counter) = (key.clone(), counter.clone());
                let handle = tasks.spawn(async move {
                    let action = match reconcile(object.clone(), context.clone()).await {
                        Ok(action) => action,
                        Err(error) => {
                            tracing::warn!(controller = name, object = %task_key, %error, "reconcile failed");
                            error_policy(object, &error, context)
                        }
                    };
                    // Counted once it ended: whoever reads the count then sees its writes.
                    counter.inc();
                    if !cache.catch_up(CATCH_UP).await {
                        tracing::warn!(controller = name, object = %task_key, "the caches did not catch up with the store within 10s");
                    }
                    (task_key, action.requeue_after())
                });
                in_flight.insert(handle.id(), key);
            }
            let wake = scheduler.next_due().unwrap_or(now + IDLE);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                received = events.recv() => match received {
                    Ok(event) => match event.as_ref() {
                        Event::Changed(changed) => {
                            for key in self.woken(changed) {
                                scheduler.schedule(key, Instant::now());
                            }
                        }
                        Event::Relisted => everything(&mut scheduler),
                    },
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(controller = self.name, missed, "fell behind the change feed; looking at everything again");
                        everything(&mut scheduler);
                    }
                    Err(RecvError::Closed) => break,
                },
                Some(key) = async {
                    match triggers.as_mut() {
                        Some(Triggers(receiver)) => receiver.recv().await,
                        None => std::future::pending().await,
                    }
                } => scheduler.schedule(key, Instant::now()),
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let (key, requeue) = match done {
                        Ok((id, (key, requeue))) => {
                            in_flight.remove(&id);
                            (key, requeue)
                        }
                        Err(error) => {
                            let Some(key) = in_flight.remove(&error.id()) else { continue };
                            tracing::error!(controller = self.name, object = %key, %error, "reconcile panicked; trying again in 30s");
                            (key, Some(AFTER_PANIC))
                        }
                    };
                    scheduler.finished(&key);
                    if let Some(after) = requeue {
                        scheduler.schedule(key, Instant::now() + after);
                    }
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}
