//! What a promotion would commit, read from a preview's throwaway work directory.
//!
//! Owns: finding the worktrees `git-clone` made in a work directory (by their checkout
//! record), the unified diff of each against the commit it was checked out at — staged the
//! way `git-commit` stages (`git add -A`), so the diff is what a commit would hold, whether
//! or not a `git-commit` step already ran — and removing those worktrees from their shared
//! mirrors afterwards, under the mirror's lock ([`crate::MirrorLocks`]), so a preview leaves
//! no registration behind. It does not run steps or decide where a preview stops: that is
//! the engine's (it stops before the first step whose [`crate::Writes`] is not `Nothing`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::MirrorLocks;
use crate::git::{Git, GitError, read_record, redact_url};

/// How deep below the work directory a checkout is looked for (`./out`, `./a/b/c`).
const MAX_DEPTH: usize = 6;

/// The largest diff kept for one file; a larger one is replaced by a note saying its size.
pub const MAX_FILE_DIFF: usize = 256 * 1024;

/// A preview's failure to read or clean up its checkouts.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// A git command on a checkout failed.
    #[error("cannot diff the checkout `{checkout}`: {source}")]
    Diff {
        /// The checkout's path in the work directory.
        checkout: String,
        /// What git said.
        #[source]
        source: GitErrorText,
    },
    /// A checkout's record could not be read.
    #[error("cannot read the checkout record of `{checkout}`: {reason}")]
    Record {
        /// The checkout's path in the work directory.
        checkout: String,
        /// Why.
        reason: String,
    },
}

/// A git error's text (the git error type itself stays private to the crate).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GitErrorText(String);

impl From<GitError> for GitErrorText {
    fn from(error: GitError) -> Self {
        GitErrorText(error.to_string())
    }
}

/// How a file would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FileStatus {
    /// A new file.
    Added,
    /// A changed file.
    Modified,
    /// A removed file.
    Deleted,
    /// A file whose type changed (a file became a symlink).
    TypeChanged,
}

impl FileStatus {
    fn from_letter(letter: &str) -> FileStatus {
        match letter {
            "A" => FileStatus::Added,
            "D" => FileStatus::Deleted,
            "T" => FileStatus::TypeChanged,
            _ => FileStatus::Modified,
        }
    }

    /// `added`, `modified`, `deleted`, `type changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::TypeChanged => "type changed",
        }
    }
}

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    /// The file's path in the repository.
    pub path: String,
    /// How it changes.
    pub status: FileStatus,
    /// Its unified diff (`diff --git …` included).
    pub diff: String,
}

/// What one checkout would commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutDiff {
    /// The checkout's path in the work directory (`out`).
    pub checkout: String,
    /// The repository (user info redacted).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The branch it checked out, if it did (the stage branch).
    pub branch: Option<String>,
    /// The commit it was checked out at (`None`: a new branch).
    pub base: Option<String>,
    /// The files that change, by path.
    pub files: Vec<FileDiff>,
}

/// The diff of every checkout `git-clone` made under `work_dir` against the commit it was
/// checked out at, by checkout path; checkouts without changes are left out.
pub async fn checkout_diffs(
    git_bin: &Path,
    work_dir: &Path,
) -> Result<Vec<CheckoutDiff>, PreviewError> {
    let git = Git::at(git_bin);
    let mut diffs = Vec::new();
    for dir in worktrees(work_dir).await {
        let checkout = relative(work_dir, &dir);
        let record = read_record(&git, &dir)
            .await
            .map_err(|reason| PreviewError::Record {
                checkout: checkout.clone(),
                reason,
            })?;
        let Some(record) = record else { continue };
        let files = diff_worktree(&git, &dir, record.commit.as_deref())
            .await
            .map_err(|e| PreviewError::Diff {
                checkout: checkout.clone(),
                source: e.into(),
            })?;
        if files.is_empty() {
            continue;
        }
        diffs.push(CheckoutDiff {
            checkout,
            repo_url: redact_url(&record.repo_url),
            branch: record.branch,
            base: record.commit,
            files,
        });
    }
    Ok(diffs)
}

/// Removes every worktree under `work_dir` from its mirror (under the mirror's lock), then
/// the work directory itself. Returns how many worktrees were removed; what cannot be
/// removed is logged (the mirror's next `worktree prune` forgets a worktree whose
/// directory is gone).
pub async fn release_worktrees(git_bin: &Path, work_dir: &Path) -> usize {
    let git = Git::at(git_bin);
    let mut removed = 0;
    for dir in worktrees(work_dir).await {
        let common = git
            .run(
                &dir,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            )
            .await;
        let Ok(common) = common else { continue };
        let mirror = PathBuf::from(common.trim());
        let Some(mirror_str) = mirror.to_str().map(str::to_owned) else {
            continue;
        };
        let Some(dir_str) = dir.to_str().map(str::to_owned) else {
            continue;
        };
        let _locked = MirrorLocks::global().lock(&mirror).await;
        let args = [
            "--git-dir",
            mirror_str.as_str(),
            "worktree",
            "remove",
            "--force",
            "--force",
            dir_str.as_str(),
        ];
        match git.run(&mirror, &args).await {
            Ok(_) => removed += 1,
            Err(error) => {
                tracing::warn!(worktree = %dir.display(), %error, "cannot remove a preview's worktree")
            }
        }
    }
    if let Err(error) = tokio::fs::remove_dir_all(work_dir).await
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %work_dir.display(), %error, "cannot remove a preview's work directory");
    }
    removed
}

/// The worktrees (directories with a `.git` file) under `work_dir`, sorted; a worktree's
/// own subdirectories are not searched.
pub(crate) async fn worktrees(work_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![(work_dir.to_owned(), 0usize)];
    while let Some((dir, depth)) = todo.pop() {
        let Ok(mut entries) = tokio::fs::read_dir(&dir).await else {
            continue;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            let Ok(kind) = entry.file_type().await else {
                continue;
            };
            if !kind.is_dir() {
                continue;
            }
            let path = entry.path();
            if tokio::fs::symlink_metadata(path.join(".git"))
                .await
                .is_ok_and(|m| m.is_file())
            {
                found.push(path);
            } else if depth + 1 < MAX_DEPTH {
                todo.push((path, depth + 1));
            }
        }
    }
    found.sort();
    found
}

fn relative(work_dir: &Path, dir: &Path) -> String {
    dir.strip_prefix(work_dir)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// The files that `git add -A` in `dir` would change against `base` (`None`: the empty
/// tree), each with its unified diff.
async fn diff_worktree(
    git: &Git,
    dir: &Path,
    base: Option<&str>,
) -> Result<Vec<FileDiff>, GitError> {
    git.run(dir, &["add", "-A"]).await?;
    let empty_tree;
    let base = match base {
        Some(base) => base,
        None => {
            empty_tree = git
                .run(dir, &["hash-object", "-t", "tree", "/dev/null"])
                .await?;
            empty_tree.trim()
        }
    };
    let common = [
        "diff",
        "--cached",
        "--no-color",
        "--no-ext-diff",
        "--no-renames",
    ];
    let mut names = common.to_vec();
    names.extend(["--name-status", "-z", base, "--"]);
    let listed = git.run(dir, &names).await?;
    let mut fields = listed.split('\0').filter(|f| !f.is_empty());
    let mut files = Vec::new();
    while let (Some(letter), Some(path)) = (fields.next(), fields.next()) {
        let mut args = common.to_vec();
        args.extend(["--src-prefix=a/", "--dst-prefix=b/", base, "--", path]);
        let mut diff = git.run(dir, &args).await?;
        if diff.len() > MAX_FILE_DIFF {
            diff = format!(
                "diff --git a/{path} b/{path}\n(the diff is {} bytes, more than a preview shows; see the commit once promoted)\n",
                diff.len()
            );
        }
        files.push(FileDiff {
            path: path.to_owned(),
            status: FileStatus::from_letter(letter),
            diff,
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// A bare mirror with `stage/dev` holding `app.yaml`, and a worktree of it at `out`
    /// in `work`, with the record `git-clone` writes.
    fn checkout(root: &Path) -> (PathBuf, PathBuf, String) {
        let seed = root.join("seed");
        std::fs::create_dir_all(&seed).unwrap();
        git(&seed, &["init", "-q", "-b", "stage/dev"]);
        std::fs::write(seed.join("app.yaml"), "image: app:1.0.0\n").unwrap();
        std::fs::write(seed.join("gone.yaml"), "x: 1\n").unwrap();
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-q", "-m", "seed"]);
        let mirror = root.join("mirror.git");
        git(
            root,
            &[
                "clone",
                "-q",
                "--mirror",
                seed.to_str().unwrap(),
                "mirror.git",
            ],
        );
        let head = git(&mirror, &["rev-parse", "refs/heads/stage/dev"])
            .trim()
            .to_owned();
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let out = work.join("out");
        git(
            &mirror,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                out.to_str().unwrap(),
                &head,
            ],
        );
        let private = git(&out, &["rev-parse", "--path-format=absolute", "--git-dir"]);
        let record = serde_json::json!({
            "repoURL": "https://user:secret@git.example/cd.git",
            "branch": "stage/dev",
            "commit": head,
        });
        std::fs::write(
            Path::new(private.trim()).join("dray-checkout.json"),
            record.to_string(),
        )
        .unwrap();
        (mirror, work, head)
    }

    #[tokio::test]
    async fn the_diff_is_what_a_commit_would_hold_and_release_leaves_no_worktree() {
        let root = tempfile::tempdir().unwrap();
        let (mirror, work, head) = checkout(root.path());
        let out = work.join("out");
        std::fs::write(out.join("app.yaml"), "image: app:1.1.0\n").unwrap();
        std::fs::remove_file(out.join("gone.yaml")).unwrap();
        std::fs::write(out.join("new.yaml"), "y: 2\n").unwrap();
        // A step already committed part of it (as `git-commit` would): still in the diff.
        git(&out, &["add", "new.yaml"]);
        git(&out, &["commit", "-q", "-m", "rendered"]);

        let diffs = checkout_diffs(Path::new("git"), &work).await.unwrap();
        assert_eq!(diffs.len(), 1);
        let diff = &diffs[0];
        assert_eq!(diff.checkout, "out");
        assert_eq!(diff.branch.as_deref(), Some("stage/dev"));
        assert_eq!(diff.base.as_deref(), Some(head.as_str()));
        assert!(!diff.repo_url.contains("secret"), "{}", diff.repo_url);
        let statuses: Vec<_> = diff
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("app.yaml", FileStatus::Modified),
                ("gone.yaml", FileStatus::Deleted),
                ("new.yaml", FileStatus::Added),
            ]
        );
        assert!(diff.files[0].diff.contains("-image: app:1.0.0"));
        assert!(diff.files[0].diff.contains("+image: app:1.1.0"));
        assert!(
            diff.files[0]
                .diff
                .starts_with("diff --git a/app.yaml b/app.yaml")
        );

        assert_eq!(release_worktrees(Path::new("git"), &work).await, 1);
        assert!(!work.exists());
        let listed = git(&mirror, &["worktree", "list", "--porcelain"]);
        assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
        // The stage branch did not move.
        assert_eq!(
            git(&mirror, &["rev-parse", "refs/heads/stage/dev"]).trim(),
            head
        );
    }

    #[tokio::test]
    async fn an_unchanged_checkout_has_no_diff() {
        let root = tempfile::tempdir().unwrap();
        let (_mirror, work, _) = checkout(root.path());
        assert!(
            checkout_diffs(Path::new("git"), &work)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(release_worktrees(Path::new("git"), &work).await, 1);
    }
}
