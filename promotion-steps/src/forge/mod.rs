//! Pull requests on a forge (GitHub, GitLab, Gitea/Forgejo, Bitbucket Cloud): the
//! [`Forge`] trait the PR steps use, and one implementation per forge.
//!
//! ```text
//!   git-open-pr / git-wait-for-pr / git-merge-pr
//!     │  connect(provider, repoURL, apiURL, token)
//!     ▼
//!   dyn Forge ──▶ github::GitHub (octocrab)      /repos/{owner}/{repo}/pulls…
//!             ├─▶ gitlab::GitLab (gitlab crate)  /api/v4/projects/{id}/merge_requests…
//!             ├─▶ gitea::Gitea (reqwest, rest)   /api/v1/repos/{owner}/{repo}/pulls…
//!             └─▶ bitbucket::Bitbucket (reqwest) /2.0/repositories/{ws}/{slug}/pullrequests…
//! ```
//!
//! The base URL is configurable (GitHub Enterprise `https://ghe.example.com/api/v3`,
//! self-hosted GitLab or Gitea, plain `http://` for the test doubles). A rate limit
//! (GitHub: 403 or 429 with `x-ratelimit-remaining: 0` or `Retry-After`; the others: 429) is
//! [`ForgeError::RateLimited`] with how long to wait; the steps answer
//! [`crate::StepOutcome::Running`] saying so, and run again after that time.
//! Every request (and GitLab's connection check) gives up after 30 s: an unanswered forge
//! is an error the engine retries, never a wait without end.

pub mod bitbucket;
pub mod commit_status;
pub mod gitea;
pub mod github;
pub mod github_git;
pub mod gitlab;
mod rest;

use std::time::Duration;

use async_trait::async_trait;

/// Which forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// GitHub or GitHub Enterprise.
    Github,
    /// GitLab (gitlab.com or self-hosted).
    Gitlab,
    /// Gitea (self-hosted; its API v1).
    Gitea,
    /// Forgejo (Codeberg or self-hosted; Gitea's API v1).
    Forgejo,
    /// Bitbucket Cloud (bitbucket.org; its API 2.0).
    Bitbucket,
}

impl Provider {
    /// The forge's name in messages: `GitHub`, `GitLab`, `Gitea`, `Forgejo`, `Bitbucket`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Github => "GitHub",
            Provider::Gitlab => "GitLab",
            Provider::Gitea => "Gitea",
            Provider::Forgejo => "Forgejo",
            Provider::Bitbucket => "Bitbucket",
        }
    }

    /// The provider a public host is known to run: `github.com`, `gitlab.com`,
    /// `bitbucket.org`, `codeberg.org` (Forgejo). Any other host needs `provider:`.
    fn of_host(host: &str) -> Option<Provider> {
        match host {
            "github.com" => Some(Provider::Github),
            "gitlab.com" => Some(Provider::Gitlab),
            "bitbucket.org" => Some(Provider::Bitbucket),
            "codeberg.org" => Some(Provider::Forgejo),
            _ => None,
        }
    }
}

/// The state of a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    /// Open (GitHub `open`, GitLab `opened`/`locked`).
    Open,
    /// Merged.
    Merged,
    /// Closed without merging.
    Closed,
}

/// A pull request (GitHub) or merge request (GitLab), as far as Dray cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// The number (GitHub `number`, GitLab `iid`).
    pub number: u64,
    /// The web URL.
    pub url: String,
    /// Open, merged or closed.
    pub state: PrState,
    /// When merged: the commit that landed on the target branch (merge commit, squash
    /// commit, or the fast-forwarded head).
    pub merged_commit: Option<String>,
    /// When closed without merging: who closed it, if the forge says.
    pub closed_by: Option<String>,
    /// Whether the forge says it can be merged now (`None`: not computed yet).
    pub mergeable: Option<bool>,
    /// The forge's finer merge status (GitHub `mergeable_state`, GitLab
    /// `detailed_merge_status`), e.g. `blocked`, `ci_still_running`, `conflict`.
    pub merge_status: Option<String>,
    /// The source branch.
    pub head: String,
    /// The commit at the head of the source branch (GitHub `head.sha`, GitLab `sha`), when
    /// the forge says.
    pub head_sha: Option<String>,
    /// The target branch.
    pub base: String,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest {
    /// The title.
    pub title: String,
    /// The description (Markdown).
    pub body: String,
    /// The source branch.
    pub head: String,
    /// The target branch.
    pub base: String,
    /// Labels to set.
    pub labels: Vec<String>,
}

/// How to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// A merge commit.
    #[default]
    Merge,
    /// One squashed commit.
    Squash,
    /// The commits rebased onto the target (GitHub, Gitea/Forgejo `rebase`, Bitbucket
    /// `rebase_fast_forward`; GitLab rebases by the project's setting).
    Rebase,
}

/// What went wrong talking to a forge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// The forge rate-limited us: try again after `retry_after`.
    #[error("rate limited by {forge}, retry after {}s", retry_after.as_secs())]
    RateLimited {
        /// The forge's name.
        forge: &'static str,
        /// How long to wait.
        retry_after: Duration,
    },
    /// The forge refused the request (a merge that is not allowed, a conflict): the
    /// forge's own message.
    #[error("{0}")]
    Refused(String),
    /// A merge pinned to a head commit was refused because the source branch's head is
    /// another commit now (GitHub and GitLab answer 409 only when `sha` was sent): the
    /// forge's own message.
    #[error("{0}")]
    HeadMoved(String),
    /// The forge merged a head other than the one it was asked to merge (Bitbucket Cloud,
    /// whose merge cannot be pinned to a commit, when a push raced the merge): the pull
    /// request is merged, and what landed was not the reviewed commit.
    #[error("{0}")]
    MergedOtherHead(String),
    /// The pull request, or the repository, does not exist (or the token cannot see it).
    #[error("{0}")]
    NotFound(String),
    /// No answer, or one that says "later" (a 5xx): the forge or the way to it
    /// is down for now. A step asks again after [`UNAVAILABLE_WAIT`].
    #[error("{0}")]
    Unavailable(String),
    /// Anything else (bad credentials, an unexpected answer).
    #[error("{0}")]
    Other(String),
}

/// How long a step waits before asking a forge that did not answer again.
pub(crate) const UNAVAILABLE_WAIT: Duration = Duration::from_secs(15);

/// Whether an HTTP status from a forge says "try again later" rather than "no" (429s are
/// read as rate limits before this is asked).
pub(crate) fn is_transient(status: http::StatusCode) -> bool {
    crate::is_transient_status(status.as_u16())
}

/// A forge: create, read, find and merge pull requests of one repository.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Which forge this is.
    fn provider(&self) -> Provider;
    /// Opens a pull request.
    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError>;
    /// Reads pull request `number`.
    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError>;
    /// The open pull request from `head` into `base`, if there is one.
    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError>;
    /// Merges pull request `number` if its head is still `head_sha` (sent as the merge
    /// request's `sha`, so the forge refuses a head that moved: [`ForgeError::HeadMoved`]);
    /// returns the commit that landed on the target branch.
    async fn merge(
        &self,
        number: u64,
        method: MergeMethod,
        head_sha: &str,
    ) -> Result<String, ForgeError>;
}

/// Where a forge's repository is: the provider, the API base URL, and the repository's
/// path on the forge (`owner/repo`, `group/subgroup/project`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeTarget {
    /// The provider.
    pub provider: Provider,
    /// The API base URL (`https://api.github.com`, `https://gitlab.com`).
    pub api_url: String,
    /// The repository's path on the forge, without `.git`.
    pub repo_path: String,
}

/// Works out the provider, API URL and repository path from a step's config: `provider`
/// given or inferred from the host (`github.com`, `gitlab.com`, `bitbucket.org`,
/// `codeberg.org`), `apiURL` given or the public default for the provider
/// (`https://<host>/api/v3` for GitHub Enterprise, `https://<host>` for self-hosted GitLab
/// and Gitea/Forgejo, `https://api.bitbucket.org/2.0` for Bitbucket Cloud). Bitbucket on
/// another host is Bitbucket Server / Data Center, which Dray does not speak yet.
pub fn target(
    repo_url: &str,
    provider: Option<Provider>,
    api_url: Option<&str>,
) -> Result<ForgeTarget, String> {
    let (scheme, host, path) = split_repo_url(repo_url)
        .ok_or_else(|| format!("cannot read a host and a repository path from `{repo_url}`"))?;
    let bare_host = host.rsplit('@').next().unwrap_or(host);
    let bare_host_no_port = bare_host.split(':').next().unwrap_or(bare_host);
    let provider = match provider.or_else(|| Provider::of_host(bare_host_no_port)) {
        Some(p) => p,
        None => {
            return Err(format!(
                "cannot tell the forge of `{bare_host}`; hint: set `provider:` to `github`, \
                 `gitlab`, `gitea`, `forgejo` or `bitbucket`"
            ));
        }
    };
    let api_url = match api_url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => match (provider, bare_host_no_port) {
            (Provider::Github, "github.com") => "https://api.github.com".to_string(),
            (Provider::Github, _) => format!("{scheme}://{bare_host}/api/v3"),
            (Provider::Gitlab | Provider::Gitea | Provider::Forgejo, _) => {
                format!("{scheme}://{bare_host}")
            }
            (Provider::Bitbucket, "bitbucket.org") => bitbucket::CLOUD_API.to_string(),
            (Provider::Bitbucket, _) => {
                return Err(format!(
                    "`{bare_host}` is not bitbucket.org: Dray speaks Bitbucket Cloud only, not \
                     Bitbucket Server / Data Center yet; hint: set `apiURL` if this is a \
                     Bitbucket Cloud API behind another address"
                ));
            }
        },
    };
    let repo_path = path.trim_matches('/').trim_end_matches(".git").to_string();
    if repo_path.is_empty() {
        return Err(format!("`{repo_url}` names no repository"));
    }
    Ok(ForgeTarget {
        provider,
        api_url,
        repo_path,
    })
}

/// `(scheme, host, path)` of `https://host/path`, `ssh://git@host/path` or `git@host:path`.
fn split_repo_url(url: &str) -> Option<(&str, &str, &str)> {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (host, path) = rest.split_once('/')?;
        let scheme = if scheme == "http" { "http" } else { "https" };
        Some((scheme, host, path))
    } else {
        let (host, path) = url.split_once(':')?;
        Some(("https", host, path))
    }
}

/// Connects to the forge of `target` with `token`; the Gitea/Forgejo and Bitbucket
/// clients send their requests through `http`.
pub async fn connect(
    target: &ForgeTarget,
    token: Option<String>,
    http: &reqwest::Client,
) -> Result<Box<dyn Forge>, ForgeError> {
    let limit = REQUEST_TIMEOUT;
    let provider = target.provider;
    let forge: Box<dyn Forge> = within(limit, provider, "the connection check", async {
        Ok::<Box<dyn Forge>, _>(match provider {
            Provider::Github => Box::new(github::GitHub::new(
                &target.api_url,
                &target.repo_path,
                token,
            )?),
            Provider::Gitlab => {
                Box::new(gitlab::GitLab::new(&target.api_url, &target.repo_path, token).await?)
            }
            Provider::Gitea | Provider::Forgejo => Box::new(gitea::Gitea::new(
                http.clone(),
                provider,
                &target.api_url,
                &target.repo_path,
                token,
            )?),
            Provider::Bitbucket => Box::new(bitbucket::Bitbucket::new(
                http.clone(),
                &target.api_url,
                &target.repo_path,
                token,
            )?),
        })
    })
    .await?;
    Ok(Box::new(Timed {
        inner: forge,
        limit,
    }))
}

/// How long one request to a forge may take before it counts as unanswered: an error the
/// engine retries, never a wait without end (neither client has a default limit).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// `call`, or an error naming the forge and what went unanswered after `limit`.
async fn within<T>(
    limit: Duration,
    provider: Provider,
    what: &str,
    call: impl std::future::Future<Output = Result<T, ForgeError>>,
) -> Result<T, ForgeError> {
    tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
        Err(ForgeError::Unavailable(format!(
            "{} did not answer {what} within {}s; check that its API (`apiURL`) is reachable",
            provider.name(),
            limit.as_secs_f32()
        )))
    })
}

/// A [`Forge`] whose every request gives up after `limit` (see [`within`]).
struct Timed {
    inner: Box<dyn Forge>,
    limit: Duration,
}

#[async_trait]
impl Forge for Timed {
    fn provider(&self) -> Provider {
        self.inner.provider()
    }

    async fn create(&self, pr: &NewPullRequest) -> Result<PullRequest, ForgeError> {
        let what = "the request to open a pull request";
        within(self.limit, self.provider(), what, self.inner.create(pr)).await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let what = format!("the request for pull request #{number}");
        within(self.limit, self.provider(), &what, self.inner.get(number)).await
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let what = format!("the search for an open pull request from `{head}` into `{base}`");
        within(
            self.limit,
            self.provider(),
            &what,
            self.inner.find_open(head, base),
        )
        .await
    }

    async fn merge(
        &self,
        number: u64,
        method: MergeMethod,
        head_sha: &str,
    ) -> Result<String, ForgeError> {
        let what = format!("the request to merge pull request #{number}");
        within(
            self.limit,
            self.provider(),
            &what,
            self.inner.merge(number, method, head_sha),
        )
        .await
    }
}

/// How long to wait on a rate limit whose answer says nothing usable: GitHub's advice for
/// secondary rate limits ("wait at least one minute").
pub(crate) const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);

/// How long a rate-limited answer asks us to wait, from `Retry-After` (seconds) or
/// `x-ratelimit-reset` / `ratelimit-reset` (epoch seconds); `None` when neither is there.
pub(crate) fn retry_after_from_headers(headers: &http::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    if let Some(secs) = get("retry-after") {
        return Some(Duration::from_secs(secs.max(0) as u64));
    }
    let reset = get("x-ratelimit-reset").or_else(|| get("ratelimit-reset"))?;
    let now = jiff::Timestamp::now().as_second();
    Some(Duration::from_secs((reset - now).max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_forge_that_never_answers_is_an_error_naming_the_request() {
        // Accepts connections (the kernel's backlog) and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}", silent.local_addr().unwrap());
        let forge = Timed {
            inner: Box::new(github::GitHub::new(&api, "acme/config", None).unwrap()),
            limit: Duration::from_millis(200),
        };
        let Err(ForgeError::Unavailable(message)) = forge.get(7).await else {
            panic!("a silent forge must be an error");
        };
        assert_eq!(
            message,
            "GitHub did not answer the request for pull request #7 within 0.2s; check that its \
             API (`apiURL`) is reachable"
        );
    }

    #[test]
    fn the_provider_is_inferred_from_the_host_or_required() {
        let t = target("https://github.com/acme/config.git", None, None).unwrap();
        assert_eq!(t.provider, Provider::Github);
        assert_eq!(t.api_url, "https://api.github.com");
        assert_eq!(t.repo_path, "acme/config");
        let t = target("git@gitlab.com:group/sub/config.git", None, None).unwrap();
        assert_eq!(t.provider, Provider::Gitlab);
        assert_eq!(t.api_url, "https://gitlab.com");
        assert_eq!(t.repo_path, "group/sub/config");
        let err = target("https://git.example.com/a/b.git", None, None).unwrap_err();
        assert!(err.contains("set `provider:` to `github`"), "{err}");
        let t = target("git@bitbucket.org:acme/config.git", None, None).unwrap();
        assert_eq!(t.provider, Provider::Bitbucket);
        assert_eq!(t.api_url, "https://api.bitbucket.org/2.0");
        assert_eq!(t.repo_path, "acme/config");
        let t = target("https://codeberg.org/acme/config.git", None, None).unwrap();
        assert_eq!(t.provider, Provider::Forgejo);
        assert_eq!(t.api_url, "https://codeberg.org");
        let t = target(
            "https://git.example.com/a/b.git",
            Some(Provider::Gitea),
            None,
        )
        .unwrap();
        assert_eq!(t.api_url, "https://git.example.com");
        let err = target(
            "https://bitbucket.example.com/scm/a/b.git",
            Some(Provider::Bitbucket),
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("not Bitbucket Server / Data Center yet"),
            "{err}"
        );
        let t = target(
            "https://ghe.example.com/a/b.git",
            Some(Provider::Github),
            None,
        )
        .unwrap();
        assert_eq!(t.api_url, "https://ghe.example.com/api/v3");
        let t = target(
            "http://127.0.0.1:9/git/a/b.git",
            Some(Provider::Gitlab),
            Some("http://127.0.0.1:8/"),
        )
        .unwrap();
        assert_eq!(t.api_url, "http://127.0.0.1:8");
        assert_eq!(t.repo_path, "git/a/b");
    }

    #[test]
    fn retry_after_is_read_from_either_header() {
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after_from_headers(&h), None);
        let reset = jiff::Timestamp::now().as_second() + 30;
        h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
        let wait = retry_after_from_headers(&h).unwrap();
        assert!(wait <= Duration::from_secs(30) && wait >= Duration::from_secs(28));
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after_from_headers(&h), Some(Duration::from_secs(7)));
    }
}
