//! `Project`: the namespace that holds a pipeline's resources. Cluster-scoped; project-wide
//! policy lives in the project's [`crate::api::ProjectConfig`].

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Namespaces whose names start with this belong to Kubernetes (`kube-system`, …): no
/// Project may take one over.
pub const RESERVED_NAMESPACE_PREFIX: &str = "kube-";

/// The CRD's rule for a Project's name, checked by the API server on `kubectl apply`: it
/// becomes the name of the project's namespace, so it must be one (an RFC 1123 label), and
/// not one of Kubernetes' own. `dray apply` checks the same (`config::document`).
const PROJECT_NAME_RULE: &str = "size(self.metadata.name) <= 63 && \
     self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && \
     !self.metadata.name.startsWith('kube-')";

/// What the API server says when [`PROJECT_NAME_RULE`] fails.
const PROJECT_NAME_MESSAGE: &str = "a Project's name is the name of its namespace: use lowercase \
     letters, digits and '-', at most 63 characters, not starting with 'kube-'";

/// A project: a namespace for Warehouses, Stages, Freight and Promotions.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Project",
    status = "ProjectStatus",
    validation = kube::core::Rule::new(PROJECT_NAME_RULE).message(PROJECT_NAME_MESSAGE),
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
