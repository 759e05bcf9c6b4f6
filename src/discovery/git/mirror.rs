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
//! All git work here is `gix` (blocking, so it runs in `spawn_blocking`); its `file://`
//! transport runs `git upload-pack`. Credentials go to gix's credential hook only: they
//! are never put in argv, in a URL, in the mirror's config or in a message. Mirrors are
//! opened with repository-local configuration only, so a user's credential helpers or
//! `url.insteadOf` rules on the host never change what Dray fetches (HTTP proxy
//! variables are still honoured). Like the git CLI, basic auth is sent over plain
//! `http://` too (in-cluster and loopback servers), with a warning for other hosts.
//!
//! A worktree made from a mirror must not check out a branch (use a detached `HEAD`):
//! a fetch refuses to move a branch that some worktree has checked out.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use gix::bstr::ByteSlice as _;
use gix::credentials::helper::Action;
use gix::credentials::protocol::Outcome;
use gix::protocol::handshake::Ref;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use sha2::{Digest as _, Sha256};

use super::error::{GitDiscoveryError, chain, redact_url};

/// How long listing a remote's refs may take.
pub const LS_REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The refspecs every mirror fetches: all branches and all tags, forced.
const REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

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
}

impl MirrorCache {
    /// A cache rooted at `<data_dir>/git-mirrors/` (created lazily).
    pub fn new(data_dir: impl AsRef<Path>) -> Self {
        Self {
            root: data_dir.as_ref().join("git-mirrors"),
            locks: Mutex::default(),
        }
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
    /// directory. Incremental: only objects the mirror lacks are transferred.
    pub async fn fetch(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
    ) -> Result<PathBuf, GitDiscoveryError> {
        if creds.is_some() && is_plain_http_to_remote_host(url) {
            tracing::warn!(url = %redact_url(url), "sending credentials over plain http");
        }
        let _guard = self.lock(url).await;
        let mirror = self.mirror_path(url);
        // Promotions add worktrees to this mirror; a fetch must not read their half-made
        // entries (see `dray_steps::RepoCache`).
        let _worktrees = dray_steps::MirrorLocks::global().lock(&mirror).await;
        let (task_url, creds, path) = (url.to_owned(), creds.cloned(), mirror.clone());
        blocking(url, move || {
            fetch_blocking(&path, &task_url, creds.as_ref())
        })
        .await?;
        Ok(mirror)
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

fn fetch_blocking(
    mirror: &Path,
    url: &str,
    creds: Option<&GitCredentials>,
) -> Result<(), GitDiscoveryError> {
    let repo = open_or_init(mirror)?;
    let remote = remote_for(&repo, url, creds)?;
    let prepare = remote
        .connect(gix::remote::Direction::Fetch)
        .map_err(|err| connect_error(url, creds, &err))?
        .with_credentials(authenticate(creds.cloned()))
        .prepare_fetch(gix::progress::Discard, ref_map_options())
        .map_err(|err| connect_error(url, creds, &err))?;
    let fetch_error = |reason: String| GitDiscoveryError::Fetch {
        url: redact_url(url),
        mirror: mirror.to_owned(),
        reason: scrub(&reason, url, creds),
    };
    let outcome = prepare
        .receive(gix::progress::Discard, &AtomicBool::new(false))
        .map_err(|err| fetch_error(chain(&err)))?;
    let advertised = remote_refs(&outcome.ref_map.remote_refs);
    prune(&repo, &advertised).map_err(fetch_error)?;
    if let Some(target) = &advertised.head_target {
        point_head(&repo, target).map_err(fetch_error)?;
    }
    Ok(())
}

/// Delete local branches and tags the remote no longer has, so a deleted branch cannot
/// be followed from a stale mirror.
fn prune(repo: &gix::Repository, advertised: &RemoteRefs) -> Result<(), String> {
    let mut stale = Vec::new();
    let refs = repo.references().map_err(|e| chain(&e))?;
    for prefix in ["refs/heads/", "refs/tags/"] {
        for reference in refs.prefixed(prefix).map_err(|e| chain(&e))? {
            let reference = reference.map_err(|e| e.to_string())?;
            let name = reference.name().as_bstr().to_str_lossy().into_owned();
            if !advertised.refs.contains_key(&name) {
                stale.push(reference.name().to_owned());
            }
        }
    }
    if stale.is_empty() {
        return Ok(());
    }
    let edits = stale.into_iter().map(|name| RefEdit {
        change: Change::Delete {
            expected: PreviousValue::Any,
            log: RefLog::AndReference,
        },
        name,
        deref: false,
    });
    repo.edit_references(edits).map_err(|e| chain(&e))?;
    Ok(())
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
