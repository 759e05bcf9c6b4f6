//! `AnalysisTemplate`: how to measure whether Freight is fit, shaped like Argo Rollouts'
//! AnalysisTemplate (metrics with `interval`, `count`, success and failure conditions over
//! `result`, limits, and a `web` or `prometheus` provider). Stages name templates in
//! `spec.verification.analysisTemplates`; `crate::verification::analysis` runs them.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::optional_duration_string;

/// The default `consecutiveErrorLimit`, as in Argo Rollouts.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: u32 = 4;
/// The default `web.timeoutSeconds`.
pub const DEFAULT_WEB_TIMEOUT_SECONDS: u64 = 10;
/// The default `prometheus.timeout`, in seconds.
pub const DEFAULT_PROMETHEUS_TIMEOUT_SECONDS: u64 = 30;
/// The longest timeout a provider may ask for, in seconds.
pub const MAX_PROVIDER_TIMEOUT_SECONDS: u64 = 300;

/// Metrics that say whether Freight is fit, run by a Stage's verification.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "AnalysisTemplate",
    namespaced,
    shortname = "at"
)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateSpec {
    /// Arguments the metrics use as `{{args.NAME}}`; one without a `value` must be given
    /// by every Stage that uses the template (`verification.args`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<AnalysisTemplateArg>,
    /// The metrics; every one must succeed.
    pub metrics: Vec<Metric>,
}

/// An argument of a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateArg {
    /// The argument's name, as in `{{args.NAME}}`.
    pub name: String,
    /// A default value, used when the Stage gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One metric: what to measure, how often, and what counts as success or failure.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// The metric's name, unique in the template.
    pub name: String,
    /// Time between measurements (e.g. `1m`). Without `count`, the metric measures every
    /// interval until the Stage's `verification.timeout`; without both, it measures once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub interval: Option<String>,
    /// Time to wait before the first measurement (e.g. `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub initial_delay: Option<String>,
    /// How many measurements (errors excluded) to take; more than one needs `interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// A CEL condition over `result`; true makes the measurement Successful.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    /// A CEL condition over `result`; true makes the measurement Failed (it wins over
    /// `successCondition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    /// The metric fails when more measurements than this fail (default 0).
    #[serde(default)]
    pub failure_limit: u32,
    /// The metric is Inconclusive when more measurements than this are (default 0).
    #[serde(default)]
    pub inconclusive_limit: u32,
    /// The metric errors when more measurements than this error in a row (default 4).
    #[serde(default = "default_consecutive_error_limit")]
    pub consecutive_error_limit: u32,
    /// Where the value comes from: exactly one of `web` and `prometheus`.
    pub provider: MetricProvider,
}

fn default_consecutive_error_limit() -> u32 {
    DEFAULT_CONSECUTIVE_ERROR_LIMIT
}

/// Where a metric's value comes from: exactly one provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricProvider {
    /// An HTTP request; `result` is the JSON at `jsonPath` (or the whole body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<WebMetric>,
    /// A Prometheus instant query; `result` is the list of the vector's sample values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetric>,
}

/// An HTTP request whose JSON answer is the measurement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetric {
    /// The URL; may use `{{args.NAME}}`.
    pub url: String,
    /// `GET` (default), `POST` or `PUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request headers; values may use `{{args.NAME}}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<WebMetricHeader>,
    /// The request body, for `POST` and `PUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// How long the request may take, in seconds (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Where the value sits in the JSON answer, as Rollouts writes it: `{$.data.ok}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
}

/// One HTTP header.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetricHeader {
    /// The header's name.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// A Prometheus instant query.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusMetric {
    /// The Prometheus server, e.g. `http://prometheus.monitoring:9090`.
    pub address: String,
    /// The PromQL query; may use `{{args.NAME}}`.
    pub query: String,
    /// How long the query may take, in seconds (default 30), as in Argo Rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}
