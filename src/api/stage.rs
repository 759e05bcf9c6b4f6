//! `Stage`: a promotion target, usually an environment. It requests Freight from
//! Warehouses or upstream Stages and says how to promote it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, FreightOrigin, PromotionStep, Time, Var, optional_duration_string};

/// A promotion target.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Stage",
    namespaced,
    status = "StageStatus",
    printcolumn = r#"{"name":"Freight","type":"string","jsonPath":".status.currentFreight.alias"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StageSpec {
    /// Which Freight this Stage accepts and from where.
    pub requested_freight: Vec<FreightRequest>,
    /// How Freight is promoted into this Stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_template: Option<PromotionTemplate>,
    /// Variables available to every step as `vars.<name>` (steps and tasks may override).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// What happens to pending promotions when a newer one is requested.
    #[serde(default)]
    pub queue_policy: QueuePolicy,
    /// How the health of the Applications a promotion registered is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthPolicy>,
    /// How the Stage's current Freight is proven fit before it counts as verified here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// How many people must sign off Freight before it may be promoted here (a gate beside
    /// verification; an approval does not bypass it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signoff: Option<SignoffPolicy>,
}

/// A Stage's sign-off gate: `required` distinct people (members of one of `groups`, when
/// given) sign off Freight (`dray signoff`) before it may be promoted into the Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignoffPolicy {
    /// How many distinct people must sign off (at least 1).
    pub required: u32,
    /// Only members of these groups (of the signer's identity: API token `--group`s, the
    /// OIDC groups claim, Kubernetes user groups) may sign off; anyone with the `signoff`
    /// verb when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Whether the promoter's own sign-off counts toward `required` (default: it does not).
    #[serde(default)]
    pub allow_self: bool,
}

/// How health is judged after a promotion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthPolicy {
    /// How long health must hold before verification starts (default `30s`): an HPA
    /// reports Degraded for a few seconds after a healthy rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub stabilization_window: Option<String>,
    /// How long to wait for health before the verification ends in `Error` (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub timeout: Option<String>,
}

/// How a Stage's Freight is verified, shaped like Kargo's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// The AnalysisTemplates to run; all must succeed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analysis_templates: Vec<AnalysisTemplateReference>,
    /// Arguments for the templates; values may use `${{ }}` over `freight`, `stage`, `project`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<AnalysisArg>,
    /// A deadline for one verification run (default `30m`); a metric without `count` runs
    /// until it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub timeout: Option<String>,
}

/// A reference to an AnalysisTemplate in the Stage's project.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateReference {
    /// The AnalysisTemplate's name.
    pub name: String,
    /// `AnalysisTemplate` (the default) or Kargo's `ClusterAnalysisTemplate`: both name the
    /// project's AnalysisTemplate, since an Argo Rollouts `ClusterAnalysisTemplate` is
    /// applied into the project that uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A named argument for an analysis.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisArg {
    /// The argument's name, as the template's `args[].name`.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// What happens to pending promotions when a newer one is requested.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum QueuePolicy {
    /// A newer request replaces older pending ones.
    #[default]
    Supersede,
    /// Every request runs, in order.
    Queue,
}

/// A request for Freight of one origin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightRequest {
    /// The Warehouse whose Freight is requested.
    pub origin: FreightOrigin,
    /// Where the Freight may come from.
    pub sources: FreightSources,
}

/// Where requested Freight may come from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightSources {
    /// Straight from the Warehouse.
    #[serde(default)]
    pub direct: bool,
    /// From these upstream Stages, once verified there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<String>,
    /// How long Freight must stay continuously in an upstream Stage (e.g. `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub required_soak_time: Option<String>,
    /// `OneOf` (default): verified in any upstream Stage; `All`: in every one.
    #[serde(default)]
    pub availability_strategy: AvailabilityStrategy,
}

/// How many upstream Stages must have verified Freight.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AvailabilityStrategy {
    /// Any one upstream Stage.
    #[default]
    OneOf,
    /// Every upstream Stage.
    All,
}

/// How to promote.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionTemplate {
    /// The template's body.
    pub spec: PromotionTemplateSpec,
}

/// The steps of a promotion and their variables.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionTemplateSpec {
    /// Variables for every step of the template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Var>,
    /// The steps, run in order.
    pub steps: Vec<PromotionStep>,
}

/// The observed state of a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// Conditions such as `Ready`, `Healthy`, `Verified`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Freight in the Stage now, as read from its branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_freight: Option<StageFreightRef>,
    /// The promotion running now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_promotion: Option<String>,
    /// The last promotion that finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_promotion: Option<String>,
    /// The branch the last promotion pushed to, and the commit it left there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<StageBranch>,
    /// Set when the branch moved outside Dray: what it holds now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<StageDrift>,
    /// Set when a person rolled the Stage back: auto-promotion leaves it alone until the
    /// newest Freight is promoted or the hold is lifted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<StageHold>,
    /// Set while promotions into the Stage are stopped by hand (`dray freeze --stage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<super::Freeze>,
    /// The Argo CD Applications the last promotion registered (from `argocd-update`), whose
    /// health is the Stage's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<RegisteredApplication>,
    /// The Stage's health, from its registered Applications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<StageHealth>,
    /// The verification of the current Freight: running, or the last one that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationInfo>,
    /// Verifications that ended, newest first (at most [`VERIFICATION_HISTORY_LIMIT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verification_history: Vec<VerificationInfo>,
    /// What promotions recorded on this Stage with `set-metadata` (key → JSON value).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(schema_with = "super::free_form_object")]
    pub metadata: super::Metadata,
}

/// How many ended verifications a Stage keeps.
pub const VERIFICATION_HISTORY_LIMIT: usize = 20;

/// An Argo CD Application a promotion registered for health, with how to reach it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredApplication {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, when not Argo CD's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Argo CD API server it was reached through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
    /// The Kubernetes API server it was reached through (the Kubernetes transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// The revisions (one per matched source) it must report synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desired_revisions: Vec<String>,
}

/// A Stage's health.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageHealth {
    /// The verdict over every registered Application.
    pub status: HealthState,
    /// Why, in words (Argo CD's message when Unhealthy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Since when the status has held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// When Dray last looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Time>,
    /// Per Application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<ApplicationHealth>,
}

/// One Application's health as Dray judged it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationHealth {
    /// `metadata.name` (`namespace/name` when not Argo CD's own namespace).
    pub name: String,
    /// The verdict for this Application.
    pub status: HealthState,
    /// Argo CD's `status.health.status`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub argocd_health: String,
    /// The revision Argo CD reports synced.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub synced_revision: String,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A health verdict.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum HealthState {
    /// Not known yet (nothing registered, or Argo CD not reached).
    #[default]
    Unknown,
    /// Synced to the desired revision and Healthy.
    Healthy,
    /// Not synced to the desired revision yet, or Progressing / Suspended.
    Progressing,
    /// Degraded or Missing.
    Unhealthy,
}

/// One verification of a Stage's Freight.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationInfo {
    /// A unique id.
    pub id: String,
    /// The Freight verified.
    pub freight: String,
    /// Where it is.
    pub phase: VerificationPhase,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Who started it (`dray` after a promotion, or the person who re-ran it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub actor: String,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_time: Option<Time>,
    /// When health (held for the stabilisation window) let the analysis start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_start_time: Option<Time>,
    /// The metrics, with their measurements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricResult>,
}

/// Where a verification is; the ended phases are Argo Rollouts' (plus `Aborted`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum VerificationPhase {
    /// Waiting for health to hold.
    #[default]
    Pending,
    /// Measuring.
    Running,
    /// Every metric succeeded.
    Successful,
    /// A metric failed more than its `failureLimit`.
    Failed,
    /// A metric was inconclusive more than its `inconclusiveLimit`.
    Inconclusive,
    /// A metric errored more than its `consecutiveErrorLimit`, or health never held.
    Error,
    /// Stopped by a person (`dray verify stage S --abort`) or by a newer promotion.
    Aborted,
}

impl VerificationPhase {
    /// Whether the verification has ended.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// The phase as stored and shown: `Pending`, `Successful`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Successful => "Successful",
            Self::Failed => "Failed",
            Self::Inconclusive => "Inconclusive",
            Self::Error => "Error",
            Self::Aborted => "Aborted",
        }
    }
}

impl std::fmt::Display for VerificationPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One metric's results, named as Argo Rollouts names them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricResult {
    /// The metric's name.
    pub name: String,
    /// The metric's phase (`Running`, then as the run's).
    pub phase: VerificationPhase,
    /// Measurements taken.
    #[serde(default)]
    pub count: u32,
    /// How many were Successful.
    #[serde(default)]
    pub successful: u32,
    /// How many were Failed.
    #[serde(default)]
    pub failed: u32,
    /// How many were Inconclusive.
    #[serde(default)]
    pub inconclusive: u32,
    /// How many were Error.
    #[serde(default)]
    pub error: u32,
    /// Errors in a row now.
    #[serde(default)]
    pub consecutive_error: u32,
    /// Why the metric ended as it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The measurements, oldest first (the newest few are kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<Measurement>,
}

/// One measurement of a metric.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// `Successful`, `Failed`, `Inconclusive` or `Error`.
    pub phase: VerificationPhase,
    /// The value measured, as text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Why (the error, or which condition held).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When it was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// A hold on auto-promotion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageHold {
    /// Who set it (by promoting older Freight).
    pub by: String,
    /// The Freight they promoted.
    pub freight: String,
    /// Why, in words.
    pub reason: String,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// A Stage's branch, as Dray last wrote it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageBranch {
    /// The repository.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The branch, e.g. `stage/dev`.
    pub name: String,
    /// The commit Dray pushed.
    pub commit: String,
}

/// A Stage branch that moved outside Dray.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageDrift {
    /// The commit the branch holds now.
    pub commit: String,
    /// Its subject line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Its author.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub author: String,
    /// When Dray noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<Time>,
}

/// A reference to Freight held by a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFreightRef {
    /// The Freight's id.
    pub name: String,
    /// The Freight's alias.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}
