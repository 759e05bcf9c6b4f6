//! GitHub (and GitHub Enterprise) pull requests over `octocrab`.
//!
//! Requests go through octocrab's raw calls (`_get`, `_post`, `_put`) so that the status
//! and headers of every answer are seen: octocrab's typed calls drop the headers, and a
//! rate limit must be read from them (`Retry-After`, `x-ratelimit-remaining: 0`,
//! `x-ratelimit-reset`). Bodies are read into octocrab's own models.
//!
//! What landed is `merge_commit_sha` of a merged pull request: the merge commit, the
//! squash commit, or the rebased head. Who closed an unmerged pull request is on its
//! issue (`closed_by`), which a pull request object does not carry.

use async_trait::async_trait;
use http::{HeaderMap, StatusCode};
use octocrab::Octocrab;
use octocrab::models::IssueState;
use octocrab::models::pulls::{MergeableState, PullRequest as GhPull};
use serde_json::{Value, json};

use super::{
    DEFAULT_RATE_LIMIT_WAIT, Forge, ForgeError, MergeMethod, NewPullRequest, PrState, Provider,
    PullRequest, retry_after_from_headers,
};

/// A repository on GitHub.
pub struct GitHub {
    client: Octocrab,
    repo: String,
    owner: String,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub").field("repo", &self.repo).finish()
    }
}

impl GitHub {
    /// A client for `owner/repo` at `api_url` (`https://api.github.com`, or
    /// `https://ghe.example.com/api/v3`), authenticated with `token` when given.
    pub fn new(api_url: &str, repo: &str, token: Option<String>) -> Result<Self, ForgeError> {
        let Some((owner, _)) = repo.split_once('/') else {
            return Err(ForgeError::Other(format!(
                "`{repo}` is not a GitHub repository path (`owner/repo`)"
            )));
        };
        let mut builder = Octocrab::builder()
            .base_uri(api_url)
            .map_err(|e| ForgeError::Other(format!("bad GitHub API URL `{api_url}`: {e}")))?;
        if let Some(token) = token {
            builder = builder.personal_token(token);
        }
        let client = builder
            .build()
            .map_err(|e| ForgeError::Other(format!("cannot build a GitHub client: {e}")))?;
        Ok(GitHub {
            client,
            repo: repo.to_string(),
            owner: owner.to_string(),
        })
    }

    /// Sends a request; returns the body of a 2xx answer, or the error it means.
    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, ForgeError> {
        let uri = format!("/repos/{}{path}", self.repo);
        let response = match method {
            http::Method::GET => self.client._get(uri.as_str()).await,
            http::Method::POST => self.client._post(uri.as_str(), body).await,
            http::Method::PUT => self.client._put(uri.as_str(), body).await,
            _ => self.client._patch(uri.as_str(), body).await,
        }
        .map_err(|e| ForgeError::Unavailable(format!("GitHub at `{uri}` is unreachable: {e}")))?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = self
            .client
            .body_to_string(response)
            .await
            .map_err(|e| ForgeError::Unavailable(format!("reading GitHub's answer: {e}")))?;
        if status.is_success() {
            return Ok(text);
        }
        Err(error_for(status, &headers, &text))
    }

    fn pull(&self, text: &str) -> Result<GhPull, ForgeError> {
        serde_json::from_str(text)
            .map_err(|e| ForgeError::Other(format!("unexpected pull request from GitHub: {e}")))
    }

    async fn convert(&self, pr: GhPull) -> Result<PullRequest, ForgeError> {
        let merged = pr.merged == Some(true) || pr.merged_at.is_some();
        let state = if merged {
            PrState::Merged
        } else if matches!(pr.state, Some(IssueState::Closed)) {
            PrState::Closed
        } else {
            PrState::Open
        };
        let closed_by = match state {
            PrState::Closed => {
                let issue = self
                    .send(http::Method::GET, &format!("/issues/{}", pr.number), None)
                    .await?;
                let issue: Value = serde_json::from_str(&issue).unwrap_or(Value::Null);
                issue["closed_by"]["login"].as_str().map(str::to_string)
            }
            _ => None,
        };
        Ok(PullRequest {
            number: pr.number,
            url: pr.html_url.map(|u| u.to_string()).unwrap_or_default(),
            state,
            merged_commit: if merged { pr.merge_commit_sha } else { None },
            closed_by,
            mergeable: pr.mergeable,
            merge_status: pr.mergeable_state.map(|s| mergeable_state(&s).to_string()),
            head: pr.head.ref_field,
            base: pr.base.ref_field,
        })
    }
}

/// GitHub's `message` in a JSON error answer.
fn json_message(text: &str) -> Option<String> {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
}

/// The error a non-2xx answer means.
fn error_for(status: StatusCode, headers: &HeaderMap, text: &str) -> ForgeError {
    let message = json_message(text).unwrap_or_else(|| text.trim().to_string());
    let exhausted = headers
        .get("x-ratelimit-remaining")
        .is_some_and(|v| v.as_bytes() == b"0");
    let rate_limited = status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN && (exhausted || headers.contains_key("retry-after")));
    if rate_limited {
        return ForgeError::RateLimited {
            forge: Provider::Github.name(),
            retry_after: retry_after_from_headers(headers).unwrap_or(DEFAULT_RATE_LIMIT_WAIT),
        };
    }
    match status {
        StatusCode::NOT_FOUND => ForgeError::NotFound(format!("GitHub: {message}")),
        StatusCode::METHOD_NOT_ALLOWED
        | StatusCode::CONFLICT
        | StatusCode::UNPROCESSABLE_ENTITY => ForgeError::Refused(message),
        // A proxy's error page says no more than its status does.
        status if super::is_transient(status) => match json_message(text) {
            Some(message) => {
                ForgeError::Unavailable(format!("GitHub answered {status}: {message}"))
            }
            None => ForgeError::Unavailable(format!("GitHub answered {status}")),
        },
        _ => ForgeError::Other(format!("GitHub answered {status}: {message}")),
    }
}

fn mergeable_state(state: &MergeableState) -> &'static str {
    match state {
        MergeableState::Behind => "behind",
        MergeableState::Blocked => "blocked",
        MergeableState::Clean => "clean",
        MergeableState::Dirty => "dirty",
        MergeableState::Draft => "draft",
        MergeableState::HasHooks => "has_hooks",
        MergeableState::Unstable => "unstable",
        _ => "unknown",
    }
}

#[async_trait]
impl Forge for GitHub {
    fn provider(&self) -> Provider {
        Provider::Github
    }

    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError> {
        let body = json!({"title": pr.title, "body": pr.body, "head": pr.head, "base": pr.base});
        let text = self.send(http::Method::POST, "/pulls", Some(&body)).await?;
        let created = self.pull(&text)?;
        if !pr.labels.is_empty() {
            let labels = json!({"labels": pr.labels});
            self.send(
                http::Method::POST,
                &format!("/issues/{}/labels", created.number),
                Some(&labels),
            )
            .await?;
        }
        self.convert(created).await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let text = self
            .send(http::Method::GET, &format!("/pulls/{number}"), None)
            .await?;
        let pr = self.pull(&text)?;
        self.convert(pr).await
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let path = format!(
            "/pulls?state=open&head={}:{}&base={}",
            self.owner,
            encode(head),
            encode(base)
        );
        let text = self.send(http::Method::GET, &path, None).await?;
        let list: Vec<GhPull> = serde_json::from_str(&text)
            .map_err(|e| ForgeError::Other(format!("unexpected pull requests from GitHub: {e}")))?;
        match list
            .into_iter()
            .find(|p| p.head.ref_field == head && p.base.ref_field == base)
        {
            // The list omits `mergeable`; read the pull request itself.
            Some(pr) => Ok(Some(self.get(pr.number).await?)),
            None => Ok(None),
        }
    }

    async fn merge(&self, number: u64, method: MergeMethod) -> Result<String, ForgeError> {
        let method = match method {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        };
        let body = json!({"merge_method": method});
        let text = self
            .send(
                http::Method::PUT,
                &format!("/pulls/{number}/merge"),
                Some(&body),
            )
            .await?;
        let result: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match result["sha"].as_str() {
            Some(sha) if result["merged"] == Value::Bool(true) => Ok(sha.to_string()),
            _ => Err(ForgeError::Refused(
                result["message"]
                    .as_str()
                    .unwrap_or("GitHub did not merge the pull request")
                    .to_string(),
            )),
        }
    }
}

/// Percent-encodes a branch name for a query string.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_are_told_apart_from_other_refusals() {
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("retry-after", "9".parse().unwrap());
        let e = error_for(
            StatusCode::FORBIDDEN,
            &h,
            r#"{"message":"API rate limit exceeded"}"#,
        );
        assert_eq!(
            e,
            ForgeError::RateLimited {
                forge: "GitHub",
                retry_after: std::time::Duration::from_secs(9)
            }
        );
        let e = error_for(
            StatusCode::FORBIDDEN,
            &HeaderMap::new(),
            r#"{"message":"Resource not accessible by integration"}"#,
        );
        assert!(matches!(e, ForgeError::Other(m) if m.contains("not accessible")));
        let e = error_for(
            StatusCode::METHOD_NOT_ALLOWED,
            &HeaderMap::new(),
            r#"{"message":"Pull Request is not mergeable"}"#,
        );
        assert_eq!(
            e,
            ForgeError::Refused("Pull Request is not mergeable".into())
        );
    }
}
