//! Git discovery for Warehouses: which config commits a [`GitSubscription`] selects, and
//! the shared bare-mirror cache ([`MirrorCache`]) that promotions also check out from.
//!
//! Owns the path from a subscription to [`DiscoveredCommit`]s: an `ls-remote`
//! short-circuit (an unchanged branch head or tag set costs one round trip and no fetch,
//! see [`GitDiscoveryState`]), an incremental fetch into the mirror, then the strategy:
//!
//! - `NewestFromBranch` (default): search first-parent history from the head of `branch`
//!   (or the remote's default branch), diffing each commit against its first parent, and
//!   keep commits that touch `includePaths` and not only `excludePaths`, at any depth
//!   ([`search`]: `git log` over the mirror's commit-graph and changed-path Bloom
//!   filters; `since` bounds it). A README-only commit on top of an included one
//!   therefore still selects the older commit, and no new Freight is minted. Later
//!   refreshes read only the commits above the head seen last time
//!   ([`GitDiscoveryState::found`] keeps the previous answer).
//! - `SemVer`, `Lexical`, `NewestTag`: order the tags that pass `allowTags`/`ignoreTags`
//!   (and `semverConstraint`; pre-releases only when the range names one) and keep the
//!   tagged commits that pass the path filters.
//!
//! Both keep only commits that pass `expressionFilter` and `since` ([`filter`]), so
//! `discoveryLimit` counts matching commits only.
//!
//! Dray's own commits (a `Dray-Promotion:` trailer) never count and `stage/*` branches
//! are never followed. Does not mint Freight (the Warehouse controller does that from
//! [`GitDiscovery::commits`]) and does not push or make worktrees.
//!
//! Files: [`mirror`] (the cache, `ls-remote`, fetch, credentials), `cli` (running the
//! `git` CLI), `graph` (the mirrors' commit-graphs), `search` (the branch search), `select` (pure selection rules), `history`
//! (tags, diffs and logs read with gix), [`error`].
//!
//! ```no_run
//! # async fn example(sub: &dray::api::GitSubscription) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dray::discovery::git::{GitDiscoverer, MirrorCache};
//!
//! let discoverer = GitDiscoverer::new(Arc::new(MirrorCache::new("/var/lib/dray")));
//! let first = discoverer.discover(sub, None, None).await?;
//! // Next time, pass the state back: an unmoved branch head is answered without a fetch.
//! let again = discoverer.discover(sub, None, Some(&first.state)).await?;
//! assert!(again.unchanged || !again.commits.is_empty());
//! # Ok(()) }
//! ```

mod cli;
pub mod compare;
pub mod error;
pub mod filter;
mod graph;
mod history;
#[cfg(test)]
mod kargo_parity;
pub mod mirror;
mod search;
pub(crate) mod select;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_scale;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::api::{CommitSelectionStrategy, FreightCommit, GitSubscription};
use crate::expr::exprlang::ExprLanguage;

pub use error::{GitDiscoveryError, redact_url};
pub use mirror::{FETCH_TIMEOUT, GitCredentials, MirrorCache, RemoteRefs};
pub use select::{PROMOTION_TRAILER, is_dray_commit};

use filter::CommitFilter;
pub(crate) use filter::filter_hint;
use history::CommitInfo;
use mirror::blocking;
use select::{PathFilter, SemverConstraint, TagFilter, parse_version, sort_semver};

/// The largest `discoveryLimit` honoured.
pub const MAX_DISCOVERY_LIMIT: u32 = 100;

/// Branches under this prefix hold Dray's promotions and are never followed.
pub const STAGE_BRANCH_PREFIX: &str = "stage/";

/// One commit discovery selected.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredCommit {
    /// The repository URL, as the subscription wrote it.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The full commit id.
    pub id: String,
    /// The branch it was found on (`NewestFromBranch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The tag it was found under (tag strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The subject line of its message.
    pub message: String,
    /// Its author, `Name <email>`.
    pub author: String,
    /// Its committer time.
    pub committed_at: jiff::Timestamp,
}

impl From<DiscoveredCommit> for FreightCommit {
    fn from(commit: DiscoveredCommit) -> Self {
        FreightCommit {
            repo_url: commit.repo_url,
            id: commit.id,
            branch: commit.branch,
            tag: commit.tag,
            message: commit.message,
            author: commit.author,
        }
    }
}

/// What a discovery saw, to pass back next time. Equal states mean nothing to do.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GitDiscoveryState {
    /// A hash of the subscription: a changed subscription never short-circuits.
    pub spec: String,
    /// The branch followed (`NewestFromBranch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The branch's head commit (`NewestFromBranch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// A hash of every `tag commit` pair the remote has (tag strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// The commits selected at `head`, newest first (`NewestFromBranch`): when the head
    /// moves on, only the commits above it are searched and these complete the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub found: Vec<String>,
}

impl GitDiscoveryState {
    /// Whether the remote shows the same thing for the same subscription (ignoring
    /// [`found`](Self::found)).
    pub fn same_remote(&self, other: &GitDiscoveryState) -> bool {
        self.spec == other.spec
            && self.branch == other.branch
            && self.head == other.head
            && self.tags == other.tags
    }
}

/// How much work a discovery did (for metrics and tests; no timings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GitDiscoveryStats {
    /// Whether the mirror was fetched (false when `ls-remote` showed nothing new).
    pub fetched: bool,
    /// How many refs the remote advertised.
    pub refs: usize,
    /// How many commits the branch search read (after pathspec narrowing).
    pub commits_scanned: usize,
    /// Whether the branch search was narrowed by pathspecs (git used the Bloom filters).
    pub narrowed: bool,
    /// Whether only the commits above the previously seen head were searched.
    pub incremental: bool,
    /// How many tags passed the tag filters and were looked at.
    pub tags_considered: usize,
}

/// The result of one discovery.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GitDiscovery {
    /// Selected commits, newest first, at most `discoveryLimit`. Empty when `unchanged`.
    pub commits: Vec<DiscoveredCommit>,
    /// The remote has not moved since `previous`: the last result still holds.
    pub unchanged: bool,
    /// Pass this back as `previous` next time.
    pub state: GitDiscoveryState,
    /// How much work this took.
    pub stats: GitDiscoveryStats,
}

/// Runs git discovery for subscriptions, sharing one [`MirrorCache`].
#[derive(Clone, Debug)]
pub struct GitDiscoverer {
    mirrors: Arc<MirrorCache>,
}

impl GitDiscoverer {
    /// A discoverer fetching into `mirrors`.
    pub fn new(mirrors: Arc<MirrorCache>) -> Self {
        Self { mirrors }
    }

    /// The mirror cache it fetches into.
    pub fn mirrors(&self) -> &Arc<MirrorCache> {
        &self.mirrors
    }

    /// Select the commits `sub` asks for. With `previous` (the state returned last time),
    /// an unmoved branch head or tag set returns `unchanged` without fetching. Its
    /// `expressionFilter` is CEL, as in Dray's own documents.
    pub async fn discover(
        &self,
        sub: &GitSubscription,
        creds: Option<&GitCredentials>,
        previous: Option<&GitDiscoveryState>,
    ) -> Result<GitDiscovery, GitDiscoveryError> {
        self.discover_in(sub, creds, previous, ExprLanguage::Cel)
            .await
    }

    /// [`Self::discover`] for a subscription of a Warehouse whose expressions are in
    /// `language` (expr-lang for Kargo's documents).
    pub async fn discover_in(
        &self,
        sub: &GitSubscription,
        creds: Option<&GitCredentials>,
        previous: Option<&GitDiscoveryState>,
        language: ExprLanguage,
    ) -> Result<GitDiscovery, GitDiscoveryError> {
        // Check the subscription before any network call.
        let rules = Rules::new(sub, language)?;
        let url = sub.repo_url.trim();
        let remote = self.mirrors.list_remote(url, creds).await?;
        let mut stats = GitDiscoveryStats {
            refs: remote.refs.len(),
            ..Default::default()
        };
        let state = rules.state(&remote, url)?;
        if let Some(previous) = previous.filter(|p| p.same_remote(&state)) {
            return Ok(GitDiscovery {
                commits: Vec::new(),
                unchanged: true,
                state: previous.clone(),
                stats,
            });
        }
        let mirror = self.mirrors.fetch_to(url, creds, &remote).await?;
        stats.fetched = true;

        if let (Some(branch), Some(head)) = (state.branch.clone(), state.head.clone()) {
            let commits = rules
                .select_branch(&mirror, url, &branch, &head, previous, &mut stats)
                .await?;
            let state = GitDiscoveryState {
                found: commits.iter().map(|c| c.id.clone()).collect(),
                ..state
            };
            return Ok(GitDiscovery {
                commits,
                unchanged: false,
                state,
                stats,
            });
        }
        let task_url = url.to_owned();
        let task_remote = remote;
        let (commits, tags) = blocking(url, move || {
            let repo = mirror::open_or_init(&mirror)?;
            rules.select_tags(&repo, &task_url, &task_remote)
        })
        .await?;
        stats.tags_considered = tags;
        Ok(GitDiscovery {
            commits,
            unchanged: false,
            state,
            stats,
        })
    }
}

/// A subscription, validated and compiled.
struct Rules {
    sub: GitSubscription,
    paths: PathFilter,
    tags: TagFilter,
    commits: CommitFilter,
    semver: Option<SemverConstraint>,
    limit: usize,
}

impl Rules {
    fn new(sub: &GitSubscription, language: ExprLanguage) -> Result<Self, GitDiscoveryError> {
        let semver = match sub.commit_selection_strategy {
            CommitSelectionStrategy::SemVer => {
                Some(SemverConstraint::new(sub.semver_constraint.as_deref())?)
            }
            _ => None,
        };
        if let Some(branch) = sub.branch.as_deref().map(normalise_branch)
            && branch.starts_with(STAGE_BRANCH_PREFIX)
        {
            return Err(GitDiscoveryError::StageBranch {
                url: redact_url(&sub.repo_url),
                branch,
            });
        }
        Ok(Self {
            paths: PathFilter::new(&sub.include_paths, &sub.exclude_paths)?,
            tags: TagFilter::new(&sub.allow_tags, &sub.ignore_tags)?,
            commits: CommitFilter::new(sub, language)?,
            semver,
            limit: sub.discovery_limit.clamp(1, MAX_DISCOVERY_LIMIT) as usize,
            sub: sub.clone(),
        })
    }

    /// What the remote shows for this subscription, as a comparable state.
    fn state(
        &self,
        remote: &RemoteRefs,
        url: &str,
    ) -> Result<GitDiscoveryState, GitDiscoveryError> {
        let spec = short_hash_of(&self.sub);
        if self.sub.commit_selection_strategy != CommitSelectionStrategy::NewestFromBranch {
            let mut lines = String::new();
            for (tag, id) in remote.tags() {
                lines.push_str(&format!("{tag} {id}\n"));
            }
            return Ok(GitDiscoveryState {
                spec,
                tags: Some(short_hash(lines.as_bytes())),
                ..Default::default()
            });
        }
        let branch = self.branch(remote, url)?;
        let head = remote.refs.get(&format!("refs/heads/{branch}")).cloned();
        Ok(GitDiscoveryState {
            spec,
            branch: Some(branch),
            head,
            tags: None,
            found: Vec::new(),
        })
    }

    /// The branch to follow: `branch`, else the remote's default; it must exist.
    fn branch(&self, remote: &RemoteRefs, url: &str) -> Result<String, GitDiscoveryError> {
        let available = || -> Vec<String> {
            remote
                .branches()
                .filter(|b| !b.starts_with(STAGE_BRANCH_PREFIX))
                .map(str::to_owned)
                .collect()
        };
        let branch = match self.sub.branch.as_deref().map(normalise_branch) {
            Some(branch) if !branch.is_empty() => branch,
            _ => match remote
                .head_target
                .as_deref()
                .and_then(|t| t.strip_prefix("refs/heads/"))
            {
                Some(default) => default.to_owned(),
                None => {
                    return Err(GitDiscoveryError::NoDefaultBranch {
                        url: redact_url(url),
                        available: available(),
                    });
                }
            },
        };
        if branch.starts_with(STAGE_BRANCH_PREFIX) {
            return Err(GitDiscoveryError::StageBranch {
                url: redact_url(url),
                branch,
            });
        }
        if !remote.refs.contains_key(&format!("refs/heads/{branch}")) {
            return Err(GitDiscoveryError::BranchNotFound {
                url: redact_url(url),
                branch,
                available: available(),
            });
        }
        Ok(branch)
    }

    /// `NewestFromBranch` in the fetched mirror: the newest `discoveryLimit` commits of
    /// `branch` (at `head`) that count. With `previous` (same subscription, an older head
    /// on the same first-parent line) only the commits above that head are searched.
    async fn select_branch(
        &self,
        mirror: &std::path::Path,
        url: &str,
        branch: &str,
        head: &str,
        previous: Option<&GitDiscoveryState>,
        stats: &mut GitDiscoveryStats,
    ) -> Result<Vec<DiscoveredCommit>, GitDiscoveryError> {
        let history_error = |reason: String| GitDiscoveryError::History {
            url: redact_url(url),
            reason,
        };
        let since = self.commits.since();
        let mut accept =
            |commit: &CommitInfo| self.commits.accepts(url, commit, Some(branch), None);
        let earlier = previous
            .filter(|p| p.spec == short_hash_of(&self.sub) && p.branch.as_deref() == Some(branch))
            .filter(|p| !p.found.is_empty())
            .and_then(|p| Some((p.head.clone()?, p.found.clone())));
        let mut found = None;
        if let Some((last, kept)) = earlier
            && search::first_parent_line_reaches(mirror, head, &last)
                .await
                .map_err(history_error)?
        {
            let above = search::search(
                &search::Search {
                    mirror,
                    tip: head,
                    after: Some(&last),
                    paths: &self.paths,
                    since,
                    limit: self.limit,
                },
                &mut accept,
            )
            .await?
            .map_err(history_error)?;
            stats.commits_scanned = above.scanned;
            stats.narrowed = above.narrowed;
            let mut commits = above.commits;
            let wanted: Vec<String> = kept
                .into_iter()
                .take(self.limit.saturating_sub(commits.len()))
                .collect();
            let path = mirror.to_owned();
            let earlier = blocking(url, move || {
                let repo = mirror::open_or_init(&path)?;
                history::read_commits(&repo, &wanted).map_err(|reason| GitDiscoveryError::History {
                    url: String::new(),
                    reason,
                })
            })
            .await
            .map_err(|e| match e {
                GitDiscoveryError::History { reason, .. } => history_error(reason),
                other => other,
            })?;
            // A commit of the previous answer gone from the mirror: search afresh.
            if let Some(earlier) = earlier {
                commits.extend(earlier);
                stats.incremental = true;
                found = Some(commits);
            }
        }
        let commits = match found {
            Some(commits) => commits,
            None => {
                let walk = search::search(
                    &search::Search {
                        mirror,
                        tip: head,
                        after: None,
                        paths: &self.paths,
                        since,
                        limit: self.limit,
                    },
                    &mut accept,
                )
                .await?
                .map_err(history_error)?;
                stats.commits_scanned = walk.scanned;
                stats.narrowed = walk.narrowed;
                walk.commits
            }
        };
        if commits.is_empty() {
            return Err(GitDiscoveryError::NoCommitInPaths {
                url: redact_url(url),
                branch: branch.to_owned(),
                scanned: stats.commits_scanned,
                since: since.map(|s| s.to_string()),
            });
        }
        Ok(commits
            .into_iter()
            .map(|c| self.discovered(c, Some(branch.to_owned()), None))
            .collect())
    }

    /// The tag strategies in the fetched mirror: `(commits, tags considered)`.
    fn select_tags(
        &self,
        repo: &gix::Repository,
        url: &str,
        remote: &RemoteRefs,
    ) -> Result<(Vec<DiscoveredCommit>, usize), GitDiscoveryError> {
        let history_error = |reason: String| GitDiscoveryError::History {
            url: redact_url(url),
            reason,
        };
        let all: Vec<&str> = remote.tags().map(|(tag, _)| tag).collect();
        let allowed: Vec<&str> = all
            .iter()
            .copied()
            .filter(|t| self.tags.allows(t))
            .collect();
        let mut resolved = BTreeMap::new();
        let mut resolve = |tag: &str| -> Result<Option<(CommitInfo, i64)>, GitDiscoveryError> {
            if let Some(hit) = resolved.get(tag) {
                return Ok(Option::clone(hit));
            }
            let hit = history::resolve_tag(repo, tag).map_err(history_error)?;
            resolved.insert(tag.to_owned(), hit.clone());
            Ok(hit)
        };
        let ordered: Vec<String> = match self.sub.commit_selection_strategy {
            CommitSelectionStrategy::SemVer => {
                let constraint = self.semver.as_ref();
                let mut versions: Vec<_> = allowed
                    .iter()
                    .filter_map(|t| {
                        Some((t.to_string(), parse_version(t, self.sub.strict_semvers)?))
                    })
                    .filter(|(_, v)| constraint.is_none_or(|c| c.allows(v)))
                    .collect();
                sort_semver(&mut versions);
                versions.into_iter().map(|(t, _)| t).collect()
            }
            CommitSelectionStrategy::NewestTag => {
                let mut timed = Vec::new();
                for tag in &allowed {
                    if let Some((_, time)) = resolve(tag)? {
                        timed.push((time, tag.to_string()));
                    }
                }
                timed.sort_by(|a, b| b.cmp(a));
                timed.into_iter().map(|(_, t)| t).collect()
            }
            _ => {
                let mut names: Vec<String> = allowed.iter().map(|t| t.to_string()).collect();
                names.sort_by(|a, b| b.cmp(a));
                names
            }
        };

        let mut commits = Vec::new();
        for tag in &ordered {
            let Some((info, _)) = resolve(tag)? else {
                continue;
            };
            if history::is_relevant(repo, &info, &self.paths).map_err(history_error)?
                && self.commits.accepts(url, &info, None, Some(tag))?
            {
                commits.push(self.discovered(info, None, Some(tag.clone())));
                if commits.len() == self.limit {
                    break;
                }
            }
        }
        if commits.is_empty() {
            return Err(GitDiscoveryError::NoTagMatched {
                url: redact_url(url),
                filter: self.tag_filter_description(),
                total: all.len(),
                newest: self.newest_tag(&all),
            });
        }
        Ok((commits, allowed.len()))
    }

    fn discovered(
        &self,
        c: CommitInfo,
        branch: Option<String>,
        tag: Option<String>,
    ) -> DiscoveredCommit {
        DiscoveredCommit {
            repo_url: self.sub.repo_url.clone(),
            message: c.subject(),
            id: c.id,
            branch,
            tag,
            author: c.author,
            committed_at: c.committed_at,
        }
    }

    /// What filtered the tags, for [`GitDiscoveryError::NoTagMatched`].
    fn tag_filter_description(&self) -> String {
        let mut parts = Vec::new();
        if let Some(semver) = &self.semver {
            parts.push(semver.describe());
        }
        if !self.tags.is_empty() {
            parts.push("allowTags/ignoreTags".to_owned());
        }
        if self.paths.is_active() {
            parts.push("includePaths/excludePaths".to_owned());
        }
        if self.sub.expression_filter.is_some() || self.sub.since.is_some() {
            parts.push("expressionFilter/since".to_owned());
        }
        if parts.is_empty() {
            "any tag".to_owned()
        } else {
            parts.join(" with ")
        }
    }

    /// The newest of all tags by this strategy's order, ignoring every filter.
    fn newest_tag(&self, all: &[&str]) -> Option<String> {
        // Prefer the newest release over a newer pre-release: that is what users compare.
        let by_version = all
            .iter()
            .filter_map(|t| Some((parse_version(t, self.sub.strict_semvers)?, *t)))
            .max_by(|(a, _), (b, _)| (!a.is_prerelease(), a).cmp(&(!b.is_prerelease(), b)))
            .map(|(_, t)| t.to_owned());
        match self.sub.commit_selection_strategy {
            CommitSelectionStrategy::SemVer if by_version.is_some() => by_version,
            _ => all.iter().max().map(|t| t.to_string()),
        }
    }
}

/// `refs/heads/main` or ` main ` → `main`.
fn normalise_branch(branch: &str) -> String {
    branch.trim().trim_start_matches("refs/heads/").to_owned()
}

/// The hash of a subscription that [`GitDiscoveryState::spec`] holds.
fn short_hash_of(sub: &GitSubscription) -> String {
    short_hash(serde_json::to_string(sub).unwrap_or_default().as_bytes())
}

fn short_hash(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One commit of a branch's history, as the audit trail shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedCommit {
    /// The full commit id.
    pub id: String,
    /// The whole message, trailers included.
    pub message: String,
    /// `Name <email>` of the author.
    pub author: String,
    /// The committer time.
    pub committed_at: jiff::Timestamp,
}

impl MirrorCache {
    /// The first-parent history of `branch` in `url`, newest first, at most `bound`
    /// commits, after bringing the mirror up to date. `Ok(None)` when the branch does not
    /// exist.
    pub async fn branch_log(
        &self,
        url: &str,
        branch: &str,
        creds: Option<&GitCredentials>,
        bound: usize,
    ) -> Result<Option<Vec<LoggedCommit>>, GitDiscoveryError> {
        let path = self.fetch(url, creds).await?;
        let (task_url, branch) = (url.to_owned(), branch.to_owned());
        mirror::blocking(url, move || {
            let repo = gix::open(&path).map_err(|e| GitDiscoveryError::Mirror {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let reference = format!("refs/heads/{branch}");
            let Ok(mut found) = repo.find_reference(reference.as_str()) else {
                return Ok(None);
            };
            let head = found.peel_to_id().map_err(|e| GitDiscoveryError::History {
                url: redact_url(&task_url),
                reason: e.to_string(),
            })?;
            let log =
                history::first_parent_log(&repo, &head.to_string(), bound).map_err(|reason| {
                    GitDiscoveryError::History {
                        url: redact_url(&task_url),
                        reason,
                    }
                })?;
            Ok(Some(
                log.into_iter()
                    .map(|c| LoggedCommit {
                        id: c.id,
                        message: c.message,
                        author: c.author,
                        committed_at: c.committed_at,
                    })
                    .collect(),
            ))
        })
        .await
    }
}
