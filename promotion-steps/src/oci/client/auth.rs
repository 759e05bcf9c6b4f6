//! The answer to a registry's `401`: HTTP Basic with the session's credentials, or a
//! Bearer token fetched from the realm the challenge names, for the scopes the session
//! needs (`pull` or `pull,push` on its repository, `pull` on a repository mounted from).

use reqwest::{StatusCode, Url};
use serde::Deserialize;

use super::{Access, MAX_SMALL_ANSWER, REQUEST_TIMEOUT, Repository, header};
use crate::oci::OciError;
use crate::www_authenticate::challenge_params;

impl Repository {
    pub(super) async fn answer_challenge(
        &mut self,
        response: &reqwest::Response,
    ) -> Result<(), OciError> {
        let challenge = header(response, "www-authenticate").unwrap_or_default();
        let (scheme, params) = challenge
            .split_once(' ')
            .unwrap_or((challenge.as_str(), ""));
        let refused = |detail: &str| OciError::AuthFailed {
            repo: self.name.clone(),
            detail: detail.to_owned(),
            kind: self.kind,
        };
        if scheme.eq_ignore_ascii_case("basic") {
            if self.credentials.is_none() {
                return Err(refused(
                    "the registry wants credentials and none were given (HTTP 401)",
                ));
            }
            self.basic = true;
            return Ok(());
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(refused(
                "the registry answered 401 without a usable challenge",
            ));
        }
        let params = challenge_params(params);
        let Some(mut realm) = params.get("realm").and_then(|r| Url::parse(r).ok()) else {
            return Err(refused("the registry's token realm is unusable"));
        };
        if realm.scheme() == "http" && self.base.scheme() == "https" && self.credentials.is_some() {
            return Err(refused(
                "the token service is plain HTTP; Dray will not send credentials there",
            ));
        }
        let actions = match self.access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        {
            let mut query = realm.query_pairs_mut();
            if let Some(service) = params.get("service") {
                query.append_pair("service", service);
            }
            query.append_pair(
                "scope",
                &format!("repository:{}:{actions}", self.repository),
            );
            if let Some(from) = &self.mount_from {
                query.append_pair("scope", &format!("repository:{from}:pull"));
            }
        }
        let mut request = self.http.get(realm.clone()).timeout(REQUEST_TIMEOUT);
        if let Some(c) = &self.credentials {
            request = request.basic_auth(&c.username, Some(&c.password));
        }
        let answer = request
            .send()
            .await
            .map_err(|err| self.unreachable(&realm, &err))?;
        let op = "fetch a registry token for";
        let answer = self
            .expect(op, &self.name, answer, &[StatusCode::OK])
            .await?;
        let body = self
            .read_bounded(op, answer, MAX_SMALL_ANSWER, "the token answer")
            .await?;
        #[derive(Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let token: Token =
            serde_json::from_slice(&body).map_err(|err| OciError::InvalidResponse {
                operation: op.into(),
                repo: self.name.clone(),
                reason: format!("the token answer is not JSON: {err}"),
            })?;
        let token =
            token
                .token
                .or(token.access_token)
                .ok_or_else(|| OciError::InvalidResponse {
                    operation: op.into(),
                    repo: self.name.clone(),
                    reason: "no `token` in the answer".into(),
                })?;
        self.token = Some(token);
        Ok(())
    }
}
