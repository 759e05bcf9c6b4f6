//! `github-push`: pushes a worktree's commits to a GitHub branch through GitHub's REST API,
//! so that GitHub signs the commits Dray made (they show as verified) without a signing key
//! tied to any user account — Kargo's `github-push`, a drop-in for `git-push`.
//!
//! How (as Kargo does it):
//! 1. Remote changes are integrated first, exactly as `git-push` does (rebase onto the
//!    branch, a conflict fails naming the remote commit), under the same per-branch lock.
//! 2. HEAD is force-pushed with git to a staging ref `refs/dray/staging/<promotion>`, which
//!    is no branch: it only gets the objects onto GitHub.
//! 3. `GET /compare/{base}...{head}` lists the commits to replay (base: the target branch,
//!    or the cloned branch when the target does not exist yet). At most
//!    [`MAX_REVISIONS`] commits are replayed.
//! 4. Each is created again with `POST /git/commits` (same tree, same message, parents
//!    mapped). A commit Dray made in this promotion (its `Dray-Promotion` trailer names
//!    this promotion) is created **without** author and committer, so GitHub attributes it
//!    to the token's identity and signs it; its author, if not Dray, is kept as a
//!    `Co-authored-by:` trailer. Any other commit keeps its author and committer (not
//!    verified: Dray does not vouch for what it did not make).
//! 5. The branch is moved (`PATCH /git/refs/heads/<branch>`, fast-forward only unless
//!    `force`) or created (`POST /git/refs`). A 422 (someone pushed meanwhile) is retried
//!    from step 1, up to `maxAttempts` (default 10).
//! 6. The staging ref is deleted, whatever happened; the worktree is moved to the new head.
//!
//! Idempotent: when the branch already carries our change (a re-run after the push), the
//! rebase in step 1 finds it and nothing is replayed.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::git_push::Push;
use super::typed::TypedStep;
use crate::forge::github::GitHub;
use crate::forge::github_git::{Comparison, RefUpdate};
use crate::forge::{self, ForgeError, Provider};
use crate::git::{DEFAULT_EMAIL, DEFAULT_NAME, Git, GitError, Signing, is_valid_ref_name};
use crate::git::{read_record, redact_url};
use crate::{ConfigProblem, Effect, PushLocks, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "github-push";

/// How many commits one push replays at most (Kargo's default cap).
pub(crate) const MAX_REVISIONS: usize = 10;

/// The configuration of `github-push` (Kargo's fields, and Dray's `apiURL`).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The worktree, relative to the work directory (as given to `git-clone`).
    pub(crate) path: String,
    /// The branch to push to; the cloned branch when neither this nor
    /// `generateTargetBranch` is set.
    #[serde(default)]
    pub(crate) target_branch: Option<String>,
    /// Push to a new branch `dray/promotion/<promotion>` instead (for a pull request).
    #[serde(default)]
    pub(crate) generate_target_branch: bool,
    /// Overwrite the branch instead of rebasing onto it.
    #[serde(default)]
    pub(crate) force: bool,
    /// How many times to try before giving up (default 10).
    #[serde(default = "default_max_attempts")]
    pub(crate) max_attempts: u32,
    /// Kargo's switch to skip TLS verification: refused (`true` cannot be honoured).
    #[serde(default, rename = "insecureSkipTLSVerify")]
    pub(crate) insecure_skip_tls_verify: bool,
    /// GitHub's API (default: `https://api.github.com` for github.com, else
    /// `https://<host>/api/v3`, GitHub Enterprise).
    #[serde(default, rename = "apiURL")]
    pub(crate) api_url: Option<String>,
}

fn default_max_attempts() -> u32 {
    10
}

/// The `github-push` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitHubPush;

#[async_trait]
impl TypedStep for GitHubPush {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Git;
    type Config = Config;

    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        match config.get("insecureSkipTLSVerify") {
            Some(Value::Bool(true)) => vec![insecure_problem()],
            _ => Vec::new(),
        }
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        if config.insecure_skip_tls_verify {
            let p = insecure_problem();
            return StepOutcome::failed(format!(
                "invalid `{KIND}` config: {}; hint: {}",
                p.message, p.hint
            ));
        }
        if !(1..=100).contains(&config.max_attempts) {
            return StepOutcome::failed(format!(
                "invalid `{KIND}` config: `maxAttempts` must be 1 to 100, not {}",
                config.max_attempts
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
        let branch = match (&config.target_branch, config.generate_target_branch) {
            (Some(b), false) if !b.is_empty() => b.clone(),
            (None, true) => format!("dray/promotion/{}", ctx.promotion),
            (None, false) => match &record.branch {
                Some(b) => b.clone(),
                None => {
                    return StepOutcome::failed(format!(
                        "invalid `{KIND}` config: `{}` was cloned at a commit, not a branch; hint: set `targetBranch`",
                        config.path
                    ));
                }
            },
            _ => {
                return StepOutcome::failed(format!(
                    "invalid `{KIND}` config: set at most one of `targetBranch` or `generateTargetBranch: true`"
                ));
            }
        };
        if !is_valid_ref_name(&branch) {
            return StepOutcome::failed(format!(
                "invalid `{KIND}` config: `{branch}` is not a valid branch name"
            ));
        }
        let url = redact_url(&record.repo_url);
        let Some(token) = ctx.credentials.token(&record.repo_url) else {
            return StepOutcome::failed(format!(
                "no GitHub token for `{url}`: `{KIND}` pushes through GitHub's API; hint: add a Credential with a token (a GitHub App's or a personal one) for this repository"
            ));
        };
        let target = match forge::target(
            &record.repo_url,
            Some(Provider::Github),
            config.api_url.as_deref(),
        ) {
            Ok(target) => target,
            Err(reason) => {
                return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
            }
        };
        let github = match GitHub::new(&target.api_url, &target.repo_path, Some(token)) {
            Ok(github) => github,
            Err(e) => return StepOutcome::errored(e.to_string()),
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
            url: url.clone(),
            branch: &branch,
            // A generated branch is this promotion's own: a re-run overwrites it (as Kargo).
            force: config.force || config.generate_target_branch,
        };
        let _turn = tokio::select! {
            guard = PushLocks::global().lock(&record.repo_url, &branch) => guard,
            () = ctx.cancel.cancelled() => {
                return StepOutcome::failed(format!("aborted while waiting to push to `{branch}`"));
            }
        };
        let replay = Replay {
            push: &push,
            github: &github,
            staging: format!("dray/staging/{}", ctx.promotion),
            base_branch: record.branch.as_deref(),
        };
        let result = replay.run(config.max_attempts).await;
        // The staging ref goes whatever happened; a failure to delete it changes nothing.
        if let Err(e) = github.delete_ref(&replay.staging).await {
            ctx.log(&format!(
                "could not delete the staging ref `refs/{}`: {e}",
                replay.staging
            ));
        }
        match result {
            Ok(Ok(commit)) => {
                if let Err(e) = push
                    .git
                    .run(&dir, &["reset", "-q", "--hard", &commit])
                    .await
                {
                    return StepOutcome::errored(format!(
                        "pushed {commit} to `{branch}` of `{url}`, but cannot move `{}` to it: {e}",
                        config.path
                    ));
                }
                done(&record.repo_url, &branch, &commit)
            }
            Ok(Err(reason)) => StepOutcome::failed(reason),
            Err(Failure::Git(e)) => StepOutcome::errored(format!(
                "cannot push `{}` to `{branch}` of `{url}`: {e}",
                config.path
            )),
            Err(Failure::GitHub(e)) => match e {
                ForgeError::Refused(m) => StepOutcome::failed(format!(
                    "GitHub refused the push of `{}` to `{branch}` of `{url}`: {m}",
                    config.path
                )),
                e => StepOutcome::errored(format!(
                    "cannot push `{}` to `{branch}` of `{url}` through GitHub's API: {e}",
                    config.path
                )),
            },
        }
    }
}

fn insecure_problem() -> ConfigProblem {
    ConfigProblem {
        field: "insecureSkipTLSVerify",
        message: "`insecureSkipTLSVerify: true` is not honoured: Dray always verifies GitHub's TLS certificate".into(),
        hint: "remove it, and make the GitHub Enterprise certificate's CA trusted where `dray serve` runs".into(),
    }
}

/// Why a push could not be done.
enum Failure {
    Git(GitError),
    GitHub(ForgeError),
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Self {
        Failure::Git(e)
    }
}

impl From<ForgeError> for Failure {
    fn from(e: ForgeError) -> Self {
        Failure::GitHub(e)
    }
}

/// One `github-push`, with everything it needs.
struct Replay<'a> {
    push: &'a Push<'a>,
    github: &'a GitHub,
    /// The staging ref, without `refs/`.
    staging: String,
    /// The branch the worktree was cloned from: the base when the target does not exist.
    base_branch: Option<&'a str>,
}

/// What one attempt came to.
enum Attempt {
    /// The branch holds this commit now.
    Done(String),
    /// Someone pushed meanwhile: integrate and try again.
    Moved(String),
}

impl Replay<'_> {
    /// The commit the branch holds in the end, or why not (`Ok(Err)`: fail, do not retry).
    async fn run(&self, max_attempts: u32) -> Result<Result<String, String>, Failure> {
        let push = self.push;
        let mut why = String::new();
        for attempt in 1..=max_attempts {
            if attempt > 1 {
                // git-push's backoff one step on (200 ms · 2^(n-1)): each retry is an API round trip.
                let pause = super::git_push::backoff(attempt);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = push.ctx.cancel.cancelled() => {
                        return Ok(Err(format!("aborted while pushing to `{}`", push.branch)));
                    }
                }
            }
            let Some(mut head) = push.git.resolve(push.dir, "HEAD").await? else {
                return Ok(Err(format!(
                    "nothing to push: `{}` has no commit",
                    push.path
                )));
            };
            if let Some(tip) = push.remote_tip().await?
                && !push.force
            {
                if let Some(landed) = push.landed(&head, &tip).await? {
                    push.ctx.log(&format!(
                        "`{}` of `{}` already has our change {landed}",
                        push.branch, push.url
                    ));
                    return Ok(Ok(landed));
                }
                match push.rebase(&head, &tip).await? {
                    Ok(new_head) if new_head == tip => return Ok(Ok(tip)),
                    Ok(new_head) => head = new_head,
                    Err(reason) => return Ok(Err(reason)),
                }
            }
            match self.attempt(&head).await? {
                Ok(Attempt::Done(commit)) => {
                    push.ctx.log(&format!(
                        "pushed {} to `{}` of `{}` through GitHub's API (was {})",
                        crate::git::short_sha(&commit),
                        push.branch,
                        push.url,
                        crate::git::short_sha(&head)
                    ));
                    return Ok(Ok(commit));
                }
                Ok(Attempt::Moved(reason)) => {
                    push.ctx.log(&format!(
                        "attempt {attempt}/{max_attempts}: `{}` moved ({reason}); retrying",
                        push.branch
                    ));
                    why = reason;
                }
                Err(reason) => return Ok(Err(reason)),
            }
        }
        Ok(Err(format!(
            "gave up pushing `{}` to `{}` of `{}` after {max_attempts} attempts: the branch kept moving ({why}); hint: promote again, or raise `maxAttempts`",
            push.path, push.branch, push.url
        )))
    }

    /// Stages `head`, replays it through the API and moves the branch.
    async fn attempt(&self, head: &str) -> Result<Result<Attempt, String>, Failure> {
        let push = self.push;
        let refspec = format!("+{head}:refs/{}", self.staging);
        push.git
            .run(push.dir, &["push", "-q", push.repo_url, &refspec])
            .await?;
        let target_ref = format!("heads/{}", push.branch);
        let target = self.github.git_ref(&target_ref).await?;
        let base = match (&target, self.base_branch) {
            (Some(sha), _) => sha.clone(),
            (None, Some(cloned)) => match self.github.git_ref(&format!("heads/{cloned}")).await? {
                Some(sha) => sha,
                None => {
                    return Ok(Err(format!(
                        "neither `{}` nor the cloned branch `{cloned}` exists on `{}`; hint: create the branch first, or push with `git-push`",
                        push.branch, push.url
                    )));
                }
            },
            (None, None) => {
                return Ok(Err(format!(
                    "`{}` does not exist on `{}` and `{}` was cloned at a commit, so there is nothing to compare with; hint: create the branch first, or push with `git-push`",
                    push.branch, push.url, push.path
                )));
            }
        };
        let comparison = self.github.compare(&base, head).await?;
        let new_head = match comparison.status.as_str() {
            "identical" => return Ok(Ok(Attempt::Done(head.to_string()))),
            "ahead" => self.replay(&comparison).await?,
            "behind" | "diverged" if push.force => self.replay(&comparison).await?,
            "behind" | "diverged" => {
                return Ok(Ok(Attempt::Moved(format!(
                    "our commit is {} `{}`",
                    comparison.status, push.branch
                ))));
            }
            other => {
                return Ok(Err(format!(
                    "GitHub compared {}...{} as `{other}`, which Dray does not know; hint: report this",
                    crate::git::short_sha(&base),
                    crate::git::short_sha(head)
                )));
            }
        };
        let new_head = match new_head {
            Ok(sha) => sha,
            Err(reason) => return Ok(Err(reason)),
        };
        let updated = match target {
            Some(_) => {
                self.github
                    .update_ref(&target_ref, &new_head, push.force)
                    .await?
            }
            None => self.github.create_ref(&target_ref, &new_head).await?,
        };
        Ok(Ok(match updated {
            RefUpdate::Done => {
                // The replayed commits are new objects: fetch them for the worktree.
                let fetch = format!("refs/heads/{}", push.branch);
                push.git
                    .run(
                        push.dir,
                        &["fetch", "-q", "--no-tags", push.repo_url, &fetch],
                    )
                    .await?;
                Attempt::Done(new_head)
            }
            RefUpdate::NotFastForward(m) | RefUpdate::Exists(m) => Attempt::Moved(m),
        }))
    }

    /// Creates the compared commits again through the API; the last one's id.
    async fn replay(&self, comparison: &Comparison) -> Result<Result<String, String>, Failure> {
        let push = self.push;
        if comparison.commits.len() > MAX_REVISIONS {
            return Ok(Err(format!(
                "`{}` has {} commits to push to `{}`, more than the {MAX_REVISIONS} `{KIND}` replays at once; hint: squash them, or push with `git-push`",
                push.path,
                comparison.commits.len(),
                push.branch
            )));
        }
        let mut mapped: std::collections::HashMap<String, String> =
            std::collections::HashMap::new();
        let mut last = comparison.merge_base.clone();
        for commit in &comparison.commits {
            let parents: Vec<String> = if commit.parents.len() <= 1 {
                vec![last.clone()]
            } else {
                commit
                    .parents
                    .iter()
                    .map(|p| mapped.get(p).cloned().unwrap_or_else(|| p.clone()))
                    .collect()
            };
            let ours = push
                .git
                .promotion_trailer(push.dir, &commit.sha)
                .await?
                .as_deref()
                == Some(push.ctx.promotion.as_str());
            let sha = if ours {
                let message = with_co_author(&commit.message, &commit.author);
                self.github
                    .create_commit(&message, &commit.tree, &parents, None)
                    .await?
            } else {
                self.github
                    .create_commit(
                        &commit.message,
                        &commit.tree,
                        &parents,
                        Some((&commit.author, &commit.committer)),
                    )
                    .await?
            };
            mapped.insert(commit.sha.clone(), sha.clone());
            last = sha;
        }
        Ok(Ok(last))
    }
}

/// `message` with a `Co-authored-by:` trailer for `author` when it is not Dray itself.
fn with_co_author(message: &str, author: &Value) -> String {
    let (Some(name), Some(email)) = (author["name"].as_str(), author["email"].as_str()) else {
        return message.to_string();
    };
    if (name == DEFAULT_NAME && email == DEFAULT_EMAIL) || name.is_empty() || email.is_empty() {
        return message.to_string();
    }
    let trailer = format!("Co-authored-by: {name} <{email}>");
    if message.contains(&trailer) {
        return message.to_string();
    }
    format!("{}\n{trailer}\n", message.trim_end())
}

fn done(repo_url: &str, branch: &str, commit: &str) -> StepOutcome {
    let mut outputs = Map::new();
    outputs.insert("branch".into(), json!(branch));
    outputs.insert("commit".into(), json!(commit));
    outputs.insert("commitURL".into(), json!(commit_url(repo_url, commit)));
    let pushed = Effect::PushedBranch {
        repo_url: repo_url.to_owned(),
        branch: branch.to_owned(),
        commit: commit.to_owned(),
    };
    StepOutcome::wrote(outputs, vec![pushed])
}

/// `https://github.com/acme/config/commit/<sha>` of `https://github.com/acme/config.git`.
fn commit_url(repo_url: &str, commit: &str) -> String {
    let web = repo_url.trim_end_matches('/').trim_end_matches(".git");
    let web = match (web.strip_prefix("git@"), web.split_once("://")) {
        (Some(rest), _) => format!("https://{}", rest.replacen(':', "/", 1)),
        (None, Some((scheme, rest))) => {
            // No user info (credentials) in an output.
            let rest = match rest.split_once('/') {
                Some((host, path)) => {
                    format!("{}/{path}", host.rsplit('@').next().unwrap_or(host))
                }
                None => rest.rsplit('@').next().unwrap_or(rest).to_string(),
            };
            let scheme = if scheme == "ssh" { "https" } else { scheme };
            format!("{scheme}://{rest}")
        }
        (None, None) => web.to_string(),
    };
    format!("{web}/commit/{commit}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[test]
    fn a_co_author_is_kept_unless_it_is_dray() {
        let ada =
            json!({"name": "Ada", "email": "ada@example.com", "date": "2026-01-01T00:00:00Z"});
        assert_eq!(
            with_co_author("promote\n", &ada),
            "promote\nCo-authored-by: Ada <ada@example.com>\n"
        );
        let dray = json!({"name": DEFAULT_NAME, "email": DEFAULT_EMAIL});
        assert_eq!(with_co_author("promote\n", &dray), "promote\n");
    }

    #[test]
    fn commit_urls_are_the_repositorys_web_address() {
        assert_eq!(
            commit_url("https://user:pw@github.com/acme/config.git", "abc"),
            "https://github.com/acme/config/commit/abc"
        );
        assert_eq!(
            commit_url("git@github.com:acme/config.git", "abc"),
            "https://github.com/acme/config/commit/abc"
        );
    }

    #[tokio::test]
    async fn configs_dray_cannot_honour_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let problems =
            GitHubPush.check_config(&json!({"path": "out", "insecureSkipTLSVerify": true}));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "insecureSkipTLSVerify");
        let cases = [
            (
                json!({"path": "out", "insecureSkipTLSVerify": true}),
                "not honoured",
            ),
            (json!({"path": "out", "maxAttempts": 0}), "`maxAttempts`"),
            (
                json!({"path": "out", "remote": "x"}),
                "unknown field `remote`",
            ),
            (json!({"path": "out"}), "was not checked out by `git-clone`"),
        ];
        for (config, want) in cases {
            let reason = failed(GitHubPush.run(&ctx, config.clone()).await);
            assert!(reason.contains(want), "{config}: {reason}");
        }
    }
}
