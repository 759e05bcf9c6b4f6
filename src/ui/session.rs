//! Web UI sessions: a login (`POST /login` with an API token, or OIDC through
//! `/auth/login` and `/auth/callback`, see [`super::oidc`]) gets a random session id in an
//! `HttpOnly`, `SameSite=Strict` cookie; each session has its own CSRF token, which every
//! state-changing request made with the cookie must echo in `X-CSRF-Token`.
//!
//! Sessions live in this process's memory, in the [`Sessions`] store the server's
//! `AppState` holds (so tests and several routers never share one), keyed by the SHA-256
//! of their id. A session's [`Identity`] is either the hash of the API token it was made
//! with (never the token: every request re-resolves the caller from the
//! [`crate::store::TokenStore`], so a removed token ends its sessions at once) or the user
//! and groups an OpenID provider vouched for, valid until the ID token's `exp`. A restart
//! logs everyone out, which for a 12-hour session is an acceptable price for keeping
//! credentials out of the database and the schema unchanged.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "dray_session";

/// The header a cookie-authenticated, state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How long a session lasts (an OIDC session ends sooner when its ID token does).
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// At most this many live sessions; the oldest is dropped to make room.
const MAX_SESSIONS: usize = 10_000;

/// Who a session stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    expires: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("identity", &self.identity)
            .field("user", &self.user)
            .field("csrf", &"<redacted>")
            .field("expires", &self.expires)
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
        self.expires.saturating_duration_since(Instant::now())
    }
}

/// The live sessions of one server.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

fn key(id: &str) -> String {
    format!("{:x}", Sha256::digest(id.as_bytes()))
}

/// 256 random bits from the OS generator, URL-safe base64 (43 characters).
pub(crate) fn random_id() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock cannot leave the map half-written; keep serving.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a session for the API token with this hash; returns its id (for the cookie
    /// only) and the session.
    pub fn create_for_token(&self, token_hash: &str, user: &str) -> (String, Session) {
        self.create(
            Identity::Token {
                token_hash: token_hash.to_owned(),
            },
            user,
            SESSION_TTL,
        )
    }

    /// Starts a session for `identity` lasting `ttl` (at most [`SESSION_TTL`]); returns
    /// its id (for the cookie only) and the session.
    pub fn create(&self, identity: Identity, user: &str, ttl: Duration) -> (String, Session) {
        let id = random_id();
        let now = Instant::now();
        let session = Session {
            identity,
            user: user.to_owned(),
            csrf: random_id(),
            expires: now + ttl.min(SESSION_TTL),
        };
        let mut map = self.map();
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(key(&id), session.clone());
        (id, session)
    }

    /// The live session with this id.
    pub fn lookup(&self, id: &str) -> Option<Session> {
        let mut map = self.map();
        let k = key(id);
        match map.get(&k) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                map.remove(&k);
                None
            }
            None => None,
        }
    }

    /// Ends a session.
    pub fn remove(&self, id: &str) {
        self.map().remove(&key(id));
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.map().values().filter(|s| s.expires > now).count()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn sessions_are_found_by_id_and_end() {
        let sessions = Sessions::new();
        let (id, session) = sessions.create_for_token("hash-1", "ann");
        assert_eq!(id.len(), 43);
        assert_ne!(id, session.csrf);
        assert_eq!(sessions.lookup(&id).map(|s| s.user), Some("ann".to_owned()));
        assert!(sessions.lookup("not-a-session").is_none());
        assert_eq!(sessions.len(), 1);
        sessions.remove(&id);
        assert!(sessions.lookup(&id).is_none());
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_session_debug_print_hides_its_csrf_token() {
        let sessions = Sessions::new();
        let (_, session) = sessions.create_for_token("hash-2", "ann");
        let printed = format!("{session:?} {sessions:?}");
        assert!(!session.csrf.is_empty());
        assert!(!printed.contains(&session.csrf), "{printed}");
        assert!(printed.contains("ann"), "{printed}");
    }

    #[test]
    fn two_stores_do_not_share_sessions() {
        let (one, two) = (Sessions::new(), Sessions::new());
        let (id, _) = one.create_for_token("hash-3", "ann");
        assert!(one.lookup(&id).is_some());
        assert!(two.lookup(&id).is_none());
    }

    #[test]
    fn an_oidc_session_keeps_its_identity_and_ends_with_its_token() {
        let sessions = Sessions::new();
        let identity = Identity::Oidc {
            user: "ann@example.com".into(),
            groups: vec!["release-managers".into()],
        };
        let (id, session) = sessions.create(
            identity.clone(),
            "ann@example.com",
            Duration::from_secs(600),
        );
        assert!(session.remaining() <= Duration::from_secs(600));
        assert!(session.remaining() > Duration::from_secs(500));
        assert_eq!(sessions.lookup(&id).map(|s| s.identity), Some(identity));
        // A token that has already expired makes a session that is already over.
        let (gone, _) = sessions.create(
            Identity::Oidc {
                user: "bob".into(),
                groups: vec![],
            },
            "bob",
            Duration::ZERO,
        );
        assert!(sessions.lookup(&gone).is_none());
        // Never longer than a token login's session.
        let (_, long) = sessions.create(
            Identity::Oidc {
                user: "cy".into(),
                groups: vec![],
            },
            "cy",
            Duration::from_secs(7 * 24 * 3600),
        );
        assert!(long.remaining() <= SESSION_TTL);
    }

    #[test]
    fn csrf_must_match_exactly() {
        let (_, session) = Sessions::new().create_for_token("hash-2", "bob");
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
