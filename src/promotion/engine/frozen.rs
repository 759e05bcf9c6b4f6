//! Holding a running promotion at a freeze: before its first step that writes (to git, a
//! forge, Argo CD), a promotion whose Stage or project is frozen waits — still `Running`,
//! its message `held: frozen by <user>: <reason>` — and looks again whenever the store
//! changes (an unfreeze) or the freeze expires. It waits at most the step's timeout, then
//! fails saying so. A promotion started through the freeze with `override` is not held.
//! What a freeze is and when it gates is `api::Freeze`'s; who sets one is the pipeline's.

use std::time::Duration;

use dray_steps::StepOutcome;
use tokio_util::sync::CancellationToken;

use super::state::Run;
use super::{Engine, EngineError};
use crate::api::{
    Kind, ObjectKey, Project, Stage, StepPhase, active_freezes, annotations, parse_duration,
};

impl Engine {
    /// Whether step `index` of `run` is the first one that writes (none before it has
    /// started writing), and the promotion was not started through a freeze.
    pub(super) fn is_held_at_freeze(&self, run: &Run, index: usize) -> bool {
        let overridden = run
            .promotion
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(annotations::FREEZE_OVERRIDE));
        if overridden {
            return false;
        }
        let writes = |i: usize| {
            let uses = run.promotion.spec.steps[i]
                .uses
                .as_deref()
                .unwrap_or_default();
            self.steps.get(uses).is_some_and(|s| s.writes().anything())
        };
        let written_before =
            (0..index).any(|i| {
                writes(i)
                    && run.status.step_execution_metadata.get(i).is_some_and(|m| {
                        !matches!(m.status, StepPhase::Pending | StepPhase::Skipped)
                    })
            });
        writes(index) && !written_before
    }

    /// The words of the freezes on the run's Stage and project now (empty: not frozen).
    async fn freezes_now(&self, run: &Run) -> Result<Vec<String>, EngineError> {
        let project = run.key.namespace.clone().unwrap_or_default();
        let stage_key = ObjectKey::namespaced(Kind::Stage, &project, &run.promotion.spec.stage);
        let Some(stage) = self.store.get(&stage_key).await? else {
            return Ok(Vec::new());
        };
        let stage: Stage = stage.to_typed()?;
        let project_key = ObjectKey::cluster(Kind::Project, &project);
        let of_project: Option<Project> = self
            .store
            .get(&project_key)
            .await?
            .and_then(|p| p.to_typed().ok());
        Ok(
            active_freezes(of_project.as_ref(), &stage, jiff::Timestamp::now())
                .into_iter()
                .map(|(scope, f)| format!("{} ({scope})", f.words()))
                .collect(),
        )
    }

    /// Waits while the run's Stage or project is frozen, before step `index` (see the
    /// module doc). `None`: go on; `Some`: the step's outcome (timed out, or aborted).
    pub(super) async fn wait_out_freeze(
        &self,
        run: &mut Run,
        index: usize,
        cancel: &CancellationToken,
    ) -> Result<Option<StepOutcome>, EngineError> {
        let step = &run.promotion.spec.steps[index];
        let timeout = step
            .retry
            .as_ref()
            .and_then(|r| r.timeout.as_deref())
            .and_then(|t| parse_duration(t).ok())
            .or_else(|| {
                let runner = self.steps.get(step.uses.as_deref()?)?;
                Some(
                    runner
                        .default_timeout(step.config.as_ref().unwrap_or(&serde_json::Value::Null)),
                )
            })
            .unwrap_or(Duration::from_secs(600));
        let deadline = tokio::time::Instant::now() + timeout;
        let mut feed = self.store.changes();
        loop {
            let seen = feed.latest();
            let frozen = self.freezes_now(run).await?;
            if frozen.is_empty() {
                return Ok(None);
            }
            let held = format!("held: {}", frozen.join("; "));
            if tokio::time::Instant::now() >= deadline {
                return Ok(Some(StepOutcome::failed(format!(
                    "{held}: still frozen after {}; unfreeze and promote again",
                    humantime::format_duration(timeout)
                ))));
            }
            if run.status.message != held {
                tracing::info!(promotion = %run.key, message = %held, "promotion held by a freeze");
                run.status.message = held;
                self.save(run).await?;
            }
            // Looks again on any change (an unfreeze), at the latest each few seconds (an
            // `until` passing) and at the deadline.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let nap = left
                .min(Duration::from_secs(5))
                .max(Duration::from_millis(10));
            tokio::select! {
                _ = feed.wait_past(seen, nap) => {}
                _ = cancel.cancelled() => return Ok(Some(StepOutcome::errored("aborted"))),
            }
        }
    }
}
