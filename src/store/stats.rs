//! How much the store is asked to do: counters of reads and writes, for `GET /metrics` and
//! the controller benchmark (`docs/benchmarks.md`, "Controllers").
//!
//! Owns three process-wide counters and nothing else: they count, they never decide. A
//! read is one call of `get`, `list`, `get_many`, `list_newest` or `changes_since`; the
//! objects it returned (a `get` counts one, found or not; a `changes_since` counts its
//! changes) go to a second counter, because one `list` of 1,000 Stages costs what 1,000
//! `get`s do. A write is one object written by a successful `commit` (a create, update,
//! status update or delete). The counters are process-wide, like a Prometheus client's
//! default registry: `dray serve` has one store, so they are that store's; in a test
//! process with many stores they add up, and only grow.
//!
//! Reads made inside [`uncounted`] are not counted: `GET /metrics` reads the store to
//! compute queue lengths and DORA numbers, and a scrape must not move the counters it
//! reports (the controller benchmark counts reads per write between two scrapes).

use std::sync::atomic::{AtomicU64, Ordering};

static READS: AtomicU64 = AtomicU64::new(0);
static OBJECTS_READ: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

/// The counters at one moment (each only grows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Read calls.
    pub reads: u64,
    /// Objects (or changes) those reads returned.
    pub objects_read: u64,
    /// Objects written by successful commits.
    pub writes: u64,
}

tokio::task_local! {
    /// Set while a future runs inside [`uncounted`].
    static UNCOUNTED: ();
}

thread_local! {
    /// Set while a blocking read runs for an uncounted caller ([`Counting::enter`]).
    static UNCOUNTED_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `work` with the store reads it makes left out of the counters.
pub async fn uncounted<F: std::future::Future>(work: F) -> F::Output {
    UNCOUNTED.scope((), work).await
}

/// Whether the current task counts its reads, captured before a read moves to a blocking
/// thread (where task-locals are not seen) and entered there.
#[derive(Clone, Copy, Debug)]
pub struct Counting(bool);

impl Counting {
    /// The current task's.
    pub fn current() -> Self {
        Counting(UNCOUNTED.try_with(|_| ()).is_err())
    }

    /// Runs `work` on this thread counting as the task that captured `self` does.
    pub fn enter<T>(self, work: impl FnOnce() -> T) -> T {
        /// Puts the thread's flag back, even when `work` panics.
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                UNCOUNTED_HERE.with(|u| u.set(self.0));
            }
        }
        let _restore = Restore(UNCOUNTED_HERE.with(|u| u.replace(!self.0)));
        work()
    }
}

/// Counts one read call that returned `objects` objects (or changes).
pub fn record_read(objects: usize) {
    if UNCOUNTED.try_with(|_| ()).is_ok() || UNCOUNTED_HERE.with(std::cell::Cell::get) {
        return;
    }
    READS.fetch_add(1, Ordering::Relaxed);
    OBJECTS_READ.fetch_add(objects as u64, Ordering::Relaxed);
}

/// Counts `objects` objects written by one successful commit.
pub fn record_writes(objects: usize) {
    WRITES.fetch_add(objects as u64, Ordering::Relaxed);
}

/// The counters now.
pub fn counts() -> StoreCounts {
    StoreCounts {
        reads: READS.load(Ordering::Relaxed),
        objects_read: OBJECTS_READ.load(Ordering::Relaxed),
        writes: WRITES.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::api::{Kind, ObjectKey};
    use crate::store::{SqliteStore, Store};

    /// Each read call counts once with the objects it returned; each committed object counts
    /// as one write. Other tests share the counters, so only the growth is checked, and only
    /// as "at least" (they may read and write at the same time).
    #[tokio::test]
    async fn reads_count_calls_and_objects_and_writes_count_committed_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let project = |name: &str| {
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                   "metadata": {"name": name}, "spec": {}})
        };
        let before = counts();
        store
            .commit(vec![
                crate::store::Write::Create(project("one")),
                crate::store::Write::Create(project("two")),
            ])
            .await
            .unwrap();
        let written = counts();
        assert!(
            written.writes >= before.writes + 2,
            "{before:?} → {written:?}"
        );

        let listed = store.list(Kind::Project, None).await.unwrap();
        assert_eq!(listed.len(), 2);
        store
            .get(&ObjectKey::cluster(Kind::Project, "one"))
            .await
            .unwrap()
            .unwrap();
        let read = counts();
        assert!(read.reads >= written.reads + 2, "{written:?} → {read:?}");
        assert!(
            read.objects_read >= written.objects_read + 3,
            "{written:?} → {read:?}"
        );
    }
}
