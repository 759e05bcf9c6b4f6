//! One promotion, start (or resume) to end: read it and its Freight, prepare the work
//! directory, run the steps in order from the one in flight — each one's `if` decides
//! whether it runs, and a freeze holds the first that writes (`frozen.rs`) — saving the status after every step, then conclude (the first failed
//! step not allowed to fail decides the phase), record a success, and clean up. An abort
//! ends it naming what was already pushed.

use dray_steps::StepOutcome;
use tokio_util::sync::CancellationToken;

use super::barrier::{BarrierPoint, step_barrier};
use super::context::{freight_view, recorded_actor};
use super::state::{Run, now};
use super::{Engine, EngineError};
use crate::api::{
    Freight, Kind, ObjectKey, Promotion, PromotionPhase, PromotionStep, ResourceBody as _,
    StepPhase, annotations,
};
use crate::expr::{DEFAULT_CONDITION, MetadataView};
use crate::promotion::{StepExprs, metadata, record};
use crate::runtime::instruments;
use crate::store::StoreError;

/// The directory, beside a project's promotions' work directories, of its Stages' warm
/// checkouts (see [`dray_steps::park_worktrees`]).
pub(crate) const WARM_DIR: &str = ".warm";

impl Engine {
    pub(super) async fn run_promotion(
        &self,
        key: &ObjectKey,
        cancel: CancellationToken,
    ) -> Result<PromotionPhase, EngineError> {
        let stored = self
            .store
            .get(key)
            .await?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        let promotion: Promotion = stored.to_typed()?;
        if let Some(status) = &promotion.status
            && status.phase.is_terminal()
        {
            return Ok(status.phase);
        }
        let mut run = Run::resume(key, promotion);
        if run.status.phase == PromotionPhase::Pending {
            run.status.phase = PromotionPhase::Running;
            run.status.started_at = now();
            run.status.message = "running".into();
        }
        self.save(&mut run).await?;

        let project = key.namespace.clone().unwrap_or_default();
        let freight_key =
            ObjectKey::namespaced(Kind::Freight, &project, &run.promotion.spec.freight);
        let Some(freight) = self.store.get(&freight_key).await? else {
            let message = format!("Freight `{}` does not exist", freight_key.name);
            return self.finish(&mut run, PromotionPhase::Failed, message).await;
        };
        let freight: Freight = freight.to_typed()?;
        let work_dir = self.work_dir(&run);
        let workspace_kept = tokio::fs::try_exists(&work_dir).await.unwrap_or(false);
        if let Err(error) = blocking_fs(work_dir.clone(), |dir| std::fs::create_dir_all(dir)).await
        {
            let message = format!("cannot create the work directory: {error}");
            return self
                .finish(&mut run, PromotionPhase::Errored, message)
                .await;
        }
        // Every Promotion the promote path makes names its actor; one without came in some
        // other way, and runs nothing (the stage branch would not say who decided).
        let Some(actor) = recorded_actor(&run) else {
            let message = format!(
                "Promotion `{}` records no actor (`{}`): it was not made by the promote path, so it runs nothing; promote again with `dray promote`",
                key.name,
                annotations::ACTOR
            );
            let phase = self
                .finish(&mut run, PromotionPhase::Errored, message)
                .await;
            self.release_work_dir(&run).await;
            return phase;
        };
        let mut base = self
            .base_context(&run, &freight, &actor, work_dir.clone(), cancel.clone())
            .await?;
        base.warm_dir = Some(self.warm_dir(&run));
        let view = freight_view(&freight);
        let mut start = run.status.current_step.unwrap_or(0) as usize;
        if start > 0 && !workspace_kept {
            // Resumed where its work directory is not: on another replica after a
            // failover, or after its volume was lost. What the earlier steps left on disk
            // (checkouts, renders) is gone, so they run again; steps are idempotent (a
            // commit already pushed is found, not made twice) and keep their saved state.
            tracing::info!(promotion = %key, from_step = start,
                "resuming without the promotion's work directory: its steps run again from the first");
            start = 0;
        }
        for index in start..run.promotion.spec.steps.len() {
            if cancel.is_cancelled() {
                return self.abort(&mut run).await;
            }
            run.status.current_step = Some(index as u32);
            let step = run.promotion.spec.steps[index].clone();
            let alias = step.as_.clone().unwrap_or_else(|| format!("step-{index}"));
            let began = std::time::Instant::now();
            // A step that writes waits while the Stage or the project is frozen (unless the
            // promotion overrode the freeze); it runs once the freeze lifts.
            let held = if self.is_held_at_freeze(&run, index) {
                self.wait_out_freeze(&mut run, index, &cancel).await?
            } else {
                None
            };
            let outcome = match held {
                Some(outcome) => outcome,
                None => {
                    self.step_outcome(&mut run, &base, &view, &project, index, &alias)
                        .await?
                }
            };
            // What the step asks of Dray's own resources is applied now, so the next step
            // reads it; a refusal fails the step.
            let outcome = self.apply_dray_effects(&project, outcome).await?;
            step_barrier(&key.name, BarrierPoint::Ran, index).await;
            if cancel.is_cancelled() && !matches!(outcome, StepOutcome::Succeeded { .. }) {
                return self.abort(&mut run).await;
            }
            run.settle(index, &alias, outcome);
            if run
                .status
                .step_execution_metadata
                .get(index)
                .is_some_and(|meta| meta.status != StepPhase::Skipped)
            {
                instruments::record_step(step.uses.as_deref().unwrap_or("task"), began.elapsed());
            }
            self.save(&mut run).await?;
            step_barrier(&key.name, BarrierPoint::Recorded, index).await;
        }
        let (phase, message) = conclusion(&run);
        // A succeeded promotion is recorded on its Stage and Freight first, and only then
        // says Succeeded: whoever sees it ended (auto-promotion, `promote --wait`, the
        // queue) sees the Stage on its Freight. A failed record is reported once the
        // promotion says Succeeded (its steps did succeed), so the queue moves on.
        let recorded = match phase {
            PromotionPhase::Succeeded => self.record_success(&run, &freight_key, freight).await,
            _ => Ok(()),
        };
        let phase = self.finish(&mut run, phase, message).await?;
        recorded?;
        self.release_work_dir(&run).await;
        Ok(phase)
    }

    /// Records a succeeded run on its Stage and on the Freight going in and out.
    async fn record_success(
        &self,
        run: &Run,
        freight_key: &ObjectKey,
        freight: Freight,
    ) -> Result<(), EngineError> {
        // Read again: a step may have renamed it (`set-freight-alias`).
        let freight = match self.store.get(freight_key).await? {
            Some(fresh) => fresh.to_typed()?,
            None => freight,
        };
        record::promotion_succeeded(
            self.store.as_ref(),
            &run.key,
            &run.promotion,
            &freight,
            &run.effects,
        )
        .await?;
        Ok(())
    }

    /// The promotion's work directory: `<work root>/<project>/<promotion>`.
    fn work_dir(&self, run: &Run) -> std::path::PathBuf {
        let project = run.key.namespace.as_deref().unwrap_or_default();
        self.work_root.join(project).join(&run.key.name)
    }

    /// The Stage's warm directory, where the checkouts of its last promotion wait for the
    /// next one.
    fn warm_dir(&self, run: &Run) -> std::path::PathBuf {
        let project = run.key.namespace.as_deref().unwrap_or_default();
        self.stage_warm_dir(project, &run.promotion.spec.stage)
    }

    /// Ends an ended promotion's work directory: its checkouts go warm for the Stage's next
    /// promotion, the rest is removed, so nothing outside a checkout reaches the next one.
    async fn release_work_dir(&self, run: &Run) {
        let work_dir = self.work_dir(run);
        let parked =
            dray_steps::park_worktrees(&self.tools.git, &work_dir, &self.warm_dir(run)).await;
        tracing::debug!(promotion = %run.key, parked, "worktrees kept warm");
        if let Err(error) = blocking_fs(work_dir.clone(), |dir| std::fs::remove_dir_all(dir)).await
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::debug!(%error, dir = %work_dir.display(), "cannot remove the work directory");
        }
    }

    /// Step `index` (`alias`) of `run` to its outcome: its `if` decides whether it runs;
    /// nothing of the outcome is filed yet.
    pub(super) async fn step_outcome(
        &self,
        run: &mut Run,
        base: &dray_steps::StepContext,
        view: &crate::expr::FreightView,
        project: &str,
        index: usize,
        alias: &str,
    ) -> Result<StepOutcome, EngineError> {
        let step = run.promotion.spec.steps[index].clone();
        let metadata = self.metadata_view(run, project, &step).await?;
        let mut expr_ctx = match self.expr_context(run, base, view, &step) {
            Err(reason) => return Ok(StepOutcome::failed(reason)),
            Ok(expr_ctx) => expr_ctx,
        };
        expr_ctx.metadata = metadata;
        let condition = step.if_.as_deref().unwrap_or(DEFAULT_CONDITION);
        match self
            .exprs
            .evaluate_condition(run.language, condition, &expr_ctx)
        {
            Err(error) => Ok(StepOutcome::failed(format!("`if`: {error}"))),
            Ok(false) => Ok(StepOutcome::skipped(format!("`if: {condition}` is false"))),
            Ok(true) => {
                let mut ctx = base.clone();
                ctx.alias = alias.to_owned();
                ctx.log = run.logs.sink(&run.key.to_string(), index, alias);
                ctx.saved_state = run.saved.get(alias).cloned();
                ctx.exprs = std::sync::Arc::new(StepExprs::new(
                    self.exprs.clone(),
                    run.language,
                    expr_ctx.clone(),
                ));
                self.run_step(run, index, &step, &expr_ctx, ctx).await
            }
        }
    }

    /// The metadata `freightMetadata()` / `stageMetadata()` read, loaded only when the step
    /// or the promotion's variables may call them.
    async fn metadata_view(
        &self,
        run: &Run,
        project: &str,
        step: &PromotionStep,
    ) -> Result<MetadataView, EngineError> {
        let text = serde_json::to_string(step).unwrap_or_default()
            + &serde_json::to_string(&run.promotion.spec.vars).unwrap_or_default();
        if !metadata::reads_metadata(&text) {
            return Ok(MetadataView::default());
        }
        Ok(metadata::load_view(self.store.as_ref(), project).await?)
    }

    /// Applies a succeeded step's changes to Stages and Freight of the project; a refusal
    /// turns the outcome into `Failed` with its reason.
    async fn apply_dray_effects(
        &self,
        project: &str,
        outcome: StepOutcome,
    ) -> Result<StepOutcome, EngineError> {
        if !metadata::changes_dray(outcome.effects()) {
            return Ok(outcome);
        }
        match metadata::apply(self.store.as_ref(), project, outcome.effects()).await {
            Ok(()) => Ok(outcome),
            Err(metadata::MetadataError::Store(error)) => Err(error.into()),
            Err(refused) => Ok(StepOutcome::failed(refused.to_string())),
        }
    }

    /// Saves the run's status (and the log lines kept since the last save).
    pub(super) async fn save(&self, run: &mut Run) -> Result<(), EngineError> {
        run.logs.drain_into(&mut run.status.step_execution_metadata);
        if !run.persist {
            return Ok(());
        }
        run.status.state = Some(run.state());
        let status =
            serde_json::to_value(&run.status).map_err(|e| StoreError::Internal(e.to_string()))?;
        self.store.update_status(&run.key, status, None).await?;
        Ok(())
    }

    async fn finish(
        &self,
        run: &mut Run,
        phase: PromotionPhase,
        message: String,
    ) -> Result<PromotionPhase, EngineError> {
        run.status.phase = phase;
        run.status.message = message;
        run.status.finished_at = now();
        self.save(run).await?;
        tracing::info!(promotion = %run.key, ?phase, message = %run.status.message, "promotion finished");
        let ran = match (&run.status.started_at, &run.status.finished_at) {
            (Some(started), Some(finished)) => {
                std::time::Duration::try_from(finished.0.duration_since(started.0)).ok()
            }
            _ => None,
        };
        instruments::record_promotion(
            run.key.namespace.as_deref().unwrap_or_default(),
            &run.promotion.spec.stage,
            phase.as_str(),
            ran,
        );
        Ok(phase)
    }

    /// Ends the run as `Aborted`, saying who asked and what was already pushed.
    async fn abort(&self, run: &mut Run) -> Result<PromotionPhase, EngineError> {
        for meta in &mut run.status.step_execution_metadata {
            if meta.status == StepPhase::Running {
                meta.status = StepPhase::Aborted;
                meta.finished_at = now();
            }
        }
        let pushed = run.pushed();
        // Who asked: a person (the annotation holds their name) or a newer request.
        let asked = match self.store.get(&run.key).await {
            Ok(Some(current)) => current
                .object
                .annotation(annotations::ABORT)
                .map(str::to_owned),
            _ => None,
        };
        let aborted = match asked.as_deref() {
            Some(by) if by.starts_with("superseded by") => format!("{by}; aborted"),
            Some(by) if !by.is_empty() => format!("aborted by `{by}`"),
            _ => "aborted".to_owned(),
        };
        let message = if pushed.is_empty() {
            // Nothing rolled back: a hold its request set goes with it.
            let spec = &run.promotion.spec;
            let project = run.key.namespace.as_deref().unwrap_or_default();
            crate::promotion::record::lift_hold_of(
                self.store.as_ref(),
                project,
                &spec.stage,
                &spec.freight,
            )
            .await?;
            format!("{aborted} before anything was pushed")
        } else {
            format!("{aborted}; already pushed: {}", pushed.join(", "))
        };
        let phase = self.finish(run, PromotionPhase::Aborted, message).await?;
        self.release_work_dir(run).await;
        Ok(phase)
    }
}

/// The phase and message of a run whose steps all had their turn: the first failed or
/// errored step that may not fail (`continueOnError`) decides it.
fn conclusion(run: &Run) -> (PromotionPhase, String) {
    let failed = run
        .status
        .step_execution_metadata
        .iter()
        .enumerate()
        .find(|(i, s)| {
            matches!(s.status.as_str(), "Failed" | "Errored")
                && !run.promotion.spec.steps[*i].continue_on_error
        });
    match failed {
        Some((_, s)) if s.status == StepPhase::Errored => (
            PromotionPhase::Errored,
            format!("step `{}` errored: {}", s.alias, s.message),
        ),
        Some((_, s)) => (
            PromotionPhase::Failed,
            format!("step `{}` failed: {}", s.alias, s.message),
        ),
        None => (PromotionPhase::Succeeded, "every step succeeded".to_owned()),
    }
}

/// Runs whole-tree file work on a directory (create it, remove it) on tokio's blocking
/// pool, so that a large work directory never stalls the runtime's threads.
pub(super) async fn blocking_fs(
    dir: std::path::PathBuf,
    work: fn(&std::path::Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || work(&dir))
        .await
        .map_err(std::io::Error::other)?
}
