//! `git-clear`: empties a worktree (everything but `.git`), so that a render step writes
//! the complete new content of a stage branch and deleted files stay deleted.
//!
//! It only touches a directory that is a git worktree (has a `.git`), never anything else.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-clear";

/// The configuration of `git-clear`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The worktree to empty, relative to the work directory (as given to `git-clone`).
    pub(crate) path: String,
}

/// The `git-clear` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitClear;

#[async_trait]
impl TypedStep for GitClear {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let dir = match ctx.path(&config.path) {
            Ok(dir) => dir,
            Err(reason) => return StepOutcome::failed(reason),
        };
        if tokio::fs::symlink_metadata(dir.join(".git")).await.is_err() {
            return StepOutcome::failed(format!(
                "`{}` is not a git worktree; hint: check it out with `git-clone` first",
                config.path
            ));
        }
        match clear(&dir).await {
            Ok(removed) => {
                ctx.log(&format!("cleared {removed} entries from `{}`", config.path));
                StepOutcome::done()
            }
            Err(e) => StepOutcome::errored(format!("cannot clear `{}`: {e}", config.path)),
        }
    }
}

/// Removes everything in `dir` except `.git`; returns how many top-level entries went.
async fn clear(dir: &std::path::Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut entries = tokio::fs::read_dir(dir).await?;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_name() == ".git" {
            continue;
        }
        // `file_type` does not follow symlinks: a link is removed, never its target.
        if entry.file_type().await?.is_dir() {
            tokio::fs::remove_dir_all(entry.path()).await?;
        } else {
            tokio::fs::remove_file(entry.path()).await?;
        }
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[tokio::test]
    async fn clears_everything_but_git() {
        let work = tempfile::tempdir().unwrap();
        let wt = work.path().join("out");
        std::fs::create_dir_all(wt.join("dir/sub")).unwrap();
        std::fs::write(wt.join(".git"), "gitdir: /nowhere\n").unwrap();
        std::fs::write(wt.join("a.yaml"), "a").unwrap();
        std::fs::write(wt.join(".hidden"), "h").unwrap();
        std::fs::write(wt.join("dir/sub/b.yaml"), "b").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "k").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), wt.join("link")).unwrap();

        let ctx = context(work.path());
        let outcome = GitClear.run(&ctx, json!({"path": "./out"})).await;
        assert_eq!(outcome, StepOutcome::done());
        let left: Vec<_> = std::fs::read_dir(&wt)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(".git")]);
        assert!(outside.path().join("keep").exists(), "followed a symlink");
        // Idempotent.
        assert_eq!(
            GitClear.run(&ctx, json!({"path": "./out"})).await,
            StepOutcome::done()
        );
    }

    #[tokio::test]
    async fn refuses_what_is_not_a_worktree_and_bad_config() {
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("plain")).unwrap();
        std::fs::write(work.path().join("plain/f"), "f").unwrap();
        let ctx = context(work.path());
        let reason = failed(GitClear.run(&ctx, json!({"path": "plain"})).await);
        assert!(reason.contains("not a git worktree"), "{reason}");
        assert!(work.path().join("plain/f").exists());
        let reason = failed(GitClear.run(&ctx, json!({"path": "../x"})).await);
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
        let reason = failed(
            GitClear
                .run(&ctx, json!({"path": "x", "force": true}))
                .await,
        );
        assert!(reason.contains("invalid `git-clear` config"), "{reason}");
    }
}
