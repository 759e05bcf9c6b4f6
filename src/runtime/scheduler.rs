//! The keyed work queue under every controller: each key at most once in the queue and
//! at most once running; a key asked for while it runs runs again right after; a requeue
//! keeps the sooner of two times. Pure bookkeeping over [`Instant`]s, tested without a
//! clock.

use std::collections::{BTreeSet, HashMap, HashSet};

use tokio::time::Instant;

use crate::api::ObjectKey;

/// What waits to run, and what runs.
#[derive(Default)]
pub(super) struct Scheduler {
    queue: BTreeSet<(Instant, u64, ObjectKey)>,
    when: HashMap<ObjectKey, (Instant, u64)>,
    running: HashSet<ObjectKey>,
    sequence: u64,
}

impl Scheduler {
    /// Asks for `key` to run at `at`, or sooner if it is already due sooner.
    pub(super) fn schedule(&mut self, key: ObjectKey, at: Instant) {
        if let Some(&(existing, sequence)) = self.when.get(&key) {
            if existing <= at {
                return;
            }
            self.queue.remove(&(existing, sequence, key.clone()));
        }
        self.sequence += 1;
        self.queue.insert((at, self.sequence, key.clone()));
        self.when.insert(key, (at, self.sequence));
    }

    /// The next key due at `now` that is not running, marked running.
    pub(super) fn take_due(&mut self, now: Instant) -> Option<ObjectKey> {
        let found = self
            .queue
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .find(|(_, _, key)| !self.running.contains(key))
            .cloned()?;
        self.queue.remove(&found);
        let (_, _, key) = found;
        self.when.remove(&key);
        self.running.insert(key.clone());
        Some(key)
    }

    /// Marks `key` no longer running.
    pub(super) fn finished(&mut self, key: &ObjectKey) {
        self.running.remove(key);
    }

    /// When the earliest key not running falls due, if any waits.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queue
            .iter()
            .find(|(_, _, key)| !self.running.contains(key))
            .map(|(at, _, _)| *at)
    }

    /// How many keys run.
    pub(super) fn running(&self) -> usize {
        self.running.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::Kind;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced(Kind::Stage, "demo", name)
    }

    #[test]
    fn a_key_is_queued_once_at_the_sooner_time() {
        let now = Instant::now();
        let mut scheduler = Scheduler::default();
        scheduler.schedule(key("dev"), now + Duration::from_secs(60));
        scheduler.schedule(key("dev"), now + Duration::from_secs(5));
        scheduler.schedule(key("dev"), now + Duration::from_secs(30));
        assert_eq!(scheduler.next_due(), Some(now + Duration::from_secs(5)));
        assert_eq!(scheduler.take_due(now), None, "nothing is due yet");
        let later = now + Duration::from_secs(5);
        assert_eq!(scheduler.take_due(later), Some(key("dev")));
        assert_eq!(scheduler.take_due(later + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_key_asked_for_while_it_runs_runs_again_after_not_beside_itself() {
        let now = Instant::now();
        let mut scheduler = Scheduler::default();
        scheduler.schedule(key("dev"), now);
        scheduler.schedule(key("prod"), now);
        assert_eq!(scheduler.take_due(now), Some(key("dev")));
        scheduler.schedule(key("dev"), now);
        assert_eq!(
            scheduler.take_due(now),
            Some(key("prod")),
            "the running key is passed over"
        );
        assert_eq!(scheduler.take_due(now), None);
        assert_eq!(scheduler.next_due(), None, "only a running key waits");
        scheduler.finished(&key("dev"));
        assert_eq!(scheduler.next_due(), Some(now));
        assert_eq!(scheduler.take_due(now), Some(key("dev")));
        assert_eq!(scheduler.running(), 2);
    }

    #[test]
    fn keys_run_in_the_order_they_fall_due() {
        let now = Instant::now();
        let mut scheduler = Scheduler::default();
        scheduler.schedule(key("c"), now + Duration::from_secs(3));
        scheduler.schedule(key("a"), now + Duration::from_secs(1));
        scheduler.schedule(key("b"), now + Duration::from_secs(2));
        let all = now + Duration::from_secs(10);
        let order: Vec<String> = std::iter::from_fn(|| scheduler.take_due(all))
            .map(|k| k.name)
            .collect();
        assert_eq!(order, ["a", "b", "c"]);
    }
}
