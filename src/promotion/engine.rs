//! The promotion engine: runs a Promotion's steps in order, persisting its status after
//! every step, and resumes a Running promotion at the step that was in flight after a
//! crash (steps are idempotent, so running that step again is safe).
//!
//! Outcomes: a step that is `Running` is run again after its `retry_after` until its
//! `retry.timeout` (default 10m) passes — then it fails naming what it waited for; an
//! `Errored` step is retried until `retry.errorThreshold` consecutive errors (default 1);
//! after a `Failed` or `Errored` step, later steps are skipped unless their `if` uses
//! `failure()` or `always()`. Nothing waits without a deadline.
//!
//! ## Test hook: step barriers
//!
//! For crash tests only: with [`STEP_BARRIER_ENV`] (`DRAY_TEST_STEP_BARRIER_DIR`) naming a
//! directory, the engine can be held at two points of step `i` of any promotion, so that
//! a test can SIGKILL `dray serve` at an exact step boundary:
//!
//! - `ran`: step `i` has run (a push has landed) but its outcome is not yet recorded;
//! - `recorded`: step `i`'s outcome is durably saved in the Promotion's status.
//!
//! A point is armed while `<dir>/arm-<point>-<i>` exists. On reaching an armed point the
//! engine writes `<dir>/reached-<promotion>-<point>-<i>` and waits until
//! `<dir>/release-<promotion>-<point>-<i>` exists, at most [`STEP_BARRIER_TIMEOUT`] (it
//! logs what it waits for, and goes on after the timeout). Unset, nothing is checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dray_steps::{StepContext, StepOutcome, StepRegistry, TargetFreight, ToolPaths};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::{
    Actor, Freight, Kind, ObjectKey, Promotion, PromotionPhase, PromotionStatus, PromotionStep,
    StepExecution, StepPhase, Time, annotations, parse_duration,
};
use crate::expr::{DEFAULT_CONDITION, ExprCache, ExprContext, FreightView};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError};

use super::credentials::ProjectCredentials;
use super::plan::task_of;
use super::record;

/// How many consecutive errors a step may have when `retry.errorThreshold` says nothing.
pub const DEFAULT_ERROR_THRESHOLD: u32 = 1;

/// Test hook: the directory of step barriers (see the module doc). Tests only.
pub const STEP_BARRIER_ENV: &str = "DRAY_TEST_STEP_BARRIER_DIR";

/// How long a step barrier holds a promotion at most before it goes on.
pub const STEP_BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a step barrier holds a promotion (test hook, see the module doc).
#[derive(Clone, Copy, Debug)]
enum BarrierPoint {
    /// The step ran; its outcome is not recorded yet.
    Ran,
    /// The step's outcome is recorded.
    Recorded,
}

impl BarrierPoint {
    fn name(self) -> &'static str {
        match self {
            BarrierPoint::Ran => "ran",
            BarrierPoint::Recorded => "recorded",
        }
    }
}

/// Test hook: holds the promotion at `point` of step `index` while the test armed it
/// (see the module doc). Does nothing unless [`STEP_BARRIER_ENV`] is set.
async fn step_barrier(promotion: &str, point: BarrierPoint, index: usize) {
    let Some(dir) = std::env::var_os(STEP_BARRIER_ENV).filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let point = point.name();
    if !dir.join(format!("arm-{point}-{index}")).exists() {
        return;
    }
    let release = dir.join(format!("release-{promotion}-{point}-{index}"));
    let reached = dir.join(format!("reached-{promotion}-{point}-{index}"));
    if let Err(error) = std::fs::write(&reached, b"") {
        tracing::warn!(%error, file = %reached.display(), "test step barrier: cannot write");
        return;
    }
    tracing::warn!(
        promotion,
        step = index,
        point,
        "test step barrier ({STEP_BARRIER_ENV}): waiting at most {}s for `{}`",
        STEP_BARRIER_TIMEOUT.as_secs(),
        release.display()
    );
    let deadline = tokio::time::Instant::now() + STEP_BARRIER_TIMEOUT;
    while !release.exists() {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                promotion,
                step = index,
                point,
                "test step barrier: timed out; going on"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs promotions.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    steps: StepRegistry,
    exprs: ExprCache,
    work_root: PathBuf,
    repos: Arc<dyn dray_steps::RepoCache>,
    secret_key: Arc<SecretKey>,
    http: reqwest::Client,
    tools: ToolPaths,
}

/// Why a promotion could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Everything the engine is built from.
pub struct EngineParts {
    /// Where resources live.
    pub store: Arc<dyn Store>,
    /// The built-in steps.
    pub steps: StepRegistry,
    /// Where promotions get their work directories.
    pub work_root: PathBuf,
    /// The shared git mirrors.
    pub repos: Arc<dyn dray_steps::RepoCache>,
    /// Opens Credentials.
    pub secret_key: Arc<SecretKey>,
    /// External tools.
    pub tools: ToolPaths,
}

struct Run {
    key: ObjectKey,
    promotion: Promotion,
    status: PromotionStatus,
    outputs: Map<String, Value>,
    saved: Map<String, Value>,
    logs: super::step_log::StepLogs,
}

impl Run {
    fn state(&self) -> Value {
        json!({"outputs": self.outputs, "saved": self.saved})
    }
}

fn now() -> Option<Time> {
    Some(Time(jiff::Timestamp::now()))
}

fn summarise(outcome: &StepOutcome) -> (StepPhase, String) {
    match outcome {
        StepOutcome::Succeeded { .. } => (StepPhase::Succeeded, String::new()),
        StepOutcome::Running { waiting_for, .. } => {
            (StepPhase::Running, format!("waiting for {waiting_for}"))
        }
        StepOutcome::Failed { reason } => (StepPhase::Failed, reason.clone()),
        StepOutcome::Errored { reason } => (StepPhase::Errored, reason.clone()),
        StepOutcome::Skipped { reason } => (StepPhase::Skipped, reason.clone()),
    }
}

impl Engine {
    /// An engine from its parts.
    pub fn new(parts: EngineParts) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Engine {
            store: parts.store,
            steps: parts.steps,
            exprs: ExprCache::new(),
            work_root: parts.work_root,
            repos: parts.repos,
            secret_key: parts.secret_key,
            http,
            tools: parts.tools,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs (or resumes) one promotion to its end, or until `cancel` fires. Returns the
    /// final phase.
    pub async fn run(
        &self,
        key: &ObjectKey,
        cancel: CancellationToken,
    ) -> Result<PromotionPhase, EngineError> {
        let stage = match self.store.get(key).await? {
            Some(stored) => stored
                .object
                .pointer("/spec/stage")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            None => return Err(StoreError::NotFound(key.clone()).into()),
        };
        let project = key.namespace.clone().unwrap_or_default();
        let store = self.store.as_ref();
        record::set_current_promotion(store, &project, &stage, Some(&key.name), &key.name).await?;
        let phase = self.run_promotion(key, cancel).await;
        record::set_current_promotion(store, &project, &stage, None, &key.name).await?;
        phase
    }

    async fn run_promotion(
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
        let mut status = promotion.status.clone().unwrap_or_default();
        if status.phase.is_terminal() {
            return Ok(status.phase);
        }
        let state = status.state.clone().unwrap_or_default();
        let mut run = Run {
            key: key.clone(),
            outputs: state
                .get("outputs")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            saved: state
                .get("saved")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            status: std::mem::take(&mut status),
            promotion,
            logs: Default::default(),
        };
        if run.status.step_execution_metadata.len() != run.promotion.spec.steps.len() {
            run.status.step_execution_metadata = run
                .promotion
                .spec
                .steps
                .iter()
                .map(|s| StepExecution {
                    alias: s.as_.clone().unwrap_or_default(),
                    status: StepPhase::Pending,
                    ..Default::default()
                })
                .collect();
        }
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
            return self
                .finish(
                    &mut run,
                    PromotionPhase::Failed,
                    format!("Freight `{}` does not exist", freight_key.name),
                )
                .await;
        };
        let freight: Freight = freight.to_typed()?;
        let credentials = Arc::new(
            ProjectCredentials::load(self.store.as_ref(), &self.secret_key, &project).await?,
        );
        let work_dir = self.work_root.join(&project).join(&key.name);
        if let Err(error) = std::fs::create_dir_all(&work_dir) {
            return self
                .finish(
                    &mut run,
                    PromotionPhase::Errored,
                    format!("cannot create the work directory: {error}"),
                )
                .await;
        }
        let stage = run.promotion.spec.stage.clone();
        let approved_by = freight
            .status
            .as_ref()
            .and_then(|s| s.approved_for.get(&stage))
            .map(|a| a.by.clone())
            .filter(|by| !by.is_empty());
        let recorded = run
            .promotion
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::ACTOR))
            .and_then(|name| Actor::from_recorded(name));
        // Every Promotion the promote path makes names its actor; one without came in some
        // other way, and runs nothing (the stage branch would not say who decided).
        let Some(actor) = recorded.map(|a| a.name().to_owned()) else {
            return self
                .finish(
                    &mut run,
                    PromotionPhase::Errored,
                    format!(
                        "Promotion `{}` records no actor (`{}`): it was not made by the promote path, so it runs nothing; promote again with `dray promote`",
                        key.name,
                        annotations::ACTOR
                    ),
                )
                .await;
        };
        let argocd = argocd_target(self.store.as_ref(), &project).await?;
        let base = StepContext {
            work_dir: work_dir.clone(),
            project: project.clone(),
            stage: stage.clone(),
            promotion: key.name.clone(),
            actor: actor.clone(),
            alias: String::new(),
            freight: target_freight(&freight),
            approved_by,
            window_override: run
                .promotion
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::WINDOW_OVERRIDE))
                .cloned(),
            credentials,
            repos: self.repos.clone(),
            http: self.http.clone(),
            exprs: Arc::new(super::StepExprs::new(
                self.exprs.clone(),
                ExprContext::default(),
            )),
            tools: self.tools.clone(),
            cancel: cancel.clone(),
            log: Arc::new({
                let promotion = key.to_string();
                move |line: &str| tracing::info!(promotion = %promotion, "{line}")
            }),
            saved_state: None,
            argocd,
        };
        let view = freight_view(&freight);
        let start = run.status.current_step.unwrap_or(0) as usize;
        for index in start..run.promotion.spec.steps.len() {
            if cancel.is_cancelled() {
                return self.abort(&mut run).await;
            }
            run.status.current_step = Some(index as u32);
            let step = run.promotion.spec.steps[index].clone();
            let alias = step.as_.clone().unwrap_or_else(|| format!("step-{index}"));
            let expr_ctx = self.expr_context(&run, &project, &stage, &actor, &view, &step);
            let outcome = match expr_ctx {
                Err(reason) => StepOutcome::failed(format!("step `{alias}`: {reason}")),
                Ok(expr_ctx) => {
                    let condition = step
                        .if_
                        .clone()
                        .unwrap_or_else(|| DEFAULT_CONDITION.to_owned());
                    match self.exprs.evaluate_condition(&condition, &expr_ctx) {
                        Err(error) => StepOutcome::failed(format!("step `{alias}`: `if`: {error}")),
                        Ok(false) => StepOutcome::skipped(format!("`if: {condition}` is false")),
                        Ok(true) => {
                            let mut ctx = base.clone();
                            ctx.alias = alias.clone();
                            ctx.log = run.logs.sink(&run.key.to_string(), index, &alias);
                            ctx.saved_state = run.saved.get(&alias).cloned();
                            ctx.exprs = Arc::new(super::StepExprs::new(
                                self.exprs.clone(),
                                expr_ctx.clone(),
                            ));
                            self.run_step(&mut run, index, &step, &expr_ctx, ctx)
                                .await?
                        }
                    }
                }
            };
            step_barrier(&key.name, BarrierPoint::Ran, index).await;
            if cancel.is_cancelled() && !matches!(outcome, StepOutcome::Succeeded { .. }) {
                return self.abort(&mut run).await;
            }
            self.settle(&mut run, index, &alias, outcome);
            self.save(&mut run).await?;
            step_barrier(&key.name, BarrierPoint::Recorded, index).await;
        }
        let failed = run
            .status
            .step_execution_metadata
            .iter()
            .enumerate()
            .find(|(i, s)| {
                matches!(s.status.as_str(), "Failed" | "Errored")
                    && !run.promotion.spec.steps[*i].continue_on_error
            });
        let (phase, message) = match failed {
            Some((_, s)) if s.status == "Errored" => (
                PromotionPhase::Errored,
                format!("step `{}` errored: {}", s.alias, s.message),
            ),
            Some((_, s)) => (
                PromotionPhase::Failed,
                format!("step `{}` failed: {}", s.alias, s.message),
            ),
            None => (PromotionPhase::Succeeded, "every step succeeded".to_owned()),
        };
        let phase = self.finish(&mut run, phase, message).await?;
        if phase == PromotionPhase::Succeeded {
            record::promotion_succeeded(
                self.store.as_ref(),
                &run.key,
                &run.promotion,
                &freight,
                &run.outputs,
            )
            .await?;
        }
        if let Err(error) = std::fs::remove_dir_all(&work_dir) {
            tracing::debug!(%error, dir = %work_dir.display(), "cannot remove the work directory");
        }
        Ok(phase)
    }

    fn expr_context(
        &self,
        run: &Run,
        project: &str,
        stage: &str,
        actor: &str,
        view: &FreightView,
        step: &PromotionStep,
    ) -> Result<ExprContext, String> {
        let alias = step.as_.clone().unwrap_or_default();
        let mut ctx = ExprContext {
            project: project.to_owned(),
            stage: stage.to_owned(),
            promotion: run.key.name.clone(),
            actor: actor.to_owned(),
            freight: view.clone(),
            outputs: run.outputs.clone(),
            ..Default::default()
        };
        let steps = &run.promotion.spec.steps;
        for (meta, planned) in run.status.step_execution_metadata.iter().zip(steps) {
            if meta.status != "Pending" && meta.status != "Running" {
                ctx.step_statuses
                    .insert(meta.alias.clone(), meta.status.to_string());
            }
            // A step allowed to fail (`continueOnError`) does not make `success()` false.
            if matches!(meta.status.as_str(), "Failed" | "Errored") && !planned.continue_on_error {
                ctx.any_failed = true;
            }
        }
        if let Some((task, _)) = task_of(&alias) {
            let prefix = format!("{task}{}", super::plan::TASK_SEPARATOR);
            let task_outputs: Map<String, Value> = run
                .outputs
                .iter()
                .filter_map(|(k, v)| {
                    k.strip_prefix(&prefix)
                        .map(|short| (short.to_owned(), v.clone()))
                })
                .collect();
            ctx.task_outputs = Some(task_outputs);
        }
        for var in run.promotion.spec.vars.iter().chain(step.vars.iter()) {
            let value = match &var.value {
                Some(text) => self
                    .exprs
                    .evaluate_string(text, &ctx)
                    .map_err(|e| format!("variable `{}`: {e}", var.name))?,
                None => Value::Null,
            };
            ctx.vars.insert(var.name.clone(), value);
        }
        Ok(ctx)
    }

    async fn run_step(
        &self,
        run: &mut Run,
        index: usize,
        step: &PromotionStep,
        expr_ctx: &ExprContext,
        ctx: StepContext,
    ) -> Result<StepOutcome, EngineError> {
        let alias = ctx.alias.clone();
        let Some(kind) = step.uses.as_deref() else {
            return Ok(StepOutcome::failed(format!(
                "step `{alias}` names no step kind (`uses`)"
            )));
        };
        let Some(runner) = self.steps.get(kind) else {
            return Ok(StepOutcome::failed(format!(
                "step `{alias}` uses `{kind}`, which is not a built-in step (known: {})",
                self.steps.kinds().join(", ")
            )));
        };
        let config = step.config.clone().unwrap_or_else(|| json!({}));
        let config = match self.exprs.evaluate_value(&config, expr_ctx) {
            Ok(config) => config,
            Err(error) => return Ok(StepOutcome::failed(format!("step `{alias}`: {error}"))),
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
        // Counted from the step's first start, so a promotion resumed after a restart does
        // not get its whole timeout again.
        let waited = run.status.step_execution_metadata[index]
            .started_at
            .as_ref()
            .and_then(|started| {
                Duration::try_from(jiff::Timestamp::now().duration_since(started.0)).ok()
            })
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + timeout.saturating_sub(waited);
        let mut errors = 0;
        let mut ctx = ctx;
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
                    run.status.written_to_git = record::pushed_branch(&run.outputs);
                    run.status.message = match &run.status.written_to_git {
                        // Written to git is a state of its own, never a failure.
                        Some(written) => format!(
                            "written to git (`{}` at {:.12}), {}: step `{alias}` is waiting for {waiting_for}",
                            written.name,
                            written.commit,
                            if kind == "argocd-update" {
                                "waiting for sync"
                            } else {
                                "waiting"
                            }
                        ),
                        None => format!("step `{alias}` is waiting for {waiting_for}"),
                    };
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
        let wake_of = |object: &Value| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(annotations::WAKE))
                .cloned()
        };
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

    fn settle(&self, run: &mut Run, index: usize, alias: &str, outcome: StepOutcome) {
        let (status, message) = summarise(&outcome);
        if let StepOutcome::Succeeded { outputs, state } = &outcome {
            run.outputs
                .insert(alias.to_owned(), Value::Object(outputs.clone()));
            if let Some((task, _)) = task_of(alias) {
                let merged = run
                    .outputs
                    .entry(task.to_owned())
                    .or_insert_with(|| json!({}));
                if let Some(map) = merged.as_object_mut() {
                    map.extend(outputs.clone());
                }
            }
            match state {
                Some(state) => run.saved.insert(alias.to_owned(), state.clone()),
                None => run.saved.remove(alias),
            };
        }
        let meta = &mut run.status.step_execution_metadata[index];
        meta.status = status;
        meta.message = message;
        meta.finished_at = now();
        if meta.started_at.is_none() {
            meta.started_at = meta.finished_at.clone();
        }
        run.status.current_step = Some(index as u32 + 1);
    }

    async fn save(&self, run: &mut Run) -> Result<(), EngineError> {
        run.logs.drain_into(&mut run.status.step_execution_metadata);
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
        Ok(phase)
    }

    async fn abort(&self, run: &mut Run) -> Result<PromotionPhase, EngineError> {
        for meta in &mut run.status.step_execution_metadata {
            if meta.status == "Running" {
                meta.status = StepPhase::Aborted;
                meta.finished_at = now();
            }
        }
        let pushed: Vec<String> = run
            .outputs
            .values()
            .filter_map(|o| {
                let branch = o.get("branch").and_then(Value::as_str)?;
                let commit = o.get("commit").and_then(Value::as_str)?;
                Some(format!("`{branch}` at {}", &commit[..commit.len().min(12)]))
            })
            .collect();
        // Who asked: a person (the annotation holds their name) or a newer request.
        let asked = match self.store.get(&run.key).await {
            Ok(Some(current)) => current
                .object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(annotations::ABORT))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        let aborted = match asked.as_deref() {
            Some(by) if by.starts_with("superseded by") => format!("{by}; aborted"),
            Some(by) if !by.is_empty() => format!("aborted by `{by}`"),
            _ => "aborted".to_owned(),
        };
        let message = if pushed.is_empty() {
            format!("{aborted} before anything was pushed")
        } else {
            format!("{aborted}; already pushed: {}", pushed.join(", "))
        };
        self.finish(run, PromotionPhase::Aborted, message).await
    }
}

/// The Freight as steps see it.
pub fn target_freight(freight: &Freight) -> TargetFreight {
    TargetFreight {
        id: freight.metadata.name.clone().unwrap_or_default(),
        alias: freight.spec.alias.clone(),
        origin: freight.spec.origin.name.clone(),
        images: freight
            .spec
            .images
            .iter()
            .map(|i| dray_steps::FreightImage {
                repo_url: i.repo_url.clone(),
                tag: i.tag.clone(),
                digest: i.digest.clone(),
            })
            .collect(),
        commits: freight
            .spec
            .commits
            .iter()
            .map(|c| dray_steps::FreightCommit {
                repo_url: c.repo_url.clone(),
                id: c.id.clone(),
                branch: c.branch.clone(),
                message: c.message.clone(),
                author: c.author.clone(),
            })
            .collect(),
    }
}

fn freight_view(freight: &Freight) -> FreightView {
    FreightView {
        id: freight.metadata.name.clone().unwrap_or_default(),
        alias: freight.spec.alias.clone(),
        origin: freight.spec.origin.clone(),
        images: freight.spec.images.clone(),
        commits: freight.spec.commits.clone(),
    }
}

/// How `project` reaches Argo CD: its ProjectConfig's `spec.argocd`, if it says (a
/// ProjectConfig that no longer parses is logged and read as saying nothing).
pub async fn argocd_target(
    store: &dyn Store,
    project: &str,
) -> Result<Option<dray_steps::argocd::ArgocdTarget>, EngineError> {
    use dray_steps::argocd::ArgocdTarget;
    let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let Some(stored) = store.get(&key).await? else {
        return Ok(None);
    };
    let config: crate::api::ProjectConfig = match stored.to_typed() {
        Ok(config) => config,
        Err(error) => {
            tracing::warn!(%key, "cannot read `spec.argocd`: {error}");
            return Ok(None);
        }
    };
    Ok(config
        .spec
        .argocd
        .and_then(|argocd| match (argocd.api_server, argocd.kubernetes) {
            (Some(url), _) => Some(ArgocdTarget::ApiServer { url }),
            (None, Some(kubernetes)) => Some(ArgocdTarget::Kubernetes {
                namespace: kubernetes.namespace().to_owned(),
                server: kubernetes.server,
            }),
            (None, None) => None,
        }))
}
