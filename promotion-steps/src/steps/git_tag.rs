//! `git-tag`: makes an annotated tag of a worktree's HEAD, private to the promotion until
//! `git-push` (with `tag:`) pushes it.
//!
//! Dray's worktrees share one bare mirror per repository, and `git tag` would write
//! `refs/tags/<tag>` into that mirror: visible to every other promotion and to discovery
//! before anything was pushed, and left behind by a promotion that is abandoned. So the tag
//! object is made with `git mktag` and kept under the worktree's own ref
//! `refs/worktree/dray/tags/<tag>` (git keeps `refs/worktree/*` per worktree, in its private
//! git directory): the mirror's `refs/tags` never changes, and the ref goes away with the
//! worktree (`git worktree prune` when the work directory is gone), or when `git-clone`
//! takes the worktree warm for the Stage's next promotion.
//!
//! A tag of that name the mirror already knows (fetched from the remote) at another commit
//! is refused naming it; at this very commit it is reused, so a re-run, or a promotion of
//! the same commit again, succeeds. Idempotent: a re-run replaces the private ref.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::git::{DEFAULT_EMAIL, DEFAULT_NAME, Git, GitError, is_valid_ref_name, read_record};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-tag";

/// The configuration of `git-tag` (Kargo's fields).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The worktree, relative to the work directory (as given to `git-clone`).
    pub(crate) path: String,
    /// The tag to create, e.g. `v1.2.0`.
    pub(crate) tag: String,
    /// The annotation message of the tag.
    pub(crate) message: String,
}

/// The `git-tag` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitTag;

/// The worktree-private ref that holds tag `tag` until it is pushed.
pub(crate) fn private_ref(tag: &str) -> String {
    format!("refs/worktree/dray/tags/{tag}")
}

#[async_trait]
impl TypedStep for GitTag {
    const KIND: &'static str = KIND;
    // The tag stays in the worktree: `git-push` is what writes it to the remote.
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        if let Err(reason) = validate(&config) {
            return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
        }
        let dir = match ctx.path(&config.path) {
            Ok(dir) => dir,
            Err(reason) => return StepOutcome::failed(reason),
        };
        let git = Git::local(ctx);
        let not_cloned = || {
            StepOutcome::failed(format!(
                "`{}` was not checked out by `git-clone`; hint: clone the repository into it first",
                config.path
            ))
        };
        if tokio::fs::symlink_metadata(dir.join(".git")).await.is_err() {
            return not_cloned();
        }
        let record = match read_record(&git, &dir).await {
            Ok(Some(record)) => record,
            Ok(None) => return not_cloned(),
            Err(e) => return StepOutcome::errored(e),
        };
        let head = match git.resolve(&dir, "HEAD").await {
            Ok(Some(head)) => head,
            Ok(None) => {
                return StepOutcome::failed(format!(
                    "nothing to tag: `{}` has no commit; hint: commit first with `git-commit`",
                    config.path
                ));
            }
            Err(e) => return StepOutcome::errored(e.to_string()),
        };
        match tag(&git, &dir, &config, &head).await {
            Ok(Ok(())) => {}
            Ok(Err(elsewhere)) => {
                return StepOutcome::failed(format!(
                    "tag `{}` already exists in `{}` at commit {elsewhere}, not at HEAD {} of `{}`; hint: choose a tag name of its own for this promotion (e.g. with `${{{{ ctx.promotion }}}}` or the Freight's version in it), or delete the tag from the repository first",
                    config.tag,
                    crate::git::redact_url(&record.repo_url),
                    crate::git::short_sha(&head),
                    config.path
                ));
            }
            Err(e) => {
                return StepOutcome::errored(format!(
                    "cannot tag `{}` as `{}`: {e}",
                    config.path, config.tag
                ));
            }
        }
        ctx.log(&format!(
            "tagged {} of `{}` as `{}` (pushed by `git-push` with `tag: {}`)",
            crate::git::short_sha(&head),
            config.path,
            config.tag,
            config.tag
        ));
        let mut outputs = Map::new();
        outputs.insert("commit".into(), Value::String(head));
        StepOutcome::succeeded(outputs)
    }
}

fn validate(config: &Config) -> Result<(), String> {
    if config.path.trim().is_empty() {
        return Err("`path` must not be empty".into());
    }
    if !is_valid_ref_name(&config.tag) {
        return Err(format!("`tag` `{}` is not a valid tag name", config.tag));
    }
    if config.message.trim().is_empty() {
        return Err("`message` must not be empty: an annotated tag needs one".into());
    }
    Ok(())
}

/// Points the worktree's private ref at an annotated tag of `head`: `Ok(Err(commit))` when
/// the mirror already has the tag at another commit (described).
async fn tag(
    git: &Git,
    dir: &std::path::Path,
    config: &Config,
    head: &str,
) -> Result<Result<(), String>, GitError> {
    let public = format!("refs/tags/{}", config.tag);
    let object = match git.resolve(dir, &public).await? {
        Some(commit) if commit != head => return Ok(Err(git.describe(dir, &commit).await)),
        // Fetched from the remote at this very commit: that tag is the one to push.
        Some(_) => git.run(dir, &["rev-parse", "--verify", &public]).await?,
        None => {
            let now = jiff::Timestamp::now().as_second();
            let text = format!(
                "object {head}\ntype commit\ntag {}\ntagger {DEFAULT_NAME} <{DEFAULT_EMAIL}> {now} +0000\n\n{}\n",
                config.tag,
                config.message.trim_end()
            );
            git.run_with_input(dir, &["mktag"], Some(&text)).await?
        }
    };
    git.run(
        dir,
        &["update-ref", &private_ref(&config.tag), object.trim()],
    )
    .await?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::steps::git_clone::GitClone;
    use crate::steps::git_push::GitPush;
    use crate::testing::{MirrorRepos, bare_remote, failed, git, git_context, outputs, push_files};

    struct World {
        dir: tempfile::TempDir,
        url: String,
        repos: Arc<MirrorRepos>,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = bare_remote(dir.path(), "config.git");
        push_files(&url, "main", &[("README", "hi\n")], "init");
        World {
            dir,
            url,
            repos: Arc::new(MirrorRepos::new()),
        }
    }

    impl World {
        async fn checkout(&self, promotion: &str) -> (StepContext, PathBuf) {
            let work = self.dir.path().join("work").join(promotion);
            std::fs::create_dir_all(&work).unwrap();
            let mut ctx = git_context(&work, self.repos.clone());
            ctx.promotion = promotion.into();
            let config =
                json!({"repoURL": self.url, "checkout": [{"branch": "main", "path": "out"}]});
            outputs(GitClone.run(&ctx, config).await);
            (ctx, work.join("out"))
        }

        fn remote(&self) -> PathBuf {
            self.dir.path().join("config.git")
        }

        /// Every tag ref of every mirror in the cache.
        fn mirror_tags(&self) -> String {
            let mut all = String::new();
            for entry in std::fs::read_dir(self.repos.root()).unwrap().flatten() {
                all.push_str(&git(&entry.path(), &["for-each-ref", "refs/tags"]));
            }
            all
        }
    }

    #[tokio::test]
    async fn a_tag_stays_in_its_worktree_until_git_push_pushes_it() {
        let w = world();
        let (ctx, out) = w.checkout("p-1").await;
        let head = git(&out, &["rev-parse", "HEAD"]);
        let config = json!({"path": "out", "tag": "v1.0.0", "message": "release 1.0.0"});
        let got = outputs(GitTag.run(&ctx, config.clone()).await);
        assert_eq!(got["commit"], json!(head));
        // Annotated, with the message, at HEAD; only in this worktree.
        let private = private_ref("v1.0.0");
        assert_eq!(git(&out, &["cat-file", "-t", &private]), "tag");
        assert_eq!(
            git(&out, &["rev-parse", &format!("{private}^{{commit}}")]),
            head
        );
        let body = git(&out, &["cat-file", "-p", &private]);
        assert!(
            body.contains("tag v1.0.0\n") && body.ends_with("release 1.0.0"),
            "{body}"
        );
        assert_eq!(w.mirror_tags(), "");
        let (_, other) = w.checkout("p-2").await;
        assert_eq!(git(&other, &["for-each-ref", "refs/worktree"]), "");
        // A re-run is fine.
        outputs(GitTag.run(&ctx, config).await);

        let pushed = outputs(
            GitPush
                .run(&ctx, json!({"path": "out", "tag": "v1.0.0"}))
                .await,
        );
        assert_eq!(pushed["commit"], json!(head));
        assert_eq!(pushed["tag"], json!("v1.0.0"));
        let remote = w.remote();
        assert_eq!(git(&remote, &["cat-file", "-t", "refs/tags/v1.0.0"]), "tag");
        assert_eq!(git(&remote, &["rev-parse", "v1.0.0^{commit}"]), head);
        // Pushing again (a re-run after a crash) finds it there.
        outputs(
            GitPush
                .run(&ctx, json!({"path": "out", "tag": "v1.0.0"}))
                .await,
        );

        // An abandoned promotion's tag goes with its worktree: nothing is left in the mirror.
        let (ctx2, other) = w.checkout("p-3").await;
        let config = json!({"path": "out", "tag": "v9", "message": "never pushed"});
        outputs(GitTag.run(&ctx2, config).await);
        std::fs::remove_dir_all(other.parent().unwrap()).unwrap();
        for entry in std::fs::read_dir(w.repos.root()).unwrap().flatten() {
            git(&entry.path(), &["worktree", "prune"]);
            let all = git(&entry.path(), &["for-each-ref", "--format=%(refname)"]);
            assert!(!all.contains("v9"), "{all}");
            let found = std::process::Command::new("find")
                .arg(entry.path())
                .args(["-path", "*dray/tags/v9*"])
                .output()
                .unwrap();
            assert!(found.stdout.is_empty(), "{found:?}");
        }
    }

    #[tokio::test]
    async fn a_tag_the_remote_has_elsewhere_is_refused_naming_its_commit() {
        let w = world();
        let (ctx, out) = w.checkout("p-1").await;
        outputs(
            GitTag
                .run(&ctx, json!({"path": "out", "tag": "v1", "message": "one"}))
                .await,
        );
        outputs(GitPush.run(&ctx, json!({"path": "out", "tag": "v1"})).await);
        let first = git(&out, &["log", "-1", "--format=%h"]);
        push_files(&w.url, "main", &[("README", "two\n")], "two");

        // A later promotion (its mirror fetched the tag) is refused by git-tag.
        let (ctx2, out2) = w.checkout("p-2").await;
        let reason = failed(
            GitTag
                .run(
                    &ctx2,
                    json!({"path": "out", "tag": "v1", "message": "again"}),
                )
                .await,
        );
        assert!(reason.contains("tag `v1` already exists"), "{reason}");
        assert!(reason.contains(&format!("{first} \"init\"")), "{reason}");
        assert!(reason.contains("hint:"), "{reason}");

        // One that tagged before the tag was pushed is refused by git-push.
        let (ctx3, out3) = (ctx2.clone(), out2);
        git(&out3, &["update-ref", &private_ref("v2"), "HEAD"]);
        let theirs = push_files(&w.url, "main", &[("README", "three\n")], "three");
        git(&w.remote(), &["tag", "v2", &theirs]);
        let reason = failed(
            GitPush
                .run(&ctx3, json!({"path": "out", "tag": "v2"}))
                .await,
        );
        assert!(reason.contains("tag `v2` already exists"), "{reason}");
        assert!(reason.contains(&theirs[..12]), "{reason}");
        assert_eq!(git(&w.remote(), &["rev-parse", "v2"]), theirs);
    }

    #[tokio::test]
    async fn bad_configs_and_untagged_pushes_fail() {
        let w = world();
        let (ctx, _out) = w.checkout("x-1").await;
        let cases = [
            (
                json!({"path": "out", "tag": "a b", "message": "m"}),
                "not a valid tag name",
            ),
            (
                json!({"path": "out", "tag": "v1", "message": " "}),
                "`message`",
            ),
            (
                json!({"path": "out", "tag": "v1"}),
                "missing field `message`",
            ),
            (
                json!({"path": "elsewhere", "tag": "v1", "message": "m"}),
                "`git-clone`",
            ),
        ];
        for (config, want) in cases {
            let reason = failed(GitTag.run(&ctx, config.clone()).await);
            assert!(reason.contains(want), "{config}: {reason}");
        }
        let reason = failed(
            GitPush
                .run(&ctx, json!({"path": "out", "tag": "nope"}))
                .await,
        );
        assert!(reason.contains("no tag `nope`"), "{reason}");
        let reason = failed(
            GitPush
                .run(
                    &ctx,
                    json!({"path": "out", "tag": "v1", "targetBranch": "main"}),
                )
                .await,
        );
        assert!(reason.contains("exactly one of"), "{reason}");
    }
}
