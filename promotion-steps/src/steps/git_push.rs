//! `git-push`: pushes a worktree's HEAD to a branch of the repository it was cloned from,
//! without losing anyone's commits.
//!
//! Pushes to one branch are serialised inside the process ([`crate::PushLocks`]). A
//! non-fast-forward (someone else pushed first) is fetched, our commits are rebased onto
//! it and the push is retried with exponential backoff; a rebase conflict or running out
//! of attempts fails, naming the remote commit in the way. Never `--force` unless
//! `force: true`.
//!
//! Idempotent: when the branch already contains our HEAD, or a commit with the same
//! message from this promotion (our commit, rebased on an earlier attempt), it succeeds
//! without pushing.
//!
//! With `tag:` (Kargo's field) it pushes that tag instead of a branch: the one `git-tag`
//! keeps private to the worktree (see [`super::git_tag`]), or one the worktree already
//! has. No rebase and no retry: a tag the remote has at another commit is refused naming
//! that commit; at the same commit it is already there, which succeeds.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::git::{Git, GitError, Signing, is_valid_ref_name, read_record, redact_url};
use crate::{Effect, PushLocks, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-push";

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How many remote commits are searched for our change, rebased on an earlier attempt.
const SEARCH_DEPTH: &str = "500";

/// The configuration of `git-push`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The worktree, relative to the work directory (as given to `git-clone`).
    pub(crate) path: String,
    /// The branch to push to, e.g. `stage/prod`.
    #[serde(default)]
    pub(crate) target_branch: Option<String>,
    /// Push to a new branch `dray/promotion/<promotion>` instead (for a pull request).
    #[serde(default)]
    pub(crate) generate_target_branch: bool,
    /// Overwrite the branch instead of rebasing onto it.
    #[serde(default)]
    pub(crate) force: bool,
    /// How many times to try before giving up (default 5).
    #[serde(default = "default_max_attempts")]
    pub(crate) max_attempts: u32,
    /// Push this tag (made by `git-tag`) instead of a branch.
    #[serde(default)]
    pub(crate) tag: Option<String>,
}

fn default_max_attempts() -> u32 {
    5
}

/// The `git-push` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitPush;

#[async_trait]
impl TypedStep for GitPush {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Git;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        if let Some(tag) = &config.tag {
            return push_tag(ctx, &config, tag).await;
        }
        let branch = match target_branch(ctx, &config) {
            Ok(branch) => branch,
            Err(reason) => {
                return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
            }
        };
        let dir = match ctx.path(&config.path) {
            Ok(dir) => dir,
            Err(reason) => return StepOutcome::failed(reason),
        };
        let not_cloned = || {
            StepOutcome::failed(format!(
                "`{}` was not checked out by `git-clone`; hint: clone the repository into it first",
                config.path
            ))
        };
        if tokio::fs::symlink_metadata(dir.join(".git")).await.is_err() {
            return not_cloned();
        }
        let record = match read_record(&Git::local(ctx), &dir).await {
            Ok(Some(record)) => record,
            Ok(None) => return not_cloned(),
            Err(e) => return StepOutcome::errored(e),
        };
        let signing =
            match Signing::for_worktree(ctx, &Git::local(ctx), &dir, &record.repo_url).await {
                Ok(signing) => signing,
                Err(e) => return StepOutcome::errored(e.to_string()),
            };
        let push = Push {
            ctx,
            signing,
            git: Git::for_repo(ctx, &record.repo_url),
            dir: &dir,
            path: &config.path,
            repo_url: &record.repo_url,
            url: redact_url(&record.repo_url),
            branch: &branch,
            force: config.force,
        };
        // A rebase a crash left half done is undone first: mid-rebase, HEAD is not ours.
        push.abort_rebase().await;
        let head = match push.git.resolve(&dir, "HEAD").await {
            Ok(Some(head)) => head,
            Ok(None) => {
                return StepOutcome::skipped(format!(
                    "nothing to push: `{}` has no commit",
                    config.path
                ));
            }
            Err(e) => return StepOutcome::errored(e.to_string()),
        };
        let _turn = tokio::select! {
            guard = PushLocks::global().lock(&record.repo_url, &branch) => guard,
            () = ctx.cancel.cancelled() => {
                return StepOutcome::failed(format!("aborted while waiting to push to `{branch}`"));
            }
        };
        match push.run(head, config.max_attempts).await {
            Ok(outcome) => outcome,
            Err(e) => StepOutcome::errored(format!(
                "cannot push `{}` to `{branch}` of `{}`: {e}",
                config.path, push.url
            )),
        }
    }
}

fn target_branch(ctx: &StepContext, config: &Config) -> Result<String, String> {
    let branch = match (&config.target_branch, config.generate_target_branch) {
        (Some(branch), false) => branch.clone(),
        (None, true) => format!("dray/promotion/{}", ctx.promotion),
        _ => {
            return Err(
                "set exactly one of `targetBranch`, `generateTargetBranch: true` or `tag`".into(),
            );
        }
    };
    if !is_valid_ref_name(&branch) {
        return Err(format!("`{branch}` is not a valid branch name"));
    }
    if !(1..=100).contains(&config.max_attempts) {
        return Err(format!(
            "`maxAttempts` must be 1 to 100, not {}",
            config.max_attempts
        ));
    }
    Ok(branch)
}

/// One push, with everything it needs (also how `github-push` integrates remote changes).
pub(crate) struct Push<'a> {
    pub(crate) ctx: &'a StepContext,
    pub(crate) git: Git,
    pub(crate) dir: &'a Path,
    pub(crate) path: &'a str,
    pub(crate) repo_url: &'a str,
    /// `repo_url`, redacted, for messages.
    pub(crate) url: String,
    pub(crate) branch: &'a str,
    pub(crate) force: bool,
    /// How commits rebased here are signed again, when the project signs them.
    pub(crate) signing: Option<Signing>,
}

/// What the remote said to a push.
#[derive(Debug, PartialEq)]
enum Pushed {
    Yes,
    /// The branch already points at our commit (a resumed push that landed before).
    AlreadyThere,
    /// Someone else moved the branch: fetch, rebase, try again.
    Moved(String),
    /// The remote refused for another reason (a hook, a protected branch).
    Refused(String),
}

impl Push<'_> {
    async fn run(&self, mut head: String, max_attempts: u32) -> Result<StepOutcome, GitError> {
        for attempt in 1..=max_attempts {
            // The retry right after the first push was refused unseen goes at once: it
            // is the first look at the remote's tip, not a race lost to it.
            let refused_unseen = attempt == 2 && !self.force;
            if attempt > 1 && !refused_unseen {
                let pause = backoff(attempt - 1);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = self.ctx.cancel.cancelled() => {
                        return Ok(StepOutcome::failed(format!("aborted while pushing to `{}`", self.branch)));
                    }
                }
            }
            // The first attempt pushes as is: the branch almost always still sits where
            // the checkout found it, and a remote that moved refuses a push that is not a
            // fast-forward, which costs no more than asking for its tip first. Only after
            // a refused push (or before a forced one) is the remote's tip looked at:
            // whether our change landed already, what to rebase onto.
            let look_first = attempt > 1 || self.force;
            let tip = match look_first {
                true => self.remote_tip().await?,
                false => None,
            };
            if let Some(tip) = &tip {
                if let Some(landed) = self.landed(&head, tip).await? {
                    return Ok(self.already_there(&landed));
                }
                if !self.force {
                    match self.rebase(&head, tip).await? {
                        Ok(new_head) if &new_head == tip => {
                            self.ctx
                                .log("our change is already on the branch; nothing to push");
                            return Ok(done(&self.url, self.branch, tip));
                        }
                        Ok(new_head) => head = new_head,
                        Err(reason) => return Ok(StepOutcome::failed(reason)),
                    }
                }
            }
            match self.push().await? {
                Pushed::Yes => {
                    self.ctx.log(&format!(
                        "pushed {head} to `{}` of `{}`",
                        self.branch, self.url
                    ));
                    return Ok(done(&self.url, self.branch, &head));
                }
                Pushed::AlreadyThere => return Ok(self.already_there(&head)),
                Pushed::Moved(why) => {
                    self.ctx.log(&format!(
                        "attempt {attempt}/{max_attempts}: `{}` moved ({why}); retrying",
                        self.branch
                    ));
                }
                Pushed::Refused(why) => {
                    return Ok(StepOutcome::failed(format!(
                        "`{}` refused the push to `{}`: {why}",
                        self.url, self.branch
                    )));
                }
            }
        }
        let last = match self.remote_tip().await? {
            Some(tip) => {
                self.ensure_local(&tip).await?;
                format!(
                    "; the branch is now at {}",
                    self.git.describe(self.dir, &tip).await
                )
            }
            None => String::new(),
        };
        Ok(StepOutcome::failed(format!(
            "gave up pushing `{}` to `{}` of `{}` after {max_attempts} attempts: the branch kept moving{last}; hint: promote again, or raise `maxAttempts`",
            self.path, self.branch, self.url
        )))
    }

    /// Our change is on the branch already (`commit`): said, and done without a push.
    fn already_there(&self, commit: &str) -> StepOutcome {
        self.ctx.log(&format!(
            "`{}` of `{}` already has our change {commit}",
            self.branch, self.url
        ));
        done(&self.url, self.branch, commit)
    }

    /// The commit at the remote branch, or `None` when the branch does not exist yet.
    pub(crate) async fn remote_tip(&self) -> Result<Option<String>, GitError> {
        let refname = format!("refs/heads/{}", self.branch);
        let out = self
            .git
            .run(self.dir, &["ls-remote", self.repo_url, &refname])
            .await?;
        Ok(out.lines().find_map(|l| {
            l.split_once('\t')
                .filter(|(_, r)| *r == refname)
                .map(|(sha, _)| sha.to_string())
        }))
    }

    /// Makes `tip` available locally (the mirror may already have it).
    async fn ensure_local(&self, tip: &str) -> Result<(), GitError> {
        if self.git.resolve(self.dir, tip).await?.is_none() {
            let refname = format!("refs/heads/{}", self.branch);
            self.git
                .run(
                    self.dir,
                    &["fetch", "-q", "--no-tags", self.repo_url, &refname],
                )
                .await?;
        }
        Ok(())
    }

    /// The commit on the remote branch that carries our change, if it is there already.
    pub(crate) async fn landed(&self, head: &str, tip: &str) -> Result<Option<String>, GitError> {
        if head == tip {
            return Ok(Some(head.to_string()));
        }
        self.ensure_local(tip).await?;
        if self.git.is_ancestor(self.dir, head, tip).await? {
            return Ok(Some(head.to_string()));
        }
        // Our commit, rebased on an earlier attempt that pushed and then crashed.
        if self.git.promotion_trailer(self.dir, head).await?.as_deref() != Some(&self.ctx.promotion)
        {
            return Ok(None);
        }
        let ours = self
            .git
            .run(self.dir, &["log", "-1", "--format=%B", head, "--"])
            .await?;
        let log = self
            .git
            .run(
                self.dir,
                &[
                    "log",
                    "-z",
                    "-n",
                    SEARCH_DEPTH,
                    "--format=%H%n%B",
                    tip,
                    "--not",
                    head,
                    "--",
                ],
            )
            .await?;
        Ok(log.split('\0').find_map(|entry| {
            let (sha, body) = entry.trim_start_matches('\n').split_once('\n')?;
            (body.trim_end() == ours.trim_end()).then(|| sha.to_string())
        }))
    }

    /// Rebases our commits onto `tip`: the new HEAD, or why it cannot be done.
    pub(crate) async fn rebase(
        &self,
        head: &str,
        tip: &str,
    ) -> Result<Result<String, String>, GitError> {
        let git = &self.git;
        self.abort_rebase().await;
        // Our commits already sit on `tip` (nobody pushed since the clone): nothing to rebase.
        if git.is_ancestor(self.dir, tip, head).await? {
            return Ok(Ok(head.to_string()));
        }
        // A signed commit is signed again when it is rebased: the signature covers its parent.
        let sign_args = self
            .signing
            .as_ref()
            .map(Signing::config_args)
            .unwrap_or_default();
        let mut args: Vec<&str> = sign_args.iter().map(String::as_str).collect();
        args.extend([
            "rebase",
            "-q",
            "--no-autosquash",
            "--no-autostash",
            "--no-update-refs",
        ]);
        if self.signing.is_some() {
            args.push("--gpg-sign");
        }
        args.push(tip);
        let output = git.output(self.dir, &args, None).await?;
        if output.status.success() {
            let new_head = git
                .resolve(self.dir, "HEAD")
                .await?
                .unwrap_or_else(|| head.to_string());
            self.ctx.log(&format!(
                "rebased onto {} of `{}`",
                crate::git::short_sha(tip),
                self.branch
            ));
            return Ok(Ok(new_head));
        }
        let conflicts = git
            .run(self.dir, &["diff", "--name-only", "--diff-filter=U"])
            .await;
        self.abort_rebase().await;
        let files: Vec<String> = conflicts
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        if files.is_empty() {
            return Err(Signing::explain(
                self.signing.as_ref(),
                git.failure(&args, &output),
            ));
        }
        let mut log = vec!["log", "-1", "--format=%h \"%s\"", tip, "--not", head, "--"];
        log.extend(files.iter().map(String::as_str));
        let culprit = match git.run(self.dir, &log).await {
            Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
            _ => git.describe(self.dir, tip).await,
        };
        let files = files
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Err(format!(
            "cannot push `{}` to `{}` of `{}`: our change conflicts with remote commit {culprit} in {files}; hint: promote again so the change is made on top of the new branch head",
            self.path, self.branch, self.url
        )))
    }

    /// Aborts a rebase left over by a crash, if there is one (whichever of git's two
    /// rebase directories it left).
    async fn abort_rebase(&self) {
        let mut args = vec!["rev-parse", "--path-format=absolute"];
        for dir in ["rebase-merge", "rebase-apply"] {
            args.extend(["--git-path", dir]);
        }
        let Ok(paths) = self.git.run(self.dir, &args).await else {
            return;
        };
        for path in paths.lines().map(str::trim).filter(|p| !p.is_empty()) {
            if tokio::fs::metadata(path).await.is_ok() {
                let _ = self.git.run(self.dir, &["rebase", "--abort"]).await;
                return;
            }
        }
    }

    async fn push(&self) -> Result<Pushed, GitError> {
        let refspec = format!("HEAD:refs/heads/{}", self.branch);
        let mut args = vec!["push", "--porcelain"];
        if self.force {
            args.push("--force");
        }
        args.extend([self.repo_url, refspec.as_str()]);
        let output = self.git.output(self.dir, &args, None).await?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = self
            .git
            .redact(String::from_utf8_lossy(&output.stderr).trim());
        let to = format!(":refs/heads/{}", self.branch);
        let line = stdout
            .lines()
            .find(|l| l.split('\t').nth(1).is_some_and(|r| r.ends_with(&to)));
        let Some(line) = line else {
            return Err(self.git.failure(&args, &output));
        };
        let summary = line.split('\t').nth(2).unwrap_or_default().to_string();
        if output.status.success() && line.starts_with('=') {
            return Ok(Pushed::AlreadyThere);
        }
        if output.status.success() && !line.starts_with('!') {
            return Ok(Pushed::Yes);
        }
        let moved = [
            "non-fast-forward",
            "fetch first",
            "stale info",
            "failed to update ref",
            "lock",
            "incorrect old value",
        ];
        if moved.iter().any(|m| summary.contains(m)) {
            return Ok(Pushed::Moved(summary));
        }
        let remote: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("remote:"))
            .collect();
        Ok(Pushed::Refused(match remote.is_empty() {
            true => summary,
            false => format!("{summary}: {}", remote.join(" / ")),
        }))
    }
}

/// Pushes tag `tag` of the worktree (its private ref from `git-tag`, else `refs/tags/<tag>`).
async fn push_tag(ctx: &StepContext, config: &Config, tag: &str) -> StepOutcome {
    if config.target_branch.is_some() || config.generate_target_branch {
        return StepOutcome::failed(format!(
            "invalid `{KIND}` config: set exactly one of `targetBranch`, `generateTargetBranch: true` or `tag`"
        ));
    }
    if !is_valid_ref_name(tag) {
        return StepOutcome::failed(format!(
            "invalid `{KIND}` config: `tag` `{tag}` is not a valid tag name"
        ));
    }
    let dir = match ctx.path(&config.path) {
        Ok(dir) => dir,
        Err(reason) => return StepOutcome::failed(reason),
    };
    let record = match read_record(&Git::local(ctx), &dir).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            return StepOutcome::failed(format!(
                "`{}` was not checked out by `git-clone`; hint: clone the repository into it first",
                config.path
            ));
        }
        Err(e) => return StepOutcome::errored(e),
    };
    let git = Git::for_repo(ctx, &record.repo_url);
    let url = redact_url(&record.repo_url);
    match tag_push(ctx, &git, &dir, &record.repo_url, tag).await {
        Ok(Ok((commit, said))) => {
            ctx.log(&format!(
                "tag `{tag}` ({}) {said} `{url}`",
                crate::git::short_sha(&commit)
            ));
            let mut outputs = Map::new();
            outputs.insert("commit".into(), Value::String(commit.clone()));
            outputs.insert("tag".into(), Value::String(tag.to_string()));
            if let Some(branch) = &record.branch {
                outputs.insert("branch".into(), Value::String(branch.clone()));
            }
            let pushed = Effect::PushedTag {
                repo_url: record.repo_url.clone(),
                tag: tag.to_string(),
                commit,
            };
            StepOutcome::wrote(outputs, vec![pushed])
        }
        Ok(Err(reason)) => StepOutcome::failed(reason.replace("{path}", &config.path)),
        Err(e) => StepOutcome::errored(format!(
            "cannot push tag `{tag}` of `{}` to `{url}`: {e}",
            config.path
        )),
    }
}

/// Pushes `tag`: `Ok(Ok((commit, what happened)))`, or `Ok(Err(why not))`.
async fn tag_push(
    ctx: &StepContext,
    git: &Git,
    dir: &Path,
    repo_url: &str,
    tag: &str,
) -> Result<Result<(String, &'static str), String>, GitError> {
    let url = redact_url(repo_url);
    let private = super::git_tag::private_ref(tag);
    let public = format!("refs/tags/{tag}");
    let mut source = None;
    for candidate in [&private, &public] {
        if let Some(commit) = git.resolve(dir, candidate).await? {
            source = Some((candidate.clone(), commit));
            break;
        }
    }
    let Some((source, commit)) = source else {
        return Ok(Err(format!(
            "no tag `{tag}` in `{{path}}` to push; hint: create it with a `git-tag` step first"
        )));
    };
    let remote_at = |out: &str| {
        let peeled = format!("{public}^{{}}");
        let line = |name: &str| {
            out.lines().find_map(|l| {
                l.split_once('\t')
                    .filter(|(_, r)| *r == name)
                    .map(|(sha, _)| sha.to_string())
            })
        };
        line(&peeled).or_else(|| line(&public))
    };
    let listed = git
        .run(
            dir,
            &["ls-remote", repo_url, &public, &format!("{public}^{{}}")],
        )
        .await?;
    let refused = |theirs: &str| {
        format!(
            "tag `{tag}` already exists in `{url}` at commit {}, not at {} of `{{path}}`; hint: tags are not moved: choose another tag name for this promotion, or delete the tag from the repository first",
            crate::git::short_sha(theirs),
            crate::git::short_sha(&commit)
        )
    };
    match remote_at(&listed) {
        Some(theirs) if theirs == commit => return Ok(Ok((commit, "is already in"))),
        Some(theirs) => return Ok(Err(refused(&theirs))),
        None => {}
    }
    let refspec = format!("{source}:{public}");
    let args = ["push", "--porcelain", repo_url, refspec.as_str()];
    let output = git.output(dir, &args, None).await?;
    if output.status.success() {
        return Ok(Ok((commit, "pushed to")));
    }
    // Someone pushed the tag in between.
    let listed = git
        .run(
            dir,
            &["ls-remote", repo_url, &public, &format!("{public}^{{}}")],
        )
        .await?;
    match remote_at(&listed) {
        Some(theirs) if theirs == commit => Ok(Ok((commit, "is already in"))),
        Some(theirs) => Ok(Err(refused(&theirs))),
        None => {
            ctx.log(&format!("pushing tag `{tag}` failed"));
            Err(git.failure(&args, &output))
        }
    }
}

fn done(repo_url: &str, branch: &str, commit: &str) -> StepOutcome {
    let mut outputs = Map::new();
    outputs.insert("repoURL".into(), Value::String(repo_url.to_string()));
    outputs.insert("branch".into(), Value::String(branch.to_string()));
    outputs.insert("commit".into(), Value::String(commit.to_string()));
    let pushed = Effect::PushedBranch {
        repo_url: repo_url.to_owned(),
        branch: branch.to_owned(),
        commit: commit.to_owned(),
    };
    StepOutcome::wrote(outputs, vec![pushed])
}

/// The pause before retry `n` (1-based): 100 ms · 2^(n-1), at most [`MAX_BACKOFF`].
pub(crate) fn backoff(n: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << (n - 1).min(16))).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::steps::git_clone::GitClone;
    use crate::steps::git_commit::GitCommit;
    use crate::testing::{MirrorRepos, bare_remote, failed, git, git_context, outputs, push_files};

    struct World {
        dir: tempfile::TempDir,
        url: String,
        repos: Arc<MirrorRepos>,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = bare_remote(dir.path(), "config.git");
        push_files(
            &url,
            "main",
            &[("README", "hi\n"), ("app/a.yaml", "v: 0\n")],
            "init",
        );
        World {
            dir,
            url,
            repos: Arc::new(MirrorRepos::new()),
        }
    }

    impl World {
        /// A context for `promotion` with its own work dir, `branch` checked out at `out`.
        async fn checkout(
            &self,
            promotion: &str,
            branch: &str,
            create: bool,
        ) -> (StepContext, PathBuf) {
            let work = self.dir.path().join("work").join(promotion);
            std::fs::create_dir_all(&work).unwrap();
            let mut ctx = git_context(&work, self.repos.clone());
            ctx.promotion = promotion.to_string();
            let config = json!({"repoURL": self.url, "checkout": [{"branch": branch, "create": create, "path": "out"}]});
            outputs(GitClone.run(&ctx, config).await);
            (ctx, work.join("out"))
        }

        /// The subjects on `branch` of the remote, newest first.
        fn subjects(&self, branch: &str) -> Vec<String> {
            let remote = self.dir.path().join("config.git");
            git(&remote, &["log", "--format=%s", branch])
                .lines()
                .map(str::to_string)
                .collect()
        }

        /// Commits in `out`, lets someone else push to `main` first, then runs `git-push`
        /// to `main`: our commit, theirs, and the tip pushed (ours rebased onto theirs).
        async fn push_after_an_outside_edit(
            &self,
            ctx: &StepContext,
            out: &Path,
        ) -> (String, String, String) {
            let ours = commit(ctx, out, "app/a.yaml", "v: 1\n", "promote to staging").await;
            let theirs = push_files(
                &self.url,
                "main",
                &[("docs/notes.md", "hand edit\n")],
                "outside edit",
            );
            let got = outputs(
                GitPush
                    .run(ctx, json!({"path": "out", "targetBranch": "main"}))
                    .await,
            );
            let tip = self.remote_tip("main");
            assert_eq!(got["commit"], json!(tip));
            assert_ne!(tip, ours, "our commit was rebased");
            (ours, theirs, tip)
        }

        /// `promotion` commits `app/a.yaml` in `out` while someone else pushes another
        /// edit of it to `main`: the context, `out` and their commit.
        async fn conflicting_edits(&self, promotion: &str) -> (StepContext, PathBuf, String) {
            let (ctx, out) = self.checkout(promotion, "main", false).await;
            commit(&ctx, &out, "app/a.yaml", "v: ours\n", "promote").await;
            let theirs = push_files(
                &self.url,
                "main",
                &[("app/a.yaml", "v: theirs\n")],
                "hand edit of a",
            );
            (ctx, out, theirs)
        }

        fn remote_tip(&self, branch: &str) -> String {
            git(&self.dir.path().join("config.git"), &["rev-parse", branch])
        }
    }

    async fn commit(
        ctx: &StepContext,
        out: &Path,
        file: &str,
        content: &str,
        message: &str,
    ) -> String {
        let path = out.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        let got = outputs(
            GitCommit
                .run(ctx, json!({"path": "out", "message": message}))
                .await,
        );
        got["commit"].as_str().unwrap().to_string()
    }

    #[tokio::test]
    async fn pushes_a_new_branch_and_is_idempotent() {
        let w = world();
        let (ctx, out) = w.checkout("dev-1", "stage/dev", true).await;
        let sha = commit(&ctx, &out, "app.yaml", "v: 1\n", "promote to dev").await;
        let config = json!({"path": "out", "targetBranch": "stage/dev"});
        let got = outputs(GitPush.run(&ctx, config.clone()).await);
        assert_eq!(got["branch"], json!("stage/dev"));
        assert_eq!(got["commit"], json!(sha));
        assert_eq!(w.remote_tip("stage/dev"), sha);
        // Again (a resumed push that had landed): nothing new is pushed, and it says so.
        let (with_log, lines) = crate::testing::context_with_log(&ctx.work_dir);
        let ctx = StepContext {
            log: with_log.log,
            ..ctx
        };
        let again = outputs(GitPush.run(&ctx, config).await);
        assert_eq!(again, got);
        assert_eq!(w.subjects("stage/dev"), vec!["promote to dev"]);
        let logged = lines.lock().unwrap().join("\n");
        assert!(logged.contains("already has our change"), "{logged}");
    }

    #[tokio::test]
    async fn generates_a_branch_per_promotion() {
        let w = world();
        let (ctx, out) = w.checkout("prod-7", "main", false).await;
        let sha = commit(&ctx, &out, "app/a.yaml", "v: 1\n", "promote").await;
        let got = outputs(
            GitPush
                .run(&ctx, json!({"path": "out", "generateTargetBranch": true}))
                .await,
        );
        assert_eq!(got["branch"], json!("dray/promotion/prod-7"));
        assert_eq!(w.remote_tip("dray/promotion/prod-7"), sha);
        assert_eq!(w.subjects("main"), vec!["init"]);
    }

    #[tokio::test]
    async fn only_a_push_that_rebased_says_it_rebased() {
        let w = world();
        let logging = |ctx: StepContext| {
            let (with_log, lines) = crate::testing::context_with_log(&ctx.work_dir);
            (
                StepContext {
                    log: with_log.log,
                    ..ctx
                },
                lines,
            )
        };
        let (ctx, out) = w.checkout("staging-1", "main", false).await;
        let (ctx, lines) = logging(ctx);
        commit(&ctx, &out, "app/b.yaml", "v: 1\n", "promote to staging").await;
        outputs(
            GitPush
                .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                .await,
        );
        let logged = lines.lock().unwrap().join("\n");
        assert!(!logged.contains("rebased"), "{logged}");

        let (ctx, out) = w.checkout("staging-2", "main", false).await;
        let (ctx, lines) = logging(ctx);
        w.push_after_an_outside_edit(&ctx, &out).await;
        let logged = lines.lock().unwrap().join("\n");
        assert!(logged.contains("rebased onto"), "{logged}");
    }

    #[tokio::test]
    async fn an_outside_push_is_rebased_onto_and_nothing_is_lost() {
        let w = world();
        let (ctx, out) = w.checkout("staging-1", "main", false).await;
        let (ours, theirs, tip) = w.push_after_an_outside_edit(&ctx, &out).await;
        assert_eq!(
            w.subjects("main"),
            vec!["promote to staging", "outside edit", "init"]
        );
        assert_eq!(git(&out, &["rev-parse", "HEAD^"]), theirs);
        // The rebased commit keeps its trailers.
        let trailer = git(
            &out,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Dray-Promotion,valueonly)",
            ],
        );
        assert_eq!(trailer, "staging-1");

        // A re-run from the pre-rebase commit (a crash after the push) finds the change
        // by its trailer and pushes nothing.
        git(&out, &["update-ref", "--no-deref", "HEAD", &ours]);
        let again = outputs(
            GitPush
                .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                .await,
        );
        assert_eq!(again["commit"], json!(tip));
        assert_eq!(w.remote_tip("main"), tip);
    }

    /// Signs every repository's commits with one SSH key.
    struct SignEverything(String);

    impl crate::CredentialProvider for SignEverything {
        fn git(&self, _: &str) -> Option<crate::GitCredentials> {
            None
        }
        fn token(&self, _: &str) -> Option<String> {
            None
        }
        fn signing_key(&self, _: &str) -> Option<String> {
            Some(self.0.clone())
        }
    }

    /// A new ed25519 key made by `ssh-keygen` in `dir`: (private key, allowed-signers file
    /// for Dray's committer address).
    fn ssh_key(dir: &Path) -> (String, PathBuf) {
        let key = dir.join("signing");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "dray", "-f"])
            .arg(&key)
            .status()
            .expect("ssh-keygen runs (install openssh-client)");
        assert!(made.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let allowed = dir.join("allowed_signers");
        std::fs::write(&allowed, format!("dray@localhost {public}")).unwrap();
        (std::fs::read_to_string(&key).unwrap(), allowed)
    }

    /// Whether `git verify-commit` accepts `rev` in `dir` with the allowed signers given.
    fn verified(dir: &Path, allowed: &Path, rev: &str) -> bool {
        std::process::Command::new("git")
            .arg("-c")
            .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
            .args(["verify-commit", rev])
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success()
    }

    #[tokio::test]
    async fn signed_commits_stay_signed_when_rebased_onto_an_outside_push() {
        let w = world();
        let (key, allowed) = ssh_key(w.dir.path());
        let (mut ctx, out) = w.checkout("staging-1", "main", false).await;
        ctx.credentials = Arc::new(SignEverything(key.clone()));
        let (ours, _, tip) = w.push_after_an_outside_edit(&ctx, &out).await;
        assert!(verified(&out, &allowed, &ours), "git-commit did not sign");
        let remote = w.dir.path().join("config.git");
        assert!(
            verified(&remote, &allowed, &tip),
            "the rebased commit is not signed"
        );
        assert!(
            !verified(&remote, &allowed, "main^"),
            "the outside commit is unsigned"
        );
        // The key is not left where the worktree's files are, nor anywhere else.
        let listed = git(&out, &["status", "--porcelain", "--ignored"]);
        assert!(!listed.contains("signing"), "{listed}");
        fn key_files(dir: &Path) -> Vec<PathBuf> {
            let mut found = Vec::new();
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    found.extend(key_files(&path));
                } else if path.file_name().is_some_and(|n| n == "dray-signing-key") {
                    found.push(path);
                }
            }
            found
        }
        assert_eq!(key_files(w.dir.path()), Vec::<PathBuf>::new());
        assert_eq!(key_files(w.repos.root()), Vec::<PathBuf>::new());
        // Without the key, nothing is signed.
        let (plain, out) = w.checkout("staging-2", "main", false).await;
        let unsigned = commit(&plain, &out, "app/b.yaml", "v: 2\n", "promote again").await;
        assert!(!verified(&out, &allowed, &unsigned));
    }

    #[tokio::test]
    async fn a_key_git_cannot_sign_with_is_an_error_with_a_hint() {
        let w = world();
        let (mut ctx, out) = w.checkout("staging-3", "main", false).await;
        ctx.credentials = Arc::new(SignEverything(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----".into(),
        ));
        std::fs::write(out.join("app/a.yaml"), "v: 9\n").unwrap();
        let outcome = GitCommit
            .run(&ctx, json!({"path": "out", "message": "promote"}))
            .await;
        let StepOutcome::Errored { reason } = outcome else {
            panic!("expected Errored, got {outcome:?}")
        };
        assert!(
            reason.contains("hint: signing needs `ssh-keygen`"),
            "{reason}"
        );
        assert!(!reason.contains("AAAA"), "{reason}");
    }

    #[tokio::test]
    async fn ten_concurrent_pushes_to_one_branch_all_land() {
        let w = Arc::new(world());
        let mut tasks = Vec::new();
        for i in 0..10 {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                let promotion = format!("p-{i}");
                let (ctx, out) = w.checkout(&promotion, "main", false).await;
                commit(
                    &ctx,
                    &out,
                    &format!("apps/app-{i}.yaml"),
                    "v: 1\n",
                    &format!("promote {i}"),
                )
                .await;
                GitPush
                    .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                    .await
            }));
        }
        for task in tasks {
            outputs(task.await.unwrap());
        }
        let subjects = w.subjects("main");
        assert_eq!(subjects.len(), 11, "{subjects:?}");
        for i in 0..10 {
            assert!(subjects.contains(&format!("promote {i}")), "{subjects:?}");
        }
        let remote = w.dir.path().join("config.git");
        let files = git(&remote, &["ls-tree", "-r", "--name-only", "main", "apps"]);
        assert_eq!(files.lines().count(), 10, "{files}");
    }

    #[tokio::test]
    async fn a_rebase_a_crash_left_half_done_is_undone_before_anything_is_pushed() {
        let w = world();
        let (ctx, out, theirs) = w.conflicting_edits("staging-3").await;
        // A crash mid-rebase: HEAD sits on their commit, ours not yet applied.
        git(&out, &["fetch", "-q", &w.url, "main"]);
        let rebase = std::process::Command::new("git")
            .args(["rebase", "-q", "FETCH_HEAD"])
            .current_dir(&out)
            .output()
            .unwrap();
        assert!(!rebase.status.success(), "the rebase stops on the conflict");
        assert_eq!(git(&out, &["rev-parse", "HEAD"]), theirs);
        let reason = failed(
            GitPush
                .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                .await,
        );
        // Not "pushed" (HEAD mid-rebase is their commit): the rebase was undone and ours
        // found in conflict with theirs.
        assert!(reason.contains("\"hand edit of a\""), "{reason}");
        assert_eq!(w.remote_tip("main"), theirs);
        assert_eq!(git(&out, &["log", "-1", "--format=%s"]), "promote");
    }

    #[tokio::test]
    async fn a_conflicting_change_fails_naming_the_remote_commit() {
        let w = world();
        let (ctx, out, theirs) = w.conflicting_edits("staging-2").await;
        let reason = failed(
            GitPush
                .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                .await,
        );
        let short = &theirs[..7];
        assert!(reason.contains(short), "{reason}");
        assert!(reason.contains("\"hand edit of a\""), "{reason}");
        assert!(reason.contains("`app/a.yaml`"), "{reason}");
        assert_eq!(w.remote_tip("main"), theirs);
        // The worktree is left as it was, not mid-rebase.
        assert_eq!(git(&out, &["log", "-1", "--format=%s"]), "promote");
        assert_eq!(git(&out, &["status", "--porcelain"]), "");

        // With `force: true` it overwrites (only when told to).
        let got = outputs(
            GitPush
                .run(
                    &ctx,
                    json!({"path": "out", "targetBranch": "main", "force": true}),
                )
                .await,
        );
        assert_eq!(w.remote_tip("main"), got["commit"].as_str().unwrap());
        assert_eq!(w.subjects("main"), vec!["promote", "init"]);
    }

    #[tokio::test]
    async fn a_refusal_by_the_remote_fails_with_its_message() {
        let w = world();
        let hook = w.dir.path().join("config.git/hooks/pre-receive");
        std::fs::write(
            &hook,
            "#!/bin/sh\necho 'branch main is protected' >&2\nexit 1\n",
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let (ctx, out) = w.checkout("prod-1", "main", false).await;
        commit(&ctx, &out, "app/a.yaml", "v: 1\n", "promote").await;
        let reason = failed(
            GitPush
                .run(&ctx, json!({"path": "out", "targetBranch": "main"}))
                .await,
        );
        assert!(reason.contains("pre-receive hook declined"), "{reason}");
        assert!(reason.contains("branch main is protected"), "{reason}");
    }

    #[tokio::test]
    async fn a_branch_that_keeps_moving_fails_after_max_attempts_naming_its_tip() {
        let w = world();
        // The remote's `update` hook moves the branch under every push, so each push
        // loses the race (as against a busy outside pusher), deterministically.
        let hook = w.dir.path().join("config.git/hooks/update");
        let script = "#!/bin/sh\n\
            export GIT_AUTHOR_NAME=hook GIT_AUTHOR_EMAIL=hook@example.com\n\
            export GIT_COMMITTER_NAME=hook GIT_COMMITTER_EMAIL=hook@example.com\n\
            new=$(git commit-tree \"$2^{tree}\" -p \"$2\" -m 'moved by hook') || exit 1\n\
            git update-ref \"$1\" \"$new\" \"$2\"\n";
        std::fs::write(&hook, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let (ctx, out) = w.checkout("busy-1", "main", false).await;
        commit(&ctx, &out, "app/a.yaml", "v: 1\n", "promote").await;
        let config = json!({"path": "out", "targetBranch": "main", "maxAttempts": 3});
        let reason = failed(GitPush.run(&ctx, config).await);
        let tip = git(
            &w.dir.path().join("config.git"),
            &["log", "-1", "--format=%h", "main"],
        );
        assert!(reason.contains("after 3 attempts"), "{reason}");
        assert!(
            reason.contains(&format!("{tip} \"moved by hook\"")),
            "{reason}"
        );
        assert_eq!(
            w.subjects("main"),
            vec!["moved by hook"; 3]
                .into_iter()
                .chain(["init"])
                .collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn bad_configs_and_uncloned_paths_fail() {
        let w = world();
        let (ctx, _out) = w.checkout("x-1", "main", false).await;
        let cases = [
            (json!({"path": "out"}), "exactly one of"),
            (
                json!({"path": "out", "targetBranch": "a", "generateTargetBranch": true}),
                "exactly one of",
            ),
            (
                json!({"path": "out", "targetBranch": "a b"}),
                "not a valid branch name",
            ),
            (
                json!({"path": "out", "targetBranch": "a", "maxAttempts": 0}),
                "`maxAttempts`",
            ),
            (
                json!({"path": "out", "targetBranch": "a", "remote": "origin"}),
                "unknown field `remote`",
            ),
            (
                json!({"path": "elsewhere", "targetBranch": "a"}),
                "was not checked out by `git-clone`",
            ),
        ];
        for (config, want) in cases {
            let reason = failed(GitPush.run(&ctx, config.clone()).await);
            assert!(reason.contains(want), "{config}: {reason}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(4), Duration::from_millis(800));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
