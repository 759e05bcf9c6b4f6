//! The resource model: one kind per file, shaped like Kargo's where the concept is the same.
//!
//! Every kind is a Kubernetes custom resource in the API group [`GROUP`] at version
//! [`VERSION`], derived with `kube::CustomResource`, so that the same YAML works with
//! `dray apply` against the embedded server and with `kubectl apply` against a cluster that
//! has the CRDs from `crds/`. This module imports only serde, schemars, k8s-openapi and
//! kube's derive (and strsim, for [`suggest`]'s "did you mean"): never the store, the
//! engine or the server.
//!
//! Project resources live in the namespace named after their project
//! (`metadata.namespace: <project>`); [`Project`] itself is cluster-scoped.

mod actor;
mod analysis_template;
pub mod annotations;
mod body;
mod common;
pub mod crd;
mod credential;
mod freeze;
mod freight;
mod kind;
pub mod label;
mod metadata;
mod notification;
mod object;
mod project;
mod project_config;
mod promotion;
mod promotion_task;
mod repo_url;
mod role;
mod stage;
pub mod suggest;
pub mod verification_run;
mod warehouse;

pub use actor::*;
pub use analysis_template::*;
pub use body::{BodyPart, ResourceBody};
pub use common::*;
pub use credential::*;
pub use freeze::*;
pub use freight::*;
pub use kind::*;
pub use metadata::*;
pub use notification::*;
pub use object::*;
pub use project::*;
pub use project_config::*;
pub use promotion::*;
pub use promotion_task::*;
pub use repo_url::RepoUrl;
pub use role::*;
pub use stage::*;
pub use warehouse::*;

/// The API group of every Dray kind.
pub const GROUP: &str = "dray.dev";
/// The API version of every Dray kind.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "dray.dev/v1alpha1";
