//! Where the web UI's login sessions live, so that restarting `dray serve` logs nobody out.
//! A row is keyed by the SHA-256 of the session id (the id itself only ever travels in the
//! browser's cookie, so the database cannot be used to take a session over); it holds who
//! the session stands for — the hash of the API token it was made with, or the user and
//! groups an OpenID provider vouched for — its CSRF token and when it ends.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, StoreError};

/// One stored session.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The SHA-256 (hex) of the session id.
    pub key: String,
    /// Who it stands for, as JSON (see `server::auth::sessions::Identity`).
    pub identity: String,
    /// The user, for display and logs.
    pub user: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// When it ends, in Unix seconds.
    pub expires_at: i64,
}

impl std::fmt::Debug for SessionRecord {
    /// Never prints the CSRF token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecord")
            .field("user", &self.user)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Where the web UI's sessions are kept.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session; ended ones (`expires_at <= now`) are dropped first, and the
    /// soonest-ending ones while more than `max - 1` remain.
    async fn put_session(
        &self,
        record: SessionRecord,
        now: i64,
        max: usize,
    ) -> Result<(), StoreError>;
    /// The session with this key, unless it has ended by `now` (an ended one is dropped).
    async fn session(&self, key: &str, now: i64) -> Result<Option<SessionRecord>, StoreError>;
    /// Ends the session with this key.
    async fn delete_session(&self, key: &str) -> Result<(), StoreError>;
    /// How many sessions have not ended by `now`.
    async fn live_sessions(&self, now: i64) -> Result<usize, StoreError>;
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn put_session(
        &self,
        record: SessionRecord,
        now: i64,
        max: usize,
    ) -> Result<(), StoreError> {
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM ui_sessions WHERE expires_at <= ?1",
                params![now],
            )?;
            let keep = i64::try_from(max.saturating_sub(1)).unwrap_or(i64::MAX);
            tx.execute(
                "DELETE FROM ui_sessions WHERE key IN (
                    SELECT key FROM ui_sessions ORDER BY expires_at DESC LIMIT -1 OFFSET ?1)",
                params![keep],
            )?;
            tx.execute(
                "INSERT OR REPLACE INTO ui_sessions (key, identity, user, csrf, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    record.key,
                    record.identity,
                    record.user,
                    record.csrf,
                    record.expires_at
                ],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn session(&self, key: &str, now: i64) -> Result<Option<SessionRecord>, StoreError> {
        let key = key.to_owned();
        self.with_connection(move |c| {
            let found = c
                .query_row(
                    "SELECT key, identity, user, csrf, expires_at FROM ui_sessions WHERE key = ?1",
                    params![key],
                    |r| {
                        Ok(SessionRecord {
                            key: r.get(0)?,
                            identity: r.get(1)?,
                            user: r.get(2)?,
                            csrf: r.get(3)?,
                            expires_at: r.get(4)?,
                        })
                    },
                )
                .optional()?;
            match found {
                Some(record) if record.expires_at <= now => {
                    c.execute("DELETE FROM ui_sessions WHERE key = ?1", params![key])?;
                    Ok(None)
                }
                other => Ok(other),
            }
        })
        .await
    }

    async fn delete_session(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.with_connection(move |c| {
            c.execute("DELETE FROM ui_sessions WHERE key = ?1", params![key])?;
            Ok(())
        })
        .await
    }

    async fn live_sessions(&self, now: i64) -> Result<usize, StoreError> {
        self.with_reader(move |c| {
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM ui_sessions WHERE expires_at > ?1",
                params![now],
                |r| r.get(0),
            )?;
            Ok(usize::try_from(count).unwrap_or_default())
        })
        .await
    }
}
