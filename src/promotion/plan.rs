//! Turning a Stage's promotion template into the flat list of steps a Promotion runs:
//! `task:` references are expanded in place, their steps' aliases namespaced
//! `<task alias>::<step alias>`, and each step's variables merged
//! (stage < template < task defaults < task caller < step).
//!
//! The plan is copied into the Promotion when it is created, so a promotion in flight
//! never changes when someone edits the Stage or a task.

use std::collections::BTreeMap;

use crate::api::{PromotionStep, PromotionTask, PromotionTaskReference, Stage, TaskKind, Var};
use crate::expr::exprlang::ExprLanguage;

/// Separates a task's alias from its steps' aliases.
pub const TASK_SEPARATOR: &str = "::";

/// Why a plan could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    /// The Stage has no promotion template.
    #[error("Stage `{0}` has no `promotionTemplate`, so it cannot be promoted to")]
    NoTemplate(String),
    /// A step names a task that does not exist.
    #[error("step `{step}` uses {kind} `{task}`, which does not exist")]
    MissingTask {
        /// The step's alias.
        step: String,
        /// `PromotionTask` or `ClusterPromotionTask`.
        kind: String,
        /// The task.
        task: String,
    },
    /// A task variable without a default was not supplied.
    #[error("step `{step}` does not supply variable `{var}` of PromotionTask `{task}`")]
    MissingVar {
        /// The step's alias.
        step: String,
        /// The task.
        task: String,
        /// The variable.
        var: String,
    },
    /// A task is written in another expression language than the Stage that uses it.
    #[error(
        "step `{step}` uses PromotionTask `{task}`, whose expressions are {task_language} while \
         Stage `{stage}`'s are {stage_language}: one promotion reads one language; write both \
         in the same API version (`kargo.akuity.io` documents are expr-lang, `dray.dev` ones \
         CEL) or set the `dray.dev/expression-language` annotation on both alike"
    )]
    MixedLanguages {
        /// The Stage.
        stage: String,
        /// The step's alias.
        step: String,
        /// The task.
        task: String,
        /// The Stage's language.
        stage_language: &'static str,
        /// The task's language.
        task_language: &'static str,
    },
}

/// The tasks a Stage's steps may name: its project's PromotionTasks and the
/// ClusterPromotionTasks (read as PromotionTasks), by name.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    /// The project's PromotionTasks.
    pub project: BTreeMap<String, PromotionTask>,
    /// The ClusterPromotionTasks.
    pub cluster: BTreeMap<String, PromotionTask>,
}

impl Tasks {
    fn find(&self, reference: &PromotionTaskReference) -> Option<&PromotionTask> {
        match reference.task_kind()? {
            TaskKind::Project => self.project.get(&reference.name),
            TaskKind::Cluster => self.cluster.get(&reference.name),
        }
    }
}

/// The flat plan: promotion-wide variables and the steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Stage and template variables.
    pub vars: Vec<Var>,
    /// The steps, each with its full alias in `as` and its own variables in `vars`.
    pub steps: Vec<PromotionStep>,
    /// The language of every expression in the plan: the Stage's.
    pub language: ExprLanguage,
}

fn merge(layers: &[&[Var]]) -> Vec<Var> {
    let mut merged: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for layer in layers {
        for var in *layer {
            if !merged.contains_key(var.name.as_str()) {
                order.push(&var.name);
            }
            if var.value.is_some() || !merged.contains_key(var.name.as_str()) {
                merged.insert(&var.name, var.value.clone());
            }
        }
    }
    order
        .into_iter()
        .map(|name| Var {
            name: name.to_owned(),
            value: merged.get(name).cloned().flatten(),
        })
        .collect()
}

/// A step's alias: its `as`, else what it runs (`git-clone`, or the task's name) when
/// that is unique among its siblings, else `step-<index>`.
fn step_alias(step: &PromotionStep, index: usize, siblings: &[PromotionStep]) -> String {
    if let Some(alias) = &step.as_ {
        return alias.clone();
    }
    let what = |s: &PromotionStep| {
        s.uses
            .clone()
            .or_else(|| s.task.as_ref().map(|t| t.name.clone()))
    };
    match what(step) {
        Some(name)
            if siblings
                .iter()
                .filter(|s| s.as_.is_none() && what(s).as_ref() == Some(&name))
                .count()
                == 1
                && !siblings
                    .iter()
                    .any(|s| s.as_.as_deref() == Some(name.as_str())) =>
        {
            name
        }
        _ => format!("step-{index}"),
    }
}

/// Builds the plan of `stage`, expanding tasks from `tasks` (by name).
pub fn build(stage: &Stage, tasks: &Tasks) -> Result<Plan, PlanError> {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let language = ExprLanguage::of_annotations(stage.metadata.annotations.as_ref());
    let template = stage
        .spec
        .promotion_template
        .as_ref()
        .ok_or_else(|| PlanError::NoTemplate(name.clone()))?;
    let vars = merge(&[&stage.spec.vars, &template.spec.vars]);
    let mut steps = Vec::new();
    for (index, step) in template.spec.steps.iter().enumerate() {
        let alias = step_alias(step, index, &template.spec.steps);
        let Some(reference) = &step.task else {
            let mut flat = step.clone();
            flat.as_ = Some(alias);
            steps.push(flat);
            continue;
        };
        let task = tasks
            .find(reference)
            .ok_or_else(|| PlanError::MissingTask {
                step: alias.clone(),
                kind: reference
                    .kind
                    .clone()
                    .unwrap_or_else(|| "PromotionTask".to_owned()),
                task: reference.name.clone(),
            })?;
        let task_language = ExprLanguage::of_annotations(task.metadata.annotations.as_ref());
        if task_language != language {
            return Err(PlanError::MixedLanguages {
                stage: name,
                step: alias,
                task: reference.name.clone(),
                stage_language: language.as_str(),
                task_language: task_language.as_str(),
            });
        }
        let task_vars = merge(&[&task.spec.vars, &step.vars]);
        if let Some(missing) = task_vars.iter().find(|v| v.value.is_none()) {
            let supplied_by_stage = vars
                .iter()
                .any(|v| v.name == missing.name && v.value.is_some());
            if !supplied_by_stage {
                return Err(PlanError::MissingVar {
                    step: alias,
                    task: reference.name.clone(),
                    var: missing.name.clone(),
                });
            }
        }
        let task_vars: Vec<Var> = task_vars
            .into_iter()
            .filter(|v| v.value.is_some())
            .collect();
        for (inner_index, inner) in task.spec.steps.iter().enumerate() {
            let mut flat = inner.clone();
            let inner_alias = step_alias(inner, inner_index, &task.spec.steps);
            flat.as_ = Some(format!("{alias}{TASK_SEPARATOR}{inner_alias}"));
            flat.vars = merge(&[&task_vars, &inner.vars]);
            if step.if_.is_some() && inner.if_.is_none() {
                flat.if_ = step.if_.clone();
            }
            flat.continue_on_error = inner.continue_on_error || step.continue_on_error;
            steps.push(flat);
        }
    }
    Ok(Plan {
        vars,
        steps,
        language,
    })
}

/// The task alias of a flattened step (`render` for `render::commit`), if it came from a task.
pub fn task_of(alias: &str) -> Option<(&str, &str)> {
    alias.split_once(TASK_SEPARATOR)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stage(template: serde_json::Value) -> Stage {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "dev", "namespace": "demo"},
            "spec": {
                "requestedFreight": [],
                "vars": [{"name": "a", "value": "stage"}, {"name": "b", "value": "stage"}],
                "promotionTemplate": {"spec": template}
            }
        }))
        .unwrap()
    }

    fn task() -> Tasks {
        let task: PromotionTask = serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "PromotionTask",
            "metadata": {"name": "render", "namespace": "demo"},
            "spec": {
                "vars": [{"name": "repoURL"}, {"name": "b", "value": "task"}],
                "steps": [{"uses": "git-clone", "as": "clone"}, {"uses": "git-push"}]
            }
        }))
        .unwrap();
        Tasks {
            project: BTreeMap::from([("render".to_owned(), task.clone())]),
            cluster: BTreeMap::from([("shared".to_owned(), task)]),
        }
    }

    #[test]
    fn tasks_expand_with_namespaced_aliases_and_merged_vars() {
        let stage = stage(json!({
            "vars": [{"name": "a", "value": "template"}],
            "steps": [
                {"uses": "http", "as": "gate"},
                {"task": {"name": "render"}, "as": "r", "vars": [{"name": "repoURL", "value": "http://git"}]}
            ]
        }));
        let plan = build(&stage, &task()).unwrap();
        let aliases: Vec<_> = plan.steps.iter().map(|s| s.as_.clone().unwrap()).collect();
        assert_eq!(aliases, ["gate", "r::clone", "r::git-push"]);
        assert_eq!(
            plan.vars
                .iter()
                .find(|v| v.name == "a")
                .unwrap()
                .value
                .as_deref(),
            Some("template")
        );
        let clone_vars = &plan.steps[1].vars;
        assert_eq!(
            clone_vars
                .iter()
                .find(|v| v.name == "repoURL")
                .unwrap()
                .value
                .as_deref(),
            Some("http://git")
        );
        assert_eq!(
            clone_vars
                .iter()
                .find(|v| v.name == "b")
                .unwrap()
                .value
                .as_deref(),
            Some("task")
        );
        assert_eq!(task_of("r::clone"), Some(("r", "clone")));
    }

    #[test]
    fn a_missing_task_var_is_named() {
        let stage = stage(json!({"steps": [{"task": {"name": "render"}}]}));
        let error = build(&stage, &task()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "step `render` does not supply variable `repoURL` of PromotionTask `render`"
        );
        let missing = stage.clone();
        let error = build(&missing, &Tasks::default()).unwrap_err();
        assert!(matches!(error, PlanError::MissingTask { .. }));
        // A ClusterPromotionTask is found among the cluster's tasks only.
        let shared = stage.clone();
        let shared_json = json!({"steps": [{"task": {"name": "shared", "kind": "ClusterPromotionTask"},
                                            "vars": [{"name": "repoURL", "value": "http://git"}]}]});
        let plan = build(&self::stage(shared_json), &task()).unwrap();
        assert_eq!(plan.steps.len(), 2);
        let wrong =
            json!({"steps": [{"task": {"name": "render", "kind": "ClusterPromotionTask"}}]});
        let error = build(&self::stage(wrong), &task()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "step `render` uses ClusterPromotionTask `render`, which does not exist"
        );
        drop(shared);
    }
}
