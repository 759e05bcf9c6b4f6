//! A working copy of a remote repository, driven from the test side with the git CLI.
//!
//! Owns clone, write, commit, push, and reading what is on a remote branch (`head`,
//! `log`, `show`). Every git call is isolated from the machine: `HOME` is the world's,
//! no system config, no prompts, a fixed committer. Test-side URLs may embed
//! credentials; the server side never sees them in argv. Does not serve repositories:
//! see `git_server`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};

use crate::world::TestWorld;

/// The committer (and default author) of test-side commits.
pub const TEST_AUTHOR: (&str, &str) = ("Dray E2E", "e2e@dray.invalid");

/// Field and record separators for `git log --format`.
const FIELD: char = '\u{1f}';
const RECORD: char = '\u{1e}';

/// A `git` command isolated from the machine's and the user's configuration.
pub fn git(world: &TestWorld) -> Command {
    let mut cmd = Command::new("git");
    cmd.env("HOME", world.home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .args(["-c", &format!("user.name={}", TEST_AUTHOR.0)])
        .args(["-c", &format!("user.email={}", TEST_AUTHOR.1)])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args([
            "-c",
            "credential.helper=",
            "-c",
            "advice.detachedHead=false",
        ]);
    cmd
}

/// Run a command; its stdout on success, an error with the command and stderr otherwise.
fn run(cmd: &mut Command) -> Result<String> {
    let output = cmd
        .output()
        .with_context(|| format!("Failed to run {cmd:?}"))?;
    if !output.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `git ls-remote URL`: `(sha, ref)` pairs.
pub fn ls_remote(world: &TestWorld, url: &str) -> Result<Vec<(String, String)>> {
    let out = run(git(world).args(["ls-remote", url]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(sha, name)| (sha.to_owned(), name.to_owned()))
        .collect())
}

/// One commit as `git log` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Full commit id.
    pub sha: String,
    /// Parent ids (two for a merge).
    pub parents: Vec<String>,
    /// Author name.
    pub author_name: String,
    /// Author email.
    pub author_email: String,
    /// First line of the message.
    pub subject: String,
    /// The rest of the message, trailers included.
    pub body: String,
    /// `Key: value` trailers, in order.
    pub trailers: Vec<(String, String)>,
}

impl Commit {
    /// The value of the first trailer named `key` (case-insensitive).
    pub fn trailer(&self, key: &str) -> Option<&str> {
        self.trailers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

/// A working copy in the world's directory, with `origin` pointing at a remote.
#[derive(Debug)]
pub struct GitRepo {
    world: TestWorld,
    dir: PathBuf,
    url: String,
}

impl GitRepo {
    /// Clone `url` into a new directory of the world (an empty remote is fine).
    pub fn clone_from_url(world: &TestWorld, url: &str) -> Result<Self> {
        let dir = world.unique_dir("work")?;
        run(git(world).args(["clone", "--quiet", url]).arg(&dir))?;
        Ok(Self {
            world: world.clone(),
            dir,
            url: url.to_owned(),
        })
    }

    /// Clone `url`, copy `source` (a directory, e.g. `examples/quickstart/config-repo`)
    /// into it, commit and push to `main`. Returns the working copy and the commit id.
    pub fn seed(world: &TestWorld, url: &str, source: &Path) -> Result<(Self, String)> {
        let repo = Self::clone_from_url(world, url)?;
        repo.copy_dir(source)?;
        let sha = repo.commit(&format!("Seed from {}", source.display()))?;
        repo.push("main")?;
        Ok((repo, sha))
    }

    /// The working copy's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The remote URL it was cloned from.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Run `git ARGS` in the working copy; stdout on success.
    pub fn git<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(git(&self.world).arg("-C").arg(&self.dir).args(args))
    }

    /// Run `git ARGS` in the working copy and return its output whatever the status
    /// (to assert on failures, e.g. a rejected push).
    pub fn try_git<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = git(&self.world);
        cmd.arg("-C").arg(&self.dir).args(args);
        cmd.output()
            .with_context(|| format!("Failed to run {cmd:?}"))
    }

    /// Write `content` to `path` (relative), creating parent directories.
    pub fn write(&self, path: &str, content: &str) -> Result<()> {
        let full = self.dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&full, content)
            .with_context(|| format!("Failed to write `{}`", full.display()))
    }

    /// Delete `path` (relative) from the working tree.
    pub fn remove(&self, path: &str) -> Result<()> {
        let full = self.dir.join(path);
        if full.is_dir() {
            std::fs::remove_dir_all(&full)
        } else {
            std::fs::remove_file(&full)
        }
        .with_context(|| format!("Failed to remove `{}`", full.display()))
    }

    /// Copy a directory tree into the working tree (skipping any `.git`).
    pub fn copy_dir(&self, source: &Path) -> Result<()> {
        copy_tree(source, &self.dir)
            .with_context(|| format!("Failed to copy `{}` into the repository", source.display()))
    }

    /// Stage everything and commit as the test author; returns the new commit id.
    pub fn commit(&self, message: &str) -> Result<String> {
        self.commit_as(message, TEST_AUTHOR.0, TEST_AUTHOR.1)
    }

    /// Stage everything and commit with the given author; returns the new commit id.
    pub fn commit_as(&self, message: &str, name: &str, email: &str) -> Result<String> {
        self.git(["add", "--all"])?;
        self.git([
            "commit",
            "--quiet",
            "--allow-empty",
            "--cleanup=verbatim",
            &format!("--author={name} <{email}>"),
            "-m",
            message,
        ])?;
        Ok(self.git(["rev-parse", "HEAD"])?.trim().to_owned())
    }

    /// Push `HEAD` to `branch` on origin (fast-forward only).
    pub fn push(&self, branch: &str) -> Result<()> {
        self.git([
            "push",
            "--quiet",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
        ])?;
        Ok(())
    }

    /// Force-push `HEAD` to `branch` on origin.
    pub fn force_push(&self, branch: &str) -> Result<()> {
        self.git([
            "push",
            "--quiet",
            "--force",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
        ])?;
        Ok(())
    }

    /// Switch to `branch`: the remote's tip if it exists there, else a new branch here.
    pub fn switch(&self, branch: &str) -> Result<()> {
        self.fetch()?;
        let remote = format!("refs/remotes/origin/{branch}");
        if self
            .try_git(["rev-parse", "--verify", "--quiet", &remote])?
            .status
            .success()
        {
            self.git(["checkout", "--quiet", "-B", branch, &remote])?;
        } else {
            self.git(["checkout", "--quiet", "-B", branch])?;
        }
        Ok(())
    }

    /// Switch to a new branch with no history and an empty tree.
    pub fn switch_orphan(&self, branch: &str) -> Result<()> {
        self.git(["switch", "--quiet", "--orphan", branch])?;
        Ok(())
    }

    /// Fetch every branch of origin (pruning deleted ones).
    pub fn fetch(&self) -> Result<()> {
        self.git([
            "fetch",
            "--quiet",
            "--prune",
            "origin",
            "+refs/heads/*:refs/remotes/origin/*",
        ])?;
        Ok(())
    }

    /// The remote branches, after a fetch.
    pub fn branches(&self) -> Result<Vec<String>> {
        self.fetch()?;
        let out = self.git([
            "for-each-ref",
            "--format=%(refname)",
            "refs/remotes/origin/",
        ])?;
        Ok(out
            .lines()
            .filter_map(|r| r.strip_prefix("refs/remotes/origin/"))
            .filter(|b| *b != "HEAD")
            .map(str::to_owned)
            .collect())
    }

    /// The commit id at the tip of `branch` on the remote (fetches first).
    pub fn head(&self, branch: &str) -> Result<String> {
        self.fetch()?;
        let out = self
            .git([
                "rev-parse",
                "--verify",
                &format!("refs/remotes/origin/{branch}^{{commit}}"),
            ])
            .with_context(|| format!("Branch `{branch}` not found on `{}`", self.url))?;
        Ok(out.trim().to_owned())
    }

    /// The history of `branch` on the remote, newest first (fetches first).
    pub fn log(&self, branch: &str) -> Result<Vec<Commit>> {
        self.fetch()?;
        let format = format!(
            "--format=%H{FIELD}%P{FIELD}%an{FIELD}%ae{FIELD}%s{FIELD}%b{FIELD}\
             %(trailers:only,unfold){RECORD}"
        );
        let out = self.git(["log", &format, &format!("refs/remotes/origin/{branch}")])?;
        out.split(RECORD)
            .map(str::trim_start)
            .filter(|r| !r.is_empty())
            .map(parse_commit)
            .collect()
    }

    /// The content of `path` at the tip of `branch` on the remote (fetches first).
    pub fn show(&self, branch: &str, path: &str) -> Result<String> {
        self.fetch()?;
        self.git(["show", &format!("refs/remotes/origin/{branch}:{path}")])
    }
}

fn parse_commit(record: &str) -> Result<Commit> {
    let fields: Vec<&str> = record.split(FIELD).collect();
    let [
        sha,
        parents,
        author_name,
        author_email,
        subject,
        body,
        trailers,
    ] = fields[..]
    else {
        bail!("unexpected `git log` record {record:?}");
    };
    Ok(Commit {
        sha: sha.to_owned(),
        parents: parents.split_whitespace().map(str::to_owned).collect(),
        author_name: author_name.to_owned(),
        author_email: author_email.to_owned(),
        subject: subject.to_owned(),
        body: body.trim_end().to_owned(),
        trailers: trailers
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect(),
    })
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_name() == ".git" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
