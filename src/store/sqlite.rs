//! The embedded store: SQLite in WAL mode with `synchronous=FULL`, one writer and a few
//! readers that never wait for it (`pool.rs`), schema migrations by `PRAGMA user_version`.
//! Blocking SQLite calls run on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::api::{Kind, ObjectKey};

use super::object::{desired_state, key_of, resource_version_of, spec_part};
use super::picked_cache::{self, PickKey, PickedCache};
use super::pool::{self, ReadPool};
use super::{
    Change, ChangeFeed, ChangeOp, ObjectFields, Picked, Store, StoreError, StoredObject, Write,
};

/// The database file inside the data directory.
pub const DATABASE_FILE: &str = "dray.db";

/// How many change-feed rows to keep; older ones are trimmed.
const CHANGES_KEPT: u64 = 100_000;

/// Schema migrations, applied in order; `PRAGMA user_version` counts how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: resources and the change feed.
    "CREATE TABLE objects (
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        resource_version INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)
     ) WITHOUT ROWID;
     CREATE TABLE changes (
        revision INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        op TEXT NOT NULL
     );",
    // 2: API tokens (SHA-256 hashes only) and cluster-wide role bindings; see `tokens.rs`.
    "CREATE TABLE api_tokens (
        hash TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        groups TEXT NOT NULL,
        created_at TEXT NOT NULL
     ) WITHOUT ROWID;
     CREATE TABLE cluster_role_bindings (
        subject_kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        role TEXT NOT NULL,
        PRIMARY KEY (subject_kind, subject, role)
     ) WITHOUT ROWID;",
    // 3: newest-first listing (`list_newest`, the UI's Freight timeline) without reading
    // every row. The expression must match `NEWEST_ORDER` exactly for SQLite to use it.
    "CREATE INDEX objects_newest ON objects
        (kind, namespace, rtrim(json_extract(body, '$.metadata.creationTimestamp'), 'Z'), name);",
    // 4: API tokens get a stable id (random, unrelated to the token), their creator, a
    // description, an expiry and when they were last used; see `tokens.rs`. Tokens made
    // before keep working: they get a random id, no expiry, and the first `admin` token
    // (the bootstrap token is always the first one) is marked as the bootstrap token.
    "ALTER TABLE api_tokens ADD COLUMN id TEXT;
     ALTER TABLE api_tokens ADD COLUMN created_by TEXT;
     ALTER TABLE api_tokens ADD COLUMN description TEXT;
     ALTER TABLE api_tokens ADD COLUMN expires_at TEXT;
     ALTER TABLE api_tokens ADD COLUMN last_used_at TEXT;
     UPDATE api_tokens SET id = lower(hex(randomblob(6)));
     UPDATE api_tokens SET created_by = 'system:bootstrap'
        WHERE user = 'admin' AND created_at = (SELECT MIN(created_at) FROM api_tokens);
     CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);",
    // 5: the web UI's sessions, so that a restart logs nobody out (store/sessions.rs).
    "CREATE TABLE ui_sessions (
        key TEXT PRIMARY KEY,
        identity TEXT NOT NULL,
        user TEXT NOT NULL,
        csrf TEXT NOT NULL,
        expires_at INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);",
    // 6: webhook deliveries already taken, so a replay does nothing (store/deliveries.rs).
    "CREATE TABLE webhook_deliveries (
        receiver TEXT NOT NULL,
        key TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (receiver, key)
     ) WITHOUT ROWID;
     CREATE INDEX webhook_deliveries_expires ON webhook_deliveries (expires_at);",
    // 7: revoked API tokens (hash, id, user, when), so that a revoked token is refused as
    // revoked rather than as unknown (`tokens.rs`).
    "CREATE TABLE revoked_api_tokens (
        hash TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        user TEXT NOT NULL,
        revoked_at TEXT NOT NULL
     ) WITHOUT ROWID;",
    // 8: newest-first listing of one origin (`list_newest_of_origin`, the UI's Freight
    // lanes): without it, a lane of a Warehouse whose Freight is old read every newer
    // Freight of the project first (1.3 s of the project page at 50,000 Freight,
    // docs/benchmarks.md). The expressions must match `ORIGIN` and `NEWEST_ORDER`.
    "CREATE INDEX objects_origin_newest ON objects
        (kind, namespace, json_extract(body, '$.origin.name'),
         rtrim(json_extract(body, '$.metadata.creationTimestamp'), 'Z'), name);",
];

/// `list_newest`'s sort key: the creation time (RFC 3339 UTC; without its `Z` it sorts as
/// text, whatever the fraction's length), as index 3 has it.
const NEWEST_ORDER: &str = "rtrim(json_extract(body, '$.metadata.creationTimestamp'), 'Z')";

/// `list_newest_of_origin`'s filter, as index 8 has it.
const ORIGIN: &str = "json_extract(body, '$.origin.name')";

/// The statement of `list_newest` (`of_origin`: of `list_newest_of_origin`). Two
/// statements, so that SQLite sees the origin's equality and takes index 8 (`?6 IS NULL
/// OR …` would hide it).
fn newest_sql(of_origin: bool) -> String {
    newest_select(", resource_version, body", of_origin)
}

/// The statement of `list_newest` picking `columns` (`, a, b`: after `name`) of each row.
fn newest_select(columns: &str, of_origin: bool) -> String {
    let origin = if of_origin {
        format!("AND {ORIGIN} = ?6")
    } else {
        "AND ?6 IS NULL".to_owned()
    };
    format!(
        "SELECT name{columns} FROM objects
         WHERE kind = ?1 AND namespace = ?2
           AND (?3 IS NULL OR ({NEWEST_ORDER}, name) < (?3, ?4))
           {origin}
         ORDER BY {NEWEST_ORDER} DESC, name DESC LIMIT ?5"
    )
}

/// `, body -> ?first, body -> ?first+1, …`: `count` picked fields (none: nothing), their
/// JSON paths bound from parameter `first` on.
fn picked_columns(count: usize, first: usize) -> String {
    (first..first + count)
        .map(|i| format!(", body -> ?{i}"))
        .collect()
}

/// The embedded SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Every write goes through this one connection, in revision order.
    writer: Mutex<Connection>,
    /// Reads take one of these; see `pool.rs` for what they see.
    readers: Arc<ReadPool>,
    latest: watch::Sender<u64>,
    path: PathBuf,
    /// `list_fields`' answers while nothing they read changed (`picked_cache.rs`).
    picked: Arc<PickedCache>,
}

impl SqliteStore {
    /// `list_newest`, and `list_newest_of_origin` when `origin` is given: one query
    /// through the `objects_newest` index, newest first.
    async fn newest(
        &self,
        kind: Kind,
        namespace: &str,
        origin: Option<&str>,
        limit: usize,
        before: Option<(&str, &str)>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let namespace = namespace.to_owned();
        let origin = origin.map(str::to_owned);
        let before =
            before.map(|(ts, name)| (ts.trim_end_matches('Z').to_owned(), name.to_owned()));
        self.with_reader(move |c| {
            let mut statement = c.prepare_cached(&newest_sql(origin.is_some()))?;
            let (ts, name) = before.unzip();
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = statement.query_map(
                params![kind.as_str(), namespace, ts, name, limit, origin],
                |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get::<_, String>(2)?)),
            )?;
            let mut objects = Vec::new();
            for row in rows {
                let (name, resource_version, body) = row?;
                let key = ObjectKey::namespaced(kind, &namespace, &name);
                objects.push(parse_row(key, resource_version, &body)?);
            }
            super::stats::record_read(objects.len());
            Ok(objects)
        })
        .await
    }

    /// Runs `sql`, whose rows are a name then one column per pointer (`body -> ?N`, the
    /// pointers' JSON paths bound after `arguments`), into [`ObjectFields`]. SQLite picks
    /// the fields out of the stored text (`->` gives each as JSON text), so only they are
    /// parsed here: a tenth of the bytes of whole objects.
    async fn picked(
        &self,
        kind: Kind,
        namespace: &str,
        sql: String,
        mut arguments: Vec<rusqlite::types::Value>,
        pointers: &[&'static str],
        kept: Option<PickKey>,
    ) -> Result<Picked, StoreError> {
        let namespace = namespace.to_owned();
        let pointers = pointers.to_vec();
        arguments.extend(
            pointers
                .iter()
                .map(|p| rusqlite::types::Value::Text(json_path(p))),
        );
        let cache = self.inner.picked.clone();
        self.with_reader(move |c| {
            // The version first, then the fields (see `picked_cache.rs`).
            let kept = match kept {
                Some(key) => {
                    let version = picked_cache::kind_version(c, kind, &namespace)?;
                    if let Some(answer) = cache.get(&key, version) {
                        super::stats::record_read(answer.len());
                        return Ok(answer);
                    }
                    Some((key, version))
                }
                None => None,
            };
            let mut statement = c.prepare_cached(&sql)?;
            let mut rows = statement.query(rusqlite::params_from_iter(arguments))?;
            let mut found = Vec::new();
            while let Some(row) = rows.next()? {
                let name: String = row.get(0)?;
                let mut fields = ObjectFields {
                    key: ObjectKey::namespaced(kind, &namespace, &name),
                    fields: Value::Object(serde_json::Map::new()),
                };
                for (i, pointer) in pointers.iter().enumerate() {
                    if let Some(text) = row.get::<_, Option<String>>(i + 1)? {
                        let value = serde_json::from_str(&text).map_err(|e| {
                            StoreError::Internal(format!(
                                "`{pointer}` of {} is not JSON: {e}",
                                fields.key
                            ))
                        })?;
                        fields.insert(pointer, value);
                    }
                }
                found.push(fields);
            }
            super::stats::record_read(found.len());
            let found = Arc::new(found);
            if let Some((key, version)) = kept {
                cache.put(key, version, found.clone());
            }
            Ok(found)
        })
        .await
    }

    /// Opens (creating if needed) the store in a data directory and migrates it.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let open_error = |cause: String| StoreError::Open {
            path: data_dir.display().to_string(),
            cause,
        };
        std::fs::create_dir_all(data_dir).map_err(|e| open_error(e.to_string()))?;
        let path = data_dir.join(DATABASE_FILE);
        let mut connection = pool::open_writer(&path).map_err(|e| open_error(e.to_string()))?;
        migrate(&mut connection).map_err(|e| open_error(e.to_string()))?;
        let readers = ReadPool::open(&path).map_err(|e| open_error(e.to_string()))?;
        let latest: u64 = connection
            .query_row("SELECT COALESCE(MAX(revision), 0) FROM changes", [], |r| {
                r.get(0)
            })
            .map_err(|e| open_error(e.to_string()))?;
        let (sender, _) = watch::channel(latest);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Mutex::new(connection),
                readers: Arc::new(readers),
                latest: sender,
                path,
                picked: Arc::default(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `work` on the writer connection (waits for the write in progress, if any).
    pub(super) async fn with_connection<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut connection = inner
                .writer
                .lock()
                .map_err(|_| StoreError::Internal("the database lock was poisoned".into()))?;
            work(&mut connection)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("database task failed: {e}")))?
    }

    /// Runs `work` on a read-only connection: it never waits for a write in progress, and
    /// sees every write whose revision the change feed has announced.
    pub(super) async fn with_reader<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let counting = super::stats::Counting::current();
        self.inner
            .readers
            .run(move |connection| counting.enter(|| work(connection)))
            .await
    }
}

fn migrate(connection: &mut Connection) -> Result<(), rusqlite::Error> {
    let applied: usize = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        let tx = connection.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// The key a change-feed row names (`None` for a kind this build does not know).
fn change_key(kind: &str, namespace: &str, name: &str) -> Option<ObjectKey> {
    let kind = Kind::from_manifest_kind(kind)?;
    Some(if kind.is_namespaced() {
        ObjectKey::namespaced(kind, namespace, name)
    } else {
        ObjectKey::cluster(kind, name)
    })
}

fn namespace_column(key: &ObjectKey) -> &str {
    key.namespace.as_deref().unwrap_or("")
}

fn read_row(c: &Connection, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
    let row: Option<(u64, String)> = c
        .query_row(
            "SELECT resource_version, body FROM objects WHERE kind=?1 AND namespace=?2 AND name=?3",
            params![key.kind.as_str(), namespace_column(key), key.name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    row.map(|(resource_version, body)| parse_row(key.clone(), resource_version, &body))
        .transpose()
}

fn parse_row(
    key: ObjectKey,
    resource_version: u64,
    body: &str,
) -> Result<StoredObject, StoreError> {
    let object = serde_json::from_str(body)
        .map_err(|e| StoreError::Internal(format!("stored body of {key} is not JSON: {e}")))?;
    Ok(StoredObject {
        key,
        resource_version,
        object,
    })
}

/// SQLite's JSON path of a JSON pointer whose steps are plain names (`/spec/x` →
/// `$."spec"."x"`).
fn json_path(pointer: &str) -> String {
    let mut path = String::from("$");
    for step in pointer.split('/').skip(1) {
        path.push_str(&format!(".\"{}\"", step.replace('"', "")));
    }
    path
}

fn check_version(key: &ObjectKey, expected: Option<u64>, actual: u64) -> Result<(), StoreError> {
    match expected {
        Some(expected) if expected != actual => Err(StoreError::Conflict {
            key: key.clone(),
            expected,
            actual,
        }),
        _ => Ok(()),
    }
}

fn record_change(tx: &Transaction<'_>, key: &ObjectKey, op: ChangeOp) -> Result<u64, StoreError> {
    let op_text = match op {
        ChangeOp::Created => "Created",
        ChangeOp::Updated => "Updated",
        ChangeOp::StatusUpdated => "StatusUpdated",
        ChangeOp::Deleted => "Deleted",
    };
    tx.execute(
        "INSERT INTO changes (kind, namespace, name, op) VALUES (?1, ?2, ?3, ?4)",
        params![key.kind.as_str(), namespace_column(key), key.name, op_text],
    )?;
    Ok(tx.last_insert_rowid() as u64)
}

fn write_row(tx: &Transaction<'_>, stored: &StoredObject) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO objects (kind, namespace, name, resource_version, body)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (kind, namespace, name)
         DO UPDATE SET resource_version = excluded.resource_version, body = excluded.body",
        params![
            stored.key.kind.as_str(),
            namespace_column(&stored.key),
            stored.key.name,
            stored.resource_version,
            stored.object.to_string()
        ],
    )?;
    Ok(())
}

fn set_metadata(object: &mut Value, field: &str, value: Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(field.to_owned(), value);
    }
}

/// Microseconds keep creation order visible between objects made in the same second
/// (Freight "newest first" depends on it).
fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Microsecond)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

fn apply_write(tx: &Transaction<'_>, write: Write) -> Result<StoredObject, StoreError> {
    match write {
        Write::Create(mut object) => {
            let key = key_of(&object)?;
            if read_row(tx, &key)?.is_some() {
                return Err(StoreError::AlreadyExists(key));
            }
            let revision = record_change(tx, &key, ChangeOp::Created)?;
            if !object.get("metadata").is_some_and(Value::is_object) {
                return Err(StoreError::Invalid(format!("{key} has no metadata")));
            }
            set_metadata(&mut object, "resourceVersion", json!(revision.to_string()));
            set_metadata(&mut object, "uid", json!(uuid::Uuid::new_v4().to_string()));
            set_metadata(&mut object, "generation", json!(1));
            set_metadata(&mut object, "creationTimestamp", json!(now()));
            let stored = StoredObject {
                key,
                resource_version: revision,
                object,
            };
            write_row(tx, &stored)?;
            Ok(stored)
        }
        Write::Update(object) => {
            let key = key_of(&object)?;
            let expected = resource_version_of(&object)?;
            let current = read_row(tx, &key)?.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            check_version(&key, expected, current.resource_version)?;
            let revision = record_change(tx, &key, ChangeOp::Updated)?;
            let mut next = desired_state(&object);
            let old_meta = current.object.get("metadata").cloned().unwrap_or_default();
            for kept in ["uid", "creationTimestamp"] {
                if let Some(value) = old_meta.get(kept) {
                    set_metadata(&mut next, kept, value.clone());
                }
            }
            let old_generation = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let generation = if spec_part(&current.object) == spec_part(&next) {
                old_generation
            } else {
                old_generation + 1
            };
            set_metadata(&mut next, "generation", json!(generation));
            set_metadata(&mut next, "resourceVersion", json!(revision.to_string()));
            if let (Some(map), Some(status)) = (next.as_object_mut(), current.object.get("status"))
            {
                map.insert("status".into(), status.clone());
            }
            let stored = StoredObject {
                key,
                resource_version: revision,
                object: next,
            };
            write_row(tx, &stored)?;
            Ok(stored)
        }
        Write::UpdateStatus {
            key,
            status,
            resource_version,
        } => {
            let mut current =
                read_row(tx, &key)?.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            check_version(&key, resource_version, current.resource_version)?;
            let revision = record_change(tx, &key, ChangeOp::StatusUpdated)?;
            if let Some(map) = current.object.as_object_mut() {
                map.insert("status".into(), status);
            }
            set_metadata(
                &mut current.object,
                "resourceVersion",
                json!(revision.to_string()),
            );
            current.resource_version = revision;
            write_row(tx, &current)?;
            Ok(current)
        }
        Write::Delete {
            key,
            resource_version,
        } => {
            let current = read_row(tx, &key)?.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            check_version(&key, resource_version, current.resource_version)?;
            record_change(tx, &key, ChangeOp::Deleted)?;
            tx.execute(
                "DELETE FROM objects WHERE kind=?1 AND namespace=?2 AND name=?3",
                params![key.kind.as_str(), namespace_column(&key), key.name],
            )?;
            Ok(current)
        }
    }
}

/// Puts `revision` on the change feed once its commit has returned (so every reader sees
/// the write), never moving the feed backwards when two commits announce out of order.
fn announce(latest: &watch::Sender<u64>, revision: u64) {
    latest.send_if_modified(|announced| {
        let newer = revision > *announced;
        if newer {
            *announced = revision;
        }
        newer
    });
}

fn parse_op(text: &str) -> ChangeOp {
    match text {
        "Created" => ChangeOp::Created,
        "StatusUpdated" => ChangeOp::StatusUpdated,
        "Deleted" => ChangeOp::Deleted,
        _ => ChangeOp::Updated,
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
        super::stats::record_read(1);
        let key = key.clone();
        self.with_reader(move |c| read_row(c, &key)).await
    }

    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let namespace = namespace.map(str::to_owned);
        self.with_reader(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT namespace, name, resource_version, body FROM objects
                 WHERE kind = ?1 AND (?2 IS NULL OR namespace = ?2)
                 ORDER BY namespace, name",
            )?;
            let rows = statement.query_map(params![kind.as_str(), namespace], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut objects = Vec::new();
            for row in rows {
                let (ns, name, resource_version, body) = row?;
                let key = if kind.is_namespaced() {
                    ObjectKey::namespaced(kind, &ns, &name)
                } else {
                    ObjectKey::cluster(kind, &name)
                };
                objects.push(parse_row(key, resource_version, &body)?);
            }
            super::stats::record_read(objects.len());
            Ok(objects)
        })
        .await
    }

    async fn list_newest(
        &self,
        kind: Kind,
        namespace: &str,
        limit: usize,
        before: Option<(&str, &str)>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        self.newest(kind, namespace, None, limit, before).await
    }

    async fn list_newest_of_origin(
        &self,
        kind: Kind,
        namespace: &str,
        origin: &str,
        limit: usize,
        before: Option<(&str, &str)>,
    ) -> Result<Vec<StoredObject>, StoreError> {
        self.newest(kind, namespace, Some(origin), limit, before)
            .await
    }

    async fn list_fields(
        &self,
        kind: Kind,
        namespace: &str,
        pointers: &[&'static str],
    ) -> Result<Picked, StoreError> {
        let sql = format!(
            "SELECT name{} FROM objects WHERE kind = ?1 AND namespace = ?2 ORDER BY name",
            picked_columns(pointers.len(), 3)
        );
        let arguments = vec![
            rusqlite::types::Value::Text(kind.as_str().to_owned()),
            rusqlite::types::Value::Text(namespace.to_owned()),
        ];
        let kept = picked_cache::key(kind, namespace, pointers);
        self.picked(kind, namespace, sql, arguments, pointers, Some(kept))
            .await
    }

    async fn list_newest_fields(
        &self,
        kind: Kind,
        namespace: &str,
        limit: usize,
        pointers: &[&'static str],
    ) -> Result<Picked, StoreError> {
        let sql = newest_select(&picked_columns(pointers.len(), 7), false);
        let null = rusqlite::types::Value::Null;
        let arguments = vec![
            rusqlite::types::Value::Text(kind.as_str().to_owned()),
            rusqlite::types::Value::Text(namespace.to_owned()),
            null.clone(),
            null.clone(),
            rusqlite::types::Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)),
            null,
        ];
        self.picked(kind, namespace, sql, arguments, pointers, None)
            .await
    }

    async fn get_many(
        &self,
        kind: Kind,
        namespace: &str,
        names: &[String],
    ) -> Result<Vec<StoredObject>, StoreError> {
        let namespace = namespace.to_owned();
        let names =
            serde_json::to_string(names).map_err(|e| StoreError::Internal(e.to_string()))?;
        self.with_reader(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT name, resource_version, body FROM objects
                 WHERE kind = ?1 AND namespace = ?2
                   AND name IN (SELECT value FROM json_each(?3))
                 ORDER BY name",
            )?;
            let rows = statement.query_map(params![kind.as_str(), namespace, names], |r| {
                Ok((r.get::<_, String>(0)?, r.get(1)?, r.get::<_, String>(2)?))
            })?;
            let mut objects = Vec::new();
            for row in rows {
                let (name, resource_version, body) = row?;
                let key = ObjectKey::namespaced(kind, &namespace, &name);
                objects.push(parse_row(key, resource_version, &body)?);
            }
            super::stats::record_read(objects.len());
            Ok(objects)
        })
        .await
    }

    async fn get_many_fields(
        &self,
        kind: Kind,
        namespace: &str,
        names: &[String],
        pointers: &[&'static str],
    ) -> Result<Vec<ObjectFields>, StoreError> {
        let sql = format!(
            "SELECT name{} FROM objects
             WHERE kind = ?1 AND namespace = ?2
               AND name IN (SELECT value FROM json_each(?3))
             ORDER BY name",
            picked_columns(pointers.len(), 4)
        );
        let names =
            serde_json::to_string(names).map_err(|e| StoreError::Internal(e.to_string()))?;
        let arguments = vec![
            rusqlite::types::Value::Text(kind.as_str().to_owned()),
            rusqlite::types::Value::Text(namespace.to_owned()),
            rusqlite::types::Value::Text(names),
        ];
        let found = self
            .picked(kind, namespace, sql, arguments, pointers, None)
            .await?;
        Ok(Arc::try_unwrap(found).unwrap_or_else(|shared| shared.as_ref().clone()))
    }

    async fn commit(&self, writes: Vec<Write>) -> Result<Vec<StoredObject>, StoreError> {
        let inner = self.inner.clone();
        let (stored, latest) = self
            .with_connection(move |c| {
                let tx = c.transaction()?;
                let stored = writes
                    .into_iter()
                    .map(|w| apply_write(&tx, w))
                    .collect::<Result<Vec<_>, _>>()?;
                let latest: u64 =
                    tx.query_row("SELECT COALESCE(MAX(revision), 0) FROM changes", [], |r| {
                        r.get(0)
                    })?;
                if latest > CHANGES_KEPT && latest % 1000 == 0 {
                    tx.execute(
                        "DELETE FROM changes WHERE revision <= ?1",
                        params![latest - CHANGES_KEPT],
                    )?;
                }
                tx.commit()?;
                Ok((stored, latest))
            })
            .await?;
        announce(&inner.latest, latest);
        super::stats::record_writes(stored.len());
        Ok(stored)
    }

    fn changes(&self) -> ChangeFeed {
        ChangeFeed::new(self.inner.latest.subscribe())
    }

    async fn changed_objects_since(
        &self,
        revision: u64,
        limit: usize,
    ) -> Result<Vec<(Change, Option<StoredObject>)>, StoreError> {
        self.with_reader(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT c.revision, c.kind, c.namespace, c.name, c.op, o.resource_version, o.body
                 FROM changes c LEFT JOIN objects o
                   ON o.kind = c.kind AND o.namespace = c.namespace AND o.name = c.name
                 WHERE c.revision > ?1 ORDER BY c.revision LIMIT ?2",
            )?;
            let rows = statement.query_map(params![revision, limit as i64], |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<u64>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })?;
            let mut changes = Vec::new();
            for row in rows {
                let (revision, kind, ns, name, op, version, body) = row?;
                let Some(key) = change_key(&kind, &ns, &name) else {
                    continue;
                };
                let object = match (version, body) {
                    (Some(version), Some(body)) => Some(parse_row(key.clone(), version, &body)?),
                    _ => None,
                };
                let change = Change {
                    revision,
                    key,
                    op: parse_op(&op),
                };
                changes.push((change, object));
            }
            super::stats::record_read(changes.len());
            Ok(changes)
        })
        .await
    }

    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        self.with_reader(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT revision, kind, namespace, name, op FROM changes
                 WHERE revision > ?1 ORDER BY revision LIMIT ?2",
            )?;
            let rows = statement.query_map(params![revision, limit as i64], |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?;
            let mut changes = Vec::new();
            for row in rows {
                let (revision, kind, ns, name, op) = row?;
                let Some(key) = change_key(&kind, &ns, &name) else {
                    continue;
                };
                changes.push(Change {
                    revision,
                    key,
                    op: parse_op(&op),
                });
            }
            super::stats::record_read(changes.len());
            Ok(changes)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn stage(name: &str, rv: Option<&str>) -> Value {
        let mut object = json!({
            "apiVersion": "dray.dev/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": {"requestedFreight": []}
        });
        if let Some(rv) = rv {
            object["metadata"]["resourceVersion"] = json!(rv);
        }
        object
    }

    /// `list_fields`' answers are kept (`picked_cache.rs`) and given again only while no
    /// object of that kind in that project was written.
    #[tokio::test]
    async fn a_kept_list_fields_answer_is_given_only_while_nothing_it_read_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let pointers = ["/status/health/status"];
        let health = |picked: &[ObjectFields]| -> Vec<(String, Value)> {
            picked
                .iter()
                .map(|f| {
                    (
                        f.key.name.clone(),
                        f.fields["status"]["health"]["status"].clone(),
                    )
                })
                .collect()
        };
        let pick = || store.list_fields(Kind::Stage, "demo", &pointers);
        let dev = store.create(stage("dev", None)).await.unwrap();
        store.create(stage("qa", None)).await.unwrap();
        assert_eq!(
            health(&pick().await.unwrap()),
            [("dev".into(), Value::Null), ("qa".into(), Value::Null)]
        );
        // The answer is kept: a change behind the store's back (no new revision) is not seen.
        let sneak = |body: &str| {
            let writer = store.inner.writer.lock().unwrap();
            writer
                .execute(
                    "UPDATE objects SET body = json_set(body, '$.status.health.status', ?1)
                     WHERE kind = 'Stage' AND name = 'qa'",
                    [body],
                )
                .unwrap();
        };
        let before = pick().await.unwrap();
        sneak("Sneaked");
        let kept = pick().await.unwrap();
        assert_eq!(health(&kept)[1].1, Value::Null, "kept");
        // The very same answer is handed out, so what callers derive from it is kept too.
        assert!(Arc::ptr_eq(&before, &kept), "the kept answer is shared");
        // Every write through the store is seen: an update, a create, a delete.
        store
            .update_status(&dev.key, json!({"health": {"status": "Healthy"}}), None)
            .await
            .unwrap();
        let updated = pick().await.unwrap();
        assert!(!Arc::ptr_eq(&kept, &updated), "a new answer after a write");
        let after_update = health(&updated);
        assert_eq!(after_update[0].1, json!("Healthy"));
        assert_eq!(
            after_update[1].1,
            json!("Sneaked"),
            "read again, from the table"
        );
        store.create(stage("prod", None)).await.unwrap();
        assert_eq!(pick().await.unwrap().len(), 3);
        let qa = ObjectKey::namespaced(Kind::Stage, "demo", "qa");
        store.delete(&qa, None).await.unwrap();
        let names: Vec<String> = health(&pick().await.unwrap())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["dev", "prod"]);
        // A write elsewhere (another project) does not matter to this answer.
        store
            .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "x", "namespace": "elsewhere"}, "spec": {}}))
            .await
            .unwrap();
        assert_eq!(pick().await.unwrap().len(), 2);
    }

    /// `list_fields` and `list_newest_fields` pick the same fields in SQL as
    /// `ObjectFields::of` does from whole objects: strings, arrays, numbers, nested
    /// places, and nothing for a missing field.
    #[tokio::test]
    async fn list_fields_answers_as_the_whole_objects_would() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let mut dev = stage("dev", None);
        dev["spec"]["requestedFreight"] =
            json!([{"origin": {"kind": "Warehouse", "name": "app"}, "sources": {"direct": true}}]);
        let dev = store.create(dev).await.unwrap();
        store
            .update_status(
                &dev.key,
                json!({"health": {"status": "Healthy"}, "currentFreight": {"name": "f1"}}),
                None,
            )
            .await
            .unwrap();
        let mut quoted = stage("qa", None);
        quoted["spec"]["vars"] = json!([{"name": "a\"b", "value": "x.y"}]);
        store.create(quoted).await.unwrap();
        store
            .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "other", "namespace": "elsewhere"}, "spec": {}}))
            .await
            .unwrap();
        let pointers = [
            "/spec/requestedFreight",
            "/spec/vars",
            "/status/health/status",
            "/status/currentFreight/name",
            "/metadata/generation",
            "/spec/missing/deeper",
        ];
        let picked = store
            .list_fields(Kind::Stage, "demo", &pointers)
            .await
            .unwrap();
        let whole: Vec<ObjectFields> = store
            .list(Kind::Stage, Some("demo"))
            .await
            .unwrap()
            .iter()
            .map(|o| ObjectFields::of(o, &pointers))
            .collect();
        assert_eq!(*picked, whole);
        assert_eq!(picked.len(), 2, "only project `demo`'s Stages: {picked:?}");
        assert_eq!(
            picked[0].fields,
            json!({
                "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                    "sources": {"direct": true}}]},
                "status": {"health": {"status": "Healthy"}, "currentFreight": {"name": "f1"}},
                "metadata": {"generation": 1}
            })
        );
        assert_eq!(picked[1].fields["spec"]["vars"][0]["name"], json!("a\"b"));

        let names = store.list_fields(Kind::Stage, "demo", &[]).await.unwrap();
        assert_eq!(names.len(), 2, "no pointers: the names alone");
        assert!(names.iter().all(|f| f.fields == json!({})), "{names:?}");
        for limit in [1, 5] {
            let newest = store
                .list_newest_fields(Kind::Stage, "demo", limit, &pointers)
                .await
                .unwrap();
            let whole: Vec<ObjectFields> = store
                .list_newest(Kind::Stage, "demo", limit, None)
                .await
                .unwrap()
                .iter()
                .map(|o| ObjectFields::of(o, &pointers))
                .collect();
            assert_eq!(*newest, whole, "the newest {limit}");
            assert_eq!(newest.len(), limit.min(2));
        }
        let asked: Vec<String> = ["qa", "gone", "dev"].map(String::from).into();
        let many = store
            .get_many_fields(Kind::Stage, "demo", &asked, &pointers)
            .await
            .unwrap();
        assert_eq!(many, whole, "dev and qa by name; the missing one left out");
    }

    /// The newest-first reads walk an index (no scan of the kind, no sort), with and
    /// without an origin: a Freight lane reads its few rows whatever the project holds.
    #[tokio::test]
    async fn newest_first_reads_walk_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        for (of_origin, index) in [(false, "objects_newest"), (true, "objects_origin_newest")] {
            let plan: Vec<String> = store
                .with_reader(move |c| {
                    let sql = format!("EXPLAIN QUERY PLAN {}", newest_sql(of_origin));
                    let mut statement = c.prepare(&sql)?;
                    let rows = statement.query_map(
                        params!["Freight", "demo", None::<String>, None::<String>, 7, "app"],
                        |r| r.get::<_, String>(3),
                    )?;
                    Ok(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .unwrap();
            let plan = plan.join("; ");
            assert!(plan.contains(&format!("USING INDEX {index}")), "{plan}");
            assert!(
                !plan.contains("TEMP B-TREE"),
                "sorted apart from the index: {plan}"
            );
        }
    }

    #[tokio::test]
    async fn create_get_update_delete_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let created = store.create(stage("dev", None)).await.unwrap();
        assert_eq!(created.object["metadata"]["generation"], json!(1));
        let key = created.key.clone();
        let got = store.get(&key).await.unwrap().unwrap();
        assert_eq!(got, created);

        let status = json!({"lastPromotion": "p1"});
        let with_status = store
            .update_status(&key, status.clone(), Some(created.resource_version))
            .await
            .unwrap();
        assert_eq!(with_status.object["status"], status);
        assert_eq!(with_status.object["metadata"]["generation"], json!(1));

        let mut changed = stage("dev", Some(&with_status.resource_version.to_string()));
        changed["spec"]["vars"] = json!([{"name": "a", "value": "b"}]);
        let updated = store.update(changed).await.unwrap();
        assert_eq!(
            updated.object["status"], status,
            "an update keeps the status"
        );
        assert_eq!(updated.object["metadata"]["generation"], json!(2));
        assert_eq!(
            updated.object["metadata"]["uid"],
            created.object["metadata"]["uid"]
        );

        store.delete(&key, None).await.unwrap();
        assert!(store.get(&key).await.unwrap().is_none());
        assert!(matches!(
            store.delete(&key, None).await,
            Err(StoreError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn a_stale_update_is_a_conflict_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let first = store.create(stage("dev", None)).await.unwrap();
        let stale = first.resource_version.to_string();
        store.update(stage("dev", Some(&stale))).await.unwrap();
        let mut late = stage("dev", Some(&stale));
        late["spec"]["vars"] = json!([{"name": "lost", "value": "update"}]);
        let result = store.update(late).await;
        assert!(
            matches!(result, Err(StoreError::Conflict { .. })),
            "{result:?}"
        );
        let now = store.get(&first.key).await.unwrap().unwrap();
        assert!(now.object["spec"].get("vars").is_none());
    }

    #[tokio::test]
    async fn a_batch_is_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create(stage("dev", None)).await.unwrap();
        let result = store
            .commit(vec![
                Write::Create(stage("staging", None)),
                Write::Create(stage("dev", None)),
            ])
            .await;
        assert!(matches!(result, Err(StoreError::AlreadyExists(_))));
        assert_eq!(
            store.list(Kind::Stage, Some("demo")).await.unwrap().len(),
            1
        );
    }

    #[tokio::test]
    async fn the_feed_wakes_waiters_and_lists_changes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let mut feed = store.changes();
        let start = feed.latest();
        let writer = store.clone();
        let handle = tokio::spawn(async move { writer.create(stage("dev", None)).await });
        let woke = feed.wait_past(start, Duration::from_secs(30)).await;
        assert!(woke.is_some_and(|rev| rev > start));
        handle.await.unwrap().unwrap();
        let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
        store.delete(&key, None).await.unwrap();
        let changes = store.changes_since(start, 10).await.unwrap();
        let ops: Vec<_> = changes.iter().map(|c| c.op).collect();
        assert_eq!(ops, vec![ChangeOp::Created, ChangeOp::Deleted]);
        assert!(changes.iter().all(|c| c.key == key));
    }

    #[tokio::test]
    async fn reads_do_not_wait_for_a_write_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create(stage("dev", None)).await.unwrap();
        let before = store.changes().latest();
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let writer = store.clone();
        let write = tokio::spawn(async move {
            writer
                .with_connection(move |c| {
                    let tx = c.transaction()?;
                    apply_write(&tx, Write::Create(stage("held", None)))?;
                    let _ = held_tx.send(());
                    // The test releases the transaction once its reads are back. Should the
                    // reads wait for it instead, this gives up after a minute and commits,
                    // so that they see `held` and fail rather than hang.
                    let _ = release_rx.recv_timeout(Duration::from_secs(60));
                    tx.commit()?;
                    Ok(())
                })
                .await
        });
        held_rx.await.unwrap();

        let waited = "a read waited for the open write transaction (or saw it uncommitted)";
        let held = ObjectKey::namespaced(Kind::Stage, "demo", "held");
        assert_eq!(store.get(&held).await.unwrap(), None, "{waited}");
        let listed = store.list(Kind::Stage, Some("demo")).await.unwrap();
        assert_eq!(listed.len(), 1, "{waited}");
        let changes = store.changes_since(before, 10).await.unwrap();
        assert!(changes.is_empty(), "{waited}: {changes:?}");
        let newest = store.list_newest(Kind::Stage, "demo", 10, None).await;
        assert_eq!(newest.unwrap().len(), 1, "{waited}");
        let many = store.get_many(Kind::Stage, "demo", &["held".into()]).await;
        assert!(many.unwrap().is_empty(), "{waited}");

        release_tx.send(()).unwrap();
        write.await.unwrap().unwrap();
        assert!(store.get(&held).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_revision_on_the_feed_is_visible_to_every_reader() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let mut feed = store.changes();
        let names: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        let writer = store.clone();
        let to_write = names.clone();
        let writes = tokio::spawn(async move {
            for name in to_write {
                writer.create(stage(&name, None)).await.unwrap();
            }
        });
        let mut seen = feed.latest();
        let mut found = Vec::new();
        while found.len() < names.len() {
            let latest = feed.wait_past(seen, Duration::from_secs(30)).await;
            let latest = latest.expect("the feed announced the next write");
            let changes = store.changes_since(seen, 100).await.unwrap();
            assert!(
                changes.iter().any(|c| c.revision == latest),
                "revision {latest} was announced before its change was readable: {changes:?}"
            );
            for change in changes.iter().filter(|c| c.revision <= latest) {
                let object = store.get(&change.key).await.unwrap();
                assert!(
                    object.is_some(),
                    "{} announced but not readable",
                    change.key
                );
                found.push(change.key.name.clone());
            }
            seen = latest;
        }
        writes.await.unwrap();
        assert_eq!(found, names);
    }

    #[tokio::test]
    async fn data_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let rv = {
            let store = SqliteStore::open(dir.path()).unwrap();
            store
                .create(stage("dev", None))
                .await
                .unwrap()
                .resource_version
        };
        let store = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(store.changes().latest(), rv);
        let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
        assert_eq!(store.get(&key).await.unwrap().unwrap().resource_version, rv);
    }

    #[tokio::test]
    async fn list_newest_pages_newest_first_through_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        // Created in this order; names deliberately not in creation order.
        for name in ["m", "a", "z", "c", "b"] {
            store.create(stage(name, None)).await.unwrap();
        }
        let names = |objects: &[StoredObject]| {
            objects
                .iter()
                .map(|o| o.key.name.clone())
                .collect::<Vec<_>>()
        };
        let first = store
            .list_newest(Kind::Stage, "demo", 2, None)
            .await
            .unwrap();
        assert_eq!(names(&first), ["b", "c"]);
        let last = first.last().unwrap();
        let created = last.object["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap();
        let next = store
            .list_newest(Kind::Stage, "demo", 10, Some((created, &last.key.name)))
            .await
            .unwrap();
        assert_eq!(names(&next), ["z", "a", "m"]);
        // Narrowed to one origin (a Freight lane): the same order and cursor.
        for (name, origin) in [
            ("m", "app"),
            ("a", "web"),
            ("z", "app"),
            ("c", "web"),
            ("b", "app"),
        ] {
            let mut object = stage(name, None);
            object["origin"] = json!({"kind": "Warehouse", "name": origin});
            let key = ObjectKey::namespaced(Kind::Stage, "demo", name);
            let stored = store.get(&key).await.unwrap().unwrap();
            object["metadata"] = stored.object["metadata"].clone();
            store.update(object).await.unwrap();
        }
        let app = store
            .list_newest_of_origin(Kind::Stage, "demo", "app", 2, None)
            .await
            .unwrap();
        assert_eq!(names(&app), ["b", "z"]);
        let z = &app[1];
        let created = z.object["metadata"]["creationTimestamp"].as_str().unwrap();
        let older = store
            .list_newest_of_origin(Kind::Stage, "demo", "app", 10, Some((created, "z")))
            .await
            .unwrap();
        assert_eq!(names(&older), ["m"]);
        let web = store
            .list_newest_of_origin(Kind::Stage, "demo", "web", 10, None)
            .await
            .unwrap();
        assert_eq!(names(&web), ["c", "a"]);
        assert!(
            store
                .list_newest(Kind::Stage, "other", 10, None)
                .await
                .unwrap()
                .is_empty()
        );
        let many = store
            .get_many(
                Kind::Stage,
                "demo",
                &["z".into(), "nope".into(), "a".into()],
            )
            .await
            .unwrap();
        assert_eq!(names(&many), ["a", "z"]);
        let plan: String = store
            .with_connection(|c| {
                let sql = format!(
                    "EXPLAIN QUERY PLAN SELECT name FROM objects WHERE kind = 'Freight' AND namespace = 'demo' ORDER BY {NEWEST_ORDER} DESC, name DESC LIMIT 50"
                );
                let mut statement = c.prepare(&sql)?;
                let rows = statement.query_map([], |r| r.get::<_, String>(3))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?.join("; "))
            })
            .await
            .unwrap();
        assert!(plan.contains("objects_newest"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}
