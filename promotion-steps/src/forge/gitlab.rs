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
//! A merge sends the head commit it was asked to merge as `sha`: GitLab then refuses
//! (409 `SHA does not match HEAD of source branch`) if the source branch moved, which is
//! [`ForgeError::HeadMoved`]. While GitLab is still checking mergeability
//! (`checking`, `unchecked`, `preparing`, `cannot_be_merged_recheck`) `mergeable` is
//! unknown (`None`), never "no".
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

impl GitLab {
    /// Posts a commit status on `sha` (`POST /projects/:id/statuses/:sha`).
    pub(super) async fn post_status(
        &self,
        sha: &str,
        status: &super::commit_status::CommitStatus,
        description: &str,
    ) -> Result<(), ForgeError> {
        use super::commit_status::StatusState;
        use gitlab::api::projects::repository::commits::{CommitStatusState, CreateCommitStatus};
        let state = match status.state {
            StatusState::Pending => CommitStatusState::Pending,
            StatusState::Success => CommitStatusState::Success,
            StatusState::Failure => CommitStatusState::Failed,
        };
        let endpoint = CreateCommitStatus::builder()
            .project(self.project.as_str())
            .commit(sha)
            .state(state)
            .name(status.context.as_str())
            .target_url(status.target_url.as_str())
            .description(description)
            .build()
            .map_err(build_error)?;
        let _: Value = endpoint
            .query_async(&self.client)
            .await
            .map_err(api_error)?;
        Ok(())
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
        Some(
            "checking"
            | "unchecked"
            | "preparing"
            | "approvals_syncing"
            | "cannot_be_merged_recheck",
        )
        | None => None,
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
        head_sha: text("sha"),
        base: text("target_branch").unwrap_or_default(),
    })
}

/// `PUT /projects/:id/merge_requests/:iid/merge` with `squash` and the head commit the
/// merge request must still be at (`sha`).
fn merge_endpoint<'a>(
    project: &'a str,
    number: u64,
    squash: bool,
    head_sha: &'a str,
) -> Result<MergeMergeRequest<'a>, ForgeError> {
    MergeMergeRequest::builder()
        .project(project)
        .merge_request(number)
        .squash(squash)
        .sha(head_sha)
        .build()
        .map_err(build_error)
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

    async fn merge(
        &self,
        number: u64,
        method: MergeMethod,
        head_sha: &str,
    ) -> Result<String, ForgeError> {
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
        let endpoint = merge_endpoint(&self.project, number, squash, head_sha)?;
        let mr: Value = endpoint
            .query_async(&self.client)
            .await
            .map_err(|e| match e {
                // Only a merge that sent `sha` gets a 409: the head is another commit now.
                ApiError::GitlabWithStatus { status, msg }
                    if status == http::StatusCode::CONFLICT =>
                {
                    ForgeError::HeadMoved(msg)
                }
                e => api_error(e),
            })?;
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
    fn a_merge_is_pinned_to_the_head_commit_it_was_given() {
        use gitlab::api::Endpoint;
        let endpoint = merge_endpoint("acme/config", 7, false, "0123abcd").unwrap();
        assert_eq!(
            endpoint.endpoint(),
            "projects/acme%2Fconfig/merge_requests/7/merge"
        );
        let (kind, body) = endpoint.body().unwrap().expect("a merge has a body");
        assert_eq!(kind, "application/x-www-form-urlencoded");
        let body = String::from_utf8(body).unwrap();
        assert!(body.split('&').any(|p| p == "sha=0123abcd"), "{body}");
        assert!(body.split('&').any(|p| p == "squash=false"), "{body}");
    }

    #[test]
    fn checking_is_not_yet_known_never_unmergeable() {
        for status in ["checking", "unchecked", "preparing"] {
            let mr = serde_json::json!({"iid": 1, "state": "opened", "sha": "h",
                "merge_status": "checking", "detailed_merge_status": status});
            let pr = convert(&mr).unwrap();
            assert_eq!(pr.mergeable, None, "{status}");
            assert_eq!(pr.head_sha.as_deref(), Some("h"));
        }
        let mr = serde_json::json!({"iid": 1, "state": "opened", "merge_status": "cannot_be_merged_recheck"});
        assert_eq!(convert(&mr).unwrap().mergeable, None);
    }

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
