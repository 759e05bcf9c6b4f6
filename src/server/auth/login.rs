//! Logging in with an API token ([`with_token`]; in Kubernetes mode a Kubernetes token,
//! reviewed by a TokenReview), and out ([`logout`]). The token is checked exactly as the API
//! checks a bearer token (its SHA-256 against the token store, [`super::check_token`]) and
//! a valid one starts a session ([`super::sessions::Sessions::create_for_token`]). The
//! token is never echoed, logged or kept: the session holds its hash only. An unknown,
//! expired or revoked token makes no session, and [`TokenLoginError`] says which, in the
//! API's words. Logging out ends the session only when the request carries the session's
//! CSRF token (a cross-site form cannot log anyone out). Drawing the form is the web UI's
//! job.

use axum::http::{HeaderValue, StatusCode};

use crate::store::StoreError;

use super::super::tokens;
use super::Auth;
use super::api_tokens::{TokenRefusal, check_token};
use super::sessions::{Session, Sessions};

/// A session made for a valid API token.
#[derive(Debug)]
pub struct TokenLogin {
    /// The session's id, for the cookie only.
    pub id: String,
    /// The session.
    pub session: Session,
}

/// Why a login with an API token made no session; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TokenLoginError {
    /// No token was given.
    #[error("enter an API token")]
    Empty,
    /// The token authenticates no one: unknown, expired or revoked.
    #[error("{0}")]
    Refused(TokenRefusal),
    /// The token store could not be read.
    #[error("the token store cannot be read; see the server log")]
    TokenStore(#[source] StoreError),
    /// The session could not be stored.
    #[error("the session cannot be stored: {0}")]
    Session(#[source] StoreError),
    /// Kubernetes mode: the TokenReview did not accept the token, or could not be made.
    #[error("{0}")]
    Kubernetes(#[source] super::kubernetes::KubeAuthError),
}

impl TokenLoginError {
    /// The HTTP status of the page showing it.
    pub fn status(&self) -> StatusCode {
        match self {
            TokenLoginError::Empty => StatusCode::BAD_REQUEST,
            TokenLoginError::Refused(_) => StatusCode::UNAUTHORIZED,
            TokenLoginError::TokenStore(_) | TokenLoginError::Session(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            TokenLoginError::Kubernetes(super::kubernetes::KubeAuthError::Unauthenticated {
                ..
            }) => StatusCode::UNAUTHORIZED,
            TokenLoginError::Kubernetes(_) => StatusCode::BAD_GATEWAY,
        }
    }
}

/// Starts a session for `token` (surrounding blanks ignored) when it is a valid API token.
pub async fn with_token(
    auth: &Auth,
    sessions: &Sessions,
    token: &str,
) -> Result<TokenLogin, TokenLoginError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(TokenLoginError::Empty);
    }
    if let super::AuthMode::Kubernetes(kube) = &auth.mode {
        return with_kubernetes_token(kube, sessions, token).await;
    }
    let hash = tokens::hash(token);
    let record = match check_token(auth, &hash).await {
        Ok(Ok(record)) => record,
        Ok(Err(refusal)) => {
            if refusal == TokenRefusal::Unknown {
                tracing::info!("login refused: unknown token");
            }
            return Err(TokenLoginError::Refused(refusal));
        }
        Err(error) => {
            tracing::warn!(%error, "login: cannot read the token store");
            return Err(TokenLoginError::TokenStore(error));
        }
    };
    let (id, session) = sessions
        .create_for_token(&hash, &record.user)
        .await
        .map_err(TokenLoginError::Session)?;
    tracing::info!(user = %record.user, "logged in to the UI");
    Ok(TokenLogin { id, session })
}

/// Kubernetes mode: a session for the user a TokenReview says `token` stands for (the
/// token is not kept; what the user may do is asked of Kubernetes RBAC on every request).
async fn with_kubernetes_token(
    kube: &super::kubernetes::KubeAuth,
    sessions: &Sessions,
    token: &str,
) -> Result<TokenLogin, TokenLoginError> {
    let reviewed = kube.review_token(token).await.map_err(|error| {
        tracing::info!(%error, "login refused by Kubernetes");
        TokenLoginError::Kubernetes(error)
    })?;
    let identity = super::sessions::Identity::Kubernetes {
        user: reviewed.user.clone(),
        groups: reviewed.groups,
    };
    let (id, session) = sessions
        .create(identity, &reviewed.user, super::sessions::SESSION_TTL)
        .await
        .map_err(TokenLoginError::Session)?;
    tracing::info!(user = %reviewed.user, "logged in to the UI with a Kubernetes token");
    Ok(TokenLogin { id, session })
}

/// Why a logout did not end the session.
#[derive(Debug, thiserror::Error)]
pub enum LogoutError {
    /// The form did not carry the session's CSRF token.
    #[error("logging out needs the page's CSRF token; use the Log out button")]
    Csrf,
    /// The session store could not be read or written.
    #[error("the session store cannot be used: {0}")]
    Store(#[source] StoreError),
}

/// Ends the session `id` when `csrf` is its CSRF token; returns its user, or `None` when
/// there was no such session (already over: nothing to end).
pub async fn logout(
    sessions: &Sessions,
    id: &str,
    csrf: &str,
) -> Result<Option<String>, LogoutError> {
    let Some(found) = sessions.lookup(id).await.map_err(LogoutError::Store)? else {
        return Ok(None);
    };
    let sent = HeaderValue::from_str(csrf).ok();
    if !found.csrf_matches(sent.as_ref()) {
        return Err(LogoutError::Csrf);
    }
    sessions.remove(id).await.map_err(LogoutError::Store)?;
    tracing::info!(user = %found.user, "logged out of the UI");
    Ok(Some(found.user))
}
