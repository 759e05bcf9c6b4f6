//! OpenID Connect login for the web UI (authorization code flow with PKCE S256), for
//! `dray serve --oidc-issuer …`. The protocol work (discovery, the authorization URL with
//! `state`, `nonce` and the PKCE challenge, the code exchange, and ID-token verification:
//! signature against the provider's JWKS, `iss`, `aud`, `exp`, `nonce`) is the
//! `openidconnect` crate's; this module keeps the login attempts and turns a verified ID
//! token into a UI session ([`super::session::Identity::Oidc`]).
//!
//! - `GET /auth/login`: keeps `state`, `nonce` and the PKCE verifier in memory under a
//!   random id, sets that id in the `dray_oidc_state` cookie (`HttpOnly; SameSite=Lax`,
//!   `Path=/auth`, 10 minutes: Lax because the provider's redirect back is a cross-site
//!   top-level GET, which a Strict cookie would not ride on), and answers 302 to the
//!   provider.
//! - `GET /auth/callback?code&state`: takes the attempt (one use), checks `state`,
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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
    CoreRevocableToken, CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthenticationFlow, AuthorizationCode, ClaimsVerificationError, ClientId,
    ClientSecret, CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    IdTokenClaims, IdTokenFields, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, StandardErrorResponse, StandardTokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::server::AppState;

use super::session::{self, Identity};
use super::{layout, login};

/// The cookie naming a login attempt between `/auth/login` and `/auth/callback`.
pub const STATE_COOKIE: &str = "dray_oidc_state";

/// How long a login attempt may take at the provider.
pub const ATTEMPT_TTL: Duration = Duration::from_secs(600);

/// How long discovery, the code exchange and every other call to the provider may take.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Provider metadata (and its signing keys) older than this is read again at login.
const METADATA_MAX_AGE: Duration = Duration::from_secs(3600);

/// What an OIDC username not taken from `email` starts with, unless
/// `--oidc-username-prefix` says otherwise (as Kubernetes prefixes such names with the
/// issuer): ``oidc:bob``.
pub const DEFAULT_USERNAME_PREFIX: &str = "oidc:";

/// At most this many pending login attempts; the oldest is dropped to make room.
const MAX_ATTEMPTS: usize = 10_000;

/// How `dray serve` talks to an OpenID provider.
#[derive(Clone)]
pub struct OidcOptions {
    /// The issuer URL, exactly as the provider writes it in `iss`.
    pub issuer: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// The client secret (read from `--oidc-client-secret-file`); none for a public client.
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: `<dray URL>/auth/callback`.
    pub redirect_url: String,
    /// The claim that names the user (`email`, else `sub` when the token has no such claim,
    /// or, for `email`, when `email_verified` is not `true`).
    pub username_claim: String,
    /// The claim listing the user's groups (a list of strings, or one string).
    pub groups_claim: String,
    /// Put before every OIDC username (`Some("")`: nothing). `None`, the default: a name
    /// from a verified `email` claim is kept as it is, any other (another claim, or `sub`)
    /// gets [`DEFAULT_USERNAME_PREFIX`], so that no provider-side name can be taken for an
    /// API token's user (the bootstrap `admin`, say) and inherit its cluster-wide roles.
    pub username_prefix: Option<String>,
    /// The scopes asked for (`openid` is always asked for).
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for OidcOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcOptions")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("redirect_url", &self.redirect_url)
            .field("username_claim", &self.username_claim)
            .field("groups_claim", &self.groups_claim)
            .field("username_prefix", &self.username_prefix)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// A bad OIDC setting of `dray serve`.
#[derive(Debug, thiserror::Error)]
pub enum OidcConfigError {
    /// `--oidc-issuer` is not a URL.
    #[error(
        "--oidc-issuer `{url}` is not a valid URL ({cause}); give the issuer exactly as the provider's `iss` claim has it, e.g. https://login.example.com/realms/main"
    )]
    Issuer {
        /// The value given.
        url: String,
        /// Why it does not parse.
        cause: String,
    },
    /// `--oidc-redirect-url` is not a URL ending in `/auth/callback`.
    #[error(
        "--oidc-redirect-url `{url}` {cause}; give Dray's external URL followed by /auth/callback, e.g. https://dray.example.com/auth/callback, and register it at the provider"
    )]
    RedirectUrl {
        /// The value given.
        url: String,
        /// What is wrong with it.
        cause: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot set up the HTTP client for the OpenID provider: {0}")]
    Http(String),
}

/// Additional ID-token claims: everything the standard claims do not name (`groups`…).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct OtherClaims {
    #[serde(flatten)]
    claims: serde_json::Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

type Fields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type TokenResponse = StandardTokenResponse<Fields, CoreTokenType>;
type Claims = IdTokenClaims<OtherClaims, CoreGenderClaim>;
type OidcClient = openidconnect::Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// One login attempt between `/auth/login` and `/auth/callback`.
struct Attempt {
    state: CsrfToken,
    nonce: Nonce,
    verifier: PkceCodeVerifier,
    expires: Instant,
}

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

/// Why a login through the provider did not end in a session; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OidcLoginError {
    /// Discovery failed (now or at start-up and again now).
    #[error(
        "the OpenID provider {issuer} is unavailable: {cause}; try again later, or log in with an API token"
    )]
    Unavailable {
        /// The issuer.
        issuer: String,
        /// Why.
        cause: String,
    },
    /// The provider sent the user back with an error (`access_denied`, …).
    #[error(
        "the OpenID provider refused the login: {error}{description}; log in again, or ask your identity provider's admin for access to Dray"
    )]
    Refused {
        /// The OAuth error code.
        error: String,
        /// `: <description>` when the provider gave one.
        description: String,
    },
    /// No attempt cookie came back.
    #[error(
        "this login was not started here (its state cookie is missing); start again with the login button, at the same address as --oidc-redirect-url"
    )]
    NoAttempt,
    /// The attempt is unknown, was used, or is too old.
    #[error(
        "this login attempt has expired or was already used (an attempt lasts 10 minutes and works once); start again with the login button"
    )]
    Expired,
    /// `state` does not match the attempt.
    #[error(
        "the login's `state` does not match the one this browser started with (a forged or replayed redirect); start again with the login button"
    )]
    StateMismatch,
    /// The callback has neither `code` nor `error`.
    #[error(
        "the OpenID provider's redirect has no authorization code; start again with the login button"
    )]
    NoCode,
    /// The code exchange failed.
    #[error(
        "exchanging the authorization code at the OpenID provider's token endpoint failed: {0}; start again with the login button"
    )]
    Exchange(String),
    /// The ID token is missing or cannot be read.
    #[error(
        "the OpenID provider's ID token is not valid: {0}; start again, and if it persists check --oidc-issuer and --oidc-client-id against the provider's client"
    )]
    BadToken(String),
    /// The ID token does not pass verification: what is wrong with it, and what to do.
    #[error("the OpenID provider's ID token was refused: {0}")]
    RefusedToken(TokenProblem),
    /// The token names no usable user.
    #[error(
        "the ID token has no usable `{claim}` claim (nor `sub`) to name the user; set --oidc-username-claim to a claim your provider sends"
    )]
    NoUser {
        /// The configured username claim.
        claim: String,
    },
}

impl OidcLoginError {
    /// The HTTP status of the page showing it.
    pub fn status(&self) -> StatusCode {
        match self {
            OidcLoginError::Unavailable { .. } | OidcLoginError::Exchange(_) => {
                StatusCode::BAD_GATEWAY
            }
            OidcLoginError::Refused { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
}

/// Why a verified-looking ID token was refused: each check `openidconnect` makes, named,
/// with what to do. The detail is the crate's (what was expected and found), made
/// printable; never the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenProblem {
    /// The signature does not verify against the provider's keys (read again once).
    #[error(
        "its signature does not verify against the provider's published keys ({0}): it was forged or altered on the way; log in again, and if it persists tell the provider's admin that its JWKS does not match the tokens it signs"
    )]
    Signature(String),
    /// `iss` is not `--oidc-issuer`.
    #[error(
        "it was not issued by the configured provider ({0}); log in again, and if it persists set --oidc-issuer exactly to the provider's `iss`"
    )]
    Issuer(String),
    /// `aud` does not name `--oidc-client-id`.
    #[error(
        "it was issued to another client ({0}); log in again, and if it persists check --oidc-client-id against the provider's client"
    )]
    Audience(String),
    /// `exp` has passed.
    #[error(
        "it has expired ({0}); log in again, and if it persists check that this server's clock agrees with the provider's"
    )]
    Expired(String),
    /// `nonce` is not the one this login attempt sent.
    #[error(
        "its nonce is not the one this login sent ({0}): a token from another login was replayed or injected; log in again with the login button"
    )]
    Nonce(String),
    /// Anything else the verifier refuses (an unsupported algorithm, header…).
    #[error("{0}; log in again, and if it persists check the provider's signing settings")]
    Other(String),
}

impl TokenProblem {
    fn from_verification(error: &ClaimsVerificationError) -> Self {
        let detail = |text: &str| printable(text);
        match error {
            ClaimsVerificationError::SignatureVerification(cause) => {
                TokenProblem::Signature(detail(&cause.to_string()))
            }
            ClaimsVerificationError::InvalidIssuer(text) => TokenProblem::Issuer(detail(text)),
            ClaimsVerificationError::InvalidAudience(text) => TokenProblem::Audience(detail(text)),
            ClaimsVerificationError::Expired(text) => TokenProblem::Expired(detail(text)),
            ClaimsVerificationError::InvalidNonce(text) => TokenProblem::Nonce(detail(text)),
            other => TokenProblem::Other(detail(&error_chain(other))),
        }
    }
}

/// Who logged in: from a verified ID token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedIn {
    /// The user, from the username claim.
    pub user: String,
    /// The groups, from the groups claim.
    pub groups: Vec<String>,
    /// How long until the ID token expires.
    pub ttl: Duration,
}

/// The query of `/auth/callback`.
#[derive(Debug, Default, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
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

    /// Reads the provider's `/.well-known/openid-configuration` and keys, waiting at most
    /// [`PROVIDER_TIMEOUT`]; remembers the result (or why it failed) for the login page.
    pub async fn discover(&self) -> Result<(), OidcLoginError> {
        let discovered = tokio::time::timeout(
            PROVIDER_TIMEOUT,
            CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http),
        )
        .await;
        let result = match discovered {
            Ok(Ok(metadata)) => Ok(metadata),
            Ok(Err(error)) => Err(error_chain(&error)),
            Err(_) => Err(format!(
                "its /.well-known/openid-configuration did not answer within {}s",
                PROVIDER_TIMEOUT.as_secs()
            )),
        };
        let mut provider = lock(&self.provider);
        match result {
            Ok(metadata) => {
                provider.metadata = Some((metadata, Instant::now()));
                provider.unavailable = None;
                Ok(())
            }
            Err(cause) => {
                provider.unavailable = Some(cause.clone());
                Err(OidcLoginError::Unavailable {
                    issuer: self.options.issuer.clone(),
                    cause,
                })
            }
        }
    }

    /// The client for the current metadata, discovering first when there is none yet or
    /// it is older than an hour (a stale copy is used if rediscovery fails).
    async fn client(&self) -> Result<OidcClient, OidcLoginError> {
        let current = lock(&self.provider).metadata.clone();
        let metadata = match current {
            Some((metadata, at)) if at.elapsed() < METADATA_MAX_AGE => metadata,
            stale => match (self.discover().await, stale) {
                (Ok(()), _) => match lock(&self.provider).metadata.clone() {
                    Some((metadata, _)) => metadata,
                    None => {
                        return Err(OidcLoginError::Unavailable {
                            issuer: self.options.issuer.clone(),
                            cause: "no provider metadata".to_owned(),
                        });
                    }
                },
                (Err(_), Some((metadata, _))) => metadata,
                (Err(error), None) => return Err(error),
            },
        };
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.options.client_id.clone()),
            self.options.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone()))
    }

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
        let id = session::random_id();
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

    /// Ends a login: the attempt named by the state cookie (`attempt`) is used up whatever
    /// happens; then `state` is checked, the code exchanged and the ID token verified.
    pub async fn finish(
        &self,
        attempt: Option<&str>,
        query: CallbackQuery,
    ) -> Result<LoggedIn, OidcLoginError> {
        let taken = attempt.and_then(|id| lock(&self.attempts).remove(id));
        if let Some(error) = query.error {
            return Err(OidcLoginError::Refused {
                error: printable(&error),
                description: query
                    .error_description
                    .map(|d| format!(": {}", printable(&d)))
                    .unwrap_or_default(),
            });
        }
        if attempt.is_none() {
            return Err(OidcLoginError::NoAttempt);
        }
        let attempt = taken
            .filter(|a| a.expires > Instant::now())
            .ok_or(OidcLoginError::Expired)?;
        let state_matches = query.state.as_deref().is_some_and(|sent| {
            bool::from(sent.as_bytes().ct_eq(attempt.state.secret().as_bytes()))
        });
        if !state_matches {
            return Err(OidcLoginError::StateMismatch);
        }
        let code = query
            .code
            .filter(|c| !c.is_empty())
            .ok_or(OidcLoginError::NoCode)?;
        let client = self.client().await?;
        let exchange = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| OidcLoginError::Exchange(e.to_string()))?
            .set_pkce_verifier(attempt.verifier);
        let response = tokio::time::timeout(PROVIDER_TIMEOUT, exchange.request_async(&self.http))
            .await
            .map_err(|_| {
                OidcLoginError::Exchange(format!(
                    "the token endpoint did not answer within {}s",
                    PROVIDER_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| OidcLoginError::Exchange(exchange_error(&e)))?;
        let id_token = response.extra_fields().id_token().ok_or_else(|| {
            OidcLoginError::BadToken("the token response has no id_token".to_owned())
        })?;
        let verified = id_token.claims(&client.id_token_verifier(), &attempt.nonce);
        match verified {
            Ok(claims) => identity_from_claims(claims, &self.options),
            // The provider may have rotated its keys since discovery: read them again,
            // once, and verify against the new set.
            Err(ClaimsVerificationError::SignatureVerification(_)) => {
                self.discover().await?;
                let client = self.client().await?;
                let claims: &Claims = id_token
                    .claims(&client.id_token_verifier(), &attempt.nonce)
                    .map_err(|e| {
                        OidcLoginError::RefusedToken(TokenProblem::from_verification(&e))
                    })?;
                identity_from_claims(claims, &self.options)
            }
            Err(error) => Err(OidcLoginError::RefusedToken(
                TokenProblem::from_verification(&error),
            )),
        }
    }
}

/// User, groups and lifetime from verified claims.
fn identity_from_claims(
    claims: &Claims,
    options: &OidcOptions,
) -> Result<LoggedIn, OidcLoginError> {
    let all = serde_json::to_value(claims)
        .map_err(|e| OidcLoginError::BadToken(format!("its claims cannot be read: {e}")))?;
    let expires = claims.expiration().timestamp();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let ttl = Duration::from_secs(u64::try_from(expires).unwrap_or(0).saturating_sub(now));
    let logged_in = user_and_groups(&all, options, ttl)?;
    Ok(logged_in)
}

/// The user and groups named by `options`' claims in `claims` (a JSON object).
/// An `email` names the user only when the token also says `email_verified: true` (a
/// JSON `true`; absent, `false` or anything else is unverified): anyone can put someone
/// else's address in their profile at many providers. Otherwise the user is named by
/// `sub`, with the prefix of names not from `email`.
fn user_and_groups(
    claims: &Value,
    options: &OidcOptions,
    ttl: Duration,
) -> Result<LoggedIn, OidcLoginError> {
    let text = |name: &str| {
        claims
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let unverified_email = options.username_claim == "email"
        && claims.get("email_verified") != Some(&Value::Bool(true));
    let from_claim = if unverified_email {
        None
    } else {
        text(&options.username_claim)
    };
    let from_email = from_claim.is_some() && options.username_claim == "email";
    let name = from_claim
        .or_else(|| text("sub"))
        .ok_or_else(|| OidcLoginError::NoUser {
            claim: options.username_claim.clone(),
        })?;
    let prefix = match &options.username_prefix {
        Some(prefix) => prefix.as_str(),
        None if from_email => "",
        None => DEFAULT_USERNAME_PREFIX,
    };
    let user = format!("{prefix}{name}");
    let groups = match claims.get(&options.groups_claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    Ok(LoggedIn { user, groups, ttl })
}

/// Text from the callback's query fit for a page: printable, at most 200 characters.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// Why the token endpoint failed, without quoting its answer: a body that does not parse
/// may hold tokens, which must reach neither the page nor the log.
fn exchange_error<RE, T>(error: &openidconnect::RequestTokenError<RE, T>) -> String
where
    RE: std::error::Error + 'static,
    T: openidconnect::ErrorResponse + 'static,
{
    match error {
        openidconnect::RequestTokenError::ServerResponse(response) => {
            format!(
                "the provider answered: {}",
                printable(&response.to_string())
            )
        }
        openidconnect::RequestTokenError::Request(cause) => error_chain(cause),
        openidconnect::RequestTokenError::Parse(_, _) => {
            "the token endpoint's answer is not a valid token response".to_owned()
        }
        openidconnect::RequestTokenError::Other(text) => printable(text),
    }
}

/// An error and its causes, `: `-joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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

fn secure(oidc: &Oidc, headers: &HeaderMap) -> bool {
    session::is_https(headers) || oidc.redirect.url().scheme() == "https"
}

fn not_configured() -> Response {
    (
        StatusCode::NOT_FOUND,
        layout::error_page(
            StatusCode::NOT_FOUND,
            "OIDC login is not configured on this server; log in with an API token at /login (an admin enables OIDC with `dray serve --oidc-issuer …`)",
        ),
    )
        .into_response()
}

/// `GET /auth/login`: 302 to the provider, with the attempt's cookie.
pub(crate) async fn start(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(oidc) = state.oidc.clone() else {
        return not_configured();
    };
    match oidc.begin().await {
        Ok((id, url)) => {
            let Ok(location) = HeaderValue::from_str(&url) else {
                return login::error_response(
                    &state,
                    StatusCode::BAD_GATEWAY,
                    "the OpenID provider's authorization endpoint is not a usable URL; check its discovery document",
                );
            };
            let mut response = StatusCode::FOUND.into_response();
            response.headers_mut().insert(LOCATION, location);
            if let Ok(cookie) = HeaderValue::from_str(&state_cookie(&id, secure(&oidc, &headers))) {
                response.headers_mut().insert(SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => {
            tracing::warn!(issuer = %oidc.options.issuer, %error, "OIDC login could not start");
            login::error_response(&state, error.status(), &error.to_string())
        }
    }
}

/// `GET /auth/callback`: a session for the verified user, or a page saying why not.
pub(crate) async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let Some(oidc) = state.oidc.clone() else {
        return not_configured();
    };
    let secure = secure(&oidc, &headers);
    let attempt = session::cookie_value(&headers, STATE_COOKIE);
    let mut response = match oidc.finish(attempt.as_deref(), query).await {
        Ok(who) => {
            let created = state
                .sessions
                .create(
                    Identity::Oidc {
                        user: who.user.clone(),
                        groups: who.groups.clone(),
                    },
                    &who.user,
                    who.ttl,
                )
                .await;
            let (id, session) = match created {
                Ok(created) => created,
                Err(error) => return super::UiError::from(error).into_response(),
            };
            tracing::info!(user = %who.user, groups = ?who.groups, "logged in to the UI with OIDC");
            let mut response = continue_page().into_response();
            if let Ok(cookie) =
                HeaderValue::from_str(&session::set_cookie_for(&id, secure, session.remaining()))
            {
                response.headers_mut().append(SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => {
            tracing::info!(issuer = %oidc.options.issuer, %error, "OIDC login refused");
            login::error_response(&state, error.status(), &error.to_string())
        }
    };
    if let Ok(cookie) = HeaderValue::from_str(&clear_state_cookie(secure)) {
        response.headers_mut().append(SET_COOKIE, cookie);
    }
    response
}

/// The page after a successful callback: it moves on to `/` by itself. Not a redirect:
/// the browser treats a redirect chain that began at the provider as cross-site and would
/// not send the new `SameSite=Strict` session cookie with it; a navigation this page starts
/// is same-site.
fn continue_page() -> maud::Markup {
    html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="0;url=/";
                title { "Logged in · Dray" }
                link rel="stylesheet" href="/ui/assets/app.css";
            }
            body {
                main {
                    section.login {
                        h1 { "Logged in" }
                        p { a #continue href="/" { "Continue to the projects" } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> OidcOptions {
        OidcOptions {
            issuer: "https://login.example.com/realms/main".into(),
            client_id: "dray".into(),
            client_secret: Some("s3cret-value".into()),
            redirect_url: "https://dray.example.com/auth/callback".into(),
            username_claim: "email".into(),
            groups_claim: "groups".into(),
            username_prefix: None,
            scopes: vec!["openid".into(), "email".into()],
        }
    }

    #[test]
    fn the_state_cookie_is_lax_http_only_short_and_scoped_to_auth() {
        let cookie = state_cookie("abc", true);
        for part in [
            "dray_oidc_state=abc",
            "HttpOnly",
            "SameSite=Lax",
            "Path=/auth",
            "Max-Age=600",
            "Secure",
        ] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(!state_cookie("abc", false).contains("Secure"));
        let cleared = clear_state_cookie(false);
        assert!(cleared.contains("Max-Age=0") && cleared.starts_with("dray_oidc_state=;"));
    }

    #[test]
    fn the_secret_is_not_in_debug_output() {
        let text = format!("{:?}", options());
        assert!(!text.contains("s3cret-value"), "{text}");
        assert!(text.contains("<redacted>"));
    }

    #[test]
    fn bad_urls_are_refused_naming_the_flag() {
        let mut bad = options();
        bad.redirect_url = "https://dray.example.com/".into();
        let error = Oidc::new(bad).unwrap_err().to_string();
        assert!(
            error.contains("--oidc-redirect-url") && error.contains("/auth/callback"),
            "{error}"
        );
        let mut bad = options();
        bad.issuer = "not a url".into();
        let error = Oidc::new(bad).unwrap_err().to_string();
        assert!(error.contains("--oidc-issuer"), "{error}");
        let oidc = Oidc::new(options()).unwrap();
        assert_eq!(oidc.issuer_host(), "login.example.com");
    }

    #[test]
    fn an_email_names_the_user_only_when_it_is_verified() {
        let ttl = Duration::from_secs(60);
        let user = |claims: Value| user_and_groups(&claims, &options(), ttl).unwrap().user;
        let cases = [
            ("verified", serde_json::json!(true), "ann@example.com"),
            ("unverified", serde_json::json!(false), "oidc:u-1"),
            (
                "verified as a string",
                serde_json::json!("true"),
                "oidc:u-1",
            ),
            ("verified as a number", serde_json::json!(1), "oidc:u-1"),
            ("null", Value::Null, "oidc:u-1"),
        ];
        for (case, verified, expected) in cases {
            let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com", "email_verified": verified});
            assert_eq!(user(claims), expected, "email_verified {case}");
        }
        let absent = serde_json::json!({"sub": "u-1", "email": "ann@example.com"});
        assert_eq!(user(absent), "oidc:u-1", "email_verified absent");
        // A prefix that is set applies to the fallback too, as to any name.
        let mut prefixed = options();
        prefixed.username_prefix = Some("corp/".into());
        let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com"});
        assert_eq!(
            user_and_groups(&claims, &prefixed, ttl).unwrap().user,
            "corp/u-1"
        );
        // `email_verified` is about `email` only: another username claim ignores it.
        let mut by_username = options();
        by_username.username_claim = "preferred_username".into();
        let claims =
            serde_json::json!({"sub": "u-1", "preferred_username": "ann", "email_verified": false});
        assert_eq!(
            user_and_groups(&claims, &by_username, ttl).unwrap().user,
            "oidc:ann"
        );
    }

    #[test]
    fn user_comes_from_the_claim_then_sub_and_groups_from_a_list_or_string() {
        let ttl = Duration::from_secs(60);
        let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com",
            "email_verified": true, "groups": ["a", "b", 3]});
        let who = user_and_groups(&claims, &options(), ttl).unwrap();
        assert_eq!(who.user, "ann@example.com");
        assert_eq!(who.groups, vec!["a".to_owned(), "b".to_owned()]);
        let claims = serde_json::json!({"sub": "u-2", "groups": "ops"});
        let who = user_and_groups(&claims, &options(), ttl).unwrap();
        assert_eq!(
            (who.user.as_str(), who.groups),
            ("oidc:u-2", vec!["ops".to_owned()])
        );
        let claims =
            serde_json::json!({"sub": "u-3", "email": "x@example.com", "email_verified": false});
        assert_eq!(
            user_and_groups(&claims, &options(), ttl).unwrap().user,
            "oidc:u-3"
        );
        let error = user_and_groups(&serde_json::json!({}), &options(), ttl).unwrap_err();
        assert!(
            error.to_string().contains("--oidc-username-claim"),
            "{error}"
        );
    }

    #[test]
    fn a_name_not_from_email_is_prefixed_so_it_cannot_be_a_token_users() {
        let ttl = Duration::from_secs(60);
        let mut by_username = options();
        by_username.username_claim = "preferred_username".into();
        let claims = serde_json::json!({"sub": "u-9", "preferred_username": "admin"});
        let who = user_and_groups(&claims, &by_username, ttl).unwrap();
        assert_eq!(who.user, "oidc:admin");
        by_username.username_prefix = Some("corp/".into());
        assert_eq!(
            user_and_groups(&claims, &by_username, ttl).unwrap().user,
            "corp/admin"
        );
        by_username.username_prefix = Some(String::new());
        assert_eq!(
            user_and_groups(&claims, &by_username, ttl).unwrap().user,
            "admin"
        );
        let mut by_email = options();
        by_email.username_prefix = Some("corp/".into());
        let claims =
            serde_json::json!({"sub": "u-1", "email": "ann@example.com", "email_verified": true});
        assert_eq!(
            user_and_groups(&claims, &by_email, ttl).unwrap().user,
            "corp/ann@example.com"
        );
    }

    #[tokio::test]
    async fn an_unreachable_provider_is_reported_and_a_callback_without_attempt_is_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut opts = options();
        opts.issuer = format!("http://127.0.0.1:{port}");
        let oidc = Oidc::new(opts).unwrap();
        assert!(oidc.unavailable().is_none());
        assert!(oidc.discover().await.is_err());
        assert!(oidc.unavailable().is_some());
        let error = oidc.begin().await.unwrap_err();
        assert!(
            matches!(error, OidcLoginError::Unavailable { .. }),
            "{error}"
        );
        let query = CallbackQuery {
            code: Some("c".into()),
            state: Some("s".into()),
            ..Default::default()
        };
        let error = oidc.finish(None, query).await.unwrap_err();
        assert!(matches!(error, OidcLoginError::NoAttempt), "{error}");
        let query = CallbackQuery {
            code: Some("c".into()),
            state: Some("s".into()),
            ..Default::default()
        };
        let error = oidc.finish(Some("unknown"), query).await.unwrap_err();
        assert!(matches!(error, OidcLoginError::Expired), "{error}");
        let query = CallbackQuery {
            error: Some("access_denied".into()),
            error_description: Some("the user said no\u{7}".into()),
            ..Default::default()
        };
        let error = oidc.finish(None, query).await.unwrap_err().to_string();
        assert!(
            error.contains("access_denied: the user said no;"),
            "{error}"
        );
    }

    /// The routes over `oneshot`: a server with `oidc` (or none), no provider needed.
    async fn get(oidc: Option<Oidc>, uri: &str) -> (StatusCode, Vec<String>, String) {
        use std::sync::Arc;

        use tower::ServiceExt;

        use crate::server::auth::AuthMode;
        use crate::store::SqliteStore;

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let state = AppState {
            oidc: oidc.map(Arc::new),
            ..AppState::for_tests(store, dir.path(), AuthMode::Token)
        };
        let request = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = crate::server::router(state).oneshot(request).await.unwrap();
        let status = response.status();
        let cookies = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .map(|h| h.to_str().unwrap().to_owned())
            .collect();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            cookies,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    fn unreachable() -> Oidc {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut opts = options();
        opts.issuer = format!("http://127.0.0.1:{port}");
        Oidc::new(opts).unwrap()
    }

    #[tokio::test]
    async fn routes_without_oidc_are_404_and_the_login_page_has_no_button() {
        let (status, cookies, body) = get(None, "/auth/login").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(cookies.is_empty());
        assert!(body.contains("not configured"), "{body}");
        let (status, _, body) = get(None, "/login").await;
        assert_eq!(status, StatusCode::OK);
        assert!(!body.contains("oidc-login"), "{body}");
    }

    #[tokio::test]
    async fn routes_with_an_unreachable_provider_explain_and_set_no_attempt() {
        let (status, _, body) = get(Some(unreachable()), "/login").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("id=\"oidc-login\""), "{body}");
        assert!(body.contains("Log in with 127.0.0.1:"), "{body}");
        // Not discovered yet (no start-up here): nothing to report until a try fails.
        assert!(!body.contains("oidc-unavailable"), "{body}");
        let (status, cookies, body) = get(Some(unreachable()), "/auth/login").await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
        assert!(body.contains("is unavailable"), "{body}");
        assert!(body.contains("id=\"oidc-unavailable\""), "{body}");
        assert!(cookies.is_empty(), "{cookies:?}");
        // The provider's refusal is shown, and the attempt cookie is cleared (Lax, /auth).
        let (status, cookies, body) = get(
            Some(unreachable()),
            "/auth/callback?error=access_denied&error_description=no+thanks&state=x",
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body.contains("refused the login: access_denied: no thanks"),
            "{body}"
        );
        assert_eq!(cookies.len(), 1, "{cookies:?}");
        for part in [
            "dray_oidc_state=;",
            "Max-Age=0",
            "HttpOnly",
            "SameSite=Lax",
            "Path=/auth",
        ] {
            assert!(cookies[0].contains(part), "{cookies:?}");
        }
        // A callback whose `state` has no attempt behind it makes no session.
        let (status, cookies, body) =
            get(Some(unreachable()), "/auth/callback?code=c&state=s").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("state cookie is missing"), "{body}");
        assert!(
            !cookies.iter().any(|c| c.starts_with("dray_session=")),
            "{cookies:?}"
        );
    }
}
