//! Comparing two commits of one repository through its mirror, for the Freight diff: the
//! commits that lead from one to the other (first parent, newest first, bounded) and the
//! unified diff of their trees, split per file and bounded in size.
//!
//! Owns reading those from the mirror (gix for the history walk, the `git` CLI for the tree
//! diff, which may fetch blobs a partial mirror lacks, within [`DIFF_TIMEOUT`]). Decides
//! nothing about Freight or Stages.

use std::time::Duration;

use super::LoggedCommit;
use super::cli;
use super::error::{GitDiscoveryError, redact_url};
use super::history::first_parent_log;
use super::mirror::{self, GitCredentials, MirrorCache};

/// The longest a tree diff may run (blobs of a partial mirror are fetched on the way).
pub const DIFF_TIMEOUT: Duration = Duration::from_secs(60);

/// The commits from one commit to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRange {
    /// `to` and its first parents down to (not including) `from`, newest first.
    pub commits: Vec<LoggedCommit>,
    /// Whether the walk reached `from`; `false` when the bound stopped it first or `from`
    /// is not a first-parent ancestor of `to`.
    pub reached: bool,
}

/// One file's part of a tree diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The file's path (the new path of a rename).
    pub path: String,
    /// `added`, `deleted`, `renamed` or `modified`.
    pub change: FileChange,
    /// Its unified diff, `diff --git` header included.
    pub patch: String,
}

/// How a file changed between two trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    /// Only in the newer tree.
    Added,
    /// Only in the older tree.
    Deleted,
    /// Moved (and maybe changed).
    Renamed,
    /// Changed in place.
    Modified,
}

impl FileChange {
    /// How the change is written.
    pub fn as_str(self) -> &'static str {
        match self {
            FileChange::Added => "added",
            FileChange::Deleted => "deleted",
            FileChange::Renamed => "renamed",
            FileChange::Modified => "modified",
        }
    }
}

/// The diff of two trees.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeDiff {
    /// Each changed file, in git's order.
    pub files: Vec<FilePatch>,
    /// Whether the diff was longer than asked for and cut (at a file boundary when one
    /// fits).
    pub truncated: bool,
}

impl MirrorCache {
    /// The commits of `url` from `from` (exclusive; `None`: from the beginning) to `to`,
    /// at most `bound`, after bringing the mirror up to date.
    pub async fn commits_between(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
        from: Option<&str>,
        to: &str,
        bound: usize,
    ) -> Result<CommitRange, GitDiscoveryError> {
        let path = self.fetch(url, creds).await?;
        let (task_url, from, to) = (url.to_owned(), from.map(str::to_owned), to.to_owned());
        mirror::blocking(url, move || {
            let history = |reason: String| GitDiscoveryError::History {
                url: redact_url(&task_url),
                reason,
            };
            let repo = gix::open(&path).map_err(|e| GitDiscoveryError::Mirror {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            // One more than asked: whether `from` comes right after the bound.
            let log = first_parent_log(&repo, &to, bound.saturating_add(1)).map_err(history)?;
            let stop = log.iter().position(|c| Some(&c.id) == from.as_ref());
            let reached = stop.is_some() || (from.is_none() && log.len() <= bound);
            let commits = log
                .into_iter()
                .take(stop.unwrap_or(bound).min(bound))
                .map(|c| LoggedCommit {
                    id: c.id,
                    message: c.message,
                    author: c.author,
                    committed_at: c.committed_at,
                })
                .collect();
            Ok(CommitRange { commits, reached })
        })
        .await
    }

    /// The unified diff from the tree of `from` to the tree of `to` in `url`, at most
    /// `max_bytes` of it. The mirror is brought up to date first.
    pub async fn tree_diff(
        &self,
        url: &str,
        creds: Option<&GitCredentials>,
        from: &str,
        to: &str,
        max_bytes: usize,
    ) -> Result<TreeDiff, GitDiscoveryError> {
        let path = self.fetch(url, creds).await?;
        let history = |reason: String| GitDiscoveryError::History {
            url: redact_url(url),
            reason,
        };
        for id in [from, to] {
            if id.len() < 7 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(history(format!("`{id}` is not a commit id")));
            }
        }
        // The mirror's remote is configured without user info; credentials go through the
        // environment, for the blobs a partial mirror fetches on the way.
        let (_, creds) = cli::split_user_info(url, creds);
        let args = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--find-renames",
            from,
            to,
            "--",
        ];
        let cmd = cli::command(&path, &args, creds.as_ref()).map_err(history)?;
        let ran = match cli::run(cmd, DIFF_TIMEOUT).await {
            Ok(ran) => ran,
            Err(cli::RunError::Spawn(e)) => return Err(history(e)),
            Err(cli::RunError::TimedOut) => {
                return Err(history(format!(
                    "`git diff {from} {to}` did not finish within {}s",
                    DIFF_TIMEOUT.as_secs()
                )));
            }
        };
        if !ran.success {
            return Err(history(format!(
                "`git diff {from} {to}` failed: {}",
                ran.stderr
            )));
        }
        Ok(split_patch(
            &String::from_utf8_lossy(&ran.stdout),
            max_bytes,
        ))
    }
}

/// A `git diff` output split per file, cut after `max_bytes`.
fn split_patch(output: &str, max_bytes: usize) -> TreeDiff {
    let mut diff = TreeDiff::default();
    let mut used = 0;
    let mut starts: Vec<usize> = output
        .match_indices("diff --git ")
        .map(|(i, _)| i)
        .collect();
    starts.retain(|&i| i == 0 || output.as_bytes()[i - 1] == b'\n');
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(output.len());
        let mut patch = &output[start..end];
        if used + patch.len() > max_bytes {
            diff.truncated = true;
            if !diff.files.is_empty() {
                break;
            }
            let mut cut = max_bytes.min(patch.len());
            while !patch.is_char_boundary(cut) {
                cut -= 1;
            }
            patch = &patch[..cut];
        }
        used += patch.len();
        diff.files.push(file_patch(patch));
        if diff.truncated {
            break;
        }
    }
    diff
}

fn file_patch(patch: &str) -> FilePatch {
    let mut change = FileChange::Modified;
    let mut path = None;
    for line in patch.lines().take_while(|l| !l.starts_with("@@")) {
        if line.starts_with("new file mode") {
            change = FileChange::Added;
        } else if line.starts_with("deleted file mode") {
            change = FileChange::Deleted;
        } else if let Some(to) = line.strip_prefix("rename to ") {
            change = FileChange::Renamed;
            path = Some(to.to_owned());
        } else if let Some(to) = line.strip_prefix("+++ b/") {
            path.get_or_insert_with(|| to.to_owned());
        } else if let Some(from) = line.strip_prefix("--- a/") {
            if change == FileChange::Deleted {
                path.get_or_insert_with(|| from.to_owned());
            }
        }
    }
    let path = path.unwrap_or_else(|| {
        // `diff --git a/x b/x` with no content lines (a mode change, a binary file).
        let header = patch.lines().next().unwrap_or_default();
        header
            .rsplit_once(" b/")
            .map(|(_, p)| p.to_owned())
            .unwrap_or_default()
    });
    FilePatch {
        path,
        change,
        patch: patch.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "diff --git a/dev/app.yaml b/dev/app.yaml\nindex 1..2 100644\n--- a/dev/app.yaml\n+++ b/dev/app.yaml\n@@ -1 +1 @@\n-image: app:1.0.0\n+image: app:1.1.0\ndiff --git a/dev/new.yaml b/dev/new.yaml\nnew file mode 100644\nindex 0..3\n--- /dev/null\n+++ b/dev/new.yaml\n@@ -0,0 +1 @@\n+kind: ConfigMap\ndiff --git a/old.yaml b/old.yaml\ndeleted file mode 100644\nindex 4..0\n--- a/old.yaml\n+++ /dev/null\n@@ -1 +0,0 @@\n-kind: Secret\ndiff --git a/a.yaml b/b.yaml\nsimilarity index 100%\nrename from a.yaml\nrename to b.yaml\n";

    #[test]
    fn a_diff_splits_per_file_with_each_change() {
        let diff = split_patch(OUTPUT, usize::MAX);
        let got: Vec<_> = diff
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.change))
            .collect();
        assert_eq!(
            got,
            [
                ("dev/app.yaml", FileChange::Modified),
                ("dev/new.yaml", FileChange::Added),
                ("old.yaml", FileChange::Deleted),
                ("b.yaml", FileChange::Renamed),
            ]
        );
        assert!(!diff.truncated);
        assert!(diff.files[0].patch.contains("+image: app:1.1.0"));
        assert!(!diff.files[0].patch.contains("new file mode"));
        assert_eq!(
            diff.files.iter().map(|f| f.patch.len()).sum::<usize>(),
            OUTPUT.len()
        );
    }

    #[test]
    fn a_long_diff_is_cut_at_a_file_boundary_or_inside_the_first_file() {
        let first = OUTPUT.find("diff --git a/dev/new.yaml").unwrap();
        let diff = split_patch(OUTPUT, first + 10);
        assert!(diff.truncated);
        assert_eq!(diff.files.len(), 1);
        assert_eq!(diff.files[0].patch.len(), first);
        let tiny = split_patch(OUTPUT, 12);
        assert!(tiny.truncated);
        assert_eq!(tiny.files.len(), 1);
        assert_eq!(tiny.files[0].patch, "diff --git a");
        assert_eq!(split_patch("", 10), TreeDiff::default());
    }
}
