//! What the forge doubles (GitHub, GitLab, Gitea/Forgejo, Bitbucket) share about the real
//! git repositories behind them: reading a branch, whether two branches merge cleanly,
//! landing a pull request with real commits (merge commit, squash, rebase, fast-forward)
//! made by the git CLI in a temporary clone and pushed to the bare repository, moving a
//! branch (a push that races a merge), and mergeability that is known only "later"
//! ([`LaterCheck`]: a counter of reads, never a clock). Test tooling only.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::git_repo::git;
use crate::world::TestWorld;

/// How a pull request lands (GitHub's merge methods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// `git merge --no-ff`.
    MergeCommit,
    /// One commit with the squashed changes, on the base.
    Squash,
    /// The head's commits replayed onto the base.
    Rebase,
    /// The base fast-forwarded to the head (GitLab `ff`).
    FastForward,
    /// A squash commit on the source, then a merge commit (GitLab squash + merge commit).
    SquashThenMerge,
}

/// What a landing made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landed {
    /// The new head of the base branch.
    pub head: String,
    /// The squash commit, when one was made.
    pub squash: Option<String>,
}

/// `git rev-parse refs/heads/BRANCH` in the bare repository.
pub(crate) fn branch_sha(world: &TestWorld, bare: &Path, branch: &str) -> Option<String> {
    let out = git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("refs/heads/{branch}^{{commit}}"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Whether `head` merges cleanly into `base` (`git merge-tree --write-tree`).
pub(crate) fn merges_cleanly(world: &TestWorld, bare: &Path, base: &str, head: &str) -> bool {
    git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["merge-tree", "--write-tree", "--name-only"])
        .arg(format!("refs/heads/{base}"))
        .arg(format!("refs/heads/{head}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Lands `head` on `base` in the bare repository `bare` with the git CLI in a temporary
/// clone, committing as `committer`; `Ok(Err(reason))` when git cannot (a conflict, not a
/// fast-forward).
// Each argument is one fact of the merge; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn land(
    world: &TestWorld,
    bare: &Path,
    head: &str,
    base: &str,
    landing: Landing,
    message: &str,
    squash_message: &str,
    committer: (&str, &str),
) -> Result<std::result::Result<Landed, String>> {
    let dir = world.unique_dir("forge-merge")?;
    let run = |args: &[&str]| -> Result<std::process::Output> {
        git(world)
            .current_dir(&dir)
            .env("GIT_AUTHOR_NAME", committer.0)
            .env("GIT_AUTHOR_EMAIL", committer.1)
            .env("GIT_COMMITTER_NAME", committer.0)
            .env("GIT_COMMITTER_EMAIL", committer.1)
            .args(args)
            .output()
            .with_context(|| format!("Failed to run git {args:?}"))
    };
    let must = |args: &[&str]| -> Result<String> {
        let out = run(args)?;
        if !out.status.success() {
            bail!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let bare_str = bare.to_str().context("a UTF-8 repository path")?;
    must(&["clone", "-q", "--no-tags", bare_str, "."])?;
    let base_ref = format!("origin/{base}");
    let head_ref = format!("origin/{head}");
    must(&["checkout", "-q", "-B", base, &base_ref])?;
    let mut squash = None;
    let conflict = |what: &str| Ok(Err(format!("{what} of `{head}` into `{base}` failed")));
    match landing {
        Landing::MergeCommit => {
            if !run(&["merge", "-q", "--no-ff", "-m", message, &head_ref])?
                .status
                .success()
            {
                return conflict("merge");
            }
        }
        Landing::Squash => {
            if !run(&["merge", "-q", "--squash", &head_ref])?
                .status
                .success()
            {
                return conflict("squash");
            }
            must(&["commit", "-q", "--allow-empty", "-m", squash_message])?;
            squash = Some(must(&["rev-parse", "HEAD"])?);
        }
        Landing::FastForward => {
            if !run(&["merge", "-q", "--ff-only", &head_ref])?
                .status
                .success()
            {
                return conflict("fast-forward");
            }
        }
        Landing::Rebase => {
            must(&["checkout", "-q", "--detach", &head_ref])?;
            if !run(&["rebase", "-q", base])?.status.success() {
                let _ = run(&["rebase", "--abort"]);
                return conflict("rebase");
            }
        }
        Landing::SquashThenMerge => {
            let fork = must(&["merge-base", &base_ref, &head_ref])?;
            must(&["checkout", "-q", "--detach", &head_ref])?;
            must(&["reset", "-q", "--soft", &fork])?;
            must(&["commit", "-q", "--allow-empty", "-m", squash_message])?;
            let sha = must(&["rev-parse", "HEAD"])?;
            must(&["checkout", "-q", base])?;
            if !run(&["merge", "-q", "--no-ff", "-m", message, &sha])?
                .status
                .success()
            {
                return conflict("merge");
            }
            squash = Some(sha);
        }
    }
    let head_sha = must(&["rev-parse", "HEAD"])?;
    must(&["push", "-q", "origin", &format!("HEAD:refs/heads/{base}")])?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Ok(Landed {
        head: head_sha,
        squash,
    }))
}

/// Moves `branch` of the bare repository to `sha` (a commit already in it), as a push would.
pub(crate) fn move_branch(world: &TestWorld, bare: &Path, branch: &str, sha: &str) -> bool {
    git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["update-ref", &format!("refs/heads/{branch}"), sha])
        .status()
        .is_ok_and(|s| s.success())
}

/// Mergeability a forge computes "later": unknown for the first `reads` looks after the
/// pull request was created or after its head or base moved.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaterCheck {
    /// The head and base commits the check was last (being) made for.
    shas: Option<(Option<String>, Option<String>)>,
    /// How many more looks say "unknown".
    left: u32,
}

impl LaterCheck {
    /// Whether the answer for `shas` (head, base) is known; a change of `shas` starts
    /// the check again with `reads` looks to go; a look that `counts` moves it on.
    pub(crate) fn known(
        &mut self,
        shas: (Option<String>, Option<String>),
        reads: u32,
        counts: bool,
    ) -> bool {
        if self.shas.as_ref() != Some(&shas) {
            self.shas = Some(shas);
            self.left = reads;
        }
        if self.left == 0 {
            return true;
        }
        if counts {
            self.left -= 1;
        }
        false
    }
}
