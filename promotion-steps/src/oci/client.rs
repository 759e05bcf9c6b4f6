//! One repository's session with an OCI registry: every request has a finite timeout,
//! answers one `401` (`auth`: HTTP Basic, or a Bearer token from the realm the challenge
//! names, for the scopes the session needs), and is worded into an [`OciError`] when
//! refused.
//!
//! Reads are checked: a manifest against the digest that named it (and the
//! `Docker-Content-Digest` the registry sent), a blob against its descriptor's digest and
//! size while it streams ([`Blob`]), both bounded in size. Writes: blob uploads (`POST`,
//! then `PATCH` chunks of [`CHUNK`] bytes and a final `PUT ?digest=`), cross-repository
//! mounts, and manifest pushes.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use sha2::Digest as _;

use super::manifest::{ACCEPT, Descriptor, Manifest};
use super::{OciError, Reference};
use crate::GitCredentials;

mod auth;
mod blob;

pub(crate) use blob::Blob;

/// How long a manifest, token, `HEAD` or upload-session request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one blob transfer (a download, or one uploaded chunk) may take.
const BLOB_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The largest manifest read (the distribution spec's registries refuse above 4 MiB).
const MAX_MANIFEST: usize = 4 << 20;
/// The largest error or token answer read.
const MAX_SMALL_ANSWER: usize = 64 << 10;
/// The size of the chunks a blob is uploaded in.
pub(crate) const CHUNK: usize = 8 << 20;

/// What a session may do in its repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

/// One repository's session.
pub(crate) struct Repository {
    http: reqwest::Client,
    /// `registry/repository`, for messages and credentials.
    pub(crate) name: String,
    registry: String,
    repository: String,
    /// `scheme://host/v2/repository/`.
    base: Url,
    credentials: Option<GitCredentials>,
    /// The Credential type looked for (`image`, `helm`), for hints.
    kind: &'static str,
    access: Access,
    /// Another repository of the same registry blobs are mounted from (its `pull` scope).
    mount_from: Option<String>,
    token: Option<String>,
    basic: bool,
}

impl Repository {
    /// A session with the repository of `reference`, with the credentials found for it
    /// (`kind` is the Credential type they were looked up as).
    pub(crate) fn new(
        http: &reqwest::Client,
        reference: &Reference,
        credentials: Option<GitCredentials>,
        kind: &'static str,
        access: Access,
    ) -> Result<Self, OciError> {
        let name = reference.repository_url();
        let base = Url::parse(&format!(
            "{}/v2/{}/",
            reference.api_origin(),
            reference.repository
        ))
        .map_err(|err| OciError::InvalidReference {
            field: "reference",
            reference: reference.to_string(),
            reason: err.to_string(),
        })?;
        Ok(Repository {
            http: http.clone(),
            name,
            registry: reference.registry.clone(),
            repository: reference.repository.clone(),
            base,
            credentials,
            kind,
            access,
            mount_from: None,
            token: None,
            basic: false,
        })
    }

    /// Also ask for `pull` on `from` (a repository of the same registry) when
    /// authenticating, so blobs can be mounted from it.
    pub(crate) fn mounting_from(&mut self, from: &Reference) {
        if from.registry == self.registry && from.repository != self.repository {
            self.mount_from = Some(from.repository.clone());
        }
    }

    /// Whether `other` is in the same registry (blobs can be mounted from it).
    pub(crate) fn same_registry(&self, other: &Reference) -> bool {
        self.registry == other.registry
    }

    /// The manifest at `reference` (a tag or a digest), checked against the digest when
    /// one names it and against the `Docker-Content-Digest` the registry sends.
    pub(crate) async fn manifest(&mut self, reference: &str) -> Result<Manifest, OciError> {
        let op = "fetch the manifest of";
        let url = self.url(&format!("manifests/{reference}"))?;
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static(ACCEPT));
        let response = self
            .send(Method::GET, url, headers, None, REQUEST_TIMEOUT)
            .await?;
        let shown = format!("{}:{reference}", self.name);
        let response = self.expect(op, &shown, response, &[StatusCode::OK]).await?;
        let content_type = header(&response, "content-type");
        let sent_digest = header(&response, "docker-content-digest");
        let body = self
            .read_bounded(op, response, MAX_MANIFEST, "the manifest")
            .await?;
        let manifest = Manifest::parse(body, content_type.as_deref()).map_err(|reason| {
            OciError::InvalidResponse {
                operation: op.into(),
                repo: shown.clone(),
                reason,
            }
        })?;
        let expected = if reference.starts_with("sha256:") {
            Some(reference.to_owned())
        } else {
            sent_digest.filter(|d| d.starts_with("sha256:"))
        };
        if let Some(expected) = expected
            && !expected.eq_ignore_ascii_case(&manifest.digest)
        {
            return Err(OciError::DigestMismatch {
                what: "the manifest".into(),
                repo: shown,
                expected,
                got: manifest.digest,
            });
        }
        Ok(manifest)
    }

    /// The digest the tag (or digest) `reference` names here, or `None` when there is no
    /// such manifest (or the registry does not say).
    pub(crate) async fn manifest_digest(
        &mut self,
        reference: &str,
    ) -> Result<Option<String>, OciError> {
        let url = self.url(&format!("manifests/{reference}"))?;
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static(ACCEPT));
        let response = self
            .send(Method::HEAD, url, headers, None, REQUEST_TIMEOUT)
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let shown = format!("{}:{reference}", self.name);
        let response = self
            .expect(
                "look up the manifest of",
                &shown,
                response,
                &[StatusCode::OK],
            )
            .await?;
        Ok(header(&response, "docker-content-digest"))
    }

    /// Pushes `manifest` under `reference` (a tag, or its digest).
    pub(crate) async fn put_manifest(
        &mut self,
        reference: &str,
        manifest: &Manifest,
    ) -> Result<(), OciError> {
        let op = "push the manifest to";
        let url = self.url(&format!("manifests/{reference}"))?;
        let mut headers = HeaderMap::new();
        let content_type = HeaderValue::from_str(&manifest.media_type).map_err(|err| {
            OciError::InvalidResponse {
                operation: op.into(),
                repo: self.name.clone(),
                reason: format!("media type `{}`: {err}", manifest.media_type),
            }
        })?;
        headers.insert("content-type", content_type);
        let response = self
            .send(
                Method::PUT,
                url,
                headers,
                Some(manifest.body.clone()),
                REQUEST_TIMEOUT,
            )
            .await?;
        let shown = format!("{}:{reference}", self.name);
        let response = self
            .expect(op, &shown, response, &[StatusCode::CREATED, StatusCode::OK])
            .await?;
        if let Some(digest) = header(&response, "docker-content-digest")
            && digest.starts_with("sha256:")
            && !digest.eq_ignore_ascii_case(&manifest.digest)
        {
            return Err(OciError::DigestMismatch {
                what: "the pushed manifest".into(),
                repo: shown,
                expected: manifest.digest.clone(),
                got: digest,
            });
        }
        Ok(())
    }

    /// Whether the repository holds the blob `digest`.
    pub(crate) async fn has_blob(&mut self, digest: &str) -> Result<bool, OciError> {
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self
            .send(Method::HEAD, url, HeaderMap::new(), None, REQUEST_TIMEOUT)
            .await?;
        match response.status() {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => {
                let shown = format!("{}@{digest}", self.name);
                self.expect("look up blob", &shown, response, &[StatusCode::OK])
                    .await
                    .map(|_| true)
            }
        }
    }

    /// Starts reading the blob of `descriptor`; refused when the descriptor says it is
    /// larger than `limit` bytes. The bytes are checked as they stream (see [`Blob`]).
    pub(crate) async fn blob(
        &mut self,
        descriptor: &Descriptor,
        limit: u64,
        step: &'static str,
    ) -> Result<Blob, OciError> {
        let what = format!("blob `{}`", descriptor.digest);
        let name = self.name.clone();
        let too_large = || OciError::TooLarge {
            what: what.clone(),
            repo: name.clone(),
            limit: limit >> 20,
            step,
            hint: "move large content elsewhere, or name a smaller artifact",
        };
        if descriptor.size > limit {
            return Err(too_large());
        }
        let url = self.url(&format!("blobs/{}", descriptor.digest))?;
        let response = self
            .send(Method::GET, url, HeaderMap::new(), None, BLOB_TIMEOUT)
            .await?;
        let shown = format!("{}@{}", self.name, descriptor.digest);
        let response = self
            .expect("fetch blob", &shown, response, &[StatusCode::OK])
            .await?;
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        Ok(Blob {
            response,
            repo: self.name.clone(),
            what,
            expected: descriptor.digest.clone(),
            size: descriptor.size,
            // A descriptor without a size is bounded by `limit` alone.
            limit: if descriptor.size > 0 {
                limit.min(descriptor.size)
            } else {
                limit
            },
            step,
            read: 0,
            hasher: sha2::Sha256::new(),
        })
    }

    /// Mounts blob `digest` from repository `from` of the same registry. `Ok(None)`: it is
    /// mounted; `Ok(Some(url))`: the registry opened an upload session at `url` instead.
    pub(crate) async fn mount(
        &mut self,
        digest: &str,
        from: &str,
    ) -> Result<Option<Url>, OciError> {
        let mut url = self.url("blobs/uploads/")?;
        url.query_pairs_mut()
            .append_pair("mount", digest)
            .append_pair("from", from);
        let response = self
            .send(Method::POST, url, HeaderMap::new(), None, REQUEST_TIMEOUT)
            .await?;
        let shown = format!("{}@{digest}", self.name);
        let response = self
            .expect(
                "mount a blob into",
                &shown,
                response,
                &[StatusCode::CREATED, StatusCode::ACCEPTED],
            )
            .await?;
        if response.status() == StatusCode::CREATED {
            return Ok(None);
        }
        self.location("mount a blob into", &response).map(Some)
    }

    /// Uploads `blob` (to the session at `session`, or a new one), in chunks; the last
    /// `PUT` is sent only when the blob hashed to its digest.
    pub(crate) async fn upload(
        &mut self,
        blob: &mut Blob,
        session: Option<Url>,
    ) -> Result<(), OciError> {
        let op = "upload a blob to";
        let shown = format!("{}@{}", self.name, blob.expected);
        let mut location = match session {
            Some(url) => url,
            None => {
                let url = self.url("blobs/uploads/")?;
                let response = self
                    .send(Method::POST, url, HeaderMap::new(), None, REQUEST_TIMEOUT)
                    .await?;
                let response = self
                    .expect(op, &shown, response, &[StatusCode::ACCEPTED])
                    .await?;
                self.location(op, &response)?
            }
        };
        let mut buffer = Vec::new();
        let mut offset = 0usize;
        while let Some(chunk) = blob.next_chunk().await? {
            buffer.extend_from_slice(&chunk);
            if buffer.len() >= CHUNK {
                let sent = std::mem::take(&mut buffer);
                let mut headers = HeaderMap::new();
                headers.insert(
                    "content-type",
                    HeaderValue::from_static("application/octet-stream"),
                );
                let range = format!("{offset}-{}", offset + sent.len() - 1);
                if let Ok(value) = HeaderValue::from_str(&range) {
                    headers.insert("content-range", value);
                }
                offset += sent.len();
                let response = self
                    .send(
                        Method::PATCH,
                        location.clone(),
                        headers,
                        Some(sent),
                        BLOB_TIMEOUT,
                    )
                    .await?;
                let response = self
                    .expect(
                        op,
                        &shown,
                        response,
                        &[StatusCode::ACCEPTED, StatusCode::NO_CONTENT],
                    )
                    .await?;
                location = self.location(op, &response)?;
            }
        }
        location
            .query_pairs_mut()
            .append_pair("digest", &blob.expected);
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            HeaderValue::from_static("application/octet-stream"),
        );
        let response = self
            .send(Method::PUT, location, headers, Some(buffer), BLOB_TIMEOUT)
            .await?;
        self.expect(
            op,
            &shown,
            response,
            &[StatusCode::CREATED, StatusCode::NO_CONTENT],
        )
        .await?;
        Ok(())
    }

    fn url(&self, rest: &str) -> Result<Url, OciError> {
        self.base
            .join(rest)
            .map_err(|err| OciError::InvalidReference {
                field: "reference",
                reference: format!("{}{rest}", self.base),
                reason: err.to_string(),
            })
    }

    /// The `Location` of an upload session, resolved against the registry.
    fn location(&self, op: &str, response: &reqwest::Response) -> Result<Url, OciError> {
        header(response, "location")
            .and_then(|l| self.base.join(&l).ok())
            .ok_or_else(|| OciError::InvalidResponse {
                operation: op.into(),
                repo: self.name.clone(),
                reason: "the answer has no usable `Location` for the upload".into(),
            })
    }

    /// Sends a request, answering one authentication challenge.
    async fn send(
        &mut self,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<reqwest::Response, OciError> {
        let response = self
            .attempt(
                method.clone(),
                url.clone(),
                headers.clone(),
                body.clone(),
                timeout,
            )
            .await?;
        if response.status() != StatusCode::UNAUTHORIZED || self.token.is_some() || self.basic {
            return Ok(response);
        }
        self.answer_challenge(&response).await?;
        self.attempt(method, url, headers, body, timeout).await
    }

    async fn attempt(
        &self,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<reqwest::Response, OciError> {
        let mut request = self
            .http
            .request(method, url.clone())
            .headers(headers)
            .timeout(timeout);
        if let Some(body) = body {
            request = request.body(body);
        }
        request = match (&self.token, self.basic, &self.credentials) {
            (Some(token), _, _) => request.bearer_auth(token),
            (None, true, Some(c)) => request.basic_auth(&c.username, Some(&c.password)),
            _ => request,
        };
        request
            .send()
            .await
            .map_err(|err| self.unreachable(&url, &err))
    }

    fn unreachable(&self, url: &Url, err: &reqwest::Error) -> OciError {
        let mut shown = url.clone();
        shown.set_query(None);
        OciError::Unreachable {
            repo: self.name.clone(),
            url: shown.to_string(),
            reason: if err.is_timeout() {
                "timed out".into()
            } else {
                root_cause(err)
            },
        }
    }

    /// `response` when its status is one of `ok`, else the error it means.
    async fn expect(
        &self,
        op: &str,
        shown: &str,
        response: reqwest::Response,
        ok: &[StatusCode],
    ) -> Result<reqwest::Response, OciError> {
        let status = response.status();
        if ok.contains(&status) {
            return Ok(response);
        }
        let auth = |detail: String| OciError::AuthFailed {
            repo: self.name.clone(),
            detail,
            kind: self.kind,
        };
        match (status, &self.credentials) {
            (StatusCode::UNAUTHORIZED, None) => {
                return Err(auth(
                    "the registry wants credentials and none were given (HTTP 401)".into(),
                ));
            }
            (StatusCode::UNAUTHORIZED, Some(c)) => {
                return Err(auth(format!(
                    "the registry refused the credentials of `{}` (HTTP 401)",
                    c.username
                )));
            }
            (StatusCode::FORBIDDEN, _) => {
                return Err(auth(format!(
                    "access denied (HTTP 403) to {op} the repository"
                )));
            }
            _ => {}
        }
        let body = self
            .read_bounded(op, response, MAX_SMALL_ANSWER, "the error")
            .await
            .unwrap_or_default();
        Err(OciError::Status {
            operation: op.to_owned(),
            repo: shown.to_owned(),
            status: status.as_u16(),
            detail: registry_error(&body),
            hint: if status == StatusCode::NOT_FOUND {
                "; hint: check the reference (registry, repository, tag or digest)"
            } else {
                ""
            },
        })
    }

    async fn read_bounded(
        &self,
        op: &str,
        mut response: reqwest::Response,
        limit: usize,
        what: &str,
    ) -> Result<Vec<u8>, OciError> {
        let url = response.url().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.unreachable(&url, &err))?
        {
            if body.len() + chunk.len() > limit {
                return Err(OciError::InvalidResponse {
                    operation: op.into(),
                    repo: self.name.clone(),
                    reason: format!("{what} is larger than {} KiB", limit >> 10),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `: CODE: message` of the distribution spec's error body, bounded, or nothing.
fn registry_error(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let Ok(errors) = serde_json::from_slice::<Errors>(body) else {
        return String::new();
    };
    let Some(first) = errors.errors.first() else {
        return String::new();
    };
    let text: String = format!("{}: {}", first.code, first.message)
        .chars()
        .take(300)
        .collect();
    format!(" ({text})")
}

/// The innermost cause, worded plainly (`connection refused`).
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    if let Some(io) = cause.downcast_ref::<std::io::Error>()
        && io.kind() == std::io::ErrorKind::ConnectionRefused
    {
        return "connection refused".into();
    }
    cause.to_string()
}
