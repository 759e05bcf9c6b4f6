//! API tokens and cluster-wide role bindings, kept beside the resources but not as
//! resources: [`TokenStore`], implemented by [`SqliteStore`] in two tables of its own.
//!
//! Why not a kind (`ApiToken`)? A token is a credential, not desired state: it must never
//! be listed by `dray get`, written by `dray apply`, announced on the change feed, nor
//! exported as a CRD; and every request looks one up by its hash, which a primary key on
//! the hash answers directly. Only the SHA-256 hash of a token is kept; the token itself
//! is shown once, when it is made, and is then unrecoverable.
//!
//! Each token also has a stable id for listing and revoking it: 12 random hex digits drawn
//! when it is made, unrelated to the token and its hash, so a listing (or a log line naming
//! the id) says nothing about either. Beside it: who made the token, a description, an
//! optional expiry and when it was last used ([`TokenInfo`]). [`TokenStore::token`] answers
//! only for tokens that have not expired; [`TokenStore::token_info`] for any, so that the
//! API can say when a refused token expired.
//!
//! Revoking a token removes it and keeps, in a table of their own, its hash, id, user and
//! when it was revoked ([`RevokedToken`]), so that a revoked token presented again is
//! refused as revoked, not as unknown. Tokens revoked before Dray kept them (store
//! migration 7) are unknown.
//!
//! Cluster-wide bindings (a built-in role for a user or group in every project) live here
//! too, since a project's `RoleBinding` cannot express them.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use crate::api::SubjectKind;

use super::{SqliteStore, StoreError};

/// The `created_by` of the bootstrap token: not a valid user name, so no user can be it.
pub const BOOTSTRAP_CREATOR: &str = "system:bootstrap";

/// An API token as stored: its hash and whom it authenticates, never the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    /// The SHA-256 of the token, in lowercase hex.
    pub hash: String,
    /// The user the token authenticates as.
    pub user: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// When it was made (RFC 3339).
    pub created_at: String,
}

/// What a new token carries beside its [`TokenRecord`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenDetails {
    /// The user who made it, or [`BOOTSTRAP_CREATOR`].
    pub created_by: Option<String>,
    /// What it is for, in the maker's words.
    pub description: Option<String>,
    /// When it stops working (RFC 3339), if ever.
    pub expires_at: Option<String>,
}

/// What may be shown about a token: everything but the token and its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    /// The token's stable id (random; says nothing about the token).
    pub id: String,
    /// The user it authenticates as.
    pub user: String,
    /// The groups the user belongs to.
    #[serde(default)]
    pub groups: Vec<String>,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// Who made it; `system:bootstrap` for the bootstrap token; none when not recorded
    /// (tokens made before Dray kept it).
    #[serde(default)]
    pub created_by: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// When it stops working (RFC 3339), if ever.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// When it was last used, to the minute (RFC 3339); none when never.
    #[serde(default)]
    pub last_used_at: Option<String>,
    /// Whether it is the bootstrap token of the data directory.
    #[serde(default)]
    pub bootstrap: bool,
}

impl TokenInfo {
    /// When the token expired, if it had by `now`. An expiry that cannot be read counts
    /// as expired at `now`: a token is refused rather than trusted forever.
    pub fn expired(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let expires_at = self.expires_at.as_deref()?;
        match expires_at.parse::<jiff::Timestamp>() {
            Ok(at) if at > now => None,
            Ok(at) => Some(at),
            Err(_) => Some(now),
        }
    }

    /// The record of the token with this hash.
    pub fn record(&self, hash: &str) -> TokenRecord {
        TokenRecord {
            hash: hash.to_owned(),
            user: self.user.clone(),
            groups: self.groups.clone(),
            created_at: self.created_at.clone(),
        }
    }
}

/// What is kept of a revoked token: never the token, and it authenticates no one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevokedToken {
    /// The token's id, as it was listed.
    pub id: String,
    /// The user it authenticated as.
    pub user: String,
    /// When it was revoked (RFC 3339).
    pub revoked_at: String,
}

/// A built-in role given to a user or group in every project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterBinding {
    /// `User` or `Group`.
    pub kind: SubjectKind,
    /// The user or group.
    pub name: String,
    /// The built-in role.
    pub role: String,
}

/// Where API tokens and cluster-wide bindings live.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// Stores a token with its details, and with it (in the same transaction) a
    /// cluster-wide binding; returns the token's new id.
    async fn add_token(
        &self,
        token: TokenRecord,
        details: TokenDetails,
        binding: Option<ClusterBinding>,
    ) -> Result<String, StoreError>;

    /// Stores a token without details (no creator, description or expiry).
    async fn create_token(
        &self,
        token: TokenRecord,
        binding: Option<ClusterBinding>,
    ) -> Result<(), StoreError> {
        self.add_token(token, TokenDetails::default(), binding)
            .await
            .map(|_| ())
    }

    /// The token with this hash, if any and not expired.
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let now = jiff::Timestamp::now();
        Ok(self
            .token_info(hash)
            .await?
            .filter(|info| info.expired(now).is_none())
            .map(|info| info.record(hash)))
    }

    /// What is known about the token with this hash, expired or not.
    async fn token_info(&self, hash: &str) -> Result<Option<TokenInfo>, StoreError>;

    /// The token with this id.
    async fn token_by_id(&self, id: &str) -> Result<Option<TokenInfo>, StoreError>;

    /// Every token (of `user` only, when given), oldest first (to the second).
    async fn list_tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, StoreError>;

    /// Removes the token with this id, keeping it as a [`RevokedToken`]; false when there
    /// was none.
    async fn revoke_token(&self, id: &str) -> Result<bool, StoreError>;

    /// The revoked token with this hash, if a token with it was revoked.
    async fn revoked_token(&self, hash: &str) -> Result<Option<RevokedToken>, StoreError>;

    /// Records that the token with this hash was used at `at` (RFC 3339).
    async fn touch_token(&self, hash: &str, at: &str) -> Result<(), StoreError>;

    /// Whether any token exists (a data directory without one gets a bootstrap token).
    async fn has_tokens(&self) -> Result<bool, StoreError>;

    /// The cluster-wide roles of a user, directly or through one of `groups`.
    async fn cluster_roles(&self, user: &str, groups: &[String])
    -> Result<Vec<String>, StoreError>;

    /// Every cluster-wide binding, by role, then subject kind and subject.
    async fn cluster_bindings(&self) -> Result<Vec<ClusterBinding>, StoreError>;
}

fn kind_text(kind: SubjectKind) -> &'static str {
    match kind {
        SubjectKind::User => "User",
        SubjectKind::Group => "Group",
    }
}

/// A new token id: 12 random lowercase hex digits.
fn new_id() -> String {
    use chacha20poly1305::aead::OsRng;
    use chacha20poly1305::aead::rand_core::RngCore;
    let mut bytes = [0u8; 6];
    OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The columns [`info_from_row`] reads, in its order.
const INFO_COLUMNS: &str =
    "id, user, groups, created_at, created_by, description, expires_at, last_used_at";

fn info_from_row(row: &Row<'_>) -> rusqlite::Result<(TokenInfo, String)> {
    let created_by: Option<String> = row.get(4)?;
    let info = TokenInfo {
        id: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
        user: row.get(1)?,
        groups: Vec::new(),
        created_at: row.get(3)?,
        bootstrap: created_by.as_deref() == Some(BOOTSTRAP_CREATOR),
        created_by,
        description: row.get(5)?,
        expires_at: row.get(6)?,
        last_used_at: row.get(7)?,
    };
    Ok((info, row.get(2)?))
}

fn with_groups((mut info, groups): (TokenInfo, String)) -> Result<TokenInfo, StoreError> {
    info.groups = serde_json::from_str(&groups)
        .map_err(|e| StoreError::Internal(format!("the groups of token `{}`: {e}", info.id)))?;
    Ok(info)
}

#[async_trait]
impl TokenStore for SqliteStore {
    async fn add_token(
        &self,
        token: TokenRecord,
        details: TokenDetails,
        binding: Option<ClusterBinding>,
    ) -> Result<String, StoreError> {
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            let groups = serde_json::to_string(&token.groups)
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            let mut id = new_id();
            // 48 random bits: a clash is all but impossible, and then simply drawn again.
            for _ in 0..5 {
                let taken: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE id = ?1)",
                    params![id],
                    |r| r.get(0),
                )?;
                if !taken {
                    break;
                }
                id = new_id();
            }
            tx.execute(
                "INSERT INTO api_tokens
                    (hash, user, groups, created_at, id, created_by, description, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    token.hash,
                    token.user,
                    groups,
                    token.created_at,
                    id,
                    details.created_by,
                    details.description,
                    details.expires_at
                ],
            )?;
            if let Some(binding) = binding {
                tx.execute(
                    "INSERT OR IGNORE INTO cluster_role_bindings (subject_kind, subject, role)
                     VALUES (?1, ?2, ?3)",
                    params![kind_text(binding.kind), binding.name, binding.role],
                )?;
            }
            tx.commit()?;
            Ok(id)
        })
        .await
    }

    async fn token_info(&self, hash: &str) -> Result<Option<TokenInfo>, StoreError> {
        let hash = hash.to_owned();
        self.with_reader(move |c| {
            c.query_row(
                &format!("SELECT {INFO_COLUMNS} FROM api_tokens WHERE hash = ?1"),
                params![hash],
                info_from_row,
            )
            .optional()?
            .map(with_groups)
            .transpose()
        })
        .await
    }

    async fn token_by_id(&self, id: &str) -> Result<Option<TokenInfo>, StoreError> {
        let id = id.to_owned();
        self.with_reader(move |c| {
            c.query_row(
                &format!("SELECT {INFO_COLUMNS} FROM api_tokens WHERE id = ?1"),
                params![id],
                info_from_row,
            )
            .optional()?
            .map(with_groups)
            .transpose()
        })
        .await
    }

    async fn list_tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, StoreError> {
        let user = user.map(str::to_owned);
        self.with_reader(move |c| {
            let mut statement = c.prepare(&format!(
                "SELECT {INFO_COLUMNS} FROM api_tokens
                 WHERE ?1 IS NULL OR user = ?1 ORDER BY created_at, id"
            ))?;
            let rows = statement.query_map(params![user], info_from_row)?;
            let mut tokens = Vec::new();
            for row in rows {
                tokens.push(with_groups(row?)?);
            }
            Ok(tokens)
        })
        .await
    }

    async fn revoke_token(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        let now = jiff::Timestamp::now();
        let revoked_at = now.round(jiff::Unit::Second).unwrap_or(now).to_string();
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT OR REPLACE INTO revoked_api_tokens (hash, id, user, revoked_at)
                 SELECT hash, id, user, ?2 FROM api_tokens WHERE id = ?1",
                params![id, revoked_at],
            )?;
            let removed = tx.execute("DELETE FROM api_tokens WHERE id = ?1", params![id])? > 0;
            tx.commit()?;
            Ok(removed)
        })
        .await
    }

    async fn revoked_token(&self, hash: &str) -> Result<Option<RevokedToken>, StoreError> {
        let hash = hash.to_owned();
        self.with_reader(move |c| {
            Ok(c.query_row(
                "SELECT id, user, revoked_at FROM revoked_api_tokens WHERE hash = ?1",
                params![hash],
                |row| {
                    Ok(RevokedToken {
                        id: row.get(0)?,
                        user: row.get(1)?,
                        revoked_at: row.get(2)?,
                    })
                },
            )
            .optional()?)
        })
        .await
    }

    async fn touch_token(&self, hash: &str, at: &str) -> Result<(), StoreError> {
        let (hash, at) = (hash.to_owned(), at.to_owned());
        self.with_connection(move |c| {
            c.execute(
                "UPDATE api_tokens SET last_used_at = ?2 WHERE hash = ?1",
                params![hash, at],
            )?;
            Ok(())
        })
        .await
    }

    async fn has_tokens(&self) -> Result<bool, StoreError> {
        self.with_reader(|c| {
            Ok(c.query_row("SELECT EXISTS (SELECT 1 FROM api_tokens)", [], |r| r.get(0))?)
        })
        .await
    }

    async fn cluster_roles(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let mut roles: Vec<String> = Vec::new();
        for binding in self.cluster_bindings().await? {
            let applies = match binding.kind {
                SubjectKind::User => binding.name == user,
                SubjectKind::Group => groups.contains(&binding.name),
            };
            if applies && !roles.contains(&binding.role) {
                roles.push(binding.role);
            }
        }
        roles.sort();
        Ok(roles)
    }

    async fn cluster_bindings(&self) -> Result<Vec<ClusterBinding>, StoreError> {
        self.with_reader(|c| {
            let mut statement = c.prepare_cached(
                "SELECT subject_kind, subject, role FROM cluster_role_bindings
                 ORDER BY role, subject_kind DESC, subject",
            )?;
            let rows = statement.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?;
            let mut bindings = Vec::new();
            for row in rows {
                let (kind, name, role) = row?;
                let kind = match kind.as_str() {
                    "User" => SubjectKind::User,
                    _ => SubjectKind::Group,
                };
                bindings.push(ClusterBinding { kind, name, role });
            }
            Ok(bindings)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tokens_and_cluster_bindings_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        assert!(!store.has_tokens().await.unwrap());
        let record = TokenRecord {
            hash: "ab".repeat(32),
            user: "ann".into(),
            groups: vec!["release".into()],
            created_at: "2025-01-01T00:00:00Z".into(),
        };
        let binding = ClusterBinding {
            kind: SubjectKind::Group,
            name: "release".into(),
            role: "dray-promoter".into(),
        };
        store
            .create_token(record.clone(), Some(binding))
            .await
            .unwrap();
        assert!(store.has_tokens().await.unwrap());
        assert_eq!(store.token(&record.hash).await.unwrap(), Some(record));
        assert_eq!(store.token("cd").await.unwrap(), None);
        let roles = store
            .cluster_roles("bob", &["release".to_owned()])
            .await
            .unwrap();
        assert_eq!(roles, vec!["dray-promoter".to_owned()]);
        assert!(store.cluster_roles("bob", &[]).await.unwrap().is_empty());
    }

    fn record(hash: &str, user: &str, created_at: &str) -> TokenRecord {
        TokenRecord {
            hash: hash.repeat(32),
            user: user.into(),
            groups: vec![],
            created_at: created_at.into(),
        }
    }

    #[tokio::test]
    async fn tokens_made_before_ids_keep_working_after_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A data directory as the previous schema (three migrations) left it.
            let path = dir.path().join(super::super::DATABASE_FILE);
            let mut c = rusqlite::Connection::open(path).unwrap();
            let tx = c.transaction().unwrap();
            for sql in &super::super::sqlite::MIGRATIONS[..3] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", 3).unwrap();
            for (hash, user, at) in [
                ("aa", "admin", "2025-01-01T00:00:00Z"),
                ("bb", "ann", "2025-02-01T00:00:00Z"),
            ] {
                tx.execute(
                    "INSERT INTO api_tokens (hash, user, groups, created_at)
                     VALUES (?1, ?2, '[\"release\"]', ?3)",
                    params![hash.repeat(32), user, at],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let store = SqliteStore::open(dir.path()).unwrap();
        let ann = store.token(&"bb".repeat(32)).await.unwrap().unwrap();
        assert_eq!(
            (ann.user.as_str(), ann.groups.as_slice()),
            ("ann", &["release".to_owned()][..])
        );
        let listed = store.list_tokens(None).await.unwrap();
        let users: Vec<_> = listed
            .iter()
            .map(|t| (t.user.as_str(), t.bootstrap))
            .collect();
        assert_eq!(users, [("admin", true), ("ann", false)]);
        for token in &listed {
            assert_eq!(token.id.len(), 12, "{token:?}");
            assert!(token.id.chars().all(|c| c.is_ascii_hexdigit()), "{token:?}");
            assert!(!"aa".repeat(32).contains(&token.id) && !"bb".repeat(32).contains(&token.id));
            assert_eq!(
                (token.expires_at.as_deref(), token.last_used_at.as_deref()),
                (None, None)
            );
        }
        assert_ne!(listed[0].id, listed[1].id);
        // Ids survive a reopen (the migration does not run twice).
        drop(store);
        let store = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(store.list_tokens(None).await.unwrap(), listed);
    }

    #[tokio::test]
    async fn tokens_are_listed_revoked_touched_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let details = TokenDetails {
            created_by: Some("admin".into()),
            description: Some("CI".into()),
            expires_at: Some("2999-01-01T00:00:00Z".into()),
        };
        let ann = store
            .add_token(
                record("aa", "ann", "2025-01-01T00:00:00Z"),
                details.clone(),
                None,
            )
            .await
            .unwrap();
        let expired = TokenDetails {
            expires_at: Some("2020-01-01T00:00:00Z".into()),
            ..details
        };
        let bob = store
            .add_token(record("bb", "bob", "2025-01-02T00:00:00Z"), expired, None)
            .await
            .unwrap();

        let info = store.token_by_id(&ann).await.unwrap().unwrap();
        assert_eq!(info.created_by.as_deref(), Some("admin"));
        assert_eq!(info.description.as_deref(), Some("CI"));
        assert!(!info.bootstrap);
        assert_eq!(
            store.token_info(&"aa".repeat(32)).await.unwrap(),
            Some(info)
        );

        // An expired token is not a token, but can still be told apart from none.
        assert!(store.token(&"bb".repeat(32)).await.unwrap().is_none());
        let bob_info = store.token_info(&"bb".repeat(32)).await.unwrap().unwrap();
        assert_eq!(
            bob_info
                .expired(jiff::Timestamp::now())
                .map(|t| t.to_string()),
            Some("2020-01-01T00:00:00Z".to_owned())
        );

        let only_bob = store.list_tokens(Some("bob")).await.unwrap();
        assert_eq!(
            only_bob.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            [bob.as_str()]
        );
        assert_eq!(store.list_tokens(None).await.unwrap().len(), 2);

        store
            .touch_token(&"aa".repeat(32), "2026-01-01T00:00:00Z")
            .await
            .unwrap();
        let touched = store.token_by_id(&ann).await.unwrap().unwrap();
        assert_eq!(
            touched.last_used_at.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );

        assert!(
            store
                .revoked_token(&"aa".repeat(32))
                .await
                .unwrap()
                .is_none()
        );
        assert!(store.revoke_token(&ann).await.unwrap());
        assert!(!store.revoke_token(&ann).await.unwrap());
        assert!(store.token(&"aa".repeat(32)).await.unwrap().is_none());
        assert!(store.token_info(&"aa".repeat(32)).await.unwrap().is_none());
        assert!(store.token_by_id(&ann).await.unwrap().is_none());
        // What is kept says whose it was and when it was revoked.
        let revoked = store
            .revoked_token(&"aa".repeat(32))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (revoked.id.as_str(), revoked.user.as_str()),
            (ann.as_str(), "ann")
        );
        assert!(
            revoked.revoked_at.parse::<jiff::Timestamp>().is_ok(),
            "{revoked:?}"
        );
        assert!(
            store
                .revoked_token(&"bb".repeat(32))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.list_tokens(None).await.unwrap().len(), 1);
    }
}
