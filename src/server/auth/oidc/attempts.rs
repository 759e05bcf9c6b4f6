//! A login attempt between `/auth/login` and `/auth/callback`: `state`, `nonce` and the
//! PKCE verifier kept in memory under a random id (at most [`MAX_ATTEMPTS`], 10 minutes,
//! one use), that id carried by the `dray_oidc_state` cookie, and the provider's
//! authorization URL ([`Oidc::begin`]).

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use openidconnect::{
    AuthenticationFlow, CsrfToken, Nonce, PkceCodeChallenge, PkceCodeVerifier, Scope,
};

use super::super::sessions;
use super::errors::OidcLoginError;
use super::{Oidc, lock};

/// The cookie naming a login attempt between `/auth/login` and `/auth/callback`.
pub const STATE_COOKIE: &str = "dray_oidc_state";

/// How long a login attempt may take at the provider.
pub const ATTEMPT_TTL: Duration = Duration::from_secs(600);

/// At most this many pending login attempts; the oldest is dropped to make room.
const MAX_ATTEMPTS: usize = 10_000;

/// One login attempt between `/auth/login` and `/auth/callback`.
pub(super) struct Attempt {
    pub(super) state: CsrfToken,
    pub(super) nonce: Nonce,
    pub(super) verifier: PkceCodeVerifier,
    pub(super) expires: Instant,
}

impl Oidc {
    /// Starts a login: returns the attempt's id (for the state cookie) and the provider's
    /// authorization URL (with `state`, `nonce` and the PKCE S256 challenge).
    pub async fn begin(&self) -> Result<(String, String), OidcLoginError> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                AuthenticationFlow::<openidconnect::core::CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.options.scopes {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        let (url, state, nonce) = request.url();
        let id = sessions::random_id();
        let now = Instant::now();
        let mut attempts = lock(&self.attempts);
        attempts.retain(|_, a| a.expires > now);
        if attempts.len() >= MAX_ATTEMPTS
            && let Some(oldest) = attempts
                .iter()
                .min_by_key(|(_, a)| a.expires)
                .map(|(k, _)| k.clone())
        {
            attempts.remove(&oldest);
        }
        attempts.insert(
            id.clone(),
            Attempt {
                state,
                nonce,
                verifier,
                expires: now + ATTEMPT_TTL,
            },
        );
        Ok((id, url.to_string()))
    }

    /// Whether the cookies of a login should be `Secure`: the request came over https, or
    /// the provider sends the browser back to an https URL.
    pub fn secure_cookies(&self, headers: &HeaderMap) -> bool {
        sessions::is_https(headers) || self.redirect.url().scheme() == "https"
    }
}

/// The `Set-Cookie` value carrying a login attempt's id to the callback.
pub fn state_cookie(id: &str, secure: bool) -> String {
    format!(
        "{STATE_COOKIE}={id}; HttpOnly; SameSite=Lax; Path=/auth; Max-Age={}{}",
        ATTEMPT_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes it.
pub fn clear_state_cookie(secure: bool) -> String {
    format!(
        "{STATE_COOKIE}=; HttpOnly; SameSite=Lax; Path=/auth; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}
