//! A small client for the read side of the OCI distribution API: list tags, `HEAD` a
//! manifest, fetch a manifest or a config blob by digest.
//!
//! Owns HTTP, the per-registry [`RegistryLimit`] and the counting of every HTTP request a
//! discovery makes (token requests, `401` challenges and redirects included). `auth`
//! answers challenges (Basic, Bearer tokens); `failure` words what went wrong. Does not
//! choose tags or cache digests: see `select` and `cache`.
//!
//! Why not `oci-client`: its `Client` sends a `GET /v2/` probe before every request for
//! which it holds no token, which is every request to a registry without authentication,
//! so a refresh would cost twice what it says and the probes would escape the rate limit;
//! it keeps one credential per registry (the first one it is given), which a discoverer
//! shared by warehouses with different credentials cannot use; and it hides the `Link`
//! header that paginates tag lists.
//!
//! Credentials are only sent to the registry's own host and scheme (never across a
//! redirect to another host) and to the token service the registry names.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::time::Duration;

use self::auth::{AuthKey, AuthState};
use self::failure::{chain, unreachable};
use super::RegistryCredentials;
use super::error::ImageDiscoveryError;
use super::limit::RegistryLimit;
use super::manifest::ACCEPT_MANIFESTS;
use super::repo::Repo;

mod auth;
mod failure;

/// The largest answer Dray reads (a tag list of a busy repository is well under this).
const MAX_BODY: usize = 32 * 1024 * 1024;
/// Redirects followed per request.
const MAX_REDIRECTS: usize = 5;
/// Tag-list pages read at most (a guard; pagination stops long before on its own).
const MAX_PAGES: usize = 10_000;

type Result<T> = std::result::Result<T, ImageDiscoveryError>;

/// The HTTP side of a discoverer, shared by every discovery.
#[derive(Debug)]
pub(crate) struct RegistryHttp {
    client: reqwest::Client,
    limits: Mutex<HashMap<String, Arc<RegistryLimit>>>,
    auth: Mutex<HashMap<AuthKey, AuthState>>,
    per_second: u32,
    concurrency: usize,
    page_size: usize,
}

/// One discovery's view: a repository, its credentials and its request counters.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    http: &'a RegistryHttp,
    repo: &'a Repo,
    credentials: Option<&'a RegistryCredentials>,
    limit: Arc<RegistryLimit>,
    key: AuthKey,
    requests: AtomicU32,
    tag_list_requests: AtomicU32,
}

/// A read answer.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
    url: Url,
}

#[derive(Deserialize)]
struct TagPage {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

impl RegistryHttp {
    pub(crate) fn new(
        per_second: u32,
        concurrency: usize,
        page_size: usize,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .timeout(request_timeout)
            .user_agent(concat!("dray/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ImageDiscoveryError::ClientSetup {
                reason: chain(&err),
            })?;
        Ok(Self {
            client,
            limits: Mutex::default(),
            auth: Mutex::default(),
            per_second,
            concurrency,
            page_size: page_size.max(1),
        })
    }

    /// Start talking to `repo` with `credentials`.
    pub(crate) fn session<'a>(
        &'a self,
        repo: &'a Repo,
        credentials: Option<&'a RegistryCredentials>,
    ) -> Session<'a> {
        let limit = lock(&self.limits)
            .entry(repo.registry.clone())
            .or_insert_with(|| Arc::new(RegistryLimit::new(self.per_second, self.concurrency)))
            .clone();
        let credential = credentials.map(|c| {
            let mut hash = Sha256::new();
            hash.update(c.username.as_bytes());
            hash.update([0]);
            hash.update(c.password.as_bytes());
            hash.finalize().into()
        });
        let key = AuthKey {
            registry: repo.registry.clone(),
            repo: repo.path.clone(),
            credential,
        };
        Session {
            http: self,
            repo,
            credentials,
            limit,
            key,
            requests: AtomicU32::new(0),
            tag_list_requests: AtomicU32::new(0),
        }
    }
}

impl Session<'_> {
    /// HTTP requests sent so far.
    pub(crate) fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Tag-list pages requested so far.
    pub(crate) fn tag_list_requests(&self) -> u32 {
        self.tag_list_requests.load(Ordering::Relaxed)
    }

    /// All tags, deduplicated, in the registry's order. Pagination follows `Link` (or
    /// `last=`) and cannot loop: it stops when a page is empty, shorter than asked, longer
    /// than asked (the registry ignores `n`), or ends with a tag a previous page ended with
    /// (the registry ignores `last`).
    pub(crate) async fn list_tags(&self) -> Result<Vec<String>> {
        let page_size = self.http.page_size;
        let mut url = self.url(&format!("tags/list?n={page_size}"))?;
        let mut tags = Vec::new();
        let mut seen = HashSet::new();
        let mut page_ends = HashSet::new();
        for _ in 0..MAX_PAGES {
            self.tag_list_requests.fetch_add(1, Ordering::Relaxed);
            let answer = self.send("list tags", Method::GET, url, None).await?;
            match answer.status {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND => {
                    return Err(ImageDiscoveryError::RepositoryNotFound {
                        repo: self.repo.display.clone(),
                    });
                }
                _ => return Err(self.failure("list tags", &answer)),
            }
            let page: TagPage = self.json("list tags", &answer)?;
            let page = page.tags.unwrap_or_default();
            let count = page.len();
            let Some(last) = page.last().cloned() else {
                break;
            };
            tags.extend(page.into_iter().filter(|t| seen.insert(t.clone())));
            if count > page_size || !page_ends.insert(last.clone()) {
                break;
            }
            let next = match self.link_next(&answer) {
                Some(next) => next,
                None if count == page_size => {
                    let mut next = self.url("tags/list")?;
                    next.query_pairs_mut()
                        .append_pair("n", &page_size.to_string())
                        .append_pair("last", &last);
                    next
                }
                None => break,
            };
            url = next;
        }
        Ok(tags)
    }

    /// `HEAD` the manifest of `reference` (a tag): its digest, `None` when the registry
    /// does not know it.
    pub(crate) async fn head(&self, reference: &str) -> Result<Option<String>> {
        let op = format!("resolve `{reference}`");
        let url = self.url(&format!("manifests/{reference}"))?;
        let answer = self
            .send(&op, Method::HEAD, url.clone(), Some(ACCEPT_MANIFESTS))
            .await?;
        match answer.status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => return Ok(None),
            _ => return Err(self.failure(&op, &answer)),
        }
        if let Some(digest) = header(&answer.headers, "docker-content-digest") {
            if is_digest(&digest) {
                return Ok(Some(digest));
            }
        }
        // No (usable) digest header: read the manifest and hash it.
        let answer = self
            .send(&op, Method::GET, url, Some(ACCEPT_MANIFESTS))
            .await?;
        match answer.status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => return Ok(None),
            _ => return Err(self.failure(&op, &answer)),
        }
        Ok(Some(sha256(&answer.body)))
    }

    /// The bytes of the manifest `digest`, checked against the digest.
    pub(crate) async fn manifest(&self, digest: &str) -> Result<Vec<u8>> {
        self.fetch_by_digest(
            "fetch manifest",
            "manifests",
            digest,
            Some(ACCEPT_MANIFESTS),
        )
        .await
    }

    /// The bytes of the blob `digest` (an image config), checked against the digest.
    pub(crate) async fn blob(&self, digest: &str) -> Result<Vec<u8>> {
        self.fetch_by_digest("fetch config", "blobs", digest, None)
            .await
    }

    async fn fetch_by_digest(
        &self,
        what: &str,
        kind: &str,
        digest: &str,
        accept: Option<&str>,
    ) -> Result<Vec<u8>> {
        let op = format!("{what} `{digest}`");
        let url = self.url(&format!("{kind}/{digest}"))?;
        let answer = self.send(&op, Method::GET, url, accept).await?;
        if answer.status != StatusCode::OK {
            return Err(self.failure(&op, &answer));
        }
        if let Some(hex) = digest.strip_prefix("sha256:") {
            let got = sha256(&answer.body);
            if got[7..] != *hex {
                return Err(self.invalid(&op, &answer, format!("the content hashes to `{got}`")));
            }
        }
        Ok(answer.body)
    }

    /// Parse a JSON answer.
    pub(crate) fn parse<T: for<'de> Deserialize<'de>>(&self, op: &str, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|err| ImageDiscoveryError::InvalidResponse {
            operation: op.to_owned(),
            url: self.repo.display.clone(),
            reason: err.to_string(),
        })
    }

    fn json<T: for<'de> Deserialize<'de>>(&self, op: &str, answer: &Answer) -> Result<T> {
        serde_json::from_slice(&answer.body)
            .map_err(|err| self.invalid(op, answer, format!("not the expected JSON: {err}")))
    }

    /// `scheme://registry/v2/<path>/<rest>`.
    fn url(&self, rest: &str) -> Result<Url> {
        let text = format!("{}/v2/{}/{rest}", self.repo.base_url(), self.repo.path);
        Url::parse(&text).map_err(|err| {
            ImageDiscoveryError::invalid("repoURL", &self.repo.display, err.to_string(), None)
        })
    }

    /// The `rel="next"` target of a `Link` header, if it stays on the registry.
    fn link_next(&self, answer: &Answer) -> Option<Url> {
        let link = header(&answer.headers, "link")?;
        let target = link
            .split(',')
            .find(|l| l.contains("rel=\"next\"") || l.contains("rel=next"))?;
        let inner = target.split_once('<')?.1.split_once('>')?.0;
        let url = answer.url.join(inner).ok()?;
        self.is_registry(&url).then_some(url)
    }

    fn is_registry(&self, url: &Url) -> bool {
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => return false,
        };
        host == self.repo.registry && url.scheme() == self.repo.scheme
    }

    /// Send a request, answering one authentication challenge and following redirects.
    async fn send(
        &self,
        op: &str,
        method: Method,
        url: Url,
        accept: Option<&str>,
    ) -> Result<Answer> {
        let mut url = url;
        let mut challenged = false;
        for _ in 0..=MAX_REDIRECTS {
            let own = self.is_registry(&url);
            let auth = if own { self.auth_state() } else { None };
            let answer = self
                .request(method.clone(), &url, accept, auth.as_ref())
                .await?;
            if answer.status.is_redirection() {
                let location = header(&answer.headers, "location").ok_or_else(|| {
                    self.invalid(op, &answer, "a redirect without `Location`".into())
                })?;
                url = answer.url.join(&location).map_err(|err| {
                    self.invalid(op, &answer, format!("bad redirect `{location}`: {err}"))
                })?;
                continue;
            }
            if answer.status == StatusCode::UNAUTHORIZED && own && !challenged {
                challenged = true;
                self.answer_challenge(&answer).await?;
                continue;
            }
            return Ok(answer);
        }
        Err(ImageDiscoveryError::InvalidResponse {
            operation: op.to_owned(),
            url: url.to_string(),
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// One HTTP request under the registry's limit, counted.
    async fn request(
        &self,
        method: Method,
        url: &Url,
        accept: Option<&str>,
        auth: Option<&AuthState>,
    ) -> Result<Answer> {
        let mut request = self.http.client.request(method, url.clone());
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        request = match (auth, self.credentials) {
            (Some(AuthState::Basic), Some(c)) => request.basic_auth(&c.username, Some(&c.password)),
            (Some(AuthState::Bearer { token, .. }), _) => request.bearer_auth(token),
            _ => request,
        };
        let _permit = self.limit.acquire().await;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let host = url.host_str().unwrap_or_default();
        let host = url
            .port()
            .map_or_else(|| host.to_owned(), |port| format!("{host}:{port}"));
        let mut response = request
            .send()
            .await
            .map_err(|err| unreachable(&host, &err))?;
        let status = response.status();
        let headers = response.headers().clone();
        let url = response.url().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| unreachable(&host, &err))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(ImageDiscoveryError::InvalidResponse {
                    operation: "read an answer".into(),
                    url: url.to_string(),
                    reason: format!("it is larger than {} MiB", MAX_BODY / 1024 / 1024),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body,
            url,
        })
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

fn is_digest(text: &str) -> bool {
    text.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty() && !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// `sha256:<hex>` of `data`.
pub(crate) fn sha256(data: &[u8]) -> String {
    let hash = Sha256::digest(data);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests() {
        assert!(is_digest(&sha256(b"x")) && !is_digest("sha256:") && !is_digest("nope"));
        assert_eq!(sha256(b"").len(), 71);
    }
}
