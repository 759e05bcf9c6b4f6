//! `git-open-pr`: opens a pull request (GitHub) or merge request (GitLab) from a branch
//! pushed by `git-push` into the Stage's branch.
//!
//! Idempotent: a re-run reuses the pull request recorded in its state; without one it
//! adopts an open pull request for the same branches; only then does it open one. So a
//! resumed promotion never opens a second pull request. A rate limit is `Running`, saying
//! until when.
//!
//! The title defaults to the subject of the head commit of `path` (the worktree pushed),
//! else `Promote <freight> to <stage>`; the description defaults to a summary of the
//! Freight: images with digests, config commits, and who promoted.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::pr::{connect, forge_error, pr_outputs, pr_ref};
use super::typed::TypedStep;
use crate::forge::{NewPullRequest, Provider, PullRequest};
use crate::git::Git;
use crate::{Effect, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-open-pr";

/// The configuration of `git-open-pr`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The repository, e.g. `https://github.com/acme/config.git`.
    #[serde(rename = "repoURL")]
    pub(crate) repo_url: String,
    /// `github`, `gitlab`, `gitea`, `forgejo` or `bitbucket`; inferred from the host for
    /// github.com, gitlab.com, bitbucket.org and codeberg.org (Forgejo).
    #[serde(default)]
    pub(crate) provider: Option<Provider>,
    /// The forge's API base URL (GitHub Enterprise `https://ghe.example.com/api/v3`,
    /// self-hosted GitLab or Gitea/Forgejo `https://git.example.com`).
    #[serde(default, rename = "apiURL")]
    pub(crate) api_url: Option<String>,
    /// The branch to merge from; `dray/promotion/<promotion>` (as pushed by `git-push`
    /// with `generateTargetBranch`) when not given.
    #[serde(default)]
    pub(crate) source_branch: Option<String>,
    /// The branch to merge into, e.g. `stage/prod`.
    pub(crate) target_branch: String,
    /// The title; the subject of the head commit of `path`, else `Promote …`.
    #[serde(default)]
    pub(crate) title: Option<String>,
    /// The description; a summary of the Freight when not given.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Labels to set.
    #[serde(default)]
    pub(crate) labels: Vec<String>,
    /// The worktree that was pushed (for the default title).
    #[serde(default)]
    pub(crate) path: Option<String>,
}

/// The `git-open-pr` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitOpenPr;

#[async_trait]
impl TypedStep for GitOpenPr {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Forge;
    type Config = Config;

    fn check(&self, config: &serde_json::Value) -> Vec<crate::ConfigProblem> {
        super::pr::check_forge(config)
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let head = config
            .source_branch
            .clone()
            .unwrap_or_else(|| format!("dray/promotion/{}", ctx.promotion));
        let forge = match connect(
            ctx,
            KIND,
            &config.repo_url,
            config.provider,
            config.api_url.as_deref(),
        )
        .await
        {
            Ok(forge) => forge,
            Err(outcome) => return outcome,
        };
        let name = forge.provider().name();
        // 1. The pull request this step opened before.
        if let Some(number) = ctx.saved_state.as_ref().and_then(|s| s["number"].as_u64()) {
            return match forge.get(number).await {
                Ok(pr) => {
                    ctx.log(&format!("reusing pull request #{number} ({})", pr.url));
                    done(&pr)
                }
                Err(e) => forge_error(&e, ctx.saved_state.clone()),
            };
        }
        // 2. An open pull request for the same branches.
        match forge.find_open(&head, &config.target_branch).await {
            Ok(Some(pr)) => {
                ctx.log(&format!(
                    "adopting the open pull request #{} ({}) from `{head}` into `{}`",
                    pr.number, pr.url, config.target_branch
                ));
                return done(&pr);
            }
            Ok(None) => {}
            Err(e) => return forge_error(&e, None),
        }
        // 3. A new one.
        let title = match &config.title {
            Some(title) => title.clone(),
            None => default_title(ctx, config.path.as_deref()).await,
        };
        let new = NewPullRequest {
            title,
            body: config
                .description
                .clone()
                .unwrap_or_else(|| default_description(ctx)),
            head: head.clone(),
            base: config.target_branch.clone(),
            labels: config.labels.clone(),
        };
        match forge.create(&new).await {
            Ok(pr) => {
                ctx.log(&format!(
                    "opened pull request #{} on {name}: {}",
                    pr.number, pr.url
                ));
                done(&pr)
            }
            Err(crate::forge::ForgeError::Refused(message)) => {
                // Opened by someone else (or by us, before a crash) since we looked.
                match forge.find_open(&head, &config.target_branch).await {
                    Ok(Some(pr)) => done(&pr),
                    _ => StepOutcome::failed(format!(
                        "{name} refused to open a pull request from `{head}` into `{}`: {message}",
                        config.target_branch
                    )),
                }
            }
            Err(e) => forge_error(&e, None),
        }
    }
}

fn done(pr: &PullRequest) -> StepOutcome {
    StepOutcome::Succeeded {
        outputs: pr_outputs(pr, &[]),
        state: Some(json!({"number": pr.number, "url": pr.url})),
        effects: vec![Effect::OpenedPullRequest(pr_ref(pr))],
    }
}

async fn default_title(ctx: &StepContext, path: Option<&str>) -> String {
    if let Some(dir) = path.and_then(|p| ctx.path(p).ok()) {
        let git = Git::local(ctx);
        if let Ok(subject) = git.run(&dir, &["log", "-1", "--format=%s"]).await {
            let subject = subject.trim();
            if !subject.is_empty() {
                return subject.to_string();
            }
        }
    }
    let f = &ctx.freight;
    let name = if f.alias.is_empty() { &f.id } else { &f.alias };
    format!("Promote {name} to {}", ctx.stage)
}

/// A Markdown summary of the Freight and the promotion.
pub(crate) fn default_description(ctx: &StepContext) -> String {
    let f = &ctx.freight;
    let mut out = format!(
        "Promotes Freight `{}`{} to Stage `{}/{}`.\n",
        f.id,
        if f.alias.is_empty() {
            String::new()
        } else {
            format!(" ({})", f.alias)
        },
        ctx.project,
        ctx.stage
    );
    if !f.images.is_empty() {
        out.push_str("\n**Images**\n\n");
        for i in &f.images {
            out.push_str(&format!("- `{}:{}@{}`\n", i.repo_url, i.tag, i.digest));
        }
    }
    if !f.commits.is_empty() {
        out.push_str("\n**Config commits**\n\n");
        for c in &f.commits {
            out.push_str(&format!("- `{}` {} ({})\n", c.id, c.message, c.repo_url));
        }
    }
    out.push_str(&format!(
        "\nPromotion `{}`, promoted by {}.",
        ctx.promotion, ctx.actor
    ));
    if let Some(who) = &ctx.approved_by {
        out.push_str(&format!(" Approved by {who}."));
    }
    if !ctx.signed_off_by.is_empty() {
        out.push_str(&format!(" Signed off by {}.", ctx.signed_off_by.join(", ")));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{DIGEST, context, failed};

    #[test]
    fn the_description_names_images_commits_and_who_promoted() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let text = default_description(&ctx);
        assert!(text.contains(DIGEST), "{text}");
        assert!(text.contains("Bump app"), "{text}");
        assert!(text.contains("promoted by ada"), "{text}");
    }

    #[tokio::test]
    async fn an_unknown_host_needs_a_provider() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let reason = failed(
            GitOpenPr
                .run(
                    &ctx,
                    json!({"repoURL": "https://git.example.com/a/b.git", "targetBranch": "main"}),
                )
                .await,
        );
        assert!(reason.contains("set `provider:` to `github`"), "{reason}");
    }
}
