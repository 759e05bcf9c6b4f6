//! Pulling a chart archive out of an OCI registry: the manifest (checked to be a Helm
//! chart), then its chart layer, both checked against their digests.
//!
//! A minimal client on purpose: one `GET` per object and the distribution spec's answer to
//! a `401` (Basic, or a Bearer token from the realm the challenge names). Discovery, which
//! lists tags, paginates, rate-limits and caches, uses the `dray` crate's registry client;
//! this crate cannot import it (docs/decisions.md).

use reqwest::{StatusCode, Url};
use serde::Deserialize;

use super::http::{self, Answer, Auth};
use super::{CHART_CONFIG_MEDIA_TYPE, CHART_LAYER_MEDIA_TYPE, ChartRepoError, version_to_tag};
use crate::GitCredentials;
use crate::www_authenticate::challenge_params;

const ACCEPT_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The layer media type of charts pushed by Helm before 3.8 (`helm chart save`).
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/tar+gzip";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
}

#[derive(Deserialize)]
struct Token {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// One pull from one repository.
struct Puller<'a> {
    http: &'a reqwest::Client,
    /// `oci://host/path`, for messages.
    repo: &'a str,
    /// `scheme://host/v2/path/`.
    base: Url,
    path: String,
    credentials: Option<&'a GitCredentials>,
    token: Option<String>,
    basic: bool,
}

/// The chart archive of `repo_url` (`oci://host/path/chart`) at `version`, or at
/// `digest` when given (then the version's tag is not read). `insecure`: plain HTTP.
pub(super) async fn pull(
    http: &reqwest::Client,
    repo_url: &str,
    version: &str,
    digest: Option<&str>,
    credentials: Option<&GitCredentials>,
    insecure: bool,
) -> Result<Vec<u8>, ChartRepoError> {
    let rest = repo_url
        .trim()
        .trim_start_matches("oci://")
        .trim_end_matches('/');
    let Some((host, path)) = rest
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        return Err(ChartRepoError::InvalidUrl {
            url: repo_url.to_owned(),
            reason: "an OCI chart is `oci://host[:port]/path/chart`".into(),
        });
    };
    let scheme = if insecure { "http" } else { "https" };
    let base = Url::parse(&format!("{scheme}://{host}/v2/{path}/")).map_err(|err| {
        ChartRepoError::InvalidUrl {
            url: repo_url.to_owned(),
            reason: err.to_string(),
        }
    })?;
    let mut puller = Puller {
        http,
        repo: repo_url,
        base,
        path: path.to_owned(),
        credentials,
        token: None,
        basic: false,
    };
    let tag = version_to_tag(version);
    let reference = digest.unwrap_or(&tag);
    let shown = format!("{repo_url}:{tag}");
    let manifest = puller
        .read(
            "fetch the chart manifest",
            &format!("manifests/{reference}"),
            Some(ACCEPT_MANIFEST),
        )
        .await?;
    if let Some(digest) = digest {
        check_digest("the chart manifest", &puller.base, &manifest, digest)?;
    }
    let layer = chart_layer(&manifest, &shown)?;
    let archive = puller
        .read("fetch the chart archive", &format!("blobs/{layer}"), None)
        .await?;
    check_digest("the chart archive", &puller.base, &archive, &layer)?;
    Ok(archive)
}

/// The digest of the chart archive layer of the manifest `body` of `reference`
/// (`oci://…:tag`), after checking the manifest is a Helm chart's.
pub fn chart_layer(body: &[u8], reference: &str) -> Result<String, ChartRepoError> {
    let manifest: Manifest =
        serde_json::from_slice(body).map_err(|err| ChartRepoError::InvalidResponse {
            operation: "fetch the chart manifest".into(),
            url: reference.to_owned(),
            reason: format!("not an OCI image manifest: {err}"),
        })?;
    if manifest.config.media_type != CHART_CONFIG_MEDIA_TYPE {
        return Err(ChartRepoError::NotAChart {
            reference: reference.to_owned(),
            media_type: manifest.config.media_type,
        });
    }
    manifest
        .layers
        .into_iter()
        .find(|l| l.media_type == CHART_LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE)
        .map(|l| l.digest)
        .ok_or_else(|| ChartRepoError::InvalidResponse {
            operation: "fetch the chart manifest".into(),
            url: reference.to_owned(),
            reason: format!("no `{CHART_LAYER_MEDIA_TYPE}` layer"),
        })
}

fn check_digest(what: &str, url: &Url, body: &[u8], digest: &str) -> Result<(), ChartRepoError> {
    let got = http::sha256(body);
    if got.eq_ignore_ascii_case(digest) {
        return Ok(());
    }
    Err(ChartRepoError::InvalidResponse {
        operation: format!("fetch {what}"),
        url: url.to_string(),
        reason: format!("the content hashes to `{got}`, not `{digest}`"),
    })
}

impl Puller<'_> {
    /// `GET base/rest`, answering one authentication challenge.
    async fn read(
        &mut self,
        op: &str,
        rest: &str,
        accept: Option<&str>,
    ) -> Result<Vec<u8>, ChartRepoError> {
        let url = self
            .base
            .join(rest)
            .map_err(|err| ChartRepoError::InvalidUrl {
                url: format!("{}{rest}", self.base),
                reason: err.to_string(),
            })?;
        let mut answer = http::get(self.http, op, &url, accept, self.auth()).await?;
        if answer.status == StatusCode::UNAUTHORIZED {
            self.answer_challenge(&answer).await?;
            answer = http::get(self.http, op, &url, accept, self.auth()).await?;
        }
        if answer.status != StatusCode::OK {
            return Err(http::status_error(
                op,
                self.repo,
                &url,
                answer.status,
                self.credentials,
            ));
        }
        Ok(answer.body)
    }

    fn auth(&self) -> Auth<'_> {
        match (&self.token, self.basic, self.credentials) {
            (Some(token), _, _) => Auth::Bearer(token),
            (None, true, Some(c)) => Auth::Basic(c),
            _ => Auth::None,
        }
    }

    async fn answer_challenge(&mut self, answer: &Answer) -> Result<(), ChartRepoError> {
        let challenge = answer
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (scheme, params) = challenge
            .split_once(' ')
            .unwrap_or((challenge.as_str(), ""));
        let refused = |detail: &str| ChartRepoError::AuthFailed {
            repo: self.repo.to_owned(),
            detail: detail.to_owned(),
        };
        if scheme.eq_ignore_ascii_case("basic") {
            if self.credentials.is_none() {
                return Err(refused(
                    "the registry wants credentials and none were given",
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
        let scope = params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{}:pull", self.path));
        {
            let mut query = realm.query_pairs_mut();
            if let Some(service) = params.get("service") {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let op = "fetch a registry token";
        let auth = self.credentials.map_or(Auth::None, Auth::Basic);
        let answer = http::get(self.http, op, &realm, None, auth).await?;
        if answer.status != StatusCode::OK {
            return Err(http::status_error(
                op,
                self.repo,
                &realm,
                answer.status,
                self.credentials,
            ));
        }
        let token: Token = serde_json::from_slice(&answer.body).map_err(|err| {
            ChartRepoError::InvalidResponse {
                operation: op.into(),
                url: realm.to_string(),
                reason: err.to_string(),
            }
        })?;
        self.token = Some(token.token.or(token.access_token).ok_or_else(|| {
            ChartRepoError::InvalidResponse {
                operation: op.into(),
                url: realm.to_string(),
                reason: "no `token` in the answer".into(),
            }
        })?);
        Ok(())
    }
}
