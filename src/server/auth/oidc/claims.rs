//! The user and groups a verified ID token names, by the configured claims: `email` only
//! when verified, else `sub`; every name not from `email` prefixed (`oidc:bob`) so that it
//! cannot be taken for an API token's user.

use std::time::Duration;

use serde_json::Value;

use super::callback::LoggedIn;
use super::errors::OidcLoginError;
use super::options::{DEFAULT_USERNAME_PREFIX, OidcOptions};

/// The user and groups named by `options`' claims in `claims` (a JSON object).
/// An `email` names the user only when the token also says `email_verified: true` (a
/// JSON `true`; absent, `false` or anything else is unverified): anyone can put someone
/// else's address in their profile at many providers. Otherwise the user is named by
/// `sub`, with the prefix of names not from `email`.
pub(super) fn user_and_groups(
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
