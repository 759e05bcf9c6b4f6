//! `Freight`: an immutable, content-addressed bundle of exact artifact versions.
//!
//! As in Kargo, Freight's fields sit at the top level of the object (no `spec`): it is
//! minted, never edited, so it has nothing to "specify". Its name is the id, a hash of its
//! artifacts; `alias` is a friendly name unique in the project.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, FreightOrigin, Metadata, Time};

/// A set of exact artifact versions, minted by a Warehouse (or assembled by hand).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Freight",
    plural = "freight",
    namespaced,
    no_spec,
    status = "FreightStatus",
    printcolumn = r#"{"name":"Alias","type":"string","jsonPath":".alias"}"#,
    printcolumn = r#"{"name":"Origin","type":"string","jsonPath":".origin.name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FreightFields {
    /// A friendly, unique name, e.g. `frosty-otter`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
    /// The Warehouse that minted this Freight.
    pub origin: FreightOrigin,
    /// Exact image versions, one per image subscription.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<FreightImage>,
    /// Exact config commits, one per git subscription.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<FreightCommit>,
    /// Exact Helm chart versions, one per chart subscription.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<FreightChart>,
    /// Surprises found when minting, e.g. a tag that moved to another digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An image pinned by digest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightImage {
    /// The repository, e.g. `registry.example.com/team/app`.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The tag the image was found under.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
    /// The content digest, `sha256:…`.
    pub digest: String,
    /// When the image was built (its config's `created`), when discovery read it: where
    /// DORA's lead time starts. Not part of the Freight's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// The repository the image was built from (its `org.opencontainers.image.source`
    /// label or annotation), when discovery read it. Not part of the Freight's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The commit the image was built from (its `org.opencontainers.image.revision` label
    /// or annotation), when discovery read it: where commit statuses go. Not part of the
    /// Freight's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Hashes what identifies the image (`Time` has no `Hash`; equal images hash alike).
impl std::hash::Hash for FreightImage {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.repo_url, &self.tag, &self.digest).hash(state);
    }
}

/// A config commit.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightCommit {
    /// The repository URL.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The full commit id.
    pub id: String,
    /// The branch the commit was found on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The tag the commit was found under, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The commit's subject line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The commit's author, `Name <email>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub author: String,
}

/// A Helm chart at an exact version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightChart {
    /// The chart repository, as the subscription writes it (`https://…` or `oci://…`).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The chart's name (for `oci://`, the repository's last path segment).
    pub name: String,
    /// The chart version.
    pub version: String,
    /// The manifest digest of an OCI chart, `sha256:…` (classic repositories have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Where this Freight has been, and what people said about it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Stages that hold this Freight now, with the time it arrived.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub currently_in: BTreeMap<String, CurrentStage>,
    /// Stages in which this Freight was verified.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub verified_in: BTreeMap<String, VerifiedStage>,
    /// Stages for which a person approved this Freight, bypassing verification and soak.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approved_for: BTreeMap<String, ApprovedStage>,
    /// Per Stage, the people who signed this Freight off for it (the Stage's
    /// `spec.signoff` gate), one entry per person, in the order they signed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signed_off_for: BTreeMap<String, Vec<Signoff>>,
    /// Stages a person rejected this Freight for (`dray freight reject --stage`): it is not
    /// available there, whatever else says it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rejected_for: BTreeMap<String, super::Rejection>,
    /// Set when a person rejected this Freight everywhere (`dray freight reject` without
    /// `--stage`): it is available to no Stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<super::Rejection>,
    /// What promotions recorded on this Freight with `set-metadata` (key → JSON value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::free_form_object")]
    pub metadata: Metadata,
}

/// Freight's stay in a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentStage {
    /// When the Freight arrived in the Stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// A verification of Freight in a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedStage {
    /// When verification succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<Time>,
    /// The longest continuous time the Freight spent in the Stage, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_soak_seconds: Option<u64>,
}

/// An approval of Freight for a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovedStage {
    /// When it was approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<Time>,
    /// Who approved it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One person's sign-off of Freight for a Stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Signoff {
    /// Who signed off.
    pub user: String,
    /// The signer's groups that the Stage's policy names, when it names groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Why (kept on the record).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
}
