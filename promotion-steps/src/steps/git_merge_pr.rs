//! `git-merge-pr`: merges a pull request when the forge says it can be merged, with the
//! configured method (`merge`, `squash`, `rebase` on GitHub), and outputs what landed on
//! the target branch (`commit`).
//!
//! While checks or reviews are pending it waits (`Running`, naming the forge's status);
//! conflicts, or a refusal by the forge (GitHub 405/409, GitLab 405/406/409/422), are
//! Failed with the forge's message. Idempotent: an already merged pull request succeeds
//! with its commit. Gives up after `timeout` (default 72 h).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::pr::{
    PrNumber, WaitFor, Waiting, closed_without_merge, forge_error, human, own_timeout, pr_outputs,
    since_state, start_waiting, timed_out,
};
use super::typed::TypedStep;
use crate::forge::{ForgeError, MergeMethod, PrState, Provider};
use crate::{StepContext, StepOutcome};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-merge-pr";

/// The configuration of `git-merge-pr`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The repository, e.g. `https://github.com/acme/config.git`.
    #[serde(rename = "repoURL")]
    pub(crate) repo_url: String,
    /// `github` or `gitlab`; inferred from the host for github.com and gitlab.com.
    #[serde(default)]
    pub(crate) provider: Option<Provider>,
    /// The forge's API base URL (GitHub Enterprise, self-hosted GitLab).
    #[serde(default, rename = "apiURL")]
    pub(crate) api_url: Option<String>,
    /// The pull request, e.g. `${{ outputs.open-pr.pr.id }}`.
    pub(crate) pr_number: PrNumber,
    /// `merge` (default), `squash` or `rebase` (GitHub only).
    #[serde(default)]
    pub(crate) merge_method: MergeMethod,
    /// How often to look while checks are pending (default `30s`).
    #[serde(default)]
    pub(crate) poll_interval: Option<String>,
    /// How long to wait for the pull request to become mergeable (default `72h`).
    #[serde(default)]
    pub(crate) timeout: Option<String>,
}

/// Statuses that may clear by themselves: wait.
const PENDING: [&str; 16] = [
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
];

/// Statuses that mean a merge cannot work without a change to the branches: fail.
const CONFLICT: [&str; 4] = ["dirty", "conflict", "need_rebase", "cannot_be_merged"];

/// The `git-merge-pr` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitMergePr;

#[async_trait]
impl TypedStep for GitMergePr {
    const KIND: &'static str = KIND;
    type Config = Config;

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
        let state = since_state(since);
        let name = forge.provider().name();
        match pr.state {
            PrState::Merged => {
                if let Some(commit) = &pr.merged_commit {
                    return StepOutcome::succeeded(pr_outputs(&pr, &[("commit", commit)]));
                }
            }
            PrState::Closed => return closed_without_merge(&pr),
            PrState::Open => {}
        }
        let status = pr.merge_status.clone().unwrap_or_default();
        if CONFLICT.contains(&status.as_str()) {
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
            if timed_out(since, timeout) {
                return StepOutcome::failed(format!(
                    "pull request #{number} ({}) did not become mergeable within {} ({name} \
                     says `{status}`)",
                    pr.url,
                    human(timeout)
                ));
            }
            let why = if status.is_empty() {
                format!("{name} to check whether it can be merged")
            } else {
                format!("{name} merge status `{status}`")
            };
            return StepOutcome::Running {
                retry_after: poll,
                waiting_for: format!("pull request #{number} to be mergeable: {why}"),
                state,
            };
        }
        match forge.merge(number, config.merge_method).await {
            Ok(commit) => {
                ctx.log(&format!(
                    "merged pull request #{number} on {name}: {commit}"
                ));
                StepOutcome::succeeded(pr_outputs(&pr, &[("commit", &commit)]))
            }
            Err(ForgeError::Refused(message)) => StepOutcome::failed(format!(
                "{name} refused to merge pull request #{number}: {message}"
            )),
            Err(e) => forge_error(&e, state),
        }
    }
}
