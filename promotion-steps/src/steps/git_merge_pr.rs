//! `git-merge-pr`: merges a pull request when the forge says it can be merged, with the
//! configured method (`merge`, `squash`, `rebase` on GitHub), and outputs what landed on
//! the target branch (`commit`).
//!
//! Reviewed means merged: the head commit the step sees on its first run — or, when its
//! config names one (`headCommit: ${{ outputs.push.commit }}`), the commit Dray pushed —
//! is kept in its state (`headCommit`, also an output) and is the only commit it merges. It is sent as
//! the merge's `sha`, so the forge refuses a head that moved meanwhile; a later push to the
//! pull request's branch fails the step, naming both commits. Before the first merge
//! request the pinned head is saved (a `Running` with no wait), so a run resumed after a
//! crash merges that same commit.
//!
//! While the forge is still computing mergeability (GitHub `mergeable: null`, GitLab
//! `checking`/`unchecked`) or checks or reviews are pending it waits (`Running`, naming
//! the forge's status); conflicts, or a refusal by the forge (GitHub 405/422, GitLab
//! 405/406/422), are Failed with the forge's message. Idempotent: an already merged pull
//! request succeeds with its commit. Gives up after `timeout` (default 72 h).

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::pr::{
    PrNumber, WaitFor, Waiting, closed_without_merge, forge_error, human, own_timeout, pr_outputs,
    pr_ref, since_state, start_waiting, timed_out,
};
use super::typed::TypedStep;
use crate::forge::{ForgeError, MergeMethod, PrState, Provider, PullRequest};
use crate::{Effect, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-merge-pr";

/// The configuration of `git-merge-pr`.
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
    /// The forge's API base URL (GitHub Enterprise, self-hosted GitLab or Gitea/Forgejo).
    #[serde(default, rename = "apiURL")]
    pub(crate) api_url: Option<String>,
    /// The pull request, e.g. `${{ outputs.open-pr.pr.id }}`.
    pub(crate) pr_number: PrNumber,
    /// `merge` (default), `squash` or `rebase` (GitHub, Gitea/Forgejo, Bitbucket).
    #[serde(default)]
    pub(crate) merge_method: MergeMethod,
    /// How often to look while checks are pending (default `30s`).
    #[serde(default)]
    pub(crate) poll_interval: Option<String>,
    /// How long to wait for the pull request to become mergeable (default `72h`).
    #[serde(default)]
    pub(crate) timeout: Option<String>,
    /// The commit the pull request's head must be, e.g. `${{ outputs.push.commit }}`: what
    /// Dray itself pushed. Pinned from the start, so a push made before this step first
    /// looks is refused too; without it, the head this step first sees is pinned.
    #[serde(default)]
    pub(crate) head_commit: Option<String>,
}

/// Statuses that may clear by themselves: wait.
const PENDING: [&str; 18] = [
    // GitHub `mergeable_state`
    "blocked",
    "unknown",
    "draft",
    // GitLab `detailed_merge_status`
    "checking",
    "unchecked",
    "preparing",
    "approvals_syncing",
    "ci_still_running",
    "ci_must_pass",
    "status_checks_must_pass",
    "not_approved",
    "discussions_not_resolved",
    "draft_status",
    "merge_time",
    "requested_changes",
    "merge_request_blocked",
    // Gitea/Forgejo `mergeable: false` (checking, a conflict or work in progress)
    crate::forge::gitea::NOT_MERGEABLE,
    // Bitbucket `QUEUED` (in its merge queue)
    "queued",
];

/// Statuses that say the forge has not worked out yet whether the merge can be done.
const COMPUTING: [&str; 5] = [
    "unknown",
    "checking",
    "unchecked",
    "preparing",
    "approvals_syncing",
];

/// Statuses that mean a merge cannot work without a change to the branches: fail.
const CONFLICT: [&str; 4] = ["dirty", "conflict", "need_rebase", "cannot_be_merged"];

/// The `git-merge-pr` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitMergePr;

#[async_trait]
impl TypedStep for GitMergePr {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Forge;
    type Config = Config;

    fn check(&self, config: &serde_json::Value) -> Vec<crate::ConfigProblem> {
        super::pr::check_forge(config)
    }

    fn default_timeout(&self, config: &Config) -> std::time::Duration {
        own_timeout(config.timeout.as_deref())
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let wait = WaitFor {
            repo_url: &config.repo_url,
            provider: config.provider,
            api_url: config.api_url.as_deref(),
            pr_number: &config.pr_number,
            poll_interval: config.poll_interval.as_deref(),
            timeout: config.timeout.as_deref(),
        };
        let Waiting {
            number,
            poll,
            timeout,
            since,
            forge,
            pr,
        } = match start_waiting(ctx, KIND, wait).await {
            Ok(waiting) => waiting,
            Err(outcome) => return outcome,
        };
        let pinned =
            pinned_head(ctx).or_else(|| config.head_commit.clone().filter(|c| !c.is_empty()));
        let first_sight = pinned.is_none();
        let name = forge.provider().name();
        match pr.state {
            PrState::Merged => {
                if let Some(commit) = &pr.merged_commit {
                    let mut extra = vec![("commit", commit.as_str())];
                    if let Some(head) = pinned.as_deref() {
                        extra.push(("headCommit", head));
                    }
                    let merged = Effect::MergedPullRequest {
                        pr: pr_ref(&pr),
                        commit: commit.clone(),
                    };
                    return StepOutcome::wrote(pr_outputs(&pr, &extra), vec![merged]);
                }
            }
            PrState::Closed => return closed_without_merge(&pr),
            PrState::Open => {}
        }
        // The head this step saw first is the one it merges: a later push is not reviewed.
        let head = match (pinned, &pr.head_sha) {
            (Some(old), Some(new)) if pr.state == PrState::Open && &old != new => {
                return head_moved(number, &old, new);
            }
            (Some(old), _) => old,
            (None, Some(new)) => new.clone(),
            (None, None) => {
                return waiting(
                    since,
                    timeout,
                    &pr,
                    poll,
                    None,
                    format!("{name} to report the head commit of the pull request"),
                );
            }
        };
        let status = pr.merge_status.clone().unwrap_or_default();
        if pr.state == PrState::Open && CONFLICT.contains(&status.as_str()) {
            return StepOutcome::failed(format!(
                "pull request #{number} cannot be merged into `{}` ({name} says `{status}`); \
                 hint: resolve the conflict on `{}`",
                pr.base, pr.head
            ));
        }
        let pending = pr.state == PrState::Merged
            || pr.mergeable.is_none()
            || PENDING.contains(&status.as_str());
        if pending {
            let why = if pr.state == PrState::Merged {
                format!("{name} to report the merge commit")
            } else if pr.mergeable.is_none() || COMPUTING.contains(&status.as_str()) {
                let said = if status.is_empty() {
                    String::new()
                } else {
                    format!(" (it says `{status}`)")
                };
                format!("{name} to finish computing whether it can be merged{said}")
            } else {
                format!("{name} merge status `{status}`")
            };
            return waiting(since, timeout, &pr, poll, Some(&head), why);
        }
        if first_sight {
            // Keep the head in the step's state before merging it, so that a run resumed
            // after a crash merges this commit and no newer one.
            return StepOutcome::Running {
                retry_after: Duration::ZERO,
                waiting_for: format!(
                    "pull request #{number} to be merged at its checked head {head}"
                ),
                state: pin_state(since, Some(&head)),
            };
        }
        match forge.merge(number, config.merge_method, &head).await {
            Ok(commit) => {
                ctx.log(&format!(
                    "merged pull request #{number} on {name} at head {head}: {commit}"
                ));
                let outputs = pr_outputs(&pr, &[("commit", &commit), ("headCommit", &head)]);
                let merged = Effect::MergedPullRequest {
                    pr: pr_ref(&pr),
                    commit,
                };
                StepOutcome::wrote(outputs, vec![merged])
            }
            Err(ForgeError::HeadMoved(message)) => {
                // Pushed to between the look above and the merge: name the new head.
                let now = forge.get(number).await.ok().and_then(|pr| pr.head_sha);
                let new = now.unwrap_or_else(|| format!("a newer commit ({name}: {message})"));
                head_moved(number, &head, &new)
            }
            Err(ForgeError::Refused(message)) => {
                // A push racing the merge may also be refused as "cannot merge now" (GitLab
                // checks mergeability before `sha`): say so when the head moved.
                match forge.get(number).await.ok().and_then(|pr| pr.head_sha) {
                    Some(new) if new != head => head_moved(number, &head, &new),
                    _ => StepOutcome::failed(format!(
                        "{name} refused to merge pull request #{number}: {message}"
                    )),
                }
            }
            Err(e) => forge_error(&e, pin_state(since, Some(&head))),
        }
    }
}

/// The key of the pinned head commit in the step's state.
const HEAD_KEY: &str = "headCommit";

/// The head commit this step pinned on an earlier run, if it did.
fn pinned_head(ctx: &StepContext) -> Option<String> {
    ctx.saved_state
        .as_ref()
        .and_then(|s| s[HEAD_KEY].as_str())
        .map(str::to_string)
}

/// The state kept across runs: when the wait began, and the head commit to merge.
fn pin_state(since: i64, head: Option<&str>) -> Option<Value> {
    let mut state = since_state(since).unwrap_or_else(|| json!({}));
    if let Some(head) = head {
        state[HEAD_KEY] = json!(head);
    }
    Some(state)
}

/// Waits (`Running`, saying for what) unless the step's `timeout` has run out.
fn waiting(
    since: i64,
    timeout: Duration,
    pr: &PullRequest,
    poll: Duration,
    head: Option<&str>,
    why: String,
) -> StepOutcome {
    let number = pr.number;
    if timed_out(since, timeout) {
        return StepOutcome::failed(format!(
            "pull request #{number} ({}) did not become mergeable within {}: still waiting \
             for {why}",
            pr.url,
            human(timeout)
        ));
    }
    StepOutcome::Running {
        retry_after: poll,
        waiting_for: format!("pull request #{number} to be mergeable: {why}"),
        state: pin_state(since, head),
    }
}

/// The failure of a pull request whose head is no longer the commit this step checked.
fn head_moved(number: u64, old: &str, new: &str) -> StepOutcome {
    StepOutcome::failed(format!(
        "pull request #{number}'s head moved from {old} to {new} after it was checked; Dray \
         merges only what was reviewed — review the new commit and promote again"
    ))
}
