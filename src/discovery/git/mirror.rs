//! The bare-mirror cache: one bare repository per remote URL under
//! `<data_dir>/git-mirrors/`, created on first use and kept warm with incremental fetches,
//! so that discovery and promotions cost milliseconds of git, not a fresh clone.
//!
//! Owns listing remote refs (`ls-remote`), fetching `+refs/heads/*:refs/heads/*` and
//! `+refs/tags/*:refs/tags/*` into the mirror (pruning refs the remote deleted), the
//! per-URL lock that keeps two callers from fetching the same mirror at once, and
//! answering the server's authentication challenge with [`GitCredentials`]. Does not
//! choose commits (see [`super::GitDiscoverer`]) and does not push or make worktrees.
//!
//! Listing is `gix` (blocking, so it runs in `spawn_blocking`); its `file://` transport
//! runs `git upload-pack`. Fetching is the `git` CLI ([`super::cli`]), so that:
//! - the first fetch is a partial clone (`--filter=blob:none`) when the server allows it
//!   (blobs are fetched on demand by the promotions' worktrees, with their credentials);
//!   a server that refuses filters gets a full fetch, recorded in the log;
//! - every fetch has an overall deadline ([`FETCH_TIMEOUT`] by default): past it git and
//!   its remote helper are killed and the lock released, with [`GitDiscoveryError::FetchTimedOut`];
//! - after each fetch a split commit-graph with changed-path Bloom filters is written
//!   in the background (incrementally after the first, see `super::graph`), which the
//!   branch search ([`super::search`]) reads;
//! - a promotion's checkout ([`MirrorCache::fetch_for`]) fetches only when a ref it checks
//!   out moved on the remote or a commit it needs is missing.
//!
//! One fetch serves many askers: [`MirrorCache::fetch_to`] takes the ref listing the asker
//! just saw, and an asker that waited (bounded) behind a running fetch finds the mirror
//! already there and fetches nothing; [`MirrorCache::fetch_count`] counts real fetches.
//!
//! Credentials go to gix's credential hook or git's askpass environment only: they are
//! never put in argv, in a URL, in the mirror's config or in a message. Mirrors are read
//! with repository-local configuration only, so a user's credential helpers or
//! `url.insteadOf` rules on the host never change what Dray fetches (HTTP proxy
//! variables are still honoured). Like the git CLI, basic auth is sent over plain
//! `http://` too (in-cluster and loopback servers), with a warning for other hosts.
//!
//! A worktree made from a mirror must not check out a branch (use a detached `HEAD`):
//! a fetch refuses to move a branch that some worktree has checked out.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gix::bstr::ByteSlice as _;
use gix::credentials::helper::Action;
use gix::credentials::protocol::Outcome;
use gix::protocol::handshake::Ref;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use sha2::{Digest as _, Sha256};

use super::cli;
use super::error::{GitDiscoveryError, chain, redact_url};
use super::graph::{BackgroundGraphs, GRAPH_TIMEOUT};

/// How long listing a remote's refs may take.
pub const LS_REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long one fetch into a mirror may take by default; past it git is killed and the
/// mirror unlocked ([`MirrorCache::with_fetch_timeout`] changes it).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a small local git command (a config write) may take.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The refspecs every mirror fetches: all branches and all tags, forced.
const REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// The name of the mirror's one configured remote (the promisor of a partial mirror).
const REMOTE: &str = "origin";

/// A user name and a password or token for one repository. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct GitCredentials {
    /// The user name (for token auth, any non-empty name the forge accepts).
    pub username: String,
    /// The password or access token.
    pub password: String,
}

impl GitCredentials {
    /// Credentials from a user name and a password or token.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }
}

impl fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// What a remote advertises: every ref with the commit it points to, and its `HEAD`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteRefs {
    /// Full ref name (`refs/heads/main`, `refs/tags/v1.0.0`, `HEAD`) to the full id of
    /// the object it points to, peeled: an annotated tag maps to the commit it tags.
    pub refs: BTreeMap<String, String>,
    /// The ref the remote's `HEAD` points to (its default branch), e.g. `refs/heads/main`.
    pub head_target: Option<String>,
}

impl RemoteRefs {
    /// Branch names (without `refs/heads/`), sorted.
    pub fn branches(&self) -> impl Iterator<Item = &str> {
        self.refs
            .keys()
            .filter_map(|name| name.strip_prefix("refs/heads/"))
    }

    /// `(tag name without refs/tags/, commit id)` pairs, sorted by name.
    pub fn tags(&self) -> impl Iterator<Item = (&str, &str)> {
        self.refs
            .iter()
            .filter_map(|(name, id)| Some((name.strip_prefix("refs/tags/")?, id.as_str())))
    }
}

/// One bare mirror per repository URL, under `<data_dir>/git-mirrors/`.
#[derive(Debug)]
pub struct MirrorCache {
    root: PathBuf,
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    fetch_timeout: Duration,
    fetches: AtomicU64,
    graphs: BackgroundGraphs,
}

impl MirrorCache {
    /// A cache rooted at `<data_dir>/git-mirrors/` (created lazily).
    pub fn new(data_dir: impl AsRef<Path>) -> Self {
        Self {
            root: data_dir.as_ref().join("git-mirrors"),
            locks: Mutex::default(),
            fetch_timeout: FETCH_TIMEOUT,
            fetches: AtomicU64::new(0),
            graphs: BackgroundGraphs::default(),
        }
    }

    /// Stop each fetch after `timeout` instead of [`FETCH_TIMEOUT`] (at least 1 ms).
    pub fn with_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How many fetches (git processes transferring from a remote) this cache has run.
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Waits (at most `timeout`) until the commit-graph of `url`'s mirror is no longer
    /// being written in the background (see `graph`); whether it is done. For benchmarks
    /// and tests: answers never depend on the graph.
    pub async fn graph_settled(&self, url: &str, timeout: Duration) -> bool {
        self.graphs.settled(&self.mirror_path(url), timeout).await
    }

    /// The longest an asker waits for another's fetch (or a promotion's worktree) of the
    /// same mirror: that fetch's own bounds, and a margin.
    fn lock_wait(&self) -> Duration {
        self.fetch_timeout + GRAPH_TIMEOUT + 2 * LOCAL_TIMEOUT
    }

    /// The directory holding every mirror.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The mirror directory for `url`: its sanitized host and path plus a short hash of
    /// the URL (user info removed), e.g. `git.example.com_team_config.git-1a2b3c4d5e6f`.
    pub fn mirror_path(&self, url: &str) -> PathBuf {
        self.root.join(mirror_dir_name(url))
    }

    /// Hold the mirror of `url` exclusively (fetches take this lock; a promotion making a
    /// worktree may take it too). Never hold it across unrelated work.
    pub async fn lock(&self, url: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let path = self.mirror_path(url);
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(locks.entry(path).or_default())
        };
        lock.lock_owned().await
    }

    /// `git ls-remote`: every ref of `url` with the (peeled) commit id it points to.
    pub async fn ls_remote(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
    ) -> Result<BTreeMap<String, String>, GitDiscoveryError> {
        Ok(self.list_remote(url, creds).await?.refs)
    }

    /// Like [`ls_remote`](Self::ls_remote), also telling which branch the remote's
    /// `HEAD` points to. Creates the mirror directory if needed, fetches nothing.
    pub async fn list_remote(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
    ) -> Result<RemoteRefs, GitDiscoveryError> {
        let mirror = self.mirror_path(url);
        let (task_url, creds) = (url.to_owned(), creds.cloned());
        let listing = blocking(url, move || {
            list_remote_blocking(&mirror, &task_url, creds.as_ref())
        });
        // Nothing waits forever: gix's reqwest transport connects within 20s and each read
        // of the answer within reqwest's 30s; the listing as a whole is bounded here too.
        tokio::time::timeout(LS_REMOTE_TIMEOUT, listing)
            .await
            .unwrap_or_else(|_| {
                Err(GitDiscoveryError::Unreachable {
                    url: redact_url(url),
                    reason: format!("no answer within {}s", LS_REMOTE_TIMEOUT.as_secs()),
                })
            })
    }

    /// Bring the mirror of `url` up to date (creating it on first use) and return its
    /// directory. Incremental: only objects the mirror lacks are transferred. Lists the
    /// remote first; see [`fetch_to`](Self::fetch_to).
    pub async fn fetch(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
    ) -> Result<PathBuf, GitDiscoveryError> {
        let remote = self.list_remote(url, creds).await?;
        self.fetch_to(url, creds, &remote).await
    }

    /// Brings the mirror of `url` up to date for a checkout that needs only `refs` (full
    /// names: `refs/heads/stage/dev`, `refs/tags/v1`) as the remote has them now and
    /// `commits` (full ids) present, and returns its directory. One listing of the remote;
    /// when the mirror already holds all of that, nothing is fetched (other refs may lag
    /// until the next fetch, which brings them); otherwise the whole mirror is fetched as
    /// [`Self::fetch`] does.
    pub async fn fetch_for(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
        refs: &[String],
        commits: &[String],
    ) -> Result<PathBuf, GitDiscoveryError> {
        let remote = self.list_remote(url, creds).await?;
        let mirror = self.mirror_path(url);
        let (path, listed) = (mirror.clone(), remote.clone());
        let (refs, commits) = (refs.to_vec(), commits.to_vec());
        let holds = blocking(url, move || {
            Ok(mirror_holds(&path, &listed, &refs, &commits))
        })
        .await?;
        if holds {
            tracing::debug!(url = %redact_url(url), "mirror already holds what the checkout needs; no fetch");
            return Ok(mirror);
        }
        self.fetch_to(url, creds, &remote).await
    }

    /// Bring the mirror of `url` up to `remote` (a listing the caller just took) and return
    /// its directory. When the mirror already holds every branch and tag as listed (say,
    /// another Warehouse's fetch ran while this one waited for the lock), nothing is
    /// fetched. Waits for the lock at most [`Self::lock_wait`].
    pub async fn fetch_to(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
        remote: &RemoteRefs,
    ) -> Result<PathBuf, GitDiscoveryError> {
        if creds.is_some() && is_plain_http_to_remote_host(url) {
            tracing::warn!(url = %redact_url(url), "sending credentials over plain http");
        }
        let wait = self.lock_wait();
        let busy = || GitDiscoveryError::MirrorBusy {
            url: redact_url(url),
            waited: wait,
        };
        let _guard = tokio::time::timeout(wait, self.lock(url))
            .await
            .map_err(|_| busy())?;
        let mirror = self.mirror_path(url);
        // Promotions add worktrees to this mirror; a fetch must not read their half-made
        // entries (see `dray_steps::RepoCache`).
        let _worktrees =
            tokio::time::timeout(wait, dray_steps::MirrorLocks::global().lock(&mirror))
                .await
                .map_err(|_| busy())?;
        let (path, wanted) = (mirror.clone(), remote.clone());
        let state = blocking(url, move || mirror_state(&path, &wanted)).await?;
        if state.up_to_date {
            tracing::debug!(url = %redact_url(url), "mirror already holds the listed refs; no fetch");
            return Ok(mirror);
        }
        self.fetches.fetch_add(1, Ordering::Relaxed);
        self.fetch_cli(&mirror, url, creds, &state).await?;
        // Off the lock and off the caller's path (a promotion waits for this fetch).
        self.graphs.start(&mirror, url);
        if let Some(target) = remote.head_target.clone() {
            let (path, task_url) = (mirror.clone(), url.to_owned());
            blocking(url, move || {
                let repo = open_or_init(&path)?;
                point_head(&repo, &target).map_err(|reason| GitDiscoveryError::Fetch {
                    url: redact_url(&task_url),
                    mirror: path.clone(),
                    reason,
                })
            })
            .await?;
        }
        Ok(mirror)
    }

    /// `git fetch` into `mirror`, a partial clone when it is new and the server allows it,
    /// all within the fetch deadline.
    async fn fetch_cli(
        &self,
        mirror: &Path,
        url: &str,
        creds: Option<&GitCredentials>,
        state: &MirrorState,
    ) -> Result<(), GitDiscoveryError> {
        let deadline = tokio::time::Instant::now() + self.fetch_timeout;
        let (clean, creds) = cli::split_user_info(url, creds);
        let fetch_error = |reason: String| GitDiscoveryError::Fetch {
            url: redact_url(url),
            mirror: mirror.to_owned(),
            reason: scrub(&reason, url, creds.as_ref()),
        };
        let remote_url = format!("remote.{REMOTE}.url");
        if state.configured_url.as_deref() != Some(clean.as_str()) {
            git_config(mirror, &[remote_url.as_str(), clean.as_str()])
                .await
                .map_err(fetch_error)?;
        }
        let mut partial = state.fresh;
        if partial {
            set_partial(mirror, true).await.map_err(fetch_error)?;
        }
        loop {
            let mut args = vec![
                "-c",
                "transfer.unpackLimit=1",
                "fetch",
                "--quiet",
                "--prune",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-auto-maintenance",
            ];
            if partial {
                args.push("--filter=blob:none");
            }
            args.push(REMOTE);
            args.extend(REFSPECS);
            let cmd = cli::command(mirror, &args, creds.as_ref()).map_err(fetch_error)?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let ran = match cli::run(cmd, left).await {
                Ok(ran) => ran,
                Err(cli::RunError::Spawn(reason)) => return Err(fetch_error(reason)),
                Err(cli::RunError::TimedOut) => {
                    tracing::warn!(url = %redact_url(url), timeout_secs = self.fetch_timeout.as_secs(), "mirror fetch timed out; git stopped, mirror unlocked");
                    return Err(GitDiscoveryError::FetchTimedOut {
                        url: redact_url(url),
                        mirror: mirror.to_owned(),
                        timeout: self.fetch_timeout,
                    });
                }
            };
            let refused_filter = ran.stderr.contains("filtering not recognized by server")
                || (!ran.success && ran.stderr.contains("filter"));
            if partial && refused_filter {
                // The server does not allow partial clones (`uploadpack.allowFilter`).
                tracing::info!(url = %redact_url(url), "the server refuses partial clones; the mirror holds every blob");
                set_partial(mirror, false).await.map_err(fetch_error)?;
                partial = false;
                if ran.success {
                    return Ok(());
                }
                continue;
            }
            if ran.success {
                if partial {
                    tracing::info!(url = %redact_url(url), "mirror created as a partial clone (blob:none); blobs are fetched when a checkout needs them");
                }
                return Ok(());
            }
            if is_auth_failure(&ran.stderr) {
                return Err(GitDiscoveryError::AuthenticationFailed {
                    url: redact_url(url),
                    had_credentials: creds.is_some(),
                });
            }
            return Err(fetch_error(ran.stderr));
        }
    }
}

/// What the mirror holds, before a fetch.
struct MirrorState {
    /// It holds every branch and tag of the listing at the listed commit, and no others.
    up_to_date: bool,
    /// It holds no ref at all yet (the first fetch).
    fresh: bool,
    /// Its configured remote URL.
    configured_url: Option<String>,
}

fn mirror_state(path: &Path, wanted: &RemoteRefs) -> Result<MirrorState, GitDiscoveryError> {
    let repo = open_or_init(path)?;
    let mirror_error = |reason: String| GitDiscoveryError::Mirror {
        path: path.to_owned(),
        reason,
    };
    let mut held = BTreeMap::new();
    let refs = repo.references().map_err(|e| mirror_error(chain(&e)))?;
    for prefix in ["refs/heads/", "refs/tags/"] {
        for reference in refs.prefixed(prefix).map_err(|e| mirror_error(chain(&e)))? {
            let mut reference = reference.map_err(|e| mirror_error(e.to_string()))?;
            let name = reference.name().as_bstr().to_str_lossy().into_owned();
            let id = reference
                .peel_to_id()
                .map(|id| id.to_string())
                .unwrap_or_default();
            held.insert(name, id);
        }
    }
    let listed: BTreeMap<&String, &String> = wanted
        .refs
        .iter()
        .filter(|(name, _)| name.starts_with("refs/heads/") || name.starts_with("refs/tags/"))
        .collect();
    let up_to_date = !listed.is_empty()
        && listed.len() == held.len()
        && listed
            .iter()
            .all(|(name, id)| held.get(name.as_str()) == Some(*id));
    let configured_url = repo
        .config_snapshot()
        .string(format!("remote.{REMOTE}.url").as_str())
        .map(|url| url.to_str_lossy().into_owned());
    Ok(MirrorState {
        up_to_date,
        fresh: held.is_empty(),
        configured_url,
    })
}

/// Whether the mirror at `path` holds each of `refs` as `remote` lists it (a ref the
/// remote does not have must be missing too) and each of `commits`. `false` when the
/// mirror cannot be read (no mirror yet).
fn mirror_holds(path: &Path, remote: &RemoteRefs, refs: &[String], commits: &[String]) -> bool {
    let Ok(repo) = gix::open_opts(path, open_options()) else {
        return false;
    };
    let held = |name: &str| -> Option<String> {
        let mut reference = repo.try_find_reference(name).ok()??;
        reference.peel_to_id().ok().map(|id| id.to_string())
    };
    let refs_held = refs
        .iter()
        .all(|name| held(name).as_ref() == remote.refs.get(name));
    refs_held
        && commits.iter().all(|id| {
            gix::ObjectId::from_hex(id.as_bytes())
                .ok()
                .and_then(|id| repo.try_find_header(id).ok().flatten())
                .is_some_and(|header| header.kind() == gix::object::Kind::Commit)
        })
}

/// Whether git's stderr says the server refused (or wanted) credentials.
fn is_auth_failure(stderr: &str) -> bool {
    [
        "Authentication failed",
        "could not read Username",
        "could not read Password",
        "terminal prompts disabled",
        "HTTP 401",
        "HTTP 403",
        "Permission denied",
    ]
    .iter()
    .any(|needle| stderr.contains(needle))
}

/// `git config KEY VALUE` (or `--unset KEY` with one argument) in the mirror.
async fn git_config(mirror: &Path, key_value: &[&str]) -> Result<(), String> {
    let mut args = vec!["config"];
    if key_value.len() == 1 {
        args.push("--unset");
    }
    args.extend_from_slice(key_value);
    let cmd = cli::command(mirror, &args, None)?;
    match cli::run(cmd, LOCAL_TIMEOUT).await {
        Ok(ran) if ran.success => Ok(()),
        // `--unset` of a key that is not there.
        Ok(ran) if key_value.len() == 1 && ran.stderr.is_empty() => Ok(()),
        Ok(ran) => Err(format!("git config {}: {}", key_value[0], ran.stderr)),
        Err(cli::RunError::Spawn(e)) => Err(e),
        Err(cli::RunError::TimedOut) => Err(format!("git config {} did not finish", key_value[0])),
    }
}

/// Make the mirror a partial clone of its remote (promisor, `blob:none`), or undo that.
async fn set_partial(mirror: &Path, on: bool) -> Result<(), String> {
    let promisor = format!("remote.{REMOTE}.promisor");
    let filter = format!("remote.{REMOTE}.partialclonefilter");
    if on {
        git_config(mirror, &["core.repositoryformatversion", "1"]).await?;
        git_config(mirror, &["extensions.partialclone", REMOTE]).await?;
        git_config(mirror, &[promisor.as_str(), "true"]).await?;
        git_config(mirror, &[filter.as_str(), "blob:none"]).await
    } else {
        git_config(mirror, &["extensions.partialclone"]).await?;
        git_config(mirror, &[promisor.as_str()]).await?;
        git_config(mirror, &[filter.as_str()]).await
    }
}

impl MirrorCache {
    /// Whether commit `id` (full or abbreviated, at least 7 hex digits) exists in `url`.
    /// The warm mirror answers when it has the commit; otherwise it is fetched first.
    pub async fn commit_exists(
        &self,
        url: &str,
        id: &str,
        creds: Option<&GitCredentials>,
    ) -> Result<bool, GitDiscoveryError> {
        let id = id.trim().to_ascii_lowercase();
        if !(7..=64).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        let mirror = self.mirror_path(url);
        if mirror.exists() {
            let (path, task_id) = (mirror.clone(), id.clone());
            if blocking(url, move || has_commit(&path, &task_id)).await? {
                return Ok(true);
            }
        }
        let path = self.fetch(url, creds).await?;
        blocking(url, move || has_commit(&path, &id)).await
    }
}

/// Whether the mirror at `path` holds commit `id` (a hex id or unambiguous prefix).
fn has_commit(path: &Path, id: &str) -> Result<bool, GitDiscoveryError> {
    let repo = open_or_init(path)?;
    let Ok(found) = repo.rev_parse_single(id) else {
        return Ok(false);
    };
    Ok(found
        .object()
        .is_ok_and(|object| object.kind == gix::object::Kind::Commit))
}

/// Run blocking git work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    url: &str,
    work: impl FnOnce() -> Result<T, GitDiscoveryError> + Send + 'static,
) -> Result<T, GitDiscoveryError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| GitDiscoveryError::Task {
            url: redact_url(url),
            reason: err.to_string(),
        })?
}

fn list_remote_blocking(
    mirror: &Path,
    url: &str,
    creds: Option<&GitCredentials>,
) -> Result<RemoteRefs, GitDiscoveryError> {
    let repo = open_or_init(mirror)?;
    let remote = remote_for(&repo, url, creds)?;
    let connection = remote
        .connect(gix::remote::Direction::Fetch)
        .map_err(|err| connect_error(url, creds, &err))?
        .with_credentials(authenticate(creds.cloned()));
    let (ref_map, _handshake) = connection
        .ref_map(gix::progress::Discard, ref_map_options())
        .map_err(|err| connect_error(url, creds, &err))?;
    Ok(remote_refs(&ref_map.remote_refs))
}

/// Point the mirror's `HEAD` at the remote's default branch, as `git clone --mirror` does.
fn point_head(repo: &gix::Repository, target: &str) -> Result<(), String> {
    let current = repo.head_name().map_err(|e| chain(&e))?;
    if current
        .as_ref()
        .is_some_and(|name| name.as_bstr() == target)
    {
        return Ok(());
    }
    let target: gix::refs::FullName = target.try_into().map_err(|e| chain(&e))?;
    let head: gix::refs::FullName = "HEAD".try_into().map_err(|e| chain(&e))?;
    repo.edit_reference(RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                ..Default::default()
            },
            expected: PreviousValue::Any,
            new: gix::refs::Target::Symbolic(target),
        },
        name: head,
        deref: false,
    })
    .map_err(|e| chain(&e))?;
    Ok(())
}

fn remote_refs(advertised: &[Ref]) -> RemoteRefs {
    let mut out = RemoteRefs::default();
    for reference in advertised {
        if let Ref::Symbolic {
            full_ref_name,
            target,
            ..
        }
        | Ref::Unborn {
            full_ref_name,
            target,
        } = reference
            && full_ref_name == "HEAD"
        {
            out.head_target = Some(target.to_str_lossy().into_owned());
        }
        let (name, direct, peeled) = reference.unpack();
        if let Some(id) = peeled.or(direct) {
            out.refs
                .insert(name.to_str_lossy().into_owned(), id.to_string());
        }
    }
    out
}

/// An anonymous remote for `url` with the mirror refspecs and no implicit tag following.
fn remote_for<'repo>(
    repo: &'repo gix::Repository,
    url: &str,
    creds: Option<&GitCredentials>,
) -> Result<gix::Remote<'repo>, GitDiscoveryError> {
    let unreachable = |err: gix::Error| GitDiscoveryError::Unreachable {
        url: redact_url(url),
        reason: scrub(&chain(&err), url, creds),
    };
    Ok(repo
        .remote_at(url)
        .map_err(unreachable)?
        .with_refspecs(REFSPECS, gix::remote::Direction::Fetch)
        .map_err(unreachable)?
        .with_fetch_tags(gix::remote::fetch::Tags::None))
}

/// List every ref: with the server-side prefix filter on, `+refs/*` specs list nothing.
fn ref_map_options() -> gix::remote::ref_map::Options {
    gix::remote::ref_map::Options {
        prefix_from_spec_as_filter_on_remote: false,
        ..Default::default()
    }
}

/// gix's credential hook: answer every challenge with `creds`, store nothing.
fn authenticate(
    creds: Option<GitCredentials>,
) -> impl FnMut(Action) -> gix::Result<Option<Outcome>> {
    move |action| match action {
        Action::Get(context) => Ok(creds.as_ref().map(|creds| Outcome {
            identity: gix::sec::identity::Account {
                username: creds.username.clone(),
                password: creds.password.clone(),
                oauth_refresh_token: None,
            },
            next: context.into(),
        })),
        Action::Store(_) | Action::Erase(_) => Ok(None),
    }
}

fn connect_error(url: &str, creds: Option<&GitCredentials>, err: &gix::Error) -> GitDiscoveryError {
    if err.is_unauthenticated() || err.is_permission_denied() {
        GitDiscoveryError::AuthenticationFailed {
            url: redact_url(url),
            had_credentials: creds.is_some(),
        }
    } else {
        GitDiscoveryError::Unreachable {
            url: redact_url(url),
            reason: scrub(&chain(err), url, creds),
        }
    }
}

/// `http://` to a host other than the loopback interface.
fn is_plain_http_to_remote_host(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    !matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// Remove any secret that might have slipped into a transport message.
fn scrub(text: &str, url: &str, creds: Option<&GitCredentials>) -> String {
    let mut out = text.replace(url, &redact_url(url));
    let embedded = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(user_info, _)| user_info.split_once(':'))
        .map(|(_, password)| password.to_owned());
    for secret in embedded.iter().chain(creds.map(|c| &c.password)) {
        if !secret.is_empty() {
            out = out.replace(secret.as_str(), "<redacted>");
        }
    }
    out
}

/// Open the bare mirror at `path`, creating it first if needed. A directory that does
/// not open as a repository (say, a crash mid-creation) is only a cache: it is replaced.
pub(crate) fn open_or_init(path: &Path) -> Result<gix::Repository, GitDiscoveryError> {
    let mirror_error = |reason: String| GitDiscoveryError::Mirror {
        path: path.to_owned(),
        reason,
    };
    if path.exists() {
        match gix::open_opts(path, open_options()) {
            Ok(repo) => return Ok(repo),
            Err(err) => {
                tracing::warn!(mirror = %path.display(), error = %chain(&err), "replacing a broken git mirror");
                std::fs::remove_dir_all(path).map_err(|e| mirror_error(e.to_string()))?;
            }
        }
    }
    let parent = path.parent().unwrap_or(path);
    std::fs::create_dir_all(parent).map_err(|e| mirror_error(e.to_string()))?;
    // Create beside it and rename into place, so a half-made mirror is never visible.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staging = parent.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    gix::ThreadSafeRepository::init_opts(
        &staging,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        open_options(),
    )
    .map_err(|e| mirror_error(chain(&e)))?;
    if std::fs::rename(&staging, path).is_err() {
        // Someone else created it meanwhile: use theirs.
        let _ = std::fs::remove_dir_all(&staging);
    }
    gix::open_opts(path, open_options()).map_err(|e| mirror_error(chain(&e)))
}

/// Repository-local configuration only, plus HTTP proxy variables from the environment.
fn open_options() -> gix::open::Options {
    use gix::open::permissions::{Attributes, Config, Environment};
    let env = Environment {
        http_transport: gix::sec::Permission::Allow,
        ..Environment::isolated()
    };
    gix::open::Options::default()
        .permissions(gix::open::Permissions {
            env,
            config: Config::isolated(),
            attributes: Attributes::isolated(),
        })
        .config_overrides(["user.name=Dray", "user.email=dray@localhost"])
}

/// `host_path-hash12`: readable, filesystem-safe and unique per URL.
fn mirror_dir_name(url: &str) -> String {
    let url = redact_url(url.trim());
    let url = url.trim_end_matches('/');
    let digest = Sha256::digest(url.as_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let readable = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut name = String::with_capacity(readable.len());
    for c in readable.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
            c
        } else {
            '_'
        };
        if !(c == '_' && name.ends_with('_')) {
            name.push(c);
        }
    }
    let name = name.trim_matches(|c| c == '_' || c == '.' || c == '-');
    let name: String = name.chars().take(80).collect();
    if name.is_empty() {
        hash
    } else {
        format!("{name}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_are_readable_safe_and_unique() {
        let a = mirror_dir_name("https://git.example.com/team/config.git");
        assert!(a.starts_with("git.example.com_team_config.git-"), "{a}");
        assert_eq!(a.len(), "git.example.com_team_config.git-".len() + 12);
        assert_ne!(a, mirror_dir_name("https://git.example.com/team/config"));
        // User info never reaches the directory name, and does not split the cache.
        assert_eq!(
            a,
            mirror_dir_name("https://bob:secret@git.example.com/team/config.git")
        );
        let local = mirror_dir_name("file:///tmp/../x y/repo");
        assert!(!local.contains('/') && !local.starts_with('.'), "{local}");
    }

    #[test]
    fn debug_hides_the_password() {
        let creds = GitCredentials::new("bob", "s3cret");
        assert!(!format!("{creds:?}").contains("s3cret"));
    }

    #[test]
    fn plain_http_warning_spares_loopback() {
        assert!(is_plain_http_to_remote_host("http://git.internal/x.git"));
        assert!(!is_plain_http_to_remote_host("http://127.0.0.1:8080/x.git"));
        assert!(!is_plain_http_to_remote_host("http://u@[::1]:80/x.git"));
        assert!(!is_plain_http_to_remote_host(
            "https://git.example.com/x.git"
        ));
    }

    #[test]
    fn scrub_removes_passwords() {
        let creds = GitCredentials::new("bob", "tok3n");
        let text = "failed for https://bob:pw1@h/x.git with tok3n";
        let out = scrub(text, "https://bob:pw1@h/x.git", Some(&creds));
        assert!(!out.contains("pw1") && !out.contains("tok3n"), "{out}");
    }
}
