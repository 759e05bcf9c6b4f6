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
