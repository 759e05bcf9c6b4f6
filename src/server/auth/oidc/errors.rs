//! Why a login through the provider made no session ([`OidcLoginError`]), and why an ID
//! token was refused ([`TokenProblem`], one variant per check); each says what to do.
//! Provider text is made printable and short, and never quotes a token.

use axum::http::StatusCode;
use openidconnect::ClaimsVerificationError;

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
    pub(super) fn from_verification(error: &ClaimsVerificationError) -> Self {
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

/// Text from the callback's query fit for a page: printable, at most 200 characters.
pub(super) fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// Why the token endpoint failed, without quoting its answer: a body that does not parse
/// may hold tokens, which must reach neither the page nor the log.
pub(super) fn exchange_error<RE, T>(error: &openidconnect::RequestTokenError<RE, T>) -> String
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
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
