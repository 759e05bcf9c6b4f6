//! The answers `list_fields` gave lately, kept while nothing they came from changed: a
//! project page or release board of 5,000 Stages asks for the same few fields of every
//! Stage on each request, and picking them out of 5,000 stored JSON texts is most of its
//! time.
//!
//! An answer is kept under the version of what it read ([`KindVersion`]: how many objects
//! of that kind the project has and the newest `resource_version` among them). Every write
//! to one of them changes that version (a create or an update gives the object the
//! store's next, highest revision; a delete lowers the count), so an answer is given again
//! only while none was written. The version is read before the fields, in the same
//! connection: a write between the two makes the answer newer than its version, never
//! older, and the next read sees a new version and reads again.

use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, params};

use super::object::Picked;
use crate::api::Kind;

/// How many answers are kept (the oldest goes first): enough for the release board of
/// dozens of projects, each read for the board and for its project page.
pub(super) const ENTRIES: usize = 128;

/// How many objects the kept answers hold together, at most (the oldest answer goes
/// first): a few fields of each, so a few hundred bytes to a few kilobytes each.
const OBJECTS: usize = 100_000;

/// What was asked: the kind, the project and the fields.
pub(super) type PickKey = (Kind, String, Vec<&'static str>);

/// How many objects of one kind a project has, and the newest `resource_version` of them.
pub(super) type KindVersion = (i64, i64);

/// One kept answer: what was asked, at which version, and the answer.
type Entry = (PickKey, KindVersion, Picked);

/// The kept answers.
#[derive(Default)]
pub(super) struct PickedCache {
    entries: Mutex<Vec<Entry>>,
}

impl PickedCache {
    /// The answer kept for `key` at `version`, if there is one.
    pub(super) fn get(&self, key: &PickKey, version: KindVersion) -> Option<Picked> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .find(|(k, v, _)| k == key && *v == version)
            .map(|(_, _, answer)| answer.clone())
    }

    /// Keeps `answer` for `key` at `version`, in place of an older one for `key`.
    pub(super) fn put(&self, key: PickKey, version: KindVersion, answer: Picked) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(k, _, _)| k != &key);
        entries.push((key, version, answer));
        let mut held: usize = entries.iter().map(|(_, _, a)| a.len()).sum();
        while entries.len() > 1 && (entries.len() > ENTRIES || held > OBJECTS) {
            let (_, _, oldest) = entries.remove(0);
            held -= oldest.len();
        }
    }
}

/// The version of `kind`'s objects in `namespace`, as this connection sees them now.
pub(super) fn kind_version(
    connection: &Connection,
    kind: Kind,
    namespace: &str,
) -> rusqlite::Result<KindVersion> {
    connection
        .prepare_cached(
            "SELECT count(*), COALESCE(max(resource_version), 0) FROM objects
             WHERE kind = ?1 AND namespace = ?2",
        )?
        .query_row(params![kind.as_str(), namespace], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
}

/// The key of a `list_fields` of `pointers` of `kind` in `namespace`.
pub(super) fn key(kind: Kind, namespace: &str, pointers: &[&'static str]) -> PickKey {
    (kind, namespace.to_owned(), pointers.to_vec())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::ObjectKey;
    use crate::store::ObjectFields;

    fn answer(objects: usize) -> Picked {
        Arc::new(
            (0..objects)
                .map(|i| ObjectFields {
                    key: ObjectKey::namespaced(Kind::Stage, "demo", &format!("s{i}")),
                    fields: serde_json::json!({}),
                })
                .collect(),
        )
    }

    fn key_of(project: &str) -> PickKey {
        key(Kind::Stage, project, &["/status"])
    }

    #[test]
    fn the_oldest_answers_go_when_too_many_objects_are_held() {
        let cache = PickedCache::default();
        cache.put(key_of("a"), (1, 1), answer(OBJECTS / 2));
        cache.put(key_of("b"), (1, 1), answer(OBJECTS / 2));
        assert!(cache.get(&key_of("a"), (1, 1)).is_some(), "both fit");
        cache.put(key_of("c"), (1, 1), answer(1));
        assert!(cache.get(&key_of("a"), (1, 1)).is_none(), "the oldest went");
        assert!(cache.get(&key_of("b"), (1, 1)).is_some());
        assert!(cache.get(&key_of("c"), (1, 1)).is_some());
        // One answer larger than the bound is still kept, alone.
        cache.put(key_of("d"), (1, 1), answer(OBJECTS + 1));
        assert!(cache.get(&key_of("d"), (1, 1)).is_some());
        assert!(cache.get(&key_of("c"), (1, 1)).is_none());
    }

    #[test]
    fn at_most_the_bound_of_answers_is_kept_and_a_new_version_replaces_the_old() {
        let cache = PickedCache::default();
        for i in 0..=ENTRIES {
            cache.put(key_of(&format!("p{i}")), (1, 1), answer(1));
        }
        assert!(
            cache.get(&key_of("p0"), (1, 1)).is_none(),
            "the oldest went"
        );
        assert!(cache.get(&key_of(&format!("p{ENTRIES}")), (1, 1)).is_some());
        cache.put(key_of("p1"), (2, 7), answer(1));
        assert!(cache.get(&key_of("p1"), (1, 1)).is_none(), "replaced");
        assert!(cache.get(&key_of("p1"), (2, 7)).is_some());
    }
}
