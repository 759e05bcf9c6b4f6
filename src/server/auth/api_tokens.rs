//! Whether a presented API token stands for anyone: found by its SHA-256 in the token
//! store, not expired, not revoked ([`check_token`]); when not, why ([`TokenRefusal`], the
//! one wording of the API's 401 and of the web UI's login page). Also when a token's use
//! is worth recording ([`last_use_is_stale`]).

use crate::store::{StoreError, TokenInfo};

use super::super::error::ApiError;
use super::{Auth, TOKEN_HINT};

/// How often a token's `lastUsedAt` is written at most: a busy client must not turn every
/// request into a write.
pub(super) const LAST_USED_EVERY: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// Whether a token last used at `last_used` (RFC 3339, none when never) should have its
/// use recorded at `now`.
pub(super) fn last_use_is_stale(last_used: Option<&str>, now: jiff::Timestamp) -> bool {
    match last_used.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        Some(last) => now.duration_since(last) >= LAST_USED_EVERY,
        None => true,
    }
}

/// Why a presented API token authenticates no one. The one wording of the API's 401 and
/// of the web UI's login page: [`TokenRefusal::reason`] says what is wrong,
/// [`TokenRefusal::remedy`] what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    /// No token has this hash (never made, or revoked before Dray kept revoked tokens).
    Unknown,
    /// The token's expiry has passed.
    Expired {
        /// The token's id.
        id: String,
        /// Its user.
        user: String,
        /// When it expired.
        at: jiff::Timestamp,
    },
    /// The token was revoked (`dray token revoke`).
    Revoked {
        /// The token's id.
        id: String,
        /// Its user.
        user: String,
        /// When it was revoked (RFC 3339).
        at: String,
    },
}

impl TokenRefusal {
    /// What is wrong with the token.
    pub fn reason(&self) -> String {
        match self {
            TokenRefusal::Unknown => "the API token is not valid: it is unknown".to_owned(),
            TokenRefusal::Expired { id, user, at } => {
                format!("the API token `{id}` of user `{user}` expired at {at}")
            }
            TokenRefusal::Revoked { id, user, at } => format!(
                "the API token is not valid: it was revoked at {at} (token `{id}` of user `{user}`)"
            ),
        }
    }

    /// What to do about it.
    pub fn remedy(&self) -> &'static str {
        match self {
            TokenRefusal::Unknown => "check it, or create one with `dray token create`",
            TokenRefusal::Expired { .. } => {
                "create a new one with `dray token create` (or ask an admin for one)"
            }
            TokenRefusal::Revoked { .. } => "ask an admin for a new one",
        }
    }

    /// The API's 401 for it.
    pub(super) fn api_error(&self) -> ApiError {
        let hint = match self {
            TokenRefusal::Unknown => TOKEN_HINT.to_owned(),
            _ => format!(
                "pass --token or set DRAY_TOKEN with another token; {}",
                self.remedy()
            ),
        };
        ApiError::unauthenticated(self.reason()).with_hint(hint)
    }
}

impl std::fmt::Display for TokenRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.reason(), self.remedy())
    }
}

/// The token with this SHA-256 hash, or why it authenticates no one: expired, revoked or
/// unknown. A refused expired or revoked token is logged by id and user (never the token).
pub async fn check_token(
    auth: &Auth,
    hash: &str,
) -> Result<Result<TokenInfo, TokenRefusal>, StoreError> {
    let Some(info) = auth.tokens.token_info(hash).await? else {
        return Ok(Err(match auth.tokens.revoked_token(hash).await? {
            Some(revoked) => {
                tracing::info!(user = %revoked.user, token = %revoked.id, "refused a revoked API token");
                TokenRefusal::Revoked {
                    id: revoked.id,
                    user: revoked.user,
                    at: revoked.revoked_at,
                }
            }
            None => TokenRefusal::Unknown,
        }));
    };
    if let Some(at) = info.expired(jiff::Timestamp::now()) {
        tracing::info!(user = %info.user, token = %info.id, "refused an expired API token");
        return Ok(Err(TokenRefusal::Expired {
            id: info.id,
            user: info.user,
            at,
        }));
    }
    Ok(Ok(info))
}
