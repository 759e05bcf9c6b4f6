//! Gitea and Forgejo pull requests over their REST API v1 (`/api/v1`), which Forgejo keeps
//! compatible with Gitea's; `Authorization: token <token>`.
//!
//! - open: `POST /repos/{owner}/{repo}/pulls` (`head`, `base`, `title`, `body`, `labels` as
//!   label ids: names are looked up in `GET …/labels` first; a label that does not exist is
//!   refused, naming it — Gitea does not create labels on the fly as GitHub does);
//! - read: `GET …/pulls/{index}`; adopt: `GET …/pulls?state=open&base_branch=…`, filtered by
//!   head and base;
//! - merge: `POST …/pulls/{index}/merge` with `Do` (`merge`, `squash`, `rebase`) and
//!   `head_commit_id`, the head commit that was checked. Gitea answers `200` with no body;
//!   the merge commit is `merge_commit_sha` of the pull request read again. A head that moved
//!   is `409 head out of date` ([`ForgeError::HeadMoved`]); a pull request Gitea will not
//!   merge now is a `405` (`Please try again later`, `Work in progress PRs cannot be
//!   merged`, `User not allowed to merge PR`), conflicts a `409` — both are
//!   [`ForgeError::Refused`] with Gitea's message.
//! - who closed an unmerged pull request is the `user` of the last `close` event of the
//!   issue's timeline (`GET …/issues/{index}/timeline`): the pull request does not say.
//!
//! Gitea's `mergeable` is one boolean, `false` while it is still checking for conflicts,
//! on a conflict, and on a work-in-progress title alike: an open pull request with
//! `mergeable: false` has the merge status `not_mergeable` (Dray's name: Gitea has no finer
//! one) and `git-merge-pr` waits on it until its timeout, as it waits on GitHub's `blocked`.
//! A draft has the status `draft`.
//!
//! Gitea has no API rate limit of its own; a proxy in front of it (Codeberg's) may answer
//! `429`, read as [`ForgeError::RateLimited`] with its `Retry-After`.

use async_trait::async_trait;
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::rest::{Auth, Refusal, Rest, encode};
use super::{Forge, ForgeError, MergeMethod, NewPullRequest, PrState, Provider, PullRequest};

/// How many pages of 50 a search for an open pull request, or for labels, reads at most.
const MAX_PAGES: u32 = 20;
/// Gitea's page size for the searches.
const PAGE: usize = 50;

/// A repository on Gitea or Forgejo.
#[derive(Debug)]
pub struct Gitea {
    rest: Rest,
    provider: Provider,
    repo: String,
}

#[derive(Debug, Deserialize)]
struct Pull {
    number: u64,
    #[serde(default)]
    html_url: String,
    state: String,
    #[serde(default)]
    merged: bool,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    mergeable: bool,
    #[serde(default)]
    draft: bool,
    head: Branch,
    base: Branch,
}

#[derive(Debug, Deserialize)]
struct Branch {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default)]
    sha: String,
}

#[derive(Debug, Deserialize)]
struct Label {
    id: u64,
    name: String,
}

#[derive(Debug, Deserialize)]
struct TimelineEvent {
    #[serde(rename = "type")]
    kind: String,
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct User {
    login: String,
}

/// Gitea's `message` in a JSON error answer.
fn message_of(text: &str) -> Option<String> {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .filter(|m| !m.is_empty())
}

impl Gitea {
    /// A client for `owner/repo` on the Gitea or Forgejo at `api_url` (its address, with
    /// or without `/api/v1`), authenticated with `token` when given.
    pub fn new(
        http: reqwest::Client,
        provider: Provider,
        api_url: &str,
        repo: &str,
        token: Option<String>,
    ) -> Result<Self, ForgeError> {
        let name = provider.name();
        let Some((owner, name_part)) = repo
            .split_once('/')
            .filter(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/'))
        else {
            return Err(ForgeError::Other(format!(
                "`{repo}` is not a {name} repository path (`owner/repo`); hint: put the \
                 {name} instance's address with its sub-path in `apiURL`"
            )));
        };
        let root = api_url.trim_end_matches('/').trim_end_matches("/api/v1");
        let base = format!("{root}/api/v1/repos/{owner}/{name_part}");
        let auth = match token {
            Some(token) => Auth::Token {
                scheme: "token",
                token,
            },
            None => Auth::None,
        };
        Ok(Gitea {
            rest: Rest::new(http, &base, auth, provider),
            provider,
            repo: repo.to_string(),
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, ForgeError> {
        self.send_refusable(method, path, body)
            .await
            .map_err(|r| r.error)
    }

    async fn send_refusable(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, Refusal> {
        let url = self.rest.url(path);
        self.rest
            .send(method, &url, body, message_of)
            .await
            .map(|a| a.body)
    }

    fn pull(&self, text: &str) -> Result<Pull, ForgeError> {
        serde_json::from_str(text).map_err(|e| {
            ForgeError::Other(format!(
                "unexpected pull request from {}: {e}",
                self.provider.name()
            ))
        })
    }

    /// Who closed issue `number` last, from its timeline.
    async fn closed_by(&self, number: u64) -> Result<Option<String>, ForgeError> {
        let text = self
            .send(Method::GET, &format!("/issues/{number}/timeline"), None)
            .await?;
        let events: Vec<TimelineEvent> = serde_json::from_str(&text).unwrap_or_default();
        Ok(events
            .into_iter()
            .rev()
            .find(|e| e.kind == "close")
            .and_then(|e| e.user.map(|u| u.login)))
    }

    async fn convert(&self, pr: Pull) -> Result<PullRequest, ForgeError> {
        let state = match (pr.merged, pr.state.as_str()) {
            (true, _) => PrState::Merged,
            (false, "closed") => PrState::Closed,
            _ => PrState::Open,
        };
        let closed_by = match state {
            PrState::Closed => self.closed_by(pr.number).await?,
            _ => None,
        };
        let (mergeable, merge_status) = match state {
            PrState::Open if pr.draft => (Some(false), Some("draft".to_string())),
            PrState::Open if !pr.mergeable => (Some(false), Some(NOT_MERGEABLE.to_string())),
            _ => (Some(pr.mergeable), None),
        };
        Ok(PullRequest {
            number: pr.number,
            url: pr.html_url,
            state,
            merged_commit: pr.merge_commit_sha.filter(|s| pr.merged && !s.is_empty()),
            closed_by,
            mergeable,
            merge_status,
            head: pr.head.name,
            head_sha: Some(pr.head.sha).filter(|s| !s.is_empty()),
            base: pr.base.name,
        })
    }

    /// The ids of the repository's labels called `names`; a missing one is refused.
    async fn label_ids(&self, names: &[String]) -> Result<Vec<u64>, ForgeError> {
        let mut known = Vec::new();
        for page in 1..=MAX_PAGES {
            let text = self
                .send(
                    Method::GET,
                    &format!("/labels?limit={PAGE}&page={page}"),
                    None,
                )
                .await?;
            let labels: Vec<Label> = serde_json::from_str(&text).map_err(|e| {
                ForgeError::Other(format!(
                    "unexpected labels from {}: {e}",
                    self.provider.name()
                ))
            })?;
            let last = labels.len() < PAGE;
            known.extend(labels);
            if last {
                break;
            }
        }
        names
            .iter()
            .map(|name| {
                known
                    .iter()
                    .find(|l| &l.name == name)
                    .map(|l| l.id)
                    .ok_or_else(|| {
                        ForgeError::Refused(format!(
                            "{} repository `{}` has no label `{name}`; hint: create it (Issues → \
                         Labels) or leave it out of `labels`",
                            self.provider.name(),
                            self.repo
                        ))
                    })
            })
            .collect()
    }
}

/// The merge status of an open pull request Gitea says is not mergeable (`mergeable:
/// false`: checking, conflicting or work in progress; Gitea does not say which).
pub const NOT_MERGEABLE: &str = "not_mergeable";

/// The body of `POST …/pulls/{index}/merge`: the style, and the head commit the pull
/// request must still be at (`head_commit_id`).
fn merge_body(method: MergeMethod, head_sha: &str) -> Value {
    let style = match method {
        MergeMethod::Merge => "merge",
        MergeMethod::Squash => "squash",
        MergeMethod::Rebase => "rebase",
    };
    json!({"Do": style, "head_commit_id": head_sha})
}

#[async_trait]
impl Forge for Gitea {
    fn provider(&self) -> Provider {
        self.provider
    }

    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError> {
        let labels = if pr.labels.is_empty() {
            Vec::new()
        } else {
            self.label_ids(&pr.labels).await?
        };
        let body = json!({"head": pr.head, "base": pr.base, "title": pr.title,
            "body": pr.body, "labels": labels});
        let text = self.send(Method::POST, "/pulls", Some(&body)).await?;
        let created = self.pull(&text)?;
        self.convert(created).await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let text = self
            .send(Method::GET, &format!("/pulls/{number}"), None)
            .await?;
        let pr = self.pull(&text)?;
        self.convert(pr).await
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        for page in 1..=MAX_PAGES {
            let path = format!(
                "/pulls?state=open&base_branch={}&limit={PAGE}&page={page}",
                encode(base)
            );
            let text = self.send(Method::GET, &path, None).await?;
            let list: Vec<Pull> = serde_json::from_str(&text).map_err(|e| {
                ForgeError::Other(format!(
                    "unexpected pull requests from {}: {e}",
                    self.provider.name()
                ))
            })?;
            let last = list.len() < PAGE;
            if let Some(pr) = list
                .into_iter()
                .find(|p| p.head.name == head && p.base.name == base && p.state == "open")
            {
                return Ok(Some(self.convert(pr).await?));
            }
            if last {
                break;
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
        let body = merge_body(method, head_sha);
        self.send_refusable(Method::POST, &format!("/pulls/{number}/merge"), Some(&body))
            .await
            .map_err(|r| match r.status {
                // Gitea's `ErrSHADoesNotMatch`: the head is another commit now.
                StatusCode::CONFLICT if r.message == "head out of date" => {
                    ForgeError::HeadMoved(r.message)
                }
                _ => r.error,
            })?;
        let pr = self.get(number).await?;
        match (pr.state, pr.merged_commit) {
            (PrState::Merged, Some(sha)) => Ok(sha),
            _ => Err(ForgeError::Refused(format!(
                "{} answered the merge of #{number} but does not show it merged",
                self.provider.name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_pull(state: &str, merged: bool, mergeable: bool) -> Pull {
        // The shape of Gitea's `PullRequest` (abridged, from its swagger definitions).
        serde_json::from_value(json!({"id": 7, "number": 3, "state": state, "merged": merged,
            "mergeable": mergeable, "merge_commit_sha": if merged { json!("abc") } else { Value::Null },
            "html_url": "https://gitea.example.com/acme/config/pulls/3",
            "head": {"label": "dray/promotion/p", "ref": "dray/promotion/p", "sha": "h3ad"},
            "base": {"label": "main", "ref": "main", "sha": "ba5e"}}))
        .unwrap()
    }

    #[tokio::test]
    async fn unmergeable_is_a_status_to_wait_on_and_merged_names_its_commit() {
        let gitea = Gitea::new(
            reqwest::Client::new(),
            Provider::Forgejo,
            "http://127.0.0.1:9/api/v1/",
            "acme/config",
            None,
        )
        .unwrap();
        let open = gitea.convert(doc_pull("open", false, false)).await.unwrap();
        assert_eq!(open.state, PrState::Open);
        assert_eq!(open.merge_status.as_deref(), Some(NOT_MERGEABLE));
        assert_eq!(open.head_sha.as_deref(), Some("h3ad"));
        let merged = gitea
            .convert(doc_pull("closed", true, false))
            .await
            .unwrap();
        assert_eq!(merged.state, PrState::Merged);
        assert_eq!(merged.merged_commit.as_deref(), Some("abc"));
        assert_eq!(
            gitea.rest.url("/pulls"),
            "http://127.0.0.1:9/api/v1/repos/acme/config/pulls"
        );
    }

    #[test]
    fn a_merge_is_pinned_to_the_checked_head() {
        assert_eq!(
            merge_body(MergeMethod::Squash, "0123"),
            json!({"Do": "squash", "head_commit_id": "0123"})
        );
    }

    #[test]
    fn a_repository_path_is_owner_and_name() {
        let err = Gitea::new(
            reqwest::Client::new(),
            Provider::Gitea,
            "https://g",
            "a/b/c",
            None,
        )
        .unwrap_err();
        assert!(matches!(err, ForgeError::Other(m) if m.contains("`owner/repo`")));
    }
}
