//! A small, bounded cache of answers that stay true for a short while: the reviewed
//! identity of a token, a SubjectAccessReview's verdict. It owns expiry and the bound, not
//! what is cached or how keys are made (a token is only ever a key as its SHA-256).
//!
//! Time is passed in (`now`), so that tests can step it without sleeping.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// At most `capacity` entries, each answered for `ttl` after it was stored.
#[derive(Debug)]
pub(super) struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<K, (Instant, V)>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache; a `capacity` of 0 caches nothing.
    pub(super) fn new(ttl: Duration, capacity: usize) -> Self {
        TtlCache {
            ttl,
            capacity,
            entries: HashMap::new(),
        }
    }

    /// The value stored for `key`, unless it is older than the ttl at `now`.
    pub(super) fn get(&self, key: &K, now: Instant) -> Option<V> {
        let (stored, value) = self.entries.get(key)?;
        (now.saturating_duration_since(*stored) < self.ttl).then(|| value.clone())
    }

    /// Stores `value` for `key` at `now`. When full, expired entries go first, then the
    /// oldest one.
    pub(super) fn insert(&mut self, key: K, value: V, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let ttl = self.ttl;
            self.entries
                .retain(|_, (stored, _)| now.saturating_duration_since(*stored) < ttl);
            if self.entries.len() >= self.capacity
                && let Some(oldest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (stored, _))| *stored)
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, (now, value));
    }

    /// How many entries are held (expired ones included until they are pushed out).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_holds_for_the_ttl_and_not_after() {
        let start = Instant::now();
        let mut cache = TtlCache::new(Duration::from_secs(10), 8);
        cache.insert("k", 1, start);
        assert_eq!(cache.get(&"k", start + Duration::from_secs(9)), Some(1));
        assert_eq!(cache.get(&"k", start + Duration::from_secs(10)), None);
        assert_eq!(cache.get(&"other", start), None);
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_oldest() {
        let start = Instant::now();
        let mut cache = TtlCache::new(Duration::from_secs(10), 2);
        cache.insert("a", 1, start);
        cache.insert("b", 2, start + Duration::from_secs(1));
        cache.insert("c", 3, start + Duration::from_secs(2));
        assert_eq!(cache.len(), 2);
        let now = start + Duration::from_secs(2);
        assert_eq!(cache.get(&"a", now), None, "the oldest went");
        assert_eq!(cache.get(&"b", now), Some(2));
        assert_eq!(cache.get(&"c", now), Some(3));
        let later = start + Duration::from_millis(11_500);
        cache.insert("d", 4, later);
        assert_eq!(cache.get(&"b", later), None, "expired, pushed out");
        assert_eq!(cache.get(&"c", later), Some(3));
        assert_eq!(cache.get(&"d", later), Some(4));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let start = Instant::now();
        let mut cache = TtlCache::new(Duration::from_secs(10), 0);
        cache.insert("a", 1, start);
        assert_eq!(cache.get(&"a", start), None);
    }
}
