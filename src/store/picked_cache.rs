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

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, params};

use super::object::ObjectFields;
use crate::api::Kind;

/// How many answers are kept (the oldest goes first): enough for the release board of
/// dozens of projects, each read for the board and for its project page.
const ENTRIES: usize = 128;

/// How many objects the kept answers hold together, at most (the oldest answer goes
/// first): a few fields of each, so a few hundred bytes to a few kilobytes each.
const OBJECTS: usize = 100_000;

/// What was asked: the kind, the project and the fields.
pub(super) type PickKey = (Kind, String, Vec<&'static str>);

/// How many objects of one kind a project has, and the newest `resource_version` of them.
pub(super) type KindVersion = (i64, i64);

/// One kept answer: what was asked, at which version, and the answer.
type Entry = (PickKey, KindVersion, Arc<Vec<ObjectFields>>);

/// The kept answers.
#[derive(Default)]
pub(super) struct PickedCache {
    entries: Mutex<Vec<Entry>>,
}

impl PickedCache {
    /// The answer kept for `key` at `version`, if there is one.
    pub(super) fn get(
        &self,
        key: &PickKey,
        version: KindVersion,
    ) -> Option<Arc<Vec<ObjectFields>>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .find(|(k, v, _)| k == key && *v == version)
            .map(|(_, _, answer)| answer.clone())
    }

    /// Keeps `answer` for `key` at `version`, in place of an older one for `key`.
    pub(super) fn put(&self, key: PickKey, version: KindVersion, answer: Arc<Vec<ObjectFields>>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(k, _, _)| k != &key);
        entries.push((key, version, answer));
        let held = |entries: &Vec<Entry>| entries.iter().map(|(_, _, a)| a.len()).sum::<usize>();
        while entries.len() > 1 && (entries.len() > ENTRIES || held(&entries) > OBJECTS) {
            entries.remove(0);
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
