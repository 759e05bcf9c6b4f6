//! One step of a promotion, to its outcome: look the step up in the registry, evaluate
//! `${{ }}` in its config, and run it — again after its `retry_after` while it answers
//! `Running` (until `retry.timeout`, counted from its first start, so a resumed step does
//! not get its whole timeout again), and again after an `Errored` answer until
//! `retry.errorThreshold` consecutive errors. Between two runs it sleeps no longer than
//! the step asked, and wakes early when someone asks the promotion to look again
//! (`dray.dev/wake`) or aborts it.

use std::time::Duration;

use dray_steps::{StepContext, StepOutcome, Writes};
use serde_json::{Value, json};

use super::state::{Run, now};
use super::{DEFAULT_ERROR_THRESHOLD, Engine, EngineError};
use crate::api::{
    ObjectKey, PromotionStep, ResourceBody as _, StepPhase, annotations, parse_duration,
};
use crate::expr::ExprContext;
use crate::promotion::record;

impl Engine {
    /// Runs step `index` of `run` with `ctx` until it answers something other than
    /// `Running` (or errors past its threshold), saving the run's status in between.
    pub(super) async fn run_step(
        &self,
        run: &mut Run,
        index: usize,
        step: &PromotionStep,
        expr_ctx: &ExprContext,
        mut ctx: StepContext,
    ) -> Result<StepOutcome, EngineError> {
        let alias = ctx.alias.clone();
        let Some(kind) = step.uses.as_deref() else {
            return Ok(StepOutcome::failed("it names no step kind (`uses`)"));
        };
        let Some(runner) = self.steps.get(kind) else {
            return Ok(StepOutcome::failed(format!(
                "it uses `{kind}`, which is not a built-in step (known: {})",
                self.steps.kinds().join(", ")
            )));
        };
        let config = step.config.clone().unwrap_or_else(|| json!({}));
        let config = match self.exprs.evaluate_value(run.language, &config, expr_ctx) {
            Ok(config) => config,
            Err(error) => return Ok(StepOutcome::failed(error)),
        };
        let timeout = step
            .retry
            .as_ref()
            .and_then(|r| r.timeout.as_deref())
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or_else(|| runner.default_timeout(&config));
        let threshold = step
            .retry
            .as_ref()
            .and_then(|r| r.error_threshold)
            .unwrap_or(DEFAULT_ERROR_THRESHOLD)
            .max(1);
        let waited = run.status.step_execution_metadata[index]
            .started_at
            .as_ref()
            .and_then(|started| {
                Duration::try_from(jiff::Timestamp::now().duration_since(started.0)).ok()
            })
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + timeout.saturating_sub(waited);
        let mut errors = 0;
        loop {
            {
                let meta = &mut run.status.step_execution_metadata[index];
                meta.status = StepPhase::Running;
                meta.attempts += 1;
                if meta.started_at.is_none() {
                    meta.started_at = now();
                }
            }
            self.save(run).await?;
            let outcome = tokio::select! {
                outcome = runner.run(&ctx, config.clone()) => outcome,
                _ = ctx.cancel.cancelled() => return Ok(StepOutcome::errored("aborted")),
            };
            let wait = match &outcome {
                StepOutcome::Running {
                    retry_after,
                    waiting_for,
                    state,
                } => {
                    if let Some(state) = state {
                        run.saved.insert(alias.clone(), state.clone());
                        ctx.saved_state = Some(state.clone());
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(StepOutcome::failed(format!(
                            "timed out after {} waiting for {waiting_for}",
                            humantime::format_duration(timeout)
                        )));
                    }
                    errors = 0;
                    run.status.step_execution_metadata[index].message =
                        format!("waiting for {waiting_for}");
                    waiting_message(run, &alias, runner.writes(), waiting_for);
                    *retry_after
                }
                StepOutcome::Errored { reason } => {
                    errors += 1;
                    if errors >= threshold || tokio::time::Instant::now() >= deadline {
                        return Ok(outcome);
                    }
                    run.status.step_execution_metadata[index].message =
                        format!("retrying after: {reason}");
                    Duration::from_millis(500 * u64::from(errors)).min(Duration::from_secs(30))
                }
                _ => return Ok(outcome),
            };
            self.save(run).await?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let nap = wait.min(left).max(Duration::from_millis(10));
            tokio::select! {
                _ = tokio::time::sleep(nap) => {}
                _ = self.woken(&run.key, nap) => {}
                _ = ctx.cancel.cancelled() => return Ok(StepOutcome::errored("aborted")),
            }
        }
    }

    /// Returns when someone asks this promotion to look again (a forge's or Argo CD's
    /// webhook sets the `dray.dev/wake` annotation), so a waiting step does not sit out its
    /// poll interval. Never returns within `at_most` otherwise.
    async fn woken(&self, key: &ObjectKey, at_most: Duration) {
        let wake_of = |object: &Value| object.annotation(annotations::WAKE).map(str::to_owned);
        let mut feed = self.store.changes();
        let Ok(Some(start)) = self.store.get(key).await else {
            return std::future::pending().await;
        };
        let before = wake_of(&start.object);
        let deadline = tokio::time::Instant::now() + at_most;
        loop {
            let seen = feed.latest();
            if let Ok(Some(now)) = self.store.get(key).await
                && wake_of(&now.object) != before
            {
                return;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() || feed.wait_past(seen, left).await.is_none() {
                return std::future::pending().await;
            }
        }
    }
}

/// The promotion's message while step `alias` waits: once something is written to git,
/// that is a state of its own ("written to git …, waiting for sync" when the waiting step
/// deploys), never a failure.
fn waiting_message(run: &mut Run, alias: &str, writes: Writes, waiting_for: &str) {
    run.status.written_to_git = record::written_to_git(&run.effects);
    run.status.message = match &run.status.written_to_git {
        Some(written) => format!(
            "written to git (`{}` at {:.12}), {}: step `{alias}` is waiting for {waiting_for}",
            written.name,
            written.commit,
            match writes {
                Writes::Deployment => "waiting for sync",
                _ => "waiting",
            }
        ),
        None => format!("step `{alias}` is waiting for {waiting_for}"),
    };
}
