//! [`MetricSpec`]: one metric of a Stage's AnalysisTemplates, resolved for a run (args
//! substituted, durations parsed, conditions checked), and [`prepare`], which builds them.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::api::{
    AnalysisTemplate, DEFAULT_PROMETHEUS_TIMEOUT_SECONDS, DEFAULT_WEB_TIMEOUT_SECONDS,
    MAX_PROVIDER_TIMEOUT_SECONDS, Metric, parse_duration,
};
use crate::expr::ExprCache;
use crate::expr::exprlang::{ExprLangEngine, ExprLanguage};

use super::AnalysisError;
use super::args;
use super::json_path::JsonPath;

/// HTTP methods a web metric may use.
pub const WEB_METHODS: [&str; 3] = ["GET", "POST", "PUT"];

/// A metric ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// The metric's name (unique among the Stage's metrics).
    pub name: String,
    /// The template it comes from.
    pub template: String,
    /// Where the value comes from, args substituted.
    pub provider: Provider,
    /// The language of the conditions: CEL, or expr-lang for a template written as Argo
    /// Rollouts' (`argoproj.io`, recorded in the `dray.dev/expression-language` annotation).
    pub language: ExprLanguage,
    /// A condition over `result`; true makes a measurement Successful.
    pub success_condition: Option<String>,
    /// A condition over `result`; true makes a measurement Failed.
    pub failure_condition: Option<String>,
    /// More Failed measurements than this fail the metric.
    pub failure_limit: u32,
    /// More Inconclusive measurements than this make the metric Inconclusive.
    pub inconclusive_limit: u32,
    /// More Error measurements in a row than this make the metric Error.
    pub consecutive_error_limit: u32,
    /// Time between measurements.
    pub interval: Option<Duration>,
    /// Time before the first measurement.
    pub initial_delay: Duration,
    /// Measurements to take (errors excluded); `None` with an interval: until the deadline.
    pub count: Option<u32>,
}

impl MetricSpec {
    /// How many measurements end the metric: `count`, or 1 without `interval` (measure
    /// once, as Argo Rollouts does), or `None` (until the deadline).
    pub fn effective_count(&self) -> Option<u32> {
        match (self.count, self.interval) {
            (Some(count), _) => Some(count),
            (None, None) => Some(1),
            (None, Some(_)) => None,
        }
    }
}

/// A metric's provider, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider {
    /// An HTTP request.
    Web(WebRequest),
    /// A Prometheus instant query.
    Prometheus(PrometheusQuery),
}

/// An HTTP request whose JSON answer is measured.
#[derive(Clone, PartialEq)]
pub struct WebRequest {
    /// The URL.
    pub url: String,
    /// `GET`, `POST` or `PUT`.
    pub method: String,
    /// Headers (values may be secrets: never shown).
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<String>,
    /// How long the request may take.
    pub timeout: Duration,
    /// Where the value is in the answer; the whole answer without it.
    pub json_path: Option<JsonPath>,
}

impl fmt::Debug for WebRequest {
    /// Header values are redacted: they often carry tokens.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(k, _)| format!("{k}: <redacted>"))
            .collect();
        f.debug_struct("WebRequest")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &headers)
            .field("body", &self.body.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("json_path", &self.json_path)
            .finish()
    }
}

/// A Prometheus instant query.
#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusQuery {
    /// The server, e.g. `http://prometheus:9090`.
    pub address: String,
    /// The PromQL query.
    pub query: String,
    /// How long the query may take.
    pub timeout: Duration,
}

/// Resolves `templates` with the Stage's `args` (already evaluated): substitutes
/// `{{args.NAME}}` in every provider field (a Stage's value wins over the template's
/// default), parses durations and checks the conditions compile. Errors name the
/// template, the metric and what is missing.
pub fn prepare(
    templates: &[AnalysisTemplate],
    args: &BTreeMap<String, String>,
) -> Result<Vec<MetricSpec>, AnalysisError> {
    let mut specs: Vec<MetricSpec> = Vec::new();
    let cache = ExprCache::new();
    let exprlang = ExprLangEngine::new();
    for template in templates {
        let name = template.metadata.name.clone().unwrap_or_default();
        let language = ExprLanguage::of_annotations(template.metadata.annotations.as_ref());
        let declared: BTreeMap<&str, Option<&String>> = template
            .spec
            .args
            .iter()
            .map(|a| (a.name.as_str(), args.get(&a.name).or(a.value.as_ref())))
            .collect();
        for metric in &template.spec.metrics {
            let spec = Resolver {
                template: &name,
                metric,
                declared: &declared,
                cache: &cache,
                exprlang: &exprlang,
                language,
            }
            .resolve()?;
            if let Some(first) = specs.iter().find(|s| s.name == spec.name) {
                return Err(AnalysisError::DuplicateMetric {
                    metric: spec.name.clone(),
                    first: first.template.clone(),
                    second: name.clone(),
                });
            }
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// Resolves one metric of one template.
struct Resolver<'a> {
    template: &'a str,
    metric: &'a Metric,
    declared: &'a BTreeMap<&'a str, Option<&'a String>>,
    cache: &'a ExprCache,
    exprlang: &'a ExprLangEngine,
    language: ExprLanguage,
}

impl Resolver<'_> {
    fn invalid(&self, field: &str, message: String, hint: &str) -> AnalysisError {
        AnalysisError::InvalidMetric {
            template: self.template.to_owned(),
            metric: self.metric.name.clone(),
            field: field.to_owned(),
            message,
            hint: hint.to_owned(),
        }
    }

    /// `text` (found at `field`) with its args substituted.
    fn text(&self, text: &str, field: &str) -> Result<String, AnalysisError> {
        let mut values = BTreeMap::new();
        for arg in args::referenced(text) {
            match self.declared.get(arg) {
                None => {
                    return Err(AnalysisError::UndeclaredArg {
                        template: self.template.to_owned(),
                        metric: self.metric.name.clone(),
                        field: field.to_owned(),
                        arg: arg.to_owned(),
                    });
                }
                Some(None) => {
                    return Err(AnalysisError::MissingArg {
                        template: self.template.to_owned(),
                        metric: self.metric.name.clone(),
                        field: field.to_owned(),
                        arg: arg.to_owned(),
                    });
                }
                Some(Some(value)) => {
                    values.insert(arg.to_owned(), (*value).clone());
                }
            }
        }
        // Every name used has a value, so substitution cannot miss one.
        args::substitute(text, &values).map_err(|arg| AnalysisError::MissingArg {
            template: self.template.to_owned(),
            metric: self.metric.name.clone(),
            field: field.to_owned(),
            arg,
        })
    }

    fn duration(&self, text: Option<&str>, field: &str) -> Result<Option<Duration>, AnalysisError> {
        text.map(|t| {
            parse_duration(t)
                .map_err(|e| self.invalid(field, e, "fix the template and apply it again"))
        })
        .transpose()
    }

    fn condition(
        &self,
        text: Option<&String>,
        field: &str,
    ) -> Result<Option<String>, AnalysisError> {
        let Some(text) = text else { return Ok(None) };
        let text = self.text(text.trim(), field)?;
        match self.language {
            ExprLanguage::Cel => self.cache.compile(text.trim()).map(drop).map_err(|e| {
                self.invalid(
                    field,
                    format!("not valid CEL with its args substituted (`{text}`): {e}"),
                    "write a CEL condition over `result`, e.g. `result[0] >= 0.95`; an arg \
                     used in it must be a CEL value, e.g. a number, or quoted: \
                     `'{{args.name}}'`",
                )
            })?,
            ExprLanguage::ExprLang => {
                self.exprlang.compile(text.trim()).map(drop).map_err(|e| {
                    self.invalid(
                        field,
                        format!("not valid expr-lang with its args substituted (`{text}`): {e}"),
                        "write an expr-lang condition over `result`, e.g. `len(result) > 0 && \
                     result[0] < 0.05`; an arg used in it must be a value, e.g. a number, or \
                     quoted: `'{{args.name}}'`",
                    )
                })?
            }
        }
        Ok(Some(text.trim().to_owned()))
    }

    fn resolve(&self) -> Result<MetricSpec, AnalysisError> {
        let metric = self.metric;
        let interval = self.duration(metric.interval.as_deref(), "interval")?;
        if interval.is_some_and(|d| d.is_zero()) {
            return Err(self.invalid(
                "interval",
                "the interval is zero".to_owned(),
                "give a positive interval such as `30s`",
            ));
        }
        let initial_delay = self
            .duration(metric.initial_delay.as_deref(), "initialDelay")?
            .unwrap_or_default();
        if metric.count == Some(0) {
            return Err(self.invalid(
                "count",
                "`count` is 0".to_owned(),
                "take at least one measurement, or remove `count` to measure until the deadline",
            ));
        }
        if metric.count.is_some_and(|c| c > 1) && interval.is_none() {
            return Err(self.invalid(
                "count",
                "more than one measurement needs an `interval`".to_owned(),
                "add `interval`, e.g. `1m`",
            ));
        }
        let provider = match (&metric.provider.web, &metric.provider.prometheus) {
            (Some(web), None) => {
                let method = web.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
                if !WEB_METHODS.contains(&method.as_str()) {
                    return Err(self.invalid(
                        "provider.web.method",
                        format!("`{method}` is not supported"),
                        "use `GET`, `POST` or `PUT`",
                    ));
                }
                let json_path = web
                    .json_path
                    .as_deref()
                    .map(JsonPath::parse)
                    .transpose()
                    .map_err(|e| self.invalid("provider.web.jsonPath", e, "fix the path"))?;
                let url = self.text(&web.url, "provider.web.url")?;
                let mut headers = Vec::new();
                for (i, header) in web.headers.iter().enumerate() {
                    let value =
                        self.text(&header.value, &format!("provider.web.headers[{i}].value"))?;
                    headers.push((header.key.clone(), value));
                }
                Provider::Web(WebRequest {
                    url,
                    method,
                    headers,
                    body: web
                        .body
                        .as_deref()
                        .map(|b| self.text(b, "provider.web.body"))
                        .transpose()?,
                    timeout: self.timeout(
                        web.timeout_seconds,
                        DEFAULT_WEB_TIMEOUT_SECONDS,
                        "provider.web.timeoutSeconds",
                    )?,
                    json_path,
                })
            }
            (None, Some(prometheus)) => Provider::Prometheus(PrometheusQuery {
                address: self.text(&prometheus.address, "provider.prometheus.address")?,
                query: self.text(&prometheus.query, "provider.prometheus.query")?,
                timeout: self.timeout(
                    prometheus.timeout,
                    DEFAULT_PROMETHEUS_TIMEOUT_SECONDS,
                    "provider.prometheus.timeout",
                )?,
            }),
            _ => {
                return Err(self.invalid(
                    "provider",
                    "a metric needs exactly one of `web` and `prometheus`".to_owned(),
                    "keep one provider per metric; split the metric in two to measure both",
                ));
            }
        };
        Ok(MetricSpec {
            name: metric.name.clone(),
            template: self.template.to_owned(),
            provider,
            language: self.language,
            success_condition: self
                .condition(metric.success_condition.as_ref(), "successCondition")?,
            failure_condition: self
                .condition(metric.failure_condition.as_ref(), "failureCondition")?,
            failure_limit: metric.failure_limit,
            inconclusive_limit: metric.inconclusive_limit,
            consecutive_error_limit: metric.consecutive_error_limit,
            interval,
            initial_delay,
            count: metric.count,
        })
    }

    fn timeout(
        &self,
        seconds: Option<u64>,
        default: u64,
        field: &str,
    ) -> Result<Duration, AnalysisError> {
        let seconds = seconds.unwrap_or(default);
        if !(1..=MAX_PROVIDER_TIMEOUT_SECONDS).contains(&seconds) {
            return Err(self.invalid(
                field,
                format!("{seconds} seconds is out of range"),
                &format!("give between 1 and {MAX_PROVIDER_TIMEOUT_SECONDS} seconds"),
            ));
        }
        Ok(Duration::from_secs(seconds))
    }
}
