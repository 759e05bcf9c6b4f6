//! Running the `git` CLI for the git steps, safely.
//!
//! Owns: how the git steps invoke `git` (environment, credentials, errors), the per-worktree
//! record that `git-clone` leaves for `git-push`, and [`PushLocks`], which serialises
//! pushes to one branch inside this process. It does not own the mirrors: those come from
//! [`crate::RepoCache`].
//!
//! The rules:
//! - `GIT_TERMINAL_PROMPT=0`: git never waits for a person.
//! - Credentials travel only through `GIT_ASKPASS`, which points to a tiny script that
//!   echoes `DRAY_GIT_USERNAME` / `DRAY_GIT_PASSWORD` from its environment. They never
//!   appear in argv, in URLs, in files or in logs; URLs with user info are redacted in
//!   every message.
//! - A failed command is an error carrying its arguments and its stderr.
//! - Worktrees made from a shared mirror are always on a **detached** HEAD, so that a
//!   mirror fetch (`+refs/*:refs/*`) never collides with a branch checked out in a
//!   promotion's worktree, and no promotion creates branches in the mirror.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::OwnedMutexGuard;

use crate::{GitCredentials, StepContext};

/// The identity used for commits Dray makes when a step names none.
pub(crate) const DEFAULT_NAME: &str = "Dray";
/// The e-mail of [`DEFAULT_NAME`].
pub(crate) const DEFAULT_EMAIL: &str = "dray@localhost";

/// The environment variable the askpass script answers user-name prompts from.
const USERNAME_ENV: &str = "DRAY_GIT_USERNAME";
/// The environment variable the askpass script answers password prompts from.
const PASSWORD_ENV: &str = "DRAY_GIT_PASSWORD";

/// The askpass script: it holds no secret, it only repeats its environment to git.
const ASKPASS_SCRIPT: &str = "#!/bin/sh\n\
# Dray's GIT_ASKPASS: answers git's prompts from the environment, never from argv.\n\
case \"$1\" in\n\
  [Uu]sername*) printf '%s\\n' \"$DRAY_GIT_USERNAME\" ;;\n\
  *) printf '%s\\n' \"$DRAY_GIT_PASSWORD\" ;;\n\
esac\n";

/// A failed git operation.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    /// `git` could not be started.
    #[error("could not run `{program}`: {source}; hint: install git or set the git tool path")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file operation around git failed.
    #[error("cannot {what}: {source}")]
    Io {
        /// What was being done, e.g. ``remove `out` ``.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// The askpass script could not be written.
    #[error("could not prepare the git askpass script: {0}")]
    Askpass(String),
    /// `git` ran and failed.
    #[error("`git {args}` failed ({status}): {stderr}")]
    Failed {
        /// The arguments, redacted.
        args: String,
        /// The exit status.
        status: String,
        /// What git said, redacted.
        stderr: String,
    },
}

/// A `git` runner for one repository's credentials.
#[derive(Clone)]
pub(crate) struct Git {
    bin: PathBuf,
    credentials: Option<GitCredentials>,
}

impl Git {
    /// A runner using the context's `git` and the credentials for `repo_url`, if any.
    pub(crate) fn for_repo(ctx: &StepContext, repo_url: &str) -> Git {
        Git {
            bin: ctx.tools.git.clone(),
            credentials: ctx.credentials.git(repo_url),
        }
    }

    /// A runner of the `git` at `bin` without credentials, outside any step.
    pub(crate) fn at(bin: &Path) -> Git {
        Git {
            bin: bin.to_owned(),
            credentials: None,
        }
    }

    /// A runner without credentials, for local work in a worktree.
    pub(crate) fn local(ctx: &StepContext) -> Git {
        Git {
            bin: ctx.tools.git.clone(),
            credentials: None,
        }
    }

    /// The credentials this runner passes to git.
    pub(crate) fn credentials(&self) -> Option<&GitCredentials> {
        self.credentials.as_ref()
    }

    /// A `git` command in `dir` with Dray's environment. The arguments are never changed:
    /// credentials go into the environment only.
    pub(crate) fn command(
        &self,
        dir: &Path,
        args: &[&str],
    ) -> Result<tokio::process::Command, GitError> {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A promotion must not inherit a repository from the process that runs it.
        for var in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_COMMON_DIR",
        ] {
            cmd.env_remove(var);
        }
        for (key, value) in base_env() {
            cmd.env(key, value);
        }
        if let Some(creds) = &self.credentials {
            for (key, value) in askpass_env(creds, askpass_script()?) {
                cmd.env(key, value);
            }
        }
        Ok(cmd)
    }

    /// Runs git and returns its output whatever the exit status.
    pub(crate) async fn output(
        &self,
        dir: &Path,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<Output, GitError> {
        self.output_env(dir, args, input, &[]).await
    }

    /// Runs git with extra environment variables (e.g. an author), whatever the exit status.
    pub(crate) async fn output_env(
        &self,
        dir: &Path,
        args: &[&str],
        input: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Output, GitError> {
        let mut cmd = self.command(dir, args)?;
        cmd.envs(env.iter().copied());
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(|source| GitError::Spawn {
            program: self.bin.display().to_string(),
            source,
        })?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // A write error shows up as git's own failure below.
            let _ = stdin.write_all(input.as_bytes()).await;
            drop(stdin);
        }
        child
            .wait_with_output()
            .await
            .map_err(|source| GitError::Spawn {
                program: self.bin.display().to_string(),
                source,
            })
    }

    /// Runs git and returns its stdout, or an error with its stderr.
    pub(crate) async fn run(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        self.run_with_input(dir, args, None).await
    }

    /// Runs git with `input` on stdin and returns its stdout, or an error with its stderr.
    pub(crate) async fn run_with_input(
        &self,
        dir: &Path,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<String, GitError> {
        let output = self.output(dir, args, input).await?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(self.failure(args, &output))
        }
    }

    /// The error for a failed run.
    pub(crate) fn failure(&self, args: &[&str], output: &Output) -> GitError {
        GitError::Failed {
            args: args
                .iter()
                .map(|a| redact_url(a))
                .collect::<Vec<_>>()
                .join(" "),
            status: output.status.to_string(),
            stderr: self.redact(String::from_utf8_lossy(&output.stderr).trim()),
        }
    }

    /// `text` with URL user info and this runner's password removed.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text
            .split('\n')
            .map(redact_url)
            .collect::<Vec<_>>()
            .join("\n");
        if let Some(creds) = &self.credentials
            && !creds.password.is_empty()
        {
            text = text.replace(&creds.password, "<redacted>");
        }
        text
    }

    /// The full id of `rev` as a commit, or `None` when it does not resolve. A linked
    /// worktree's detached `HEAD` is read from its file, without running git.
    pub(crate) async fn resolve(&self, dir: &Path, rev: &str) -> Result<Option<String>, GitError> {
        if rev == "HEAD"
            && let Some(head) = detached_head(dir).await
        {
            return Ok(Some(head));
        }
        let spec = format!("{rev}^{{commit}}");
        let output = self
            .output(dir, &["rev-parse", "--verify", "-q", &spec], None)
            .await?;
        Ok(output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string()))
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `descendant`.
    pub(crate) async fn is_ancestor(
        &self,
        dir: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError> {
        let args = ["merge-base", "--is-ancestor", ancestor, descendant];
        let output = self.output(dir, &args, None).await?;
        match output.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(self.failure(&args, &output)),
        }
    }

    /// The value of the `Dray-Promotion` trailer of `rev`, if it has one.
    pub(crate) async fn promotion_trailer(
        &self,
        dir: &Path,
        rev: &str,
    ) -> Result<Option<String>, GitError> {
        let out = self
            .run(
                dir,
                &[
                    "log",
                    "-1",
                    "--format=%(trailers:key=Dray-Promotion,valueonly,separator=%x00)",
                    rev,
                    "--",
                ],
            )
            .await?;
        let value = out.split('\0').next().unwrap_or_default().trim();
        Ok((!value.is_empty()).then(|| value.to_string()))
    }

    /// `<short sha> "<subject>"` of `rev`, for messages.
    pub(crate) async fn describe(&self, dir: &Path, rev: &str) -> String {
        match self
            .run(dir, &["log", "-1", "--format=%h \"%s\"", rev, "--"])
            .await
        {
            Ok(out) => out.trim().to_string(),
            Err(_) => rev.chars().take(12).collect(),
        }
    }
}

/// The environment every git command gets.
fn base_env() -> [(&'static str, &'static str); 12] {
    [
        ("GIT_TERMINAL_PROMPT", "0"),
        // A stalled HTTP fetch or push (under 1 kB/s for a minute) fails instead of
        // holding the promotion (and the branch's push lock) forever.
        ("GIT_HTTP_LOW_SPEED_LIMIT", "1000"),
        ("GIT_HTTP_LOW_SPEED_TIME", "60"),
        // No automatic gc or maintenance: they enumerate the mirror's worktrees unlocked
        // (see [`MirrorLocks`]); the mirror's upkeep belongs to the repository cache.
        ("GIT_CONFIG_COUNT", "2"),
        ("GIT_CONFIG_KEY_0", "gc.auto"),
        ("GIT_CONFIG_VALUE_0", "0"),
        ("GIT_CONFIG_KEY_1", "maintenance.auto"),
        ("GIT_CONFIG_VALUE_1", "false"),
        ("LC_ALL", "C"),
        ("GIT_EDITOR", ":"),
        ("GIT_COMMITTER_NAME", DEFAULT_NAME),
        ("GIT_COMMITTER_EMAIL", DEFAULT_EMAIL),
    ]
}

/// The environment that hands `creds` to git through the askpass script at `script`.
pub(crate) fn askpass_env(creds: &GitCredentials, script: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("GIT_ASKPASS".into(), script.as_os_str().to_owned()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        (USERNAME_ENV.into(), creds.username.clone().into()),
        (PASSWORD_ENV.into(), creds.password.clone().into()),
    ]
}

/// The environment variables that hand `creds` to a `git` process through Dray's askpass
/// script (for git commands run outside the steps, e.g. the mirror cache's fetches and
/// the lazy blob fetches of a partial mirror). The secret is only in the environment.
pub fn credential_env(creds: &GitCredentials) -> Result<Vec<(OsString, OsString)>, String> {
    let script = askpass_script().map_err(|e| e.to_string())?;
    Ok(askpass_env(creds, script))
}

/// The askpass script, written once per process into a fresh private directory.
pub(crate) fn askpass_script() -> Result<&'static Path, GitError> {
    static SCRIPT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SCRIPT
        .get_or_init(write_askpass_script)
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|e| GitError::Askpass(e.clone()))
}

fn write_askpass_script() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    for n in 0..100u32 {
        let dir = base.join(format!("dray-askpass-{}-{n}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create `{}`: {e}", dir.display())),
        }
        let path = dir.join("askpass.sh");
        std::fs::write(&path, ASKPASS_SCRIPT)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot make `{}` executable: {e}", path.display()))?;
        }
        return Ok(path);
    }
    Err(format!(
        "no free directory for the askpass script under `{}`",
        base.display()
    ))
}

/// `text` with the user info of a URL (`https://user:token@host/…`) replaced by `***`.
/// The first 12 characters of a commit id, as messages show it.
pub(crate) fn short_sha(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

pub(crate) fn redact_url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(&tail[at..end]);
            }
            None => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Whether `name` is a branch or tag name git accepts (`git check-ref-format`) and that
/// cannot be mistaken for an option.
pub(crate) fn is_valid_ref_name(name: &str) -> bool {
    let bad_char = |c: char| c.is_ascii_control() || " ~^:?*[\\".contains(c);
    !name.is_empty()
        && name != "@"
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name.contains("/.")
        && !name.split('/').any(|part| part.ends_with(".lock"))
        && !name.chars().any(bad_char)
}

/// The file, in a worktree's private git directory, holding the key its commits are signed
/// with while a step signs (removed when the step is done with it).
const SIGNING_KEY_FILE: &str = "dray-signing-key";

/// How the commits Dray makes in one worktree are signed: SSH signatures (`gpg.format=ssh`,
/// which `git verify-commit` checks against an allowed-signers file) with the key the
/// project keeps for the worktree's repository. The key is on disk only while this lives:
/// dropping it removes the file (the worktree's private git directory outlives the
/// promotion until the mirror's next `worktree prune`).
#[derive(Debug)]
pub(crate) struct Signing {
    key_file: PathBuf,
}

impl Drop for Signing {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_file(&self.key_file)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(file = %self.key_file.display(), %error, "cannot remove a signing key file");
        }
    }
}

impl Signing {
    /// The signing of the worktree at `worktree`, cloned from `repo_url`: the key is
    /// written (mode 0600, as `ssh-keygen` requires) into the worktree's private git
    /// directory until this is dropped. `None` when the project has no signing key for
    /// the repository.
    pub(crate) async fn for_worktree(
        ctx: &StepContext,
        git: &Git,
        worktree: &Path,
        repo_url: &str,
    ) -> Result<Option<Signing>, GitError> {
        let Some(key) = ctx.credentials.signing_key(repo_url) else {
            return Ok(None);
        };
        let key_file = private_git_dir(git, worktree).await?.join(SIGNING_KEY_FILE);
        let mut text = key.trim().to_owned();
        text.push('\n');
        write_private(&key_file, text.as_bytes())
            .await
            .map_err(|source| GitError::Io {
                what: format!("write the signing key for `{}`", redact_url(repo_url)),
                source,
            })?;
        Ok(Some(Signing { key_file }))
    }

    /// `error` of a git command that signed, with a hint on what signing needs (it fails
    /// when `ssh-keygen` is missing or the key cannot be read or has a passphrase).
    pub(crate) fn explain(signing: Option<&Signing>, error: GitError) -> GitError {
        match error {
            GitError::Failed {
                args,
                status,
                stderr,
            } if signing.is_some() => GitError::Failed {
                args,
                status,
                stderr: format!(
                    "{stderr}; hint: signing needs `ssh-keygen` (Debian: openssh-client) \
                         where `dray serve` runs, and the `signing` Credential's \
                         `sshPrivateKey` must be an OpenSSH private key without a passphrase"
                ),
            },
            other => other,
        }
    }

    /// The `-c` options that make git sign with this key; they go before the subcommand.
    pub(crate) fn config_args(&self) -> Vec<String> {
        vec![
            "-c".to_owned(),
            "gpg.format=ssh".to_owned(),
            "-c".to_owned(),
            format!("user.signingKey={}", self.key_file.display()),
        ]
    }
}

/// Writes `bytes` to a new file at `path` that only its owner may read.
async fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _ = tokio::fs::remove_file(path).await;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// What `git-clone` records about a worktree, for the steps that follow (`git-push`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckoutRecord {
    /// The real repository URL: where pushes go (the mirror's `origin` is never used).
    #[serde(rename = "repoURL")]
    pub(crate) repo_url: String,
    /// The branch that was checked out, if one was.
    pub(crate) branch: Option<String>,
    /// The commit the worktree was checked out at (`None`: a new orphan branch, or a
    /// record written before the commit was recorded). A preview diffs against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) commit: Option<String>,
    /// The shared mirror the worktree belongs to, as the [`crate::RepoCache`] named it (the
    /// key of its [`MirrorLocks`] lock and of its warm slot, see [`crate::warm`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mirror: Option<PathBuf>,
}

/// The record's file, in the worktree's private git directory (removed with the worktree).
const RECORD_FILE: &str = "dray-checkout.json";

/// The private git directory a linked worktree's `.git` file names (`gitdir: …`, what
/// `git worktree add` writes), read without running git; `None` when `worktree/.git` is
/// not such a file naming a directory.
async fn linked_git_dir(worktree: &Path) -> Option<PathBuf> {
    let text = tokio::fs::read_to_string(worktree.join(".git"))
        .await
        .ok()?;
    let named = Path::new(
        text.strip_prefix("gitdir: ")?
            .trim_end_matches(['\n', '\r']),
    );
    let dir = match named.is_absolute() {
        true => named.to_owned(),
        false => worktree.join(named),
    };
    tokio::fs::metadata(&dir)
        .await
        .is_ok_and(|m| m.is_dir())
        .then_some(dir)
}

/// A linked worktree's detached `HEAD` (the commit id its private git directory's `HEAD`
/// file holds); `None` when it is anything else (a branch, unborn), for git to answer.
async fn detached_head(worktree: &Path) -> Option<String> {
    let head = tokio::fs::read_to_string(linked_git_dir(worktree).await?.join("HEAD"))
        .await
        .ok()?;
    let id = head.trim_end();
    is_full_id(id).then(|| id.to_owned())
}

/// Whether `id` is a full object id as git writes it (40 or 64 lowercase hex digits).
pub(crate) fn is_full_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The worktree's private git directory (`<mirror>/worktrees/<name>`): read from its
/// `.git` file, or asked of git when that is not a linked worktree's.
pub(crate) async fn private_git_dir(git: &Git, worktree: &Path) -> Result<PathBuf, GitError> {
    if let Some(dir) = linked_git_dir(worktree).await {
        return Ok(dir);
    }
    let out = git
        .run(
            worktree,
            &["rev-parse", "--path-format=absolute", "--git-dir"],
        )
        .await?;
    Ok(PathBuf::from(out.trim()))
}

/// Writes the record for the worktree at `worktree`.
pub(crate) async fn write_record(
    git: &Git,
    worktree: &Path,
    record: &CheckoutRecord,
) -> Result<(), String> {
    let dir = private_git_dir(git, worktree)
        .await
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_vec_pretty(record).map_err(|e| e.to_string())?;
    let path = dir.join(RECORD_FILE);
    tokio::fs::write(&path, json)
        .await
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// Reads the record of the worktree at `worktree`, if `git-clone` made it.
pub(crate) async fn read_record(
    git: &Git,
    worktree: &Path,
) -> Result<Option<CheckoutRecord>, String> {
    let Ok(dir) = private_git_dir(git, worktree).await else {
        return Ok(None);
    };
    let path = dir.join(RECORD_FILE);
    match tokio::fs::read(&path).await {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
    }
}

/// Per-mirror async locks that keep a mirror's set of worktrees still while git reads it.
///
/// `git worktree add` registers a worktree in several writes (`<mirror>/worktrees/<id>/…`),
/// and every git command that enumerates worktrees (a mirror `fetch`, which refuses to
/// update a branch checked out anywhere; `worktree prune`; `gc`) dies when it meets a
/// half-made registration. So `git-clone` adds, removes and prunes worktrees while holding
/// [`MirrorLocks::lock`] for the mirror, and **a [`crate::RepoCache`] must hold the same lock
/// while it fetches into (or collects garbage in) a mirror**. The git steps turn off
/// automatic gc and maintenance in the commands they run, so they never enumerate
/// worktrees unlocked. One process-global instance ([`MirrorLocks::global`]) suffices: Dray
/// has one active process per data directory.
#[derive(Default)]
pub struct MirrorLocks {
    locks: PushLocks,
}

impl MirrorLocks {
    /// The instance `git-clone` uses; a [`crate::RepoCache`] must use it too.
    pub fn global() -> &'static MirrorLocks {
        static GLOBAL: OnceLock<MirrorLocks> = OnceLock::new();
        GLOBAL.get_or_init(MirrorLocks::default)
    }

    /// Waits for, and takes, the lock of the mirror at `mirror` (the path the
    /// [`crate::RepoCache`] returns).
    /// Whoever takes it finds the mirror's half-made worktree registrations removed.
    pub async fn lock(&self, mirror: &Path) -> OwnedMutexGuard<()> {
        let guard = self.locks.lock(&mirror.to_string_lossy(), "").await;
        if let Err(e) = remove_half_made_registrations(mirror).await {
            tracing::warn!(mirror = %mirror.display(), error = %e, "cannot remove half-made worktree registrations");
        }
        guard
    }
}

/// Removes the registrations (`<mirror>/worktrees/<id>`) that a `git worktree add` killed
/// part-way left behind (say, by `kill -9` of Dray): still locked as `initializing`, or
/// without their `gitdir`, `commondir` or `HEAD`. git's own `worktree prune` keeps locked
/// ones, and every later `worktree add` dies reading an empty `commondir`. Called with the
/// mirror's lock held ([`MirrorLocks::lock`]), so no registration is being made meanwhile.
async fn remove_half_made_registrations(mirror: &Path) -> std::io::Result<()> {
    let Ok(mut entries) = tokio::fs::read_dir(mirror.join("worktrees")).await else {
        return Ok(());
    };
    let non_empty = |path: PathBuf| async move {
        tokio::fs::metadata(&path)
            .await
            .is_ok_and(|m| m.is_file() && m.len() > 0)
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let admin = entry.path();
        let initializing = tokio::fs::read_to_string(admin.join("locked"))
            .await
            .is_ok_and(|reason| reason.trim() == "initializing");
        let whole = non_empty(admin.join("gitdir")).await
            && non_empty(admin.join("commondir")).await
            && non_empty(admin.join("HEAD")).await;
        if initializing || !whole {
            tracing::warn!(registration = %admin.display(), "removing a half-made worktree registration");
            tokio::fs::remove_dir_all(&admin).await?;
        }
    }
    Ok(())
}

/// A repository URL (without a trailing `/`) and a branch.
type BranchKey = (String, String);

/// Per-(repository URL, branch) async locks that serialise pushes inside this process.
///
/// One process-global instance ([`PushLocks::global`]) is shared by every `git-push`, so
/// that concurrent promotions in one Dray process take turns on a branch instead of
/// racing and rebasing. Pushes from elsewhere (other processes, people) are still handled
/// by `git-push`'s fetch, rebase and retry. Locks no one holds are dropped on the next
/// [`PushLocks::lock`].
#[derive(Default)]
pub struct PushLocks {
    locks: Mutex<HashMap<BranchKey, Arc<tokio::sync::Mutex<()>>>>,
}

impl PushLocks {
    /// The instance every `git-push` in this process uses.
    pub fn global() -> &'static PushLocks {
        static GLOBAL: OnceLock<PushLocks> = OnceLock::new();
        GLOBAL.get_or_init(PushLocks::default)
    }

    /// Waits for, and takes, the lock of `branch` in `repo_url`.
    pub async fn lock(&self, repo_url: &str, branch: &str) -> OwnedMutexGuard<()> {
        let key = (
            repo_url.trim_end_matches('/').to_string(),
            branch.to_string(),
        );
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.retain(|k, l| k == &key || Arc::strong_count(l) > 1);
            locks.entry(key).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// How many locks are kept (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::git as run_git;

    #[tokio::test]
    async fn a_linked_worktrees_head_and_git_dir_read_from_files_are_what_git_says() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        run_git(&repo, &["init", "-q", "-b", "main"]);
        run_git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let detached = dir.path().join("detached");
        let on_branch = dir.path().join("on-branch");
        run_git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                detached.to_str().unwrap(),
            ],
        );
        run_git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "side",
                on_branch.to_str().unwrap(),
            ],
        );
        let git = Git::at(Path::new("git"));
        let head = run_git(&repo, &["rev-parse", "HEAD"]);
        // Read from the files: a detached worktree; asked of git: a branch, the main repo.
        assert!(detached_head(&detached).await.is_some());
        assert!(detached_head(&on_branch).await.is_none());
        assert!(detached_head(&repo).await.is_none());
        for at in [&detached, &on_branch, &repo] {
            assert_eq!(
                git.resolve(at, "HEAD").await.unwrap().as_deref(),
                Some(head.as_str())
            );
            let said = run_git(at, &["rev-parse", "--path-format=absolute", "--git-dir"]);
            assert_eq!(
                std::fs::canonicalize(private_git_dir(&git, at).await.unwrap()).unwrap(),
                std::fs::canonicalize(said).unwrap(),
                "{}",
                at.display()
            );
        }
        assert!(
            linked_git_dir(&repo).await.is_none(),
            "a repository's own `.git` is a directory"
        );
    }

    #[test]
    fn redact_url_hides_user_info() {
        assert_eq!(
            redact_url("fatal: https://bob:s3cret@git.example.com/a.git not found"),
            "fatal: https://***@git.example.com/a.git not found"
        );
        assert_eq!(redact_url("file:///tmp/x.git"), "file:///tmp/x.git");
        assert_eq!(redact_url("no url here"), "no url here");
    }

    #[test]
    fn ref_names_are_checked() {
        for good in ["main", "stage/dev", "dray/promotion/p-1", "v1.2.3"] {
            assert!(is_valid_ref_name(good), "{good}");
        }
        for bad in [
            "", "-f", "--force", "a..b", "a b", "a~1", "x.lock", "a/", "@", "a@{1}", "/a",
        ] {
            assert!(!is_valid_ref_name(bad), "{bad}");
        }
    }

    #[test]
    fn askpass_env_carries_credentials_only_in_the_environment() {
        let creds = GitCredentials {
            username: "bob".into(),
            password: "hunter2-token".into(),
        };
        let script = askpass_script().unwrap();
        let env = askpass_env(&creds, script);
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        assert_eq!(get("GIT_ASKPASS").unwrap(), script.as_os_str());
        assert_eq!(get("GIT_TERMINAL_PROMPT").unwrap(), "0");
        assert_eq!(get(USERNAME_ENV).unwrap(), "bob");
        assert_eq!(get(PASSWORD_ENV).unwrap(), "hunter2-token");
        // The script holds no secret; the command line holds none either.
        let text = std::fs::read_to_string(script).unwrap();
        assert!(!text.contains("hunter2"));
        let git = Git {
            bin: "git".into(),
            credentials: Some(creds),
        };
        let cmd = git
            .command(
                Path::new("."),
                &[
                    "push",
                    "--porcelain",
                    "https://git.example.com/a.git",
                    "HEAD:refs/heads/x",
                ],
            )
            .unwrap();
        let argv: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            argv.iter()
                .all(|a| !a.contains("hunter2") && !a.contains("bob")),
            "{argv:?}"
        );
        let envs: HashMap<String, String> = cmd
            .as_std()
            .get_envs()
            .filter_map(|(k, v)| {
                Some((
                    k.to_string_lossy().into_owned(),
                    v?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        assert_eq!(envs["GIT_ASKPASS"], script.display().to_string());
        assert_eq!(envs[PASSWORD_ENV], "hunter2-token");
        assert_eq!(envs["GIT_TERMINAL_PROMPT"], "0");
        // A stalled transfer fails instead of hanging.
        assert_eq!(envs["GIT_HTTP_LOW_SPEED_LIMIT"], "1000");
        assert_eq!(envs["GIT_HTTP_LOW_SPEED_TIME"], "60");
        // Secrets are scrubbed from git's messages.
        assert_eq!(
            git.redact("denied for hunter2-token"),
            "denied for <redacted>"
        );
    }

    #[tokio::test]
    async fn git_asks_the_askpass_script_for_credentials() {
        // `git credential fill` prompts through GIT_ASKPASS when no helper answers: the
        // same path a push over HTTPS takes, without a network.
        let home = tempfile::tempdir().unwrap();
        let git = Git {
            bin: "git".into(),
            credentials: Some(GitCredentials {
                username: "bob".into(),
                password: "hunter2-token".into(),
            }),
        };
        let mut cmd = git.command(home.path(), &["credential", "fill"]).unwrap();
        cmd.env("HOME", home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"protocol=https\nhost=git.example.com\n\n")
            .await
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("username=bob\n"), "{stdout}");
        assert!(stdout.contains("password=hunter2-token\n"), "{stdout}");
    }

    #[tokio::test]
    async fn push_locks_serialise_one_branch_and_forget_idle_ones() {
        let locks = PushLocks::default();
        let held = locks.lock("file:///r.git", "main").await;
        // Another branch is independent.
        let other = locks.lock("file:///r.git/", "stage/dev").await;
        drop(other);
        // The same branch waits until the first guard is dropped.
        let mut waiting = Box::pin(locks.lock("file:///r.git/", "main"));
        assert!(futures_poll_once(waiting.as_mut()).is_none());
        drop(held);
        let _again = waiting.await;
        let _third = locks.lock("file:///s.git", "main").await;
        // `stage/dev` was idle and is gone; `r.git main` and `s.git main` are held.
        assert_eq!(locks.len(), 2);
    }

    fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = fut;
        match std::pin::Pin::new(&mut fut).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
