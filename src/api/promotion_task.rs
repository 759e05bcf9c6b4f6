//! `PromotionTask` and the promotion step type it shares with Stages and Promotions:
//! a reusable, parameterised list of steps.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Var, optional_duration_string, optional_free_form_object};

/// A reusable list of promotion steps, referenced from Stages with `task:`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "PromotionTask",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct PromotionTaskSpec {
    /// Variables the task takes. One without a `value` must be supplied by every caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// The steps, run in order.
    pub steps: Vec<PromotionStep>,
}

/// A PromotionTask shared by every project (Kargo's `ClusterPromotionTask`), referenced
/// from Stages with `task: {kind: ClusterPromotionTask, name}`. Cluster-scoped: only a
/// user who holds a role in every project may write one.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "ClusterPromotionTask"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPromotionTaskSpec {
    /// Variables the task takes. One without a `value` must be supplied by every caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// The steps, run in order.
    pub steps: Vec<PromotionStep>,
}

impl ClusterPromotionTask {
    /// The task as a project's PromotionTask would be (its name and metadata kept), for
    /// the plan and the checks that read both alike.
    pub fn as_task(&self) -> PromotionTask {
        let mut task = PromotionTask::new(
            self.metadata.name.as_deref().unwrap_or_default(),
            PromotionTaskSpec {
                vars: self.spec.vars.clone(),
                steps: self.spec.steps.clone(),
            },
        );
        task.metadata = self.metadata.clone();
        task
    }
}

/// One step of a promotion: either a built-in step (`uses`) or a task (`task`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionStep {
    /// The built-in step to run, e.g. `git-clone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// A PromotionTask to expand in place of this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<PromotionTaskReference>,
    /// An alias for this step; its outputs are `outputs.<as>`.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub as_: Option<String>,
    /// A CEL condition; the step is skipped when it is false.
    #[serde(default, rename = "if", skip_serializing_if = "Option::is_none")]
    pub if_: Option<String>,
    /// A failure of this step does not fail the promotion.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_error: bool,
    /// How long and how often a failing step is retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<StepRetry>,
    /// Variables for this step (or the task it expands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// The step's configuration; strings may contain `${{ }}` expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_free_form_object")]
    pub config: Option<serde_json::Value>,
}

/// A reference to a PromotionTask in the same project, or to a ClusterPromotionTask.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionTaskReference {
    /// The task's name.
    pub name: String,
    /// `PromotionTask` (the default: the Stage's project's) or `ClusterPromotionTask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// The kinds a step's `task:` may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// A PromotionTask of the Stage's project.
    Project,
    /// A ClusterPromotionTask.
    Cluster,
}

impl PromotionTaskReference {
    /// The kind named, or `None` when `kind` is neither `PromotionTask` nor
    /// `ClusterPromotionTask`.
    pub fn task_kind(&self) -> Option<TaskKind> {
        match self.kind.as_deref() {
            None | Some("PromotionTask") => Some(TaskKind::Project),
            Some("ClusterPromotionTask") => Some(TaskKind::Cluster),
            Some(_) => None,
        }
    }
}

/// Retry policy for a step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepRetry {
    /// Give up after this long (a Go duration, e.g. `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub timeout: Option<String>,
    /// Give up after this many consecutive errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_threshold: Option<u32>,
}
