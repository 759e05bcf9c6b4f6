//! Registry authentication: answering a `401` challenge with Basic credentials or with a
//! Bearer token from the token service the registry names, and remembering the answer.
//!
//! Owns the auth state (per registry, repository and credential, so warehouses with
//! different credentials for one registry never share it) and token lifetimes. Does not
//! send the registry's own requests: see the parent module.
//!
//! Basic credentials are sent only after the registry asked for them once; from then on
//! every request carries them, so a warm refresh has no `401` round trip. Credentials go
//! to the token service only over HTTPS (or when the registry itself is plain HTTP).

use std::collections::HashMap;

use dray_steps::challenge_params;
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use tokio::time::{Duration, Instant};

use super::failure::envelope_detail;
use super::{Answer, Result, Session, header, lock};

/// Lifetime of a token whose answer has no `expires_in` (the distribution spec's default).
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);

/// Authentication state is per registry, repository (token scope) and credential.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct AuthKey {
    pub(super) registry: String,
    pub(super) repo: String,
    pub(super) credential: Option<[u8; 32]>,
}

/// How requests to one repository authenticate.
#[derive(Clone, Debug)]
pub(super) enum AuthState {
    Basic,
    Bearer { token: String, expires: Instant },
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl Session<'_> {
    /// The state to authenticate the next request with (expired tokens are dropped).
    pub(super) fn auth_state(&self) -> Option<AuthState> {
        let mut states = lock(&self.http.auth);
        match states.get(&self.key) {
            Some(AuthState::Bearer { expires, .. }) if *expires <= Instant::now() => {
                states.remove(&self.key);
                None
            }
            state => state.cloned(),
        }
    }

    /// Answer a `401`: remember Basic, or fetch a Bearer token.
    pub(super) async fn answer_challenge(&self, answer: &Answer) -> Result<()> {
        let challenge = header(&answer.headers, "www-authenticate").unwrap_or_default();
        let (scheme, params) = challenge
            .split_once(' ')
            .unwrap_or((challenge.as_str(), ""));
        let state = if scheme.eq_ignore_ascii_case("basic") {
            if self.credentials.is_none() {
                return Err(self.auth_failed(StatusCode::UNAUTHORIZED, ""));
            }
            AuthState::Basic
        } else if scheme.eq_ignore_ascii_case("bearer") {
            self.fetch_token(&challenge_params(params)).await?
        } else {
            return Err(self.auth_failed(StatusCode::UNAUTHORIZED, "no usable challenge"));
        };
        lock(&self.http.auth).insert(self.key.clone(), state);
        Ok(())
    }

    /// Get a pull token from the token service named by a Bearer challenge.
    async fn fetch_token(&self, params: &HashMap<String, String>) -> Result<AuthState> {
        let op = "fetch a registry token";
        let realm = params.get("realm").and_then(|r| Url::parse(r).ok());
        let Some(mut url) = realm.filter(|r| matches!(r.scheme(), "https" | "http")) else {
            return Err(self.auth_failed(StatusCode::UNAUTHORIZED, "the token realm is unusable"));
        };
        if url.scheme() == "http" && self.repo.scheme == "https" && self.credentials.is_some() {
            return Err(self.auth_failed(
                StatusCode::UNAUTHORIZED,
                &format!(
                    "the token service `{url}` is plain HTTP; Dray will not send credentials there"
                ),
            ));
        }
        let scope = params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{}:pull", self.repo.path));
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = params.get("service") {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let auth = self.credentials.map(|_| AuthState::Basic);
        let answer = self.request(Method::GET, &url, None, auth.as_ref()).await?;
        match answer.status {
            StatusCode::OK => {}
            s @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
                return Err(self.auth_failed(s, &envelope_detail(&answer.body)));
            }
            _ => return Err(self.failure(op, &answer)),
        }
        let TokenAnswer {
            token,
            access_token,
            expires_in,
        } = self.json(op, &answer)?;
        let Some(token) = token.or(access_token) else {
            return Err(self.invalid(op, &answer, "no `token` in the answer".into()));
        };
        let lifetime = token_lifetime(expires_in);
        Ok(AuthState::Bearer {
            token,
            expires: Instant::now() + lifetime,
        })
    }
}

fn token_lifetime(expires_in: Option<u64>) -> Duration {
    match expires_in {
        // Renew a little early so a token does not expire in flight.
        Some(secs) if secs > 10 => Duration::from_secs(secs - 5),
        Some(secs) => Duration::from_secs(secs.max(1)),
        None => DEFAULT_TOKEN_LIFETIME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes() {
        assert_eq!(token_lifetime(Some(300)), Duration::from_secs(295));
        assert_eq!(token_lifetime(Some(3)), Duration::from_secs(3));
        assert_eq!(token_lifetime(None), DEFAULT_TOKEN_LIFETIME);
    }
}
