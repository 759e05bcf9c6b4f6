//! OpenID Connect login for the web UI (authorization code flow with PKCE S256), for
//! `dray serve --oidc-issuer …`. The protocol work (discovery, the authorization URL with
//! `state`, `nonce` and the PKCE challenge, the code exchange, and ID-token verification:
//! signature against the provider's JWKS, `iss`, `aud`, `exp`, `nonce`) is the
//! `openidconnect` crate's; this module keeps the login attempts and turns a verified ID
//! token into a UI session ([`super::sessions::Identity::Oidc`]).
//!
//! The web UI serves the two routes and draws the pages (`src/ui`); this module does
//! the work behind them:
//!
//! - `GET /auth/login` ([`Oidc::begin`]): keeps `state`, `nonce` and the PKCE verifier in memory under a
//!   random id, sets that id in the `dray_oidc_state` cookie (`HttpOnly; SameSite=Lax`,
//!   `Path=/auth`, 10 minutes: Lax because the provider's redirect back is a cross-site
//!   top-level GET, which a Strict cookie would not ride on), and answers 302 to the
//!   provider.
//! - `GET /auth/callback?code&state` ([`Oidc::finish`], then [`start_session`]): takes the attempt (one use), checks `state`,
//!   exchanges the code with the PKCE verifier, verifies the ID token, and starts a session
//!   whose user and groups come from the configured claims and which ends no later than
//!   the ID token. Errors (`error=access_denied`, a wrong or expired `state`, a token that
//!   does not verify) are a login page naming the cause and what to do, with no session
//!   (no `dray_session` cookie); the cause is logged, never the code or the token.
//!
//! An ID token is refused ([`TokenProblem`]) unless its signature verifies against the
//! provider's JWKS with an algorithm its discovery document lists (never `alg: none`), `iss` is exactly
//! `--oidc-issuer`, `aud` contains `--oidc-client-id`, `exp` is in the future and `nonce` is
//! the one this attempt sent. The user is the `--oidc-username-claim` (default `email`);
//! an `email` names the user only when `email_verified` is `true`, else `sub` does,
//! prefixed as any name not from `email` is ([`DEFAULT_USERNAME_PREFIX`]).
//!
//! Discovery runs at start-up with a finite timeout; when the provider cannot be reached,
//! the server still starts, the login page says why, and the next `/auth/login` tries
//! again. Provider metadata (and so its keys) is re-read when older than an hour, and once
//! when an ID token's signature does not verify (keys rotated). Codes, tokens, `state`
//! and `nonce` are never logged or shown.
//!
//! The parts, one job each:
//! - `options`: the `--oidc-*` settings ([`OidcOptions`]) and what can be wrong with them;
//! - `errors`: why a login made no session ([`OidcLoginError`], [`TokenProblem`]);
//! - `protocol`: the `openidconnect` types Dray uses (its claims, its client);
//! - `discovery`: reading the provider's metadata and keys, and keeping them fresh;
//! - `attempts`: a login attempt from `/auth/login` to the callback, and its cookie;
//! - `callback`: finishing a login (state, code exchange, ID-token checks) into a session;
//! - `claims`: the user and groups a verified ID token names.

mod attempts;
mod callback;
mod claims;
mod discovery;
mod errors;
mod options;
mod protocol;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use openidconnect::core::CoreProviderMetadata;
use openidconnect::{IssuerUrl, RedirectUrl};

pub use attempts::{ATTEMPT_TTL, STATE_COOKIE, clear_state_cookie, state_cookie};
pub use callback::{CallbackQuery, LoggedIn, start_session};
pub use errors::{OidcLoginError, TokenProblem};
pub use options::{DEFAULT_USERNAME_PREFIX, OidcConfigError, OidcOptions};

use attempts::Attempt;

/// How long discovery, the code exchange and every other call to the provider may take.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Provider metadata (and its signing keys) older than this is read again at login.
const METADATA_MAX_AGE: Duration = Duration::from_secs(3600);

#[derive(Default)]
struct Provider {
    metadata: Option<(CoreProviderMetadata, Instant)>,
    /// Why the last discovery failed, for the login page.
    unavailable: Option<String>,
}

/// The configured OpenID provider, its metadata and the pending login attempts.
pub struct Oidc {
    options: OidcOptions,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    http: reqwest::Client,
    provider: Mutex<Provider>,
    attempts: Mutex<HashMap<String, Attempt>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here is left half-written by a panic; keep serving.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Oidc {
    /// Checks the options and builds the HTTP client (a timeout, no redirects: the
    /// provider's endpoints answer directly). Does not contact the provider.
    pub fn new(options: OidcOptions) -> Result<Self, OidcConfigError> {
        let issuer =
            IssuerUrl::new(options.issuer.clone()).map_err(|e| OidcConfigError::Issuer {
                url: options.issuer.clone(),
                cause: e.to_string(),
            })?;
        let redirect = RedirectUrl::new(options.redirect_url.clone()).map_err(|e| {
            OidcConfigError::RedirectUrl {
                url: options.redirect_url.clone(),
                cause: format!("is not a valid URL ({e})"),
            }
        })?;
        if redirect.url().path() != "/auth/callback" {
            return Err(OidcConfigError::RedirectUrl {
                url: options.redirect_url.clone(),
                cause: "does not end in /auth/callback".to_owned(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(PROVIDER_TIMEOUT)
            .connect_timeout(PROVIDER_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OidcConfigError::Http(e.to_string()))?;
        Ok(Oidc {
            options,
            issuer,
            redirect,
            http,
            provider: Mutex::new(Provider::default()),
            attempts: Mutex::new(HashMap::new()),
        })
    }

    /// The options it was made with.
    pub fn options(&self) -> &OidcOptions {
        &self.options
    }

    /// The issuer's host, for the login button ("Log in with <host>").
    pub fn issuer_host(&self) -> String {
        self.issuer
            .url()
            .host_str()
            .map(|host| match self.issuer.url().port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            })
            .unwrap_or_else(|| self.options.issuer.clone())
    }

    /// Why the provider is unavailable, when its last discovery failed.
    pub fn unavailable(&self) -> Option<String> {
        lock(&self.provider).unavailable.clone()
    }
}
