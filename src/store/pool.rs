//! The SQLite connections of the embedded store: one writer and a small pool of readers.
//!
//! WAL lets readers run while a write transaction is open, so reads (`get`, `list`,
//! `changes_since`, token lookups, …) take one of [`READERS`] read-only connections
//! (`PRAGMA query_only`) and never queue behind a commit. Every write goes through the one
//! writer connection, which keeps revisions in commit order.
//!
//! Visibility: a reader's statement (or transaction) reads the snapshot of the moment it
//! starts. A write is visible to every read that starts after its `COMMIT` returned, and
//! the store announces a revision on the change feed only after that, so a reader woken
//! by the feed always finds the write it was told about. A read that must see several
//! tables at one instant (changes and the objects they name) wraps them in one
//! transaction on its reader.
//!
//! This module owns opening and configuring connections and lending readers out; what
//! the connections are used for lives in `sqlite.rs`, `tokens.rs`, `sessions.rs` and
//! `deliveries.rs`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use super::StoreError;

/// How many read-only connections each store keeps.
pub(super) const READERS: usize = 4;

/// How long a connection waits for a lock held by another process before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the writer connection: WAL, `synchronous=FULL`, foreign keys on.
pub(super) fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.execute_batch("PRAGMA journal_mode=WAL;")?;
    configure(&connection)?;
    Ok(connection)
}

/// Opens a read-only connection to a database the writer has created and migrated.
fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = Connection::open_with_flags(path, flags)?;
    configure(&connection)?;
    connection.execute_batch("PRAGMA query_only=ON;")?;
    Ok(connection)
}

/// How much of the database file a connection maps into memory (`PRAGMA mmap_size`): reads
/// of mapped pages are memory reads, not a `pread` and a copy each (a 5,000-Stage project
/// page spent a quarter of its time in `pread`). Address space only; the pages are the
/// kernel's page cache, shared by every connection. Beyond it, pages are read as before.
const MMAP_SIZE: u64 = 1 << 30;

/// The pragmas every connection shares.
fn configure(connection: &Connection) -> rusqlite::Result<()> {
    connection.execute_batch(&format!(
        "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA mmap_size={MMAP_SIZE};"
    ))?;
    connection.busy_timeout(BUSY_TIMEOUT)
}

/// The read-only connections, lent out one per read.
pub(super) struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    /// One permit per idle connection: a read waits here (asynchronously) when all are
    /// lent, never on a blocking thread.
    permits: Arc<Semaphore>,
}

impl ReadPool {
    /// Opens [`READERS`] read-only connections to the database at `path`.
    pub(super) fn open(path: &Path) -> rusqlite::Result<Self> {
        let idle = (0..READERS)
            .map(|_| open_reader(path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReadPool {
            idle: Mutex::new(idle),
            permits: Arc::new(Semaphore::new(READERS)),
        })
    }

    /// Runs `work` on an idle reader, on tokio's blocking pool.
    pub(super) async fn run<T, F>(self: &Arc<Self>, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Internal("the read connections were closed".into()))?;
        let pool = self.clone();
        tokio::task::spawn_blocking(move || {
            // Dropped in reverse order: the connection goes back before the permit does.
            let _permit = permit;
            let mut lease = Lease::take(&pool)?;
            work(lease.connection())
        })
        .await
        .map_err(|e| StoreError::Internal(format!("database task failed: {e}")))?
    }
}

/// A reader taken from the pool; it goes back when the lease ends, even if the work
/// panicked.
struct Lease<'a> {
    pool: &'a ReadPool,
    connection: Option<Connection>,
}

impl<'a> Lease<'a> {
    fn take(pool: &'a ReadPool) -> Result<Self, StoreError> {
        let connection = pool
            .idle
            .lock()
            .map_err(|_| StoreError::Internal("the read pool lock was poisoned".into()))?
            .pop()
            .ok_or_else(|| StoreError::Internal("no idle read connection".into()))?;
        Ok(Lease {
            pool,
            connection: Some(connection),
        })
    }

    fn connection(&mut self) -> &mut Connection {
        self.connection
            .as_mut()
            .expect("a lease holds its connection until it is dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let (Some(connection), Ok(mut idle)) = (self.connection.take(), self.pool.idle.lock()) {
            idle.push(connection);
        }
    }
}
