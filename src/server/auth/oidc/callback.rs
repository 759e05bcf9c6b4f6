//! Finishing a login at `/auth/callback` ([`Oidc::finish`]): the attempt is used up,
//! `state` checked, the code exchanged with the PKCE verifier, the ID token verified
//! (signature against the JWKS, read again once on failure; `iss`, `aud`, `exp`, `nonce`),
//! and the user and groups taken from its claims; then a session for them
//! ([`start_session`]), ending no later than the ID token.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use openidconnect::{AuthorizationCode, ClaimsVerificationError};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::store::StoreError;

use super::super::sessions::{Identity, Session, Sessions};
use super::claims::user_and_groups;
use super::errors::{OidcLoginError, TokenProblem, exchange_error, printable};
use super::protocol::Claims;
use super::{Oidc, OidcOptions, PROVIDER_TIMEOUT, lock};

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
    pub(super) code: Option<String>,
    pub(super) state: Option<String>,
    pub(super) error: Option<String>,
    pub(super) error_description: Option<String>,
}

impl Oidc {
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

/// Starts a UI session for the user an ID token named, lasting as long as the token;
/// returns its id (for the cookie only) and the session.
pub async fn start_session(
    sessions: &Sessions,
    who: &LoggedIn,
) -> Result<(String, Session), StoreError> {
    let created = sessions
        .create(
            Identity::Oidc {
                user: who.user.clone(),
                groups: who.groups.clone(),
            },
            &who.user,
            who.ttl,
        )
        .await?;
    tracing::info!(user = %who.user, groups = ?who.groups, "logged in to the UI with OIDC");
    Ok(created)
}
