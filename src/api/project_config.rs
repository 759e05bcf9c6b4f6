//! `ProjectConfig`: project-wide policy (auto-promotion policies and webhook receivers).
//! There is at most one per project, and its name is the project's name.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Project-wide policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "ProjectConfig",
    namespaced,
    status = "ProjectConfigStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectConfigSpec {
    /// Auto-promotion policies, matched to Stages by selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub promotion_policies: Vec<PromotionPolicy>,
    /// Webhook receivers that refresh Warehouses when CI or a registry says something changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_receivers: Vec<WebhookReceiverConfig>,
}

/// Selects Stages by name (exact or `glob:`) or by labels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageSelector {
    /// A Stage name, or a pattern prefixed with `glob:` (e.g. `glob:prod-*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels that the Stage must carry, all of them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// How a Stage picks Freight when it promotes by itself.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SelectionPolicy {
    /// The newest Freight available to the Stage.
    #[default]
    NewestFreight,
    /// The Freight currently in the upstream Stage.
    MatchUpstream,
}

/// Whether and how the selected Stages promote by themselves.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionPolicy {
    /// Which Stages this policy applies to.
    #[serde(default)]
    pub stage_selector: StageSelector,
    /// Promote new available Freight without a person clicking.
    #[serde(default)]
    pub auto_promotion_enabled: bool,
    /// Which Freight auto-promotion picks.
    #[serde(default)]
    pub selection_policy: SelectionPolicy,
}

/// A webhook receiver. Exactly one of the provider blocks is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReceiverConfig {
    /// The receiver's name, unique in the project; part of its URL.
    pub name: String,
    /// GitHub: `X-Hub-Signature-256` HMAC with the named secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<WebhookSecretRef>,
    /// GitLab: `X-Gitlab-Token` must equal the named secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<WebhookSecretRef>,
    /// Generic: the secret is part of the URL path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generic: Option<WebhookSecretRef>,
    /// A CNCF distribution registry's notifications, with a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<WebhookSecretRef>,
}

/// Names the Credential that holds a webhook receiver's shared secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecretRef {
    /// The name of the secret in the project.
    pub secret_ref: String,
}

/// The observed state of a project's configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectConfigStatus {
    /// Conditions such as `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The URL of each webhook receiver, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_receivers: Vec<WebhookReceiverStatus>,
}

/// Where a webhook receiver listens.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReceiverStatus {
    /// The receiver's name.
    pub name: String,
    /// The path, relative to the server's URL, that the forge or registry should call.
    pub path: String,
}
