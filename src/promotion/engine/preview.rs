//! A preview of a promotion: its steps run in a throwaway work directory up to (not
//! including) the first step that may write anything outside it — the step's
//! [`dray_steps::Step::writes_with`] its evaluated config is not `Nothing` (a push, a pull
//! request, a sync, an OCI push, an `http` request that is not a `GET`) — and the diff of
//! what the checkouts would commit ([`dray_steps::preview`]).
//!
//! A preview is never stored: its Promotion lives in memory only, no status is saved, the
//! changes steps ask of Dray's own resources (`set-metadata`, `set-freight-alias`) are not
//! applied, nothing is recorded, and its worktrees are removed from the shared mirrors and
//! its work directory deleted before it answers, whatever happened. It is bounded by
//! [`PREVIEW_TIMEOUT`]. Whether the caller may preview, and the gates, are the pipeline's.

use std::time::Duration;

use dray_steps::Writes;
use dray_steps::preview::{CheckoutDiff, checkout_diffs, release_worktrees};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::context::{freight_view, recorded_actor};
use super::run::blocking_fs;
use super::state::Run;
use super::{Engine, EngineError};
use crate::api::{Freight, Kind, ObjectKey, Promotion, StepPhase};
use crate::expr::FreightView;

/// How long a whole preview may take, its steps and its diff: less than the CLI waits for
/// an answer (60s), so that it hears why.
pub const PREVIEW_TIMEOUT: Duration = Duration::from_secs(50);

/// The directory under the engine's work root where previews get their work directories
/// (never a promotion's: promotions live under `<work root>/<project>/`).
const PREVIEW_DIR: &str = ".previews";

/// What a preview found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewReport {
    /// What each checkout would commit (those that change nothing are left out).
    pub checkouts: Vec<CheckoutDiff>,
    /// The alias of the first step that writes, which the preview did not run (`None`:
    /// no step writes).
    pub stopped_before: Option<String>,
    /// The steps that ran (or were skipped), with what each said.
    pub steps: Vec<PreviewStep>,
    /// The first step that failed and why: the diff is what the steps before it left.
    pub failed: Option<String>,
}

/// One step of a preview.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewStep {
    /// Its alias.
    pub alias: String,
    /// Its kind (`uses`).
    pub uses: String,
    /// How it ended.
    pub status: StepPhase,
    /// What it said.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Engine {
    /// Previews `promotion` (made by the pipeline, never stored) of `freight`: see the
    /// module doc. Its work directory and worktrees are gone when this returns.
    pub async fn preview(
        &self,
        promotion: Promotion,
        freight: &Freight,
    ) -> Result<PreviewReport, EngineError> {
        let project = promotion.metadata.namespace.clone().unwrap_or_default();
        let name = promotion.metadata.name.clone().unwrap_or_default();
        let key = ObjectKey::namespaced(Kind::Promotion, &project, &name);
        let stage = promotion.spec.stage.clone();
        let mut run = Run::resume(&key, promotion);
        run.persist = false;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let work_dir = self.work_root.join(PREVIEW_DIR).join(&id);
        blocking_fs(work_dir.clone(), |dir| std::fs::create_dir_all(dir))
            .await
            .map_err(|cause| EngineError::PreviewWorkDir {
                dir: work_dir.display().to_string(),
                cause,
            })?;
        let cancel = CancellationToken::new();
        let steps = tokio::time::timeout(
            PREVIEW_TIMEOUT,
            self.preview_steps(&mut run, freight, &work_dir, cancel.clone()),
        )
        .await;
        cancel.cancel();
        let report = match steps {
            Err(_) => Err(EngineError::PreviewTimedOut {
                stage,
                after: PREVIEW_TIMEOUT,
            }),
            Ok(Err(error)) => Err(error),
            Ok(Ok(stopped_before)) => checkout_diffs(&self.tools.git, &work_dir)
                .await
                .map_err(EngineError::PreviewDiff)
                .map(|checkouts| report(&run, checkouts, stopped_before)),
        };
        let removed = release_worktrees(&self.tools.git, &work_dir).await;
        tracing::info!(promotion = %key, worktrees = removed, "preview finished");
        report
    }

    /// Runs `run`'s steps in `work_dir` up to the first that writes; returns its alias.
    async fn preview_steps(
        &self,
        run: &mut Run,
        freight: &Freight,
        work_dir: &std::path::Path,
        cancel: CancellationToken,
    ) -> Result<Option<String>, EngineError> {
        let project = run.key.namespace.clone().unwrap_or_default();
        let actor = recorded_actor(run).unwrap_or_default();
        let base = self
            .base_context(run, freight, &actor, work_dir.to_owned(), cancel)
            .await?;
        let view = freight_view(freight);
        for index in 0..run.promotion.spec.steps.len() {
            let alias = run.promotion.spec.steps[index]
                .as_
                .clone()
                .unwrap_or_else(|| format!("step-{index}"));
            if self.writes(run, &base, &view, index).anything() {
                return Ok(Some(alias));
            }
            run.status.current_step = Some(index as u32);
            let outcome = self
                .step_outcome(run, &base, &view, &project, index, &alias)
                .await?;
            run.settle(index, &alias, outcome);
        }
        Ok(None)
    }

    /// What step `index` of `run` may write, with its config evaluated as it would run (a
    /// config that does not evaluate: what its kind may write).
    fn writes(
        &self,
        run: &Run,
        base: &dray_steps::StepContext,
        view: &FreightView,
        index: usize,
    ) -> Writes {
        let step = &run.promotion.spec.steps[index];
        let Some(runner) = step.uses.as_deref().and_then(|kind| self.steps.get(kind)) else {
            return Writes::Nothing;
        };
        if runner.writes().anything() {
            return runner.writes();
        }
        let config = step.config.clone().unwrap_or_else(|| json!({}));
        match self
            .expr_context(run, base, view, step)
            .and_then(|ctx| self.exprs.evaluate_value(run.language, &config, &ctx))
        {
            Ok(config) => runner.writes_with(&config),
            Err(_) => runner.writes(),
        }
    }
}

/// The report of a preview whose steps ran as `run` says.
fn report(
    run: &Run,
    checkouts: Vec<CheckoutDiff>,
    stopped_before: Option<String>,
) -> PreviewReport {
    // Settling a step moves `current_step` past it: it counts the steps that had their turn.
    let ran = run.status.current_step.map_or(0, |c| c as usize);
    let steps: Vec<PreviewStep> = run
        .status
        .step_execution_metadata
        .iter()
        .zip(&run.promotion.spec.steps)
        .take(ran)
        .map(|(meta, step)| PreviewStep {
            alias: meta.alias.clone(),
            uses: step.uses.clone().unwrap_or_default(),
            status: meta.status,
            message: meta.message.clone(),
        })
        .collect();
    let failed = run
        .status
        .step_execution_metadata
        .iter()
        .zip(&run.promotion.spec.steps)
        .find(|(meta, step)| meta.status.is_failure() && !step.continue_on_error)
        .map(|(meta, _)| format!("step `{}` failed: {}", meta.alias, meta.message));
    PreviewReport {
        checkouts,
        stopped_before,
        steps,
        failed,
    }
}
