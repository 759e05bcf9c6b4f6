//! Web UI sessions: a login (`POST /login` with an API token, or OIDC through
//! `/auth/login` and `/auth/callback`, see [`super::oidc`]) gets a random session id in an
//! `HttpOnly`, `SameSite=Strict` cookie; each session has its own CSRF token, which every
//! state-changing request made with the cookie must echo in `X-CSRF-Token`.
//!
//! Sessions live in the store ([`SessionStore`], the `ui_sessions` table), keyed by the
//! SHA-256 of their id, so restarting `dray serve` logs nobody out and the database never
//! holds an id that could take a session over. A session's [`Identity`] is either the hash
//! of the API token it was made with (never the token: every request re-resolves the
//! caller from the [`crate::store::TokenStore`], so a revoked or expired token ends its
//! sessions at once) or the user and groups an OpenID provider vouched for, valid until
//! the ID token's `exp`. A session is made only once a login has succeeded: an unknown,
//! expired or revoked API token, or an ID token that does not verify, makes none.

use std::sync::Arc;
use std::time::Duration;

use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::store::{SessionRecord, SessionStore, StoreError};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "dray_session";

/// The header a cookie-authenticated, state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How long a session lasts (an OIDC session ends sooner when its ID token does).
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// At most this many live sessions; the oldest is dropped to make room.
const MAX_SESSIONS: usize = 10_000;

/// Who a session stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Identity {
    /// An API token, by its SHA-256; the caller is re-resolved from the token store on
    /// every request.
    Token {
        /// The SHA-256 of the API token the session was made with.
        token_hash: String,
    },
    /// A user an OpenID provider vouched for (claims of a verified ID token).
    Oidc {
        /// The user, from the configured username claim.
        user: String,
        /// The groups, from the configured groups claim.
        groups: Vec<String>,
    },
    /// A user the Kubernetes API vouched for (a TokenReview of the token they logged in
    /// with, `dray serve --kubernetes`); the token itself is not kept.
    Kubernetes {
        /// `status.user.username`.
        user: String,
        /// `status.user.groups`.
        groups: Vec<String>,
    },
}

/// One logged-in browser. Its `Debug` hides the CSRF token, so no log can show it.
#[derive(Clone)]
pub struct Session {
    /// Who it stands for.
    pub identity: Identity,
    /// The user, for display and logs.
    pub user: String,
    /// The CSRF token pages embed and scripts send back.
    pub csrf: String,
    /// When it ends, in Unix seconds.
    expires_at: i64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("identity", &self.identity)
            .field("user", &self.user)
            .field("csrf", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl Session {
    /// Whether `header` carries this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, header: Option<&HeaderValue>) -> bool {
        header.is_some_and(|h| bool::from(h.as_bytes().ct_eq(self.csrf.as_bytes())))
    }

    /// How long the session has left (for the cookie's `Max-Age`).
    pub fn remaining(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.expires_at - now()).unwrap_or(0))
    }

    /// The session a stored row holds; `None` when its identity cannot be read (written by
    /// another version of Dray): its browser simply logs in again.
    fn from_record(record: SessionRecord) -> Option<Self> {
        match serde_json::from_str(&record.identity) {
            Ok(identity) => Some(Session {
                identity,
                user: record.user,
                csrf: record.csrf,
                expires_at: record.expires_at,
            }),
            Err(error) => {
                tracing::warn!(user = %record.user, %error, "a stored UI session cannot be read; it is ended");
                None
            }
        }
    }
}

/// Now, in Unix seconds.
fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The sessions of one server, kept in its store.
#[derive(Clone)]
pub struct Sessions {
    store: Arc<dyn SessionStore>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

fn key(id: &str) -> String {
    format!("{:x}", Sha256::digest(id.as_bytes()))
}

/// 256 random bits from the OS generator, URL-safe base64 (43 characters).
pub fn random_id() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    /// The sessions kept in `store`.
    pub fn new(store: Arc<dyn SessionStore>) -> Self {
        Sessions { store }
    }

    /// Starts a session for the API token with this hash; returns its id (for the cookie
    /// only) and the session.
    pub async fn create_for_token(
        &self,
        token_hash: &str,
        user: &str,
    ) -> Result<(String, Session), StoreError> {
        self.create(
            Identity::Token {
                token_hash: token_hash.to_owned(),
            },
            user,
            SESSION_TTL,
        )
        .await
    }

    /// Starts a session for `identity` lasting `ttl` (at most [`SESSION_TTL`]); returns
    /// its id (for the cookie only) and the session.
    pub async fn create(
        &self,
        identity: Identity,
        user: &str,
        ttl: Duration,
    ) -> Result<(String, Session), StoreError> {
        let id = random_id();
        let now = now();
        let ttl = i64::try_from(ttl.min(SESSION_TTL).as_secs()).unwrap_or(0);
        let session = Session {
            identity,
            user: user.to_owned(),
            csrf: random_id(),
            expires_at: now + ttl,
        };
        let record = SessionRecord {
            key: key(&id),
            identity: serde_json::to_string(&session.identity)
                .map_err(|e| StoreError::Internal(e.to_string()))?,
            user: session.user.clone(),
            csrf: session.csrf.clone(),
            expires_at: session.expires_at,
        };
        self.store.put_session(record, now, MAX_SESSIONS).await?;
        Ok((id, session))
    }

    /// The live session with this id.
    pub async fn lookup(&self, id: &str) -> Result<Option<Session>, StoreError> {
        let Some(record) = self.store.session(&key(id), now()).await? else {
            return Ok(None);
        };
        let session = Session::from_record(record);
        if session.is_none() {
            self.remove(id).await?;
        }
        Ok(session)
    }

    /// Ends a session.
    pub async fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.store.delete_session(&key(id)).await
    }

    /// Ends a session whose caller is gone; a store that cannot do it now is only logged
    /// (the session is refused anyway, and it ends at its expiry).
    pub async fn forget(&self, id: &str) {
        if let Err(error) = self.remove(id).await {
            tracing::warn!(%error, "cannot end a UI session");
        }
    }

    /// How many sessions are live.
    pub async fn live(&self) -> Result<usize, StoreError> {
        self.store.live_sessions(now()).await
    }
}

/// The value of the cookie `name` in the request's `Cookie` headers, if any.
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The session id in the request's `Cookie` header, if any.
pub fn cookie_id(headers: &HeaderMap) -> Option<String> {
    cookie_value(headers, COOKIE_NAME)
}

/// Whether the request reached us over https (directly or through a proxy that says so).
pub fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// The `Set-Cookie` value that starts a session of the full [`SESSION_TTL`].
pub fn set_cookie(id: &str, secure: bool) -> String {
    set_cookie_for(id, secure, SESSION_TTL)
}

/// The `Set-Cookie` value that starts a session lasting `ttl`.
pub fn set_cookie_for(id: &str, secure: bool, ttl: Duration) -> String {
    format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        ttl.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that ends one.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// False when the request names an `Origin` other than the host it was sent to: a form on
/// another site posting to `/login` or `/logout` (login CSRF).
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|h| h.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(origin);
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    /// Sessions over a fresh store (the directory must outlive them).
    fn sessions() -> (tempfile::TempDir, Sessions) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        (dir, Sessions::new(store))
    }

    #[tokio::test]
    async fn sessions_are_found_by_id_and_end() {
        let (_dir, sessions) = sessions();
        let (id, session) = sessions.create_for_token("hash-1", "ann").await.unwrap();
        assert_eq!(id.len(), 43);
        assert_ne!(id, session.csrf);
        let found = sessions.lookup(&id).await.unwrap();
        assert_eq!(found.map(|s| s.user), Some("ann".to_owned()));
        assert!(sessions.lookup("not-a-session").await.unwrap().is_none());
        assert_eq!(sessions.live().await.unwrap(), 1);
        sessions.remove(&id).await.unwrap();
        assert!(sessions.lookup(&id).await.unwrap().is_none());
        assert_eq!(sessions.live().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_session_outlives_its_server_and_the_store_holds_no_id() {
        let dir = tempfile::tempdir().unwrap();
        let (id, session) = {
            let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
            Sessions::new(store)
                .create_for_token("hash-9", "ann")
                .await
                .unwrap()
        };
        // A new server on the same data directory (a restart).
        let again = Sessions::new(Arc::new(SqliteStore::open(dir.path()).unwrap()));
        let found = again.lookup(&id).await.unwrap().expect("still logged in");
        assert_eq!(found.user, "ann");
        assert_eq!(found.csrf, session.csrf);
        assert_eq!(
            found.identity,
            Identity::Token {
                token_hash: "hash-9".into()
            }
        );
        let database = std::fs::read(dir.path().join(crate::store::DATABASE_FILE)).unwrap();
        let wal = std::fs::read(
            dir.path()
                .join(format!("{}-wal", crate::store::DATABASE_FILE)),
        )
        .unwrap_or_default();
        let holds = |bytes: &[u8]| bytes.windows(id.len()).any(|w| w == id.as_bytes());
        assert!(
            !holds(&database) && !holds(&wal),
            "the session id is stored"
        );
    }

    #[tokio::test]
    async fn a_session_stored_in_another_shape_means_logging_in_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let sessions = Sessions::new(store.clone());
        let id = random_id();
        let record = SessionRecord {
            key: key(&id),
            identity: r#"{"kind":"saml","subject":"ann"}"#.into(),
            user: "ann".into(),
            csrf: random_id(),
            expires_at: now() + 60,
        };
        store
            .put_session(record, now(), MAX_SESSIONS)
            .await
            .unwrap();
        assert!(sessions.lookup(&id).await.unwrap().is_none());
        assert_eq!(
            sessions.live().await.unwrap(),
            0,
            "the unreadable row is ended"
        );
    }

    #[tokio::test]
    async fn a_session_debug_print_hides_its_csrf_token() {
        let (_dir, sessions) = sessions();
        let (_, session) = sessions.create_for_token("hash-2", "ann").await.unwrap();
        let printed = format!("{session:?} {sessions:?}");
        assert!(!session.csrf.is_empty());
        assert!(!printed.contains(&session.csrf), "{printed}");
        assert!(printed.contains("ann"), "{printed}");
    }

    #[tokio::test]
    async fn two_stores_do_not_share_sessions() {
        let ((_a, one), (_b, two)) = (sessions(), sessions());
        let (id, _) = one.create_for_token("hash-3", "ann").await.unwrap();
        assert!(one.lookup(&id).await.unwrap().is_some());
        assert!(two.lookup(&id).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_oidc_session_keeps_its_identity_and_ends_with_its_token() {
        let (_dir, sessions) = sessions();
        let identity = Identity::Oidc {
            user: "ann@example.com".into(),
            groups: vec!["release-managers".into()],
        };
        let (id, session) = sessions
            .create(
                identity.clone(),
                "ann@example.com",
                Duration::from_secs(600),
            )
            .await
            .unwrap();
        assert!(session.remaining() <= Duration::from_secs(600));
        assert!(session.remaining() > Duration::from_secs(500));
        let found = sessions.lookup(&id).await.unwrap();
        assert_eq!(found.map(|s| s.identity), Some(identity));
        // A token that has already expired makes a session that is already over.
        let bob = Identity::Oidc {
            user: "bob".into(),
            groups: vec![],
        };
        let (gone, _) = sessions.create(bob, "bob", Duration::ZERO).await.unwrap();
        assert!(sessions.lookup(&gone).await.unwrap().is_none());
        // Never longer than a token login's session.
        let cy = Identity::Oidc {
            user: "cy".into(),
            groups: vec![],
        };
        let week = Duration::from_secs(7 * 24 * 3600);
        let (_, long) = sessions.create(cy, "cy", week).await.unwrap();
        assert!(long.remaining() <= SESSION_TTL);
    }

    #[tokio::test]
    async fn csrf_must_match_exactly() {
        let (_dir, sessions) = sessions();
        let (_, session) = sessions.create_for_token("hash-2", "bob").await.unwrap();
        let right = HeaderValue::from_str(&session.csrf).unwrap();
        let wrong = HeaderValue::from_static("nope");
        assert!(session.csrf_matches(Some(&right)));
        assert!(!session.csrf_matches(Some(&wrong)));
        assert!(!session.csrf_matches(None));
    }

    #[test]
    fn the_cookie_is_read_among_others_and_set_strictly() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=1; dray_session=xyz; b=2"),
        );
        assert_eq!(cookie_id(&headers).as_deref(), Some("xyz"));
        let cookie = set_cookie("xyz", true);
        for part in [
            "HttpOnly",
            "SameSite=Strict",
            "Path=/",
            "Secure",
            "Max-Age=43200",
        ] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(!set_cookie("xyz", false).contains("Secure"));
    }

    #[test]
    fn a_foreign_origin_is_not_same_origin() {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&headers));
        headers.insert(ORIGIN, HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin(&headers));
        headers.insert(ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(!same_origin(&headers));
    }
}
