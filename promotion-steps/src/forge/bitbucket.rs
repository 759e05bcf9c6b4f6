//! Bitbucket Cloud pull requests over its REST API 2.0
//! (`https://api.bitbucket.org/2.0/repositories/{workspace}/{repo_slug}/pullrequests…`).
//! Bitbucket Server / Data Center (`/rest/api/1.0/…`) is another API, not spoken here.
//!
//! - auth: a token is sent as `Authorization: Bearer` (a repository, project or workspace
//!   access token); a token of the form `username:app-password` (or `email:api-token`) as
//!   HTTP Basic;
//! - open: `POST …/pullrequests` with `source.branch.name` and `destination.branch.name`
//!   (Bitbucket has no labels: `labels` are refused, naming the fix);
//! - read: `GET …/pullrequests/{id}`; adopt: `GET …/pullrequests?state=OPEN&q=…` (BBQL on
//!   the branch names, also checked here), following `next`;
//! - merge: `POST …/pullrequests/{id}/merge` with `merge_strategy` `merge_commit`, `squash`
//!   or `rebase_fast_forward`. A long merge is answered `202` with a `Location` to poll
//!   (`…/merge/task-status/{task}`: `PENDING`, then `SUCCESS` with `merge_result`); it is
//!   polled [`TASK_POLLS`] times, then reported as still running. A `400` (merge checks,
//!   conflicts) and a `409` (a ref moved while merging) are [`ForgeError::Refused`] with
//!   Bitbucket's `error.message`; `555` (the merge timed out) is "later".
//! - declined (`DECLINED`, or `SUPERSEDED`) is closed without merging, by `closed_by`.
//!
//! Two things Bitbucket Cloud's API does not do, and what Dray does instead:
//! - its merge cannot be pinned to a head commit. Dray reads the pull request right before
//!   the merge and refuses ([`ForgeError::HeadMoved`]) when its source is not the checked
//!   commit; a push in the moment between that read and the merge cannot be stopped, but
//!   the merged pull request names the source that landed, and a head other than the
//!   checked one is [`ForgeError::MergedOtherHead`]: the step fails, saying so (see
//!   docs/threat-model.md).
//! - it does not say whether a pull request can be merged (BCLOUD-22014): an open pull
//!   request counts as mergeable, and Bitbucket's refusal of the merge is the answer.
//!
//! Commit hashes in pull request objects are abbreviated (12 characters): the source head
//! and the merge commit are resolved to full hashes with `GET …/commit/{hash}`.
//! A rate limit is a `429`, which carries no `Retry-After` (Bitbucket counts requests per
//! rolling hour): it waits [`super::DEFAULT_RATE_LIMIT_WAIT`] unless one is sent.

use std::time::Duration;

use async_trait::async_trait;
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::rest::{Answer, Auth, Refusal, Rest, encode};
use super::{Forge, ForgeError, MergeMethod, NewPullRequest, PrState, Provider, PullRequest};

/// Bitbucket Cloud's API.
pub const CLOUD_API: &str = "https://api.bitbucket.org/2.0";

/// How many times a merge answered `202` is polled before it counts as still running.
pub const TASK_POLLS: u32 = 3;
/// The pause between two polls of a merge task.
const TASK_POLL_PAUSE: Duration = Duration::from_millis(500);
/// How many pages a search for an open pull request reads at most.
const MAX_PAGES: usize = 20;

/// A repository on Bitbucket Cloud.
#[derive(Debug)]
pub struct Bitbucket {
    rest: Rest,
    repo: String,
}

#[derive(Debug, Deserialize)]
struct Pull {
    id: u64,
    state: String,
    source: Endpoint,
    destination: Endpoint,
    #[serde(default)]
    merge_commit: Option<Commit>,
    #[serde(default)]
    closed_by: Option<Account>,
    #[serde(default)]
    links: Links,
    #[serde(default)]
    draft: bool,
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    branch: BranchName,
    #[serde(default)]
    commit: Option<Commit>,
}

#[derive(Debug, Deserialize)]
struct BranchName {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Commit {
    hash: String,
}

#[derive(Debug, Deserialize)]
struct Account {
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    nickname: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Links {
    #[serde(default)]
    html: Option<Href>,
}

#[derive(Debug, Deserialize)]
struct Href {
    href: String,
}

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    values: Vec<Pull>,
    #[serde(default)]
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Task {
    task_status: String,
    #[serde(default)]
    merge_result: Option<Pull>,
}

/// Bitbucket's `error.message` in a JSON error answer.
fn message_of(text: &str) -> Option<String> {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .filter(|m| !m.is_empty())
}

/// The error a refused merge means: Bitbucket refuses with `400` (merge checks, conflicts)
/// and `409` (a ref changed while merging), both in its own words.
fn merge_refusal(r: Refusal) -> ForgeError {
    match r.status {
        StatusCode::BAD_REQUEST | StatusCode::CONFLICT => ForgeError::Refused(r.message),
        _ => r.error,
    }
}

impl Bitbucket {
    /// A client for `workspace/repo_slug` at `api_url` (`https://api.bitbucket.org/2.0`),
    /// authenticated with `token` (Bearer, or Basic when it is `user:password`).
    pub fn new(
        http: reqwest::Client,
        api_url: &str,
        repo: &str,
        token: Option<String>,
    ) -> Result<Self, ForgeError> {
        let valid = repo
            .split_once('/')
            .is_some_and(|(w, r)| !w.is_empty() && !r.is_empty() && !r.contains('/'));
        if !valid {
            return Err(ForgeError::Other(format!(
                "`{repo}` is not a Bitbucket repository path (`workspace/repo_slug`)"
            )));
        }
        let auth = match token {
            None => Auth::None,
            Some(token) => match token.split_once(':') {
                Some((user, password)) => Auth::Basic {
                    user: user.to_string(),
                    password: password.to_string(),
                },
                None => Auth::Token {
                    scheme: "Bearer",
                    token,
                },
            },
        };
        let base = format!("{}/repositories/{repo}", api_url.trim_end_matches('/'));
        Ok(Bitbucket {
            rest: Rest::new(http, &base, auth, Provider::Bitbucket),
            repo: repo.to_string(),
        })
    }

    async fn send_to(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Refusal> {
        self.rest.send(method, url, body, message_of).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        self.send_to(method, &self.rest.url(path), body)
            .await
            .map_err(|r| r.error)
    }

    async fn pull(&self, number: u64) -> Result<Pull, ForgeError> {
        let answer = self
            .send(Method::GET, &format!("/pullrequests/{number}"), None)
            .await?;
        answer.json("pull request", Provider::Bitbucket)
    }

    /// The full hash of the abbreviated `hash` (`GET …/commit/{hash}`).
    async fn full_hash(&self, hash: &str) -> Result<String, ForgeError> {
        if hash.len() >= 40 {
            return Ok(hash.to_string());
        }
        let answer = self
            .send(Method::GET, &format!("/commit/{}", encode(hash)), None)
            .await?;
        let commit: Commit = answer.json("commit", Provider::Bitbucket)?;
        Ok(commit.hash)
    }

    async fn convert(&self, pr: Pull) -> Result<PullRequest, ForgeError> {
        let state = match pr.state.as_str() {
            "MERGED" => PrState::Merged,
            "DECLINED" | "SUPERSEDED" => PrState::Closed,
            _ => PrState::Open,
        };
        let head_sha = match (&state, &pr.source.commit) {
            (PrState::Open, Some(c)) => Some(self.full_hash(&c.hash).await?),
            (_, c) => c.as_ref().map(|c| c.hash.clone()),
        };
        let merged_commit = match (&state, &pr.merge_commit) {
            (PrState::Merged, Some(c)) => Some(self.full_hash(&c.hash).await?),
            _ => None,
        };
        let merge_status = match (pr.state.as_str(), pr.draft) {
            (_, true) | ("DRAFT", _) => Some("draft".to_string()),
            ("QUEUED", _) => Some("queued".to_string()),
            _ => None,
        };
        let closed_by = match state {
            PrState::Closed => pr.closed_by.and_then(|a| a.display_name.or(a.nickname)),
            _ => None,
        };
        Ok(PullRequest {
            number: pr.id,
            url: pr.links.html.map(|h| h.href).unwrap_or_default(),
            state,
            merged_commit,
            closed_by,
            // Bitbucket does not say: the merge's answer does.
            mergeable: Some(merge_status.is_none()),
            merge_status,
            head: pr.source.branch.name,
            head_sha,
            base: pr.destination.branch.name,
        })
    }

    /// Waits for the merge task at `location` to end, polling it [`TASK_POLLS`] times.
    async fn merge_task(&self, number: u64, location: &str) -> Result<Pull, ForgeError> {
        for poll in 0..TASK_POLLS {
            if poll > 0 {
                tokio::time::sleep(TASK_POLL_PAUSE).await;
            }
            let answer = self
                .send_to(Method::GET, location, None)
                .await
                .map_err(merge_refusal)?;
            let task: Task = answer.json("merge task status", Provider::Bitbucket)?;
            match (task.task_status.as_str(), task.merge_result) {
                ("SUCCESS", Some(pr)) => return Ok(pr),
                ("SUCCESS", None) => return self.pull(number).await,
                _ => {}
            }
        }
        Err(ForgeError::Unavailable(format!(
            "Bitbucket is still merging pull request #{number} (task `{location}` is \
             PENDING)"
        )))
    }
}

/// The body of `POST …/pullrequests/{id}/merge`.
fn merge_body(method: MergeMethod) -> Value {
    let strategy = match method {
        MergeMethod::Merge => "merge_commit",
        MergeMethod::Squash => "squash",
        MergeMethod::Rebase => "rebase_fast_forward",
    };
    json!({"type": "pullrequest_merge_parameters", "merge_strategy": strategy,
        "close_source_branch": false})
}

#[async_trait]
impl Forge for Bitbucket {
    fn provider(&self) -> Provider {
        Provider::Bitbucket
    }

    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError> {
        if !pr.labels.is_empty() {
            return Err(ForgeError::Refused(format!(
                "Bitbucket pull requests have no labels (asked for {}); hint: leave \
                 `labels` out for `{}`",
                pr.labels.join(", "),
                self.repo
            )));
        }
        let body = json!({"type": "pullrequest", "title": pr.title, "description": pr.body,
            "source": {"branch": {"name": pr.head}},
            "destination": {"branch": {"name": pr.base}},
            "close_source_branch": false});
        let answer = self
            .send_to(Method::POST, &self.rest.url("/pullrequests"), Some(&body))
            .await
            .map_err(|r| match r.status {
                // Bitbucket answers 400 to a create it refuses (e.g. no such branch).
                StatusCode::BAD_REQUEST => ForgeError::Refused(r.message),
                _ => r.error,
            })?;
        let created: Pull = answer.json("pull request", Provider::Bitbucket)?;
        self.convert(created).await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let pr = self.pull(number).await?;
        self.convert(pr).await
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let q = format!("source.branch.name=\"{head}\" AND destination.branch.name=\"{base}\"");
        let mut url = self
            .rest
            .url(&format!("/pullrequests?state=OPEN&q={}", encode(&q)));
        for _ in 0..MAX_PAGES {
            let answer = self
                .send_to(Method::GET, &url, None)
                .await
                .map_err(|r| r.error)?;
            let page: Page = answer.json("pull requests", Provider::Bitbucket)?;
            if let Some(pr) = page.values.into_iter().find(|p| {
                p.state == "OPEN"
                    && p.source.branch.name == head
                    && p.destination.branch.name == base
            }) {
                return Ok(Some(self.get(pr.id).await?));
            }
            match page.next {
                Some(next) => url = next,
                None => break,
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
        // Bitbucket cannot pin the merge to a commit: look right before asking.
        let now = self.get(number).await?;
        if now.state != PrState::Open {
            return Err(ForgeError::Refused(format!(
                "pull request #{number} is not open on Bitbucket"
            )));
        }
        if let Some(head) = now.head_sha.as_deref().filter(|h| *h != head_sha) {
            return Err(ForgeError::HeadMoved(format!(
                "the source branch `{}` is at {head}, not {head_sha}",
                now.head
            )));
        }
        let body = merge_body(method);
        let answer = self
            .send_to(
                Method::POST,
                &self.rest.url(&format!("/pullrequests/{number}/merge")),
                Some(&body),
            )
            .await
            .map_err(merge_refusal)?;
        let merged = if answer.status == StatusCode::ACCEPTED {
            let location = answer
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    ForgeError::Other("Bitbucket answered 202 to a merge without a Location".into())
                })?
                .to_string();
            self.merge_task(number, &location).await?
        } else {
            answer.json("merged pull request", Provider::Bitbucket)?
        };
        let pr = self.convert(merged).await?;
        // The merged pull request names the source head that landed (abbreviated).
        if let Some(landed) = pr.head_sha.as_deref().filter(|h| !head_sha.starts_with(*h)) {
            return Err(ForgeError::MergedOtherHead(format!(
                "Bitbucket merged pull request #{number} at source {landed}, not at the \
                 checked head {head_sha}: a push raced the merge, and Bitbucket Cloud's merge \
                 cannot be pinned to a commit; hint: review what landed on `{}` and revert \
                 it if it was not reviewed",
                pr.base
            )));
        }
        match (pr.state, pr.merged_commit) {
            (PrState::Merged, Some(sha)) => Ok(sha),
            _ => Err(ForgeError::Refused(format!(
                "Bitbucket answered the merge of #{number} but does not show it merged"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_strategies_are_bitbuckets_names() {
        assert_eq!(
            merge_body(MergeMethod::Merge)["merge_strategy"],
            "merge_commit"
        );
        assert_eq!(merge_body(MergeMethod::Squash)["merge_strategy"], "squash");
        assert_eq!(
            merge_body(MergeMethod::Rebase)["merge_strategy"],
            "rebase_fast_forward"
        );
    }

    #[test]
    fn errors_are_read_from_bitbuckets_error_object() {
        let body = r#"{"type": "error", "error": {"message": "You can't merge until you resolve all merge checks."}}"#;
        assert_eq!(
            message_of(body).as_deref(),
            Some("You can't merge until you resolve all merge checks.")
        );
        assert_eq!(message_of("<html>502</html>"), None);
    }

    #[tokio::test]
    async fn declined_is_closed_by_whoever_declined_it() {
        let bb = Bitbucket::new(reqwest::Client::new(), CLOUD_API, "acme/config", None).unwrap();
        let pr: Pull = serde_json::from_value(json!({"type": "pullrequest", "id": 4,
            "state": "DECLINED", "source": {"branch": {"name": "a"}, "commit": {"hash": "0123456789ab"}},
            "destination": {"branch": {"name": "main"}}, "merge_commit": null,
            "closed_by": {"display_name": "Bob Jones", "nickname": "bob"},
            "links": {"html": {"href": "https://bitbucket.org/acme/config/pull-requests/4"}}}))
        .unwrap();
        let pr = bb.convert(pr).await.unwrap();
        assert_eq!(pr.state, PrState::Closed);
        assert_eq!(pr.closed_by.as_deref(), Some("Bob Jones"));
        assert_eq!(pr.url, "https://bitbucket.org/acme/config/pull-requests/4");
    }
}
