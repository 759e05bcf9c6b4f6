//! GitLab merge requests over the `gitlab` crate.
//!
//! The client is built with `GitlabBuilder` (which calls `GET /api/v4/user` at once, so a
//! bad token fails here); `host` is a host name with an optional port and path prefix, and
//! an `http://` API URL turns on `insecure()` (plain HTTP, for test doubles).
//!
//! GitLab merge requests have no `merged` field: `state == "merged"`. What landed is
//! `merge_commit_sha` (a merge commit), else `squash_commit_sha` (squashed, fast-forward),
//! else `sha` (a fast-forward merge of the source head).
//!
//! Rate limits: a 429 on a call is `GitlabRateLimited` with GitLab's `Retry-After`; a 429
//! on the connection check made while the client is built is reported by the crate
//! without its headers, so that one waits [`super::DEFAULT_RATE_LIMIT_WAIT`].

use async_trait::async_trait;
use gitlab::api::projects::merge_requests::{
    CreateMergeRequest, MergeMergeRequest, MergeRequest, MergeRequestState, MergeRequests,
};
use gitlab::api::{ApiError, AsyncQuery};
use gitlab::{AsyncGitlab, GitlabBuilder, RestError};
use serde_json::Value;

use super::{
    DEFAULT_RATE_LIMIT_WAIT, Forge, ForgeError, MergeMethod, NewPullRequest, PrState, Provider,
    PullRequest,
};

/// A project on GitLab.
pub struct GitLab {
    client: AsyncGitlab,
    project: String,
}

impl std::fmt::Debug for GitLab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLab")
            .field("project", &self.project)
            .finish()
    }
}

impl GitLab {
    /// A client for project `project` (`group/sub/name`) of the GitLab at `api_url`
    /// (`https://gitlab.com`, `https://git.example.com/gitlab`, `http://127.0.0.1:PORT`).
    pub async fn new(
        api_url: &str,
        project: &str,
        token: Option<String>,
    ) -> Result<Self, ForgeError> {
        let (insecure, rest) = match api_url.split_once("://") {
            Some(("http", rest)) => (true, rest),
            Some((_, rest)) => (false, rest),
            None => (false, api_url),
        };
        let host = rest.trim_end_matches('/').trim_end_matches("/api/v4");
        let mut builder = match token {
            Some(token) => GitlabBuilder::new(host, token),
            None => GitlabBuilder::new_unauthenticated(host),
        };
        if insecure {
            builder.insecure();
        }
        let client = builder.build_async().await.map_err(|e| match e {
            gitlab::GitlabError::Api { source } => api_error(source),
            other => ForgeError::Other(format!("cannot reach GitLab at `{api_url}`: {other}")),
        })?;
        Ok(GitLab {
            client,
            project: project.to_string(),
        })
    }
}

/// The error a failed call means.
fn api_error(e: ApiError<RestError>) -> ForgeError {
    use http::StatusCode;
    match e {
        ApiError::GitlabRateLimited { retry_after, .. } => ForgeError::RateLimited {
            forge: Provider::Gitlab.name(),
            retry_after: if retry_after.is_zero() {
                DEFAULT_RATE_LIMIT_WAIT
            } else {
                retry_after
            },
        },
        // The connection check of `GitlabBuilder` (`GET /api/v4/user`) does not read a
        // 429's headers: the wait is unknown, so the default one applies.
        ApiError::GitlabService { status, .. } if status == StatusCode::TOO_MANY_REQUESTS => {
            ForgeError::RateLimited {
                forge: Provider::Gitlab.name(),
                retry_after: DEFAULT_RATE_LIMIT_WAIT,
            }
        }
        ApiError::GitlabService { status, .. } if super::is_transient(status) => {
            ForgeError::Unavailable(format!("GitLab answered {status}"))
        }
        ApiError::Client { source } => {
            ForgeError::Unavailable(format!("GitLab did not answer: {source}"))
        }
        ApiError::GitlabWithStatus { status, msg } => match status {
            StatusCode::NOT_FOUND => ForgeError::NotFound(format!("GitLab: {msg}")),
            StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::NOT_ACCEPTABLE
            | StatusCode::CONFLICT
            | StatusCode::UNPROCESSABLE_ENTITY => ForgeError::Refused(msg),
            status if super::is_transient(status) => {
                ForgeError::Unavailable(format!("GitLab answered {status}: {msg}"))
            }
            _ => ForgeError::Other(format!("GitLab answered {status}: {msg}")),
        },
        other => ForgeError::Other(format!("GitLab: {other}")),
    }
}

fn convert(mr: &Value) -> Result<PullRequest, ForgeError> {
    let number = mr["iid"]
        .as_u64()
        .ok_or_else(|| ForgeError::Other(format!("unexpected merge request from GitLab: {mr}")))?;
    let text = |key: &str| {
        mr[key]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let state = match mr["state"].as_str() {
        Some("merged") => PrState::Merged,
        Some("closed") => PrState::Closed,
        _ => PrState::Open,
    };
    let merged_commit = match state {
        PrState::Merged => text("merge_commit_sha")
            .or_else(|| text("squash_commit_sha"))
            .or_else(|| text("sha")),
        _ => None,
    };
    let closed_by = match state {
        PrState::Closed => mr["closed_by"]["username"].as_str().map(str::to_string),
        _ => None,
    };
    let merge_status = text("detailed_merge_status").or_else(|| text("merge_status"));
    let mergeable = match merge_status.as_deref() {
        Some("mergeable" | "can_be_merged") => Some(true),
        Some("checking" | "unchecked" | "preparing" | "approvals_syncing") | None => None,
        Some(_) => Some(false),
    };
    Ok(PullRequest {
        number,
        url: text("web_url").unwrap_or_default(),
        state,
        merged_commit,
        closed_by,
        mergeable,
        merge_status,
        head: text("source_branch").unwrap_or_default(),
        base: text("target_branch").unwrap_or_default(),
    })
}

fn build_error(e: impl std::fmt::Display) -> ForgeError {
    ForgeError::Other(format!("cannot build a GitLab request: {e}"))
}

#[async_trait]
impl Forge for GitLab {
    fn provider(&self) -> Provider {
        Provider::Gitlab
    }

    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError> {
        let mut builder = CreateMergeRequest::builder();
        builder
            .project(self.project.as_str())
            .source_branch(pr.head.as_str())
            .target_branch(pr.base.as_str())
            .title(pr.title.as_str())
            .description(pr.body.as_str());
        if !pr.labels.is_empty() {
            builder.labels(pr.labels.iter().map(String::as_str));
        }
        let endpoint = builder.build().map_err(build_error)?;
        let mr: Value = endpoint
            .query_async(&self.client)
            .await
            .map_err(api_error)?;
        convert(&mr)
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let endpoint = MergeRequest::builder()
            .project(self.project.as_str())
            .merge_request(number)
            .build()
            .map_err(build_error)?;
        let mr: Value = endpoint
            .query_async(&self.client)
            .await
            .map_err(api_error)?;
        convert(&mr)
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let endpoint = MergeRequests::builder()
            .project(self.project.as_str())
            .state(MergeRequestState::Opened)
            .source_branch(head)
            .target_branch(base)
            .build()
            .map_err(build_error)?;
        let list: Vec<Value> = endpoint
            .query_async(&self.client)
            .await
            .map_err(api_error)?;
        for mr in &list {
            let pr = convert(mr)?;
            if pr.head == head && pr.base == base && pr.state == PrState::Open {
                return Ok(Some(pr));
            }
        }
        Ok(None)
    }

    async fn merge(&self, number: u64, method: MergeMethod) -> Result<String, ForgeError> {
        let squash = match method {
            MergeMethod::Merge => false,
            MergeMethod::Squash => true,
            MergeMethod::Rebase => {
                return Err(ForgeError::Refused(
                    "GitLab merges with `merge` or `squash` (a project set to fast-forward \
                     merges rebases by itself)"
                        .to_string(),
                ));
            }
        };
        let endpoint = MergeMergeRequest::builder()
            .project(self.project.as_str())
            .merge_request(number)
            .squash(squash)
            .build()
            .map_err(build_error)?;
        let mr: Value = endpoint
            .query_async(&self.client)
            .await
            .map_err(api_error)?;
        let pr = convert(&mr)?;
        match (pr.state, pr.merged_commit) {
            (PrState::Merged, Some(sha)) => Ok(sha),
            _ => Err(ForgeError::Refused(format!(
                "GitLab did not merge !{number}: {}",
                mr["merge_error"].as_str().unwrap_or("no reason given")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_landed_is_read_from_the_documented_fields() {
        // The shape of GitLab's documented merge response (abridged).
        let doc = serde_json::json!({"id": 1, "iid": 1, "state": "merged",
            "sha": "8888888888888888888888888888888888888888", "merge_commit_sha": null,
            "squash_commit_sha": null, "source_branch": "test1", "target_branch": "master"});
        let pr = convert(&doc).unwrap();
        assert_eq!(pr.state, PrState::Merged);
        // The doc example has `merge_commit_sha: null`: the head `sha` is what landed.
        assert_eq!(pr.merged_commit.as_deref(), doc["sha"].as_str());
        let squashed = serde_json::json!({"iid": 2, "state": "merged", "sha": "h",
            "merge_commit_sha": null, "squash_commit_sha": "s"});
        assert_eq!(
            convert(&squashed).unwrap().merged_commit.as_deref(),
            Some("s")
        );
        let closed =
            serde_json::json!({"iid": 3, "state": "closed", "closed_by": {"username": "bob"}});
        assert_eq!(convert(&closed).unwrap().closed_by.as_deref(), Some("bob"));
    }
}
