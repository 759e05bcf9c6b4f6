//! GitHub (and GitHub Enterprise) pull requests over `octocrab`.
//!
//! Requests go through octocrab's raw calls (`_get`, `_post`, `_put`) so that the status
//! and headers of every answer are seen: octocrab's typed calls drop the headers, and a
//! rate limit must be read from them (`Retry-After`, `x-ratelimit-remaining: 0`,
//! `x-ratelimit-reset`). Bodies are read into octocrab's own models.
//!
//! A merge sends the head commit it was asked to merge as `sha`: GitHub then refuses
//! (409 `Head branch was modified`) if the branch moved, which is
//! [`ForgeError::HeadMoved`]; a 405 is a merge GitHub will not do now.
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

use super::rest::encode;
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
        self.send_with_status(method, path, body)
            .await
            .map_err(|(_, e)| e)
    }

    /// [`GitHub::send`], keeping the status of a refusal (`None` when there was no answer).
    pub(super) async fn send_with_status(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, (Option<StatusCode>, ForgeError)> {
        let uri = format!("/repos/{}{path}", self.repo);
        let response = match method {
            http::Method::GET => self.client._get(uri.as_str()).await,
            http::Method::POST => self.client._post(uri.as_str(), body).await,
            http::Method::PUT => self.client._put(uri.as_str(), body).await,
            http::Method::DELETE => self.client._delete(uri.as_str(), body).await,
            _ => self.client._patch(uri.as_str(), body).await,
        }
        .map_err(|e| {
            let e = ForgeError::Unavailable(format!("GitHub at `{uri}` is unreachable: {e}"));
            (None, e)
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = self.client.body_to_string(response).await.map_err(|e| {
            let e = ForgeError::Unavailable(format!("reading GitHub's answer: {e}"));
            (Some(status), e)
        })?;
        if status.is_success() {
            return Ok(text);
        }
        Err((Some(status), error_for(status, &headers, &text)))
    }

    /// Posts a commit status on `sha` (`POST /repos/{owner}/{repo}/statuses/{sha}`).
    pub(super) async fn post_status(
        &self,
        sha: &str,
        state: &str,
        status: &super::commit_status::CommitStatus,
        description: &str,
    ) -> Result<(), ForgeError> {
        let body = json!({
            "state": state,
            "target_url": status.target_url,
            "description": description,
            "context": status.context,
        });
        self.send(http::Method::POST, &format!("/statuses/{sha}"), Some(&body))
            .await
            .map(|_| ())
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
            head_sha: Some(pr.head.sha).filter(|s| !s.is_empty()),
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

    async fn merge(
        &self,
        number: u64,
        method: MergeMethod,
        head_sha: &str,
    ) -> Result<String, ForgeError> {
        let body = merge_body(method, head_sha);
        let text = self
            .send_with_status(
                http::Method::PUT,
                &format!("/pulls/{number}/merge"),
                Some(&body),
            )
            .await
            .map_err(|(status, e)| match (status, e) {
                // Only a merge that sent `sha` gets a 409: the head is another commit now.
                (Some(StatusCode::CONFLICT), ForgeError::Refused(message)) => {
                    ForgeError::HeadMoved(message)
                }
                (_, e) => e,
            })?;
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

/// The body of `PUT /repos/{owner}/{repo}/pulls/{n}/merge`: the method, and the head
/// commit the pull request must still be at (`sha`).
fn merge_body(method: MergeMethod, head_sha: &str) -> Value {
    let method = match method {
        MergeMethod::Merge => "merge",
        MergeMethod::Squash => "squash",
        MergeMethod::Rebase => "rebase",
    };
    json!({"merge_method": method, "sha": head_sha})
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::routing::put;

    use super::*;

    /// A server whose merge endpoint records each body and answers 409 when the body's
    /// `sha` is not `head` (as GitHub does), else 200.
    async fn merge_server(head: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&bodies);
        let app = Router::new().route(
            "/repos/acme/config/pulls/7/merge",
            put(move |axum::Json(body): axum::Json<Value>| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push(body.clone());
                    if body["sha"].as_str().is_some_and(|sha| sha != head) {
                        let msg = "Head branch was modified. Review and try the merge again.";
                        return (StatusCode::CONFLICT, axum::Json(json!({"message": msg})));
                    }
                    let ok = json!({"sha": "m3rg3", "merged": true, "message": "Pull Request successfully merged"});
                    (StatusCode::OK, axum::Json(ok))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, bodies)
    }

    #[tokio::test]
    async fn a_merge_sends_the_head_commit_and_a_moved_head_is_told_apart() {
        let (base, bodies) = merge_server("aaaa").await;
        let gh = GitHub::new(&base, "acme/config", None).unwrap();
        assert_eq!(
            gh.merge(7, MergeMethod::Squash, "aaaa").await,
            Ok("m3rg3".to_string())
        );
        assert_eq!(
            gh.merge(7, MergeMethod::Merge, "bbbb").await,
            Err(ForgeError::HeadMoved(
                "Head branch was modified. Review and try the merge again.".into()
            ))
        );
        let bodies = bodies.lock().unwrap().clone();
        assert_eq!(
            bodies,
            vec![
                json!({"merge_method": "squash", "sha": "aaaa"}),
                json!({"merge_method": "merge", "sha": "bbbb"}),
            ]
        );
    }

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
