//! `Project`: the namespace that holds a pipeline's resources. Cluster-scoped; project-wide
//! policy lives in the project's [`crate::api::ProjectConfig`].

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A project: a namespace for Warehouses, Stages, Freight and Promotions.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Project",
    status = "ProjectStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpec {
    /// What the project is for, shown in the UI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The observed state of a project.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStatus {
    /// Conditions such as `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Set while promotions into every Stage of the project are stopped by hand
    /// (`dray freeze` without `--stage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<super::Freeze>,
}
