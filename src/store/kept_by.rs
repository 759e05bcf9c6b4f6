//! Values derived from a shared [`Picked`] answer, kept while the store hands back that
//! same answer: the project page's outline of 5,000 Stages, or the release board's typed
//! Stages, is worked out of the store's answer once, not on every request. What is
//! derived from a kept value (the Stages drawn, from the outline) is kept the same way,
//! under that value's identity.
//!
//! A store that keeps its `list_fields` answers (the SQLite store, `picked_cache.rs`) gives
//! the same `Arc` again only while nothing it read changed, so the answer's identity is
//! its version. An entry holds a [`Weak`] to the answer it came from: the answer's
//! allocation cannot be reused for another while the entry lives, so an identity match is
//! never a different answer; and once the store drops the answer the entry is dead and
//! goes. A store that keeps nothing gives a new answer each time, and its entries die
//! with the request.

use std::sync::{Arc, Mutex, PoisonError, Weak};

#[cfg(doc)]
use super::object::Picked;

/// The most entries kept, live or not (the oldest goes first): as many as the SQLite store
/// keeps answers, so that the board of that many projects keeps what it derives of each.
const ENTRIES: usize = super::picked_cache::ENTRIES;

type Entry<S, T> = (Weak<S>, Arc<T>);

/// Values of type `T` derived from shared values of type `S` (a [`Picked`] answer), each
/// kept while what it came from lives.
pub struct KeptBy<S, T> {
    entries: Mutex<Vec<Entry<S, T>>>,
}

impl<S, T> KeptBy<S, T> {
    /// No values yet; `const`, so that a memo can be a `static` beside what it derives.
    pub const fn new() -> Self {
        KeptBy {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The value derived from `source`: the kept one when `source` is the very value it
    /// was derived from, otherwise `derive(source)`, kept. `derive` must depend on nothing
    /// but `source`. It runs outside the lock: two requests racing both derive.
    pub fn get_or_derive(&self, source: &Arc<S>, derive: impl FnOnce(&S) -> T) -> Arc<T> {
        let identity = Arc::downgrade(source);
        if let Some(kept) = self
            .lock()
            .iter()
            .find(|(from, _)| from.ptr_eq(&identity))
            .map(|(_, value)| value.clone())
        {
            return kept;
        }
        let value = Arc::new(derive(source));
        let mut entries = self.lock();
        entries.retain(|(from, _)| from.strong_count() > 0 && !from.ptr_eq(&identity));
        if entries.len() >= ENTRIES {
            entries.remove(0);
        }
        entries.push((identity, value.clone()));
        value
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry<S, T>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S, T> Default for KeptBy<S, T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::api::{Kind, ObjectKey};
    use crate::store::{ObjectFields, Picked};

    fn answer(names: &[&str]) -> Picked {
        Arc::new(
            names
                .iter()
                .map(|n| ObjectFields {
                    key: ObjectKey::namespaced(Kind::Stage, "demo", n),
                    fields: serde_json::json!({}),
                })
                .collect(),
        )
    }

    fn names(fields: &[ObjectFields]) -> Vec<String> {
        fields.iter().map(|f| f.key.name.clone()).collect()
    }

    #[test]
    fn the_same_answer_is_derived_once_and_an_equal_new_one_again() {
        let memo = KeptBy::new();
        let derived = AtomicUsize::new(0);
        let derive = |fields: &Vec<ObjectFields>| {
            derived.fetch_add(1, Ordering::SeqCst);
            names(fields)
        };
        let first = answer(&["dev", "prod"]);
        assert_eq!(*memo.get_or_derive(&first, derive), ["dev", "prod"]);
        assert_eq!(*memo.get_or_derive(&first, derive), ["dev", "prod"]);
        assert_eq!(
            derived.load(Ordering::SeqCst),
            1,
            "kept for the same answer"
        );
        // An answer read again (equal, but not the kept one) is derived again: identity,
        // not content, is the version.
        let again = answer(&["dev", "prod"]);
        assert_eq!(*memo.get_or_derive(&again, derive), ["dev", "prod"]);
        assert_eq!(derived.load(Ordering::SeqCst), 2);
        let changed = answer(&["dev"]);
        assert_eq!(*memo.get_or_derive(&changed, derive), ["dev"]);
        assert_eq!(derived.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn an_entry_goes_when_its_answer_is_dropped() {
        let memo = KeptBy::new();
        let first = answer(&["dev"]);
        memo.get_or_derive(&first, |a| names(a));
        drop(first);
        let second = answer(&["prod"]);
        assert_eq!(*memo.get_or_derive(&second, |a| names(a)), ["prod"]);
        assert_eq!(memo.lock().len(), 1, "the dead entry was removed");
    }

    #[test]
    fn at_most_the_bound_of_entries_is_kept_while_answers_live() {
        let memo = KeptBy::new();
        let answers: Vec<Picked> = (0..ENTRIES + 3).map(|_| answer(&["dev"])).collect();
        for a in &answers {
            memo.get_or_derive(a, |a| names(a));
        }
        assert_eq!(memo.lock().len(), ENTRIES);
    }
}
