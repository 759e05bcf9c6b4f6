//! Types shared by several kinds: conditions, references, durations and the
//! free-form schema helper for step configuration.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A status condition, as in Kubernetes (`type`, `status`, `reason`, `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's name, e.g. `Ready` or `Healthy`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason in CamelCase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The generation of the resource that this condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A name-value pair used for promotion variables.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Var {
    /// The variable's name, as used in `${{ vars.<name> }}`.
    pub name: String,
    /// The value; may itself contain `${{ }}` expressions. A task variable without a value
    /// must be supplied by every step that uses the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The kind of a Freight origin. Only Warehouses mint Freight today.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FreightOriginKind {
    /// A [`crate::api::Warehouse`].
    #[default]
    Warehouse,
}

/// Where a piece of Freight comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightOrigin {
    /// The kind of the origin: `Warehouse`.
    pub kind: FreightOriginKind,
    /// The origin's name, in the same project.
    pub name: String,
}

/// Schema for a free-form JSON object: kept as written (structural CRDs need
/// `x-kubernetes-preserve-unknown-fields`, never `items: {}`).
pub fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for an optional free-form JSON object.
pub fn optional_free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for a duration written the Go way (`30s`, `5m`, `1h30m`).
pub fn duration_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$"
    })
}

/// Schema for an optional duration string.
pub fn optional_duration_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "nullable": true,
        "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$"
    })
}

/// Parses a Go-style duration (`30s`, `5m`, `1h30m`, `2d`) into a [`std::time::Duration`],
/// with the same parser as the steps and the CRDs' pattern ([`dray_steps::duration`]).
///
/// Errors name the offending text and show the accepted form.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let hint = "write a duration such as `30s`, `5m` or `1h30m` (no spaces)";
    if text.trim().is_empty() {
        return Err(format!("empty duration; {hint}"));
    }
    dray_steps::duration::parse(text).map_err(|e| format!("{e}; {hint}"))
}
