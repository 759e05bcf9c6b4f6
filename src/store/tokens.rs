//! API tokens and cluster-wide role bindings, kept beside the resources but not as
//! resources: [`TokenStore`], implemented by [`SqliteStore`] in two tables of its own.
//!
//! Why not a kind (`ApiToken`)? A token is a credential, not desired state: it must never
//! be listed by `dray get`, written by `dray apply`, announced on the change feed, nor
//! exported as a CRD; and every request looks one up by its hash, which a primary key on
//! the hash answers directly. Only the SHA-256 hash of a token is kept; the token itself
//! is shown once, when it is made, and is then unrecoverable.
//!
//! Cluster-wide bindings (a built-in role for a user or group in every project) live here
//! too, since a project's `RoleBinding` cannot express them.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use crate::api::SubjectKind;

use super::{SqliteStore, StoreError};

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
    /// Stores a token, and with it (in the same transaction) a cluster-wide binding.
    async fn create_token(
        &self,
        token: TokenRecord,
        binding: Option<ClusterBinding>,
    ) -> Result<(), StoreError>;

    /// The token with this hash, if any.
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;

    /// Whether any token exists (a data directory without one gets a bootstrap token).
    async fn has_tokens(&self) -> Result<bool, StoreError>;

    /// The cluster-wide roles of a user, directly or through one of `groups`.
    async fn cluster_roles(&self, user: &str, groups: &[String])
    -> Result<Vec<String>, StoreError>;
}

fn kind_text(kind: SubjectKind) -> &'static str {
    match kind {
        SubjectKind::User => "User",
        SubjectKind::Group => "Group",
    }
}

#[async_trait]
impl TokenStore for SqliteStore {
    async fn create_token(
        &self,
        token: TokenRecord,
        binding: Option<ClusterBinding>,
    ) -> Result<(), StoreError> {
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            let groups = serde_json::to_string(&token.groups)
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            tx.execute(
                "INSERT INTO api_tokens (hash, user, groups, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![token.hash, token.user, groups, token.created_at],
            )?;
            if let Some(binding) = binding {
                tx.execute(
                    "INSERT OR IGNORE INTO cluster_role_bindings (subject_kind, subject, role)
                     VALUES (?1, ?2, ?3)",
                    params![kind_text(binding.kind), binding.name, binding.role],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let hash = hash.to_owned();
        self.with_connection(move |c| {
            let row: Option<(String, String, String)> = c
                .query_row(
                    "SELECT user, groups, created_at FROM api_tokens WHERE hash = ?1",
                    params![hash],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            row.map(|(user, groups, created_at)| {
                let groups = serde_json::from_str(&groups)
                    .map_err(|e| StoreError::Internal(format!("a token's groups: {e}")))?;
                Ok(TokenRecord {
                    hash,
                    user,
                    groups,
                    created_at,
                })
            })
            .transpose()
        })
        .await
    }

    async fn has_tokens(&self) -> Result<bool, StoreError> {
        self.with_connection(|c| {
            Ok(c.query_row("SELECT EXISTS (SELECT 1 FROM api_tokens)", [], |r| r.get(0))?)
        })
        .await
    }

    async fn cluster_roles(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let user = user.to_owned();
        let groups = groups.to_vec();
        self.with_connection(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT subject_kind, subject, role FROM cluster_role_bindings ORDER BY role",
            )?;
            let rows = statement.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?;
            let mut roles = Vec::new();
            for row in rows {
                let (kind, subject, role) = row?;
                let applies = match kind.as_str() {
                    "User" => subject == user,
                    _ => groups.contains(&subject),
                };
                if applies && !roles.contains(&role) {
                    roles.push(role);
                }
            }
            Ok(roles)
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
}
