//! Running the `git` CLI for the mirror cache: the operations `gix` cannot do here, namely
//! fetches that may be killed at a deadline (and partial-clone fetches), writing the
//! commit-graph with changed-path Bloom filters, and pathspec-limited history walks that
//! read those filters.
//!
//! Owns the environment such a process gets (no system or global git configuration, no
//! prompts, no automatic gc or maintenance, `LC_ALL=C`), how credentials reach it (Dray's
//! askpass script, through the environment only: user info written in an `https://` URL
//! is moved there as well, so no secret is ever in argv or in the mirror's config), and
//! killing the whole process group (git and its remote helper) when a deadline passes.
//! Decides nothing about commits or mirrors.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::error::redact_url;
use super::mirror::GitCredentials;

/// A `git` command run from `dir`, in Dray's isolated environment, with `creds` (if any)
/// for the askpass script. Stdout and stderr are piped; the process leads its own process
/// group, so [`ProcessGroup`] can end it with every child it started.
pub(crate) fn command(
    dir: &Path,
    args: &[&str],
    creds: Option<&GitCredentials>,
) -> Result<tokio::process::Command, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.args([
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        "-c",
        "core.quotePath=false",
    ])
    .args(args)
    .current_dir(dir)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true)
    .process_group(0);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        // A stalled transfer (under 1 kB/s for a minute) fails even inside the deadline.
        .env("GIT_HTTP_LOW_SPEED_LIMIT", "1000")
        .env("GIT_HTTP_LOW_SPEED_TIME", "60");
    if let Some(creds) = creds {
        let env: Vec<(OsString, OsString)> =
            dray_steps::credential_env(&dray_steps::GitCredentials {
                username: creds.username.clone(),
                password: creds.password.clone(),
            })?;
        cmd.envs(env);
    }
    Ok(cmd)
}

/// `url` as git should be given it, and the credentials to use: user info written in an
/// `http(s)://` URL is removed from it and, when no Credential was given, becomes one.
pub(crate) fn split_user_info(
    url: &str,
    creds: Option<&GitCredentials>,
) -> (String, Option<GitCredentials>) {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return (url.to_owned(), creds.cloned());
    }
    let clean = redact_url(url);
    if creds.is_some() || clean == url {
        return (clean, creds.cloned());
    }
    let embedded = gix::url::parse(gix::bstr::BStr::new(url))
        .ok()
        .and_then(|parsed| {
            let user = parsed.user()?.to_owned();
            let password = parsed.password().unwrap_or_default().to_owned();
            Some(GitCredentials::new(user, password))
        });
    (clean, embedded)
}

/// A spawned process group, killed (every member) when dropped unless [`finished`].
///
/// [`finished`]: ProcessGroup::finished
pub(crate) struct ProcessGroup {
    pid: Option<i32>,
}

impl ProcessGroup {
    /// Watch the group led by `child`.
    pub(crate) fn of(child: &tokio::process::Child) -> Self {
        Self {
            pid: child.id().and_then(|id| i32::try_from(id).ok()),
        }
    }

    /// The leader exited by itself: nothing to kill.
    pub(crate) fn finished(mut self) {
        self.pid = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.and_then(rustix::process::Pid::from_raw) {
            // The group this process started (`process_group(0)`); gone already is fine.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// What a finished git process printed.
pub(crate) struct Ran {
    /// Whether it exited with status 0.
    pub(crate) success: bool,
    /// Its standard output.
    pub(crate) stdout: Vec<u8>,
    /// Its standard error, lossily decoded and trimmed.
    pub(crate) stderr: String,
}

/// Why [`run`] has no [`Ran`].
pub(crate) enum RunError {
    /// `git` could not be started.
    Spawn(String),
    /// It did not finish within the deadline and was killed with its children.
    TimedOut,
}

/// Run `cmd` to the end, or kill its process group once `timeout` has passed.
pub(crate) async fn run(
    mut cmd: tokio::process::Command,
    timeout: Duration,
) -> Result<Ran, RunError> {
    let child = cmd
        .spawn()
        .map_err(|e| RunError::Spawn(format!("could not run `git`: {e}")))?;
    let group = ProcessGroup::of(&child);
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => {
            group.finished();
            Ok(Ran {
                success: output.status.success(),
                stdout: output.stdout,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            })
        }
        Ok(Err(e)) => Err(RunError::Spawn(format!("waiting for `git` failed: {e}"))),
        // Dropping `group` kills git and its remote helper; the lock is released after.
        Err(_) => Err(RunError::TimedOut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_leaves_the_url_and_becomes_credentials() {
        let (url, creds) = split_user_info("https://bob:s%40cret@git.example.com/x.git", None);
        assert_eq!(url, "https://git.example.com/x.git");
        let creds = creds.unwrap();
        assert_eq!(creds.username, "bob");
        assert_eq!(creds.password, "s@cret");
        // A Credential wins over user info; other schemes are left alone.
        let given = GitCredentials::new("ann", "tok");
        let (url, creds) = split_user_info("https://bob:pw@h/x.git", Some(&given));
        assert_eq!(
            (url.as_str(), creds.unwrap().username.as_str()),
            ("https://h/x.git", "ann")
        );
        let (url, creds) = split_user_info("ssh://git@h/x.git", None);
        assert_eq!((url.as_str(), creds), ("ssh://git@h/x.git", None));
    }
}
