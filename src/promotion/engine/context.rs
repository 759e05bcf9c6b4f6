//! What a promotion's steps see: the [`StepContext`] every step of a run shares (work
//! directory, Freight, credentials, Argo CD, the actor), and per step the `${{ }}`
//! expression context (`ctx.*`, `vars.*`, `outputs.*`, `task.outputs.*`, the step
//! statuses behind `success()` / `failure()`). Nothing here runs a step.

use std::path::PathBuf;
use std::sync::Arc;

use dray_steps::{StepContext, TargetFreight};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::state::Run;
use super::{Engine, EngineError};
use crate::api::{Actor, Freight, Kind, ObjectKey, PromotionStep, annotations};
use crate::expr::{ExprContext, FreightView};
use crate::promotion::StepExprs;
use crate::promotion::credentials::ProjectCredentials;
use crate::promotion::plan::{TASK_SEPARATOR, task_of};
use crate::store::Store;

/// Who the Promotion records as having asked for it (`dray.dev/actor`), if it records one.
pub(super) fn recorded_actor(run: &Run) -> Option<String> {
    run.promotion
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::ACTOR))
        .and_then(|name| Actor::from_recorded(name))
        .map(|actor| actor.name().to_owned())
}

impl Engine {
    /// The context every step of `run` starts from; each step gets its alias, log, saved
    /// state and expressions on top.
    pub(super) async fn base_context(
        &self,
        run: &Run,
        freight: &Freight,
        actor: &str,
        work_dir: PathBuf,
        cancel: CancellationToken,
    ) -> Result<StepContext, EngineError> {
        let project = run.key.namespace.clone().unwrap_or_default();
        let stage = run.promotion.spec.stage.clone();
        let credentials = Arc::new(
            ProjectCredentials::load(self.store.as_ref(), &self.secret_key, &project).await?,
        );
        let approved_by = freight
            .status
            .as_ref()
            .and_then(|s| s.approved_for.get(&stage))
            .filter(|a| !a.by.is_empty())
            .map(|a| match a.reason.trim() {
                "" => a.by.clone(),
                reason => format!("{} ({})", a.by, reason.replace(['\r', '\n'], " ")),
            });
        let argocd = argocd_target(self.store.as_ref(), &project).await?;
        let window_override = run
            .promotion
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::WINDOW_OVERRIDE))
            .cloned();
        let signed_off_by = run
            .promotion
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::SIGNED_OFF_BY))
            .map(|lines| lines.lines().map(str::to_owned).collect())
            .unwrap_or_default();
        let freeze_override = run
            .promotion
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::FREEZE_OVERRIDE))
            .cloned();
        Ok(StepContext {
            work_dir,
            warm_dir: None,
            project,
            stage,
            promotion: run.key.name.clone(),
            actor: actor.to_owned(),
            alias: String::new(),
            freight: target_freight(freight),
            approved_by,
            window_override,
            signed_off_by,
            freeze_override,
            credentials,
            repos: self.repos.clone(),
            http: self.http.clone(),
            exprs: Arc::new(StepExprs::new(
                self.exprs.clone(),
                run.language,
                ExprContext::default(),
            )),
            tools: self.tools.clone(),
            cancel,
            log: Arc::new({
                let promotion = run.key.to_string();
                move |line: &str| tracing::info!(promotion = %promotion, "{line}")
            }),
            saved_state: None,
            argocd,
        })
    }

    /// The `${{ }}` context of `step`: the run so far, and the promotion's and the step's
    /// variables evaluated in order. The error names the variable that does not evaluate.
    pub(super) fn expr_context(
        &self,
        run: &Run,
        base: &StepContext,
        view: &FreightView,
        step: &PromotionStep,
    ) -> Result<ExprContext, String> {
        let alias = step.as_.clone().unwrap_or_default();
        let mut ctx = ExprContext {
            project: base.project.clone(),
            stage: base.stage.clone(),
            promotion: run.key.name.clone(),
            actor: base.actor.clone(),
            freight: view.clone(),
            outputs: run.outputs.clone(),
            ..Default::default()
        };
        let steps = &run.promotion.spec.steps;
        for (meta, planned) in run.status.step_execution_metadata.iter().zip(steps) {
            if meta.status.is_done() {
                ctx.step_statuses
                    .insert(meta.alias.clone(), meta.status.to_string());
            }
            // A step allowed to fail (`continueOnError`) does not make `success()` false.
            if meta.status.is_failure() && !planned.continue_on_error {
                ctx.any_failed = true;
            }
        }
        if let Some((task, _)) = task_of(&alias) {
            let prefix = format!("{task}{TASK_SEPARATOR}");
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
                    .evaluate_string(run.language, text, &ctx)
                    .map_err(|e| format!("variable `{}`: {e}", var.name))?,
                None => Value::Null,
            };
            ctx.vars.insert(var.name.clone(), value);
        }
        Ok(ctx)
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
        charts: freight
            .spec
            .charts
            .iter()
            .map(|c| dray_steps::FreightChart {
                repo_url: c.repo_url.clone(),
                name: c.name.clone(),
                version: c.version.clone(),
                digest: c.digest.clone(),
            })
            .collect(),
    }
}

/// The Freight as `${{ ctx.targetFreight }}` and `imageFrom()` see it.
pub(super) fn freight_view(freight: &Freight) -> FreightView {
    FreightView::from(freight)
}

/// How `project` reaches Argo CD: its ProjectConfig's `spec.argocd`, if it says (a
/// ProjectConfig that no longer parses is logged and read as saying nothing).
pub async fn argocd_target(
    store: &dyn Store,
    project: &str,
) -> Result<Option<dray_steps::argocd::ArgocdTarget>, EngineError> {
    use crate::api::ArgocdConfig;
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
    Ok(config.spec.argocd.as_ref().and_then(ArgocdConfig::target))
}
