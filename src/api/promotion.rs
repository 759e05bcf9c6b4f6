//! `Promotion`: one request to move one piece of Freight into one Stage, with its phase,
//! per-step state and outcome.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PromotionStep, Time, Var, optional_free_form_object};

/// A request to move Freight into a Stage.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Promotion",
    namespaced,
    status = "PromotionStatus",
    printcolumn = r#"{"name":"Stage","type":"string","jsonPath":".spec.stage"}"#,
    printcolumn = r#"{"name":"Freight","type":"string","jsonPath":".spec.freight"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSpec {
    /// The target Stage.
    pub stage: String,
    /// The id of the Freight to promote.
    pub freight: String,
    /// Variables for the steps, copied from the Stage when the promotion is created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// The steps, copied from the Stage's template when the promotion is created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<PromotionStep>,
}

/// Where a promotion is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PromotionPhase {
    /// Waiting for its turn in the Stage's queue.
    #[default]
    Pending,
    /// Running its steps.
    Running,
    /// Every step succeeded.
    Succeeded,
    /// The change was refused (by a gate, a reviewer, a failed check).
    Failed,
    /// Something broke (an unreachable service, a bug).
    Errored,
    /// Someone aborted it, or a newer request superseded it.
    Aborted,
}

impl PromotionPhase {
    /// Whether the promotion has finished.
    pub fn is_terminal(self) -> bool {
        !matches!(self, PromotionPhase::Pending | PromotionPhase::Running)
    }

    /// The phase as stored and shown: `Pending`, `Running`, …
    pub fn as_str(self) -> &'static str {
        match self {
            PromotionPhase::Pending => "Pending",
            PromotionPhase::Running => "Running",
            PromotionPhase::Succeeded => "Succeeded",
            PromotionPhase::Failed => "Failed",
            PromotionPhase::Errored => "Errored",
            PromotionPhase::Aborted => "Aborted",
        }
    }
}

impl std::fmt::Display for PromotionPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The observed state of a promotion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionStatus {
    /// The phase.
    #[serde(default)]
    pub phase: PromotionPhase,
    /// Why the promotion is in this phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The index of the step running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<u32>,
    /// Per-step state, in step order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_execution_metadata: Vec<StepExecution>,
    /// Outputs of the steps, by alias.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_free_form_object")]
    pub state: Option<serde_json::Value>,
    /// Set once a step pushed to the Stage's branch: the change is in git, whatever the
    /// steps after it (waiting for a sync, a gate) still do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_to_git: Option<super::StageBranch>,
    /// When it started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// Where one step of a promotion is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StepPhase {
    /// Not started yet.
    #[default]
    Pending,
    /// Running, or waiting for something (a review, a sync) between attempts.
    Running,
    /// Done.
    Succeeded,
    /// The change was refused (a failed check, a rejected review).
    Failed,
    /// Something broke (an unreachable service, a bug).
    Errored,
    /// Its `if` was false, or an earlier step failed.
    Skipped,
    /// The promotion was aborted while the step ran.
    Aborted,
}

impl StepPhase {
    /// The phase as stored and shown: `Pending`, `Running`, …
    pub fn as_str(self) -> &'static str {
        match self {
            StepPhase::Pending => "Pending",
            StepPhase::Running => "Running",
            StepPhase::Succeeded => "Succeeded",
            StepPhase::Failed => "Failed",
            StepPhase::Errored => "Errored",
            StepPhase::Skipped => "Skipped",
            StepPhase::Aborted => "Aborted",
        }
    }

    /// Whether the step failed (`Failed` or `Errored`).
    pub fn is_failure(self) -> bool {
        matches!(self, StepPhase::Failed | StepPhase::Errored)
    }

    /// Whether the step has ended, whatever the outcome.
    pub fn is_done(self) -> bool {
        !matches!(self, StepPhase::Pending | StepPhase::Running)
    }
}

impl std::fmt::Display for StepPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of one step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepExecution {
    /// The step's alias.
    pub alias: String,
    /// Where the step is.
    pub status: StepPhase,
    /// What the step said.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// How many times it ran.
    #[serde(default)]
    pub attempts: u32,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// What the step logged, `HH:MM:SS line`, oldest first (the newest 100 lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<String>,
}
