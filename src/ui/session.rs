//! Web UI sessions: `POST /login` trades an API token for a random session id in an
//! `HttpOnly`, `SameSite=Strict` cookie; each session has its own CSRF token, which every
//! state-changing request made with the cookie must echo in `X-CSRF-Token`.
//!
//! Sessions live in this process's memory, keyed by the SHA-256 of their id, and hold the
//! token's hash (never the token): every request re-resolves the caller from the
//! [`crate::store::TokenStore`], so a removed token ends its sessions at once. A restart
//! logs everyone out, which for a 12-hour session is an acceptable price for keeping
//! credentials out of the database and the schema unchanged.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
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

/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// At most this many live sessions; the oldest is dropped to make room.
const MAX_SESSIONS: usize = 10_000;

/// One logged-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    /// The SHA-256 of the API token it was made with.
    pub token_hash: String,
    /// The user, for display.
    pub user: String,
    /// The CSRF token pages embed and scripts send back.
    pub csrf: String,
    expires: Instant,
}

impl Session {
    /// Whether `header` carries this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, header: Option<&HeaderValue>) -> bool {
        header.is_some_and(|h| bool::from(h.as_bytes().ct_eq(self.csrf.as_bytes())))
    }
}

static SESSIONS: LazyLock<Mutex<HashMap<String, Session>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn key(id: &str) -> String {
    format!("{:x}", Sha256::digest(id.as_bytes()))
}

/// 256 random bits from the OS generator, URL-safe base64 (43 characters).
fn random_id() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn sessions() -> std::sync::MutexGuard<'static, HashMap<String, Session>> {
    // A panic while holding the lock cannot leave the map half-written; keep serving.
    SESSIONS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a session for the token with this hash; returns its id (for the cookie only).
pub fn create(token_hash: &str, user: &str) -> (String, Session) {
    let id = random_id();
    let session = Session {
        token_hash: token_hash.to_owned(),
        user: user.to_owned(),
        csrf: random_id(),
        expires: Instant::now() + SESSION_TTL,
    };
    let mut map = sessions();
    let now = Instant::now();
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
pub fn lookup(id: &str) -> Option<Session> {
    let mut map = sessions();
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
pub fn remove(id: &str) {
    sessions().remove(&key(id));
}

/// The session id in the request's `Cookie` header, if any.
pub fn cookie_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Whether the request reached us over https (directly or through a proxy that says so).
pub fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// The `Set-Cookie` value that starts a session.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        SESSION_TTL.as_secs(),
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
        let (id, session) = create("hash-1", "ann");
        assert_eq!(id.len(), 43);
        assert_ne!(id, session.csrf);
        assert_eq!(lookup(&id).map(|s| s.user), Some("ann".to_owned()));
        assert!(lookup("not-a-session").is_none());
        remove(&id);
        assert!(lookup(&id).is_none());
    }

    #[test]
    fn csrf_must_match_exactly() {
        let (_, session) = create("hash-2", "bob");
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
