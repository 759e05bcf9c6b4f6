//! `git-wait-for-pr`: waits until a pull request is merged, and outputs what landed on
//! the target branch (`commit`: the merge commit, the squash commit, or the fast-forward
//! head) for `argocd-update`.
//!
//! Closed without merging → Failed, naming who closed it. Polls every `pollInterval`
//! (default 30 s; the forge's merge webhook is meant to wake it sooner); fails after
//! `timeout` (default 72 h), counted from the first run (kept in the step's state).

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::pr::{
    PrNumber, WaitFor, Waiting, closed_without_merge, human, own_timeout, pr_outputs, since_state,
    start_waiting, timed_out,
};
use super::typed::TypedStep;
use crate::forge::{PrState, Provider};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-wait-for-pr";

/// The configuration of `git-wait-for-pr`.
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
    /// How often to look (default `30s`).
    #[serde(default)]
    pub(crate) poll_interval: Option<String>,
    /// How long to wait at most (default `72h`).
    #[serde(default)]
    pub(crate) timeout: Option<String>,
}

/// The `git-wait-for-pr` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitWaitForPr;

#[async_trait]
impl TypedStep for GitWaitForPr {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    fn check(&self, config: &serde_json::Value) -> Vec<crate::ConfigProblem> {
        super::pr::check_forge(config)
    }

    fn default_timeout(&self, config: &Config) -> Duration {
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
            poll,
            timeout,
            since,
            forge,
            pr,
            ..
        } = match start_waiting(ctx, KIND, wait).await {
            Ok(waiting) => waiting,
            Err(outcome) => return outcome,
        };
        wait_outcome(&pr, since, poll, timeout, forge.provider().name())
    }
}

/// What a pull request in this state means for a step waiting for its merge.
pub(crate) fn wait_outcome(
    pr: &crate::forge::PullRequest,
    since: i64,
    poll: Duration,
    timeout: Duration,
    forge: &str,
) -> StepOutcome {
    match pr.state {
        PrState::Merged => match &pr.merged_commit {
            Some(commit) => StepOutcome::Succeeded {
                outputs: pr_outputs(pr, &[("commit", commit)]),
                state: None,
                effects: Vec::new(),
            },
            None => StepOutcome::Running {
                retry_after: poll,
                waiting_for: format!(
                    "{forge} to report the merge commit of pull request #{}",
                    pr.number
                ),
                state: since_state(since),
            },
        },
        PrState::Closed => closed_without_merge(pr),
        PrState::Open if timed_out(since, timeout) => StepOutcome::failed(format!(
            "pull request #{} ({}) was not merged within {}",
            pr.number,
            pr.url,
            human(timeout)
        )),
        PrState::Open => StepOutcome::Running {
            retry_after: poll,
            waiting_for: format!(
                "pull request #{} ({}) to be merged into `{}`",
                pr.number, pr.url, pr.base
            ),
            state: since_state(since),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::forge::PullRequest;
    use crate::steps::pr::{DEFAULT_POLL, DEFAULT_TIMEOUT};

    #[test]
    fn the_engine_waits_as_long_as_the_steps_own_timeout_says() {
        let config = |timeout: Option<&str>| {
            let mut config =
                serde_json::json!({"repoURL": "https://github.com/a/b", "prNumber": 7});
            if let Some(timeout) = timeout {
                config["timeout"] = serde_json::json!(timeout);
            }
            config
        };
        let step: &dyn Step = &GitWaitForPr;
        assert_eq!(
            step.default_timeout(&config(Some("100h"))),
            Duration::from_secs(100 * 3600)
        );
        assert_eq!(
            step.default_timeout(&config(Some("5m"))),
            Duration::from_secs(300)
        );
        assert_eq!(step.default_timeout(&config(None)), DEFAULT_TIMEOUT);
        assert_eq!(
            Step::default_timeout(
                &crate::steps::git_merge_pr::GitMergePr,
                &config(Some("100h"))
            ),
            Duration::from_secs(100 * 3600)
        );
    }

    fn pr(state: PrState) -> PullRequest {
        PullRequest {
            number: 7,
            url: "https://github.com/a/b/pull/7".into(),
            state,
            merged_commit: None,
            closed_by: Some("bob".into()),
            mergeable: None,
            merge_status: None,
            head: "dray/promotion/p".into(),
            head_sha: Some("h3ad".into()),
            base: "stage/prod".into(),
        }
    }

    #[test]
    fn open_waits_closed_fails_and_time_runs_out() {
        let now = jiff::Timestamp::now().as_second();
        let open = wait_outcome(
            &pr(PrState::Open),
            now,
            DEFAULT_POLL,
            DEFAULT_TIMEOUT,
            "GitHub",
        );
        let StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } = open
        else {
            panic!("{open:?}")
        };
        assert_eq!(retry_after, DEFAULT_POLL);
        assert!(waiting_for.contains("#7"), "{waiting_for}");
        let closed = wait_outcome(
            &pr(PrState::Closed),
            now,
            DEFAULT_POLL,
            DEFAULT_TIMEOUT,
            "GitHub",
        );
        assert_eq!(
            closed,
            StepOutcome::failed("pull request #7 was closed without merging by bob")
        );
        let late = wait_outcome(
            &pr(PrState::Open),
            now - 73 * 3600,
            DEFAULT_POLL,
            DEFAULT_TIMEOUT,
            "GitHub",
        );
        assert!(matches!(late, StepOutcome::Failed { reason } if reason.contains("within 72h")));
    }
}
