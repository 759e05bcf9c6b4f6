//! Rules for analysis: an AnalysisTemplate on its own (metrics, durations, CEL conditions,
//! one provider each, `{{args.NAME}}` declared), and a Stage's `spec.verification`
//! (timeout, names). That the templates a Stage names exist and get every arg they need
//! is checked with the other references in [`super::references`].

use std::collections::BTreeSet;

use crate::api::{AnalysisTemplate, MAX_PROVIDER_TIMEOUT_SECONDS, Metric, Verification};
use crate::expr::ExprCache;
use crate::expr::exprlang::{ExprLanguage, KnownShapes, check_exprlang_condition};
use crate::verification::analysis::{
    ARG_PLACEHOLDER, JsonPath, WEB_METHODS, referenced_args, with_arg_placeholders,
};

use super::durations;
use super::error::Issue;
use super::names::{self, MAX_LABEL};
use super::path::FieldPath;

/// The conditions of a template written as Argo Rollouts' (`argoproj.io`): expr-lang over
/// `result`, refused on a syntax error, an unknown function or an unknown variable. Args
/// stand as numbers, as for CEL.
fn expr_lang_conditions(metric: &Metric, at: &FieldPath, issues: &mut Vec<Issue>) {
    let name = &metric.name;
    for (field, condition) in [
        ("successCondition", &metric.success_condition),
        ("failureCondition", &metric.failure_condition),
    ] {
        let Some(condition) = condition else { continue };
        let text = with_arg_placeholders(condition.trim());
        for issue in check_exprlang_condition(text.trim(), &KnownShapes::analysis()) {
            issues.push(
                Issue::new(
                    at.key(field),
                    format!(
                        "metric `{name}`: `{field}` (expr-lang, as in Argo Rollouts): {}",
                        issue.message
                    ),
                )
                .hint(
                    "write a condition over `result`, e.g. `len(result) > 0 && result[0] < 0.05`; \
                     the helpers are asInt, asFloat, isNaN, isInf, isNil and default",
                ),
            );
        }
    }
}

/// Every single-document rule of an AnalysisTemplate.
pub(crate) fn template(template: &AnalysisTemplate) -> Vec<Issue> {
    let mut issues = Vec::new();
    let spec = &template.spec;
    let args_at = FieldPath::of(&["spec", "args"]);
    let mut declared = BTreeSet::new();
    for (i, arg) in spec.args.iter().enumerate() {
        let at = args_at.index(i).key("name");
        if arg.name.trim().is_empty() {
            issues.push(
                Issue::new(at, "the arg's name is empty")
                    .hint("name it as the metrics use it: `{{args.NAME}}`"),
            );
        } else if !declared.insert(arg.name.as_str()) {
            issues.push(
                Issue::new(at, format!("arg `{}` is declared twice", arg.name))
                    .hint("declare each arg once"),
            );
        }
    }
    let at = FieldPath::of(&["spec", "metrics"]);
    if spec.metrics.is_empty() {
        issues.push(
            Issue::new(at.clone(), "an AnalysisTemplate needs at least one metric")
                .hint("add `- name: …` with a `provider` (`web` or `prometheus`) and a condition"),
        );
    }
    let cache = ExprCache::new();
    let mut seen = BTreeSet::new();
    for (i, metric) in spec.metrics.iter().enumerate() {
        let at = at.index(i);
        issues.extend(names::check(
            &metric.name,
            MAX_LABEL,
            "metric name",
            at.key("name"),
        ));
        if !seen.insert(metric.name.as_str()) {
            issues.push(
                Issue::new(
                    at.key("name"),
                    format!("metric `{}` is defined twice", metric.name),
                )
                .hint("give every metric its own name; results are kept by name"),
            );
        }
        let language = ExprLanguage::of_annotations(template.metadata.annotations.as_ref());
        if language == ExprLanguage::ExprLang {
            expr_lang_conditions(metric, &at, &mut issues);
        }
        self::metric(
            metric,
            &at,
            &declared,
            (language == ExprLanguage::Cel).then_some(&cache),
            &mut issues,
        );
    }
    issues
}

fn metric(
    metric: &Metric,
    at: &FieldPath,
    declared: &BTreeSet<&str>,
    cache: Option<&ExprCache>,
    issues: &mut Vec<Issue>,
) {
    let name = &metric.name;
    if let Some(interval) = &metric.interval {
        issues.extend(durations::check(interval, at.key("interval")));
        if crate::api::parse_duration(interval).is_ok_and(|d| d.is_zero()) {
            issues.push(
                Issue::new(
                    at.key("interval"),
                    format!("metric `{name}`: the interval is zero"),
                )
                .hint("give a positive interval such as `30s`"),
            );
        }
    }
    if let Some(delay) = &metric.initial_delay {
        issues.extend(durations::check(delay, at.key("initialDelay")));
    }
    match metric.count {
        Some(0) => issues.push(
            Issue::new(at.key("count"), format!("metric `{name}`: `count` is 0")).hint(
                "take at least one measurement, or remove `count` and set `interval` to measure \
                 until the Stage's `verification.timeout`",
            ),
        ),
        Some(count) if count > 1 && metric.interval.is_none() => issues.push(
            Issue::new(
                at.key("count"),
                format!("metric `{name}`: {count} measurements need an `interval` between them"),
            )
            .hint(
                "add `interval`, e.g. `1m`; without `count` and `interval` a metric measures once",
            ),
        ),
        _ => {}
    }
    let mut texts: Vec<(FieldPath, &str)> = Vec::new();
    for (field, condition) in [
        ("successCondition", &metric.success_condition),
        ("failureCondition", &metric.failure_condition),
    ] {
        let Some(condition) = condition else { continue };
        texts.push((at.key(field), condition));
        // Args are substituted before a run compiles it; here each stands as a number.
        let with_args = !referenced_args(condition).is_empty();
        let Some(cache) = cache else { continue };
        let placed = with_arg_placeholders(condition.trim());
        if let Err(e) = cache.compile(placed.trim()) {
            let taken = if with_args {
                format!(" (each `{{{{args.…}}}}` taken as {ARG_PLACEHOLDER})")
            } else {
                String::new()
            };
            issues.push(
                Issue::new(
                    at.key(field),
                    format!("metric `{name}`: `{field}` is not valid CEL{taken}: {e}"),
                )
                .hint("write a CEL condition over `result`, e.g. `result[0] >= 0.95`"),
            );
        } else if let Err(e) = crate::expr::check_analysis_condition(cache, &placed) {
            issues.push(
                Issue::new(at.key(field), format!("metric `{name}`: `{field}`: {e}"))
                    .hint("write a CEL condition over `result`, e.g. `size(result) > 0 && result[0] >= 0.95`"),
            );
        }
    }
    let provider = at.key("provider");
    match (&metric.provider.web, &metric.provider.prometheus) {
        (Some(web), None) => {
            let at = provider.key("web");
            if web.url.trim().is_empty() {
                issues.push(
                    Issue::new(at.key("url"), format!("metric `{name}`: `url` is empty"))
                        .hint("give the URL to ask, e.g. `http://app.example.com/healthz`"),
                );
            }
            if let Some(method) = &web.method
                && !WEB_METHODS.contains(&method.to_ascii_uppercase().as_str())
            {
                issues.push(
                    Issue::new(
                        at.key("method"),
                        format!("metric `{name}`: method `{method}` is not supported"),
                    )
                    .hint("use `GET` (the default), `POST` or `PUT`"),
                );
            }
            timeout(web.timeout_seconds, &at.key("timeoutSeconds"), name, issues);
            if let Some(path) = &web.json_path
                && let Err(e) = JsonPath::parse(path)
            {
                issues.push(Issue::new(
                    at.key("jsonPath"),
                    format!("metric `{name}`: {e}"),
                ));
            }
            texts.push((at.key("url"), &web.url));
            for (i, header) in web.headers.iter().enumerate() {
                texts.push((at.key("headers").index(i).key("value"), &header.value));
            }
            if let Some(body) = &web.body {
                texts.push((at.key("body"), body));
            }
        }
        (None, Some(prometheus)) => {
            let at = provider.key("prometheus");
            let address = prometheus.address.trim();
            let is_url = address.starts_with("http://") || address.starts_with("https://");
            // With args in it, the address is checked when the run is prepared.
            if !is_url && referenced_args(address).is_empty() {
                issues.push(
                    Issue::new(
                        at.key("address"),
                        format!("metric `{name}`: `{address}` is not an http(s) URL"),
                    )
                    .hint("give Prometheus' base URL, e.g. `http://prometheus.monitoring:9090`"),
                );
            }
            if prometheus.query.trim().is_empty() {
                issues.push(
                    Issue::new(
                        at.key("query"),
                        format!("metric `{name}`: `query` is empty"),
                    )
                    .hint("give a PromQL query that returns an instant vector or a scalar"),
                );
            }
            timeout(prometheus.timeout, &at.key("timeout"), name, issues);
            texts.push((at.key("address"), &prometheus.address));
            texts.push((at.key("query"), &prometheus.query));
        }
        (Some(_), Some(_)) => issues.push(
            Issue::new(
                provider,
                format!("metric `{name}` sets both `web` and `prometheus`"),
            )
            .hint("keep one provider per metric; split it into two metrics to measure both"),
        ),
        (None, None) => issues.push(
            Issue::new(provider, format!("metric `{name}` has no provider"))
                .hint("add `web: {url: …}` or `prometheus: {address: …, query: …}`"),
        ),
    }
    for (path, text) in texts {
        for arg in referenced_args(text) {
            if !declared.contains(arg) {
                issues.push(
                    Issue::new(
                        path.clone(),
                        format!(
                            "metric `{name}` uses `{{{{args.{arg}}}}}`, but the template declares no arg `{arg}`"
                        ),
                    )
                    .hint(format!("add `- name: {arg}` to `spec.args`")),
                );
            }
        }
    }
}

fn timeout(seconds: Option<u64>, at: &FieldPath, name: &str, issues: &mut Vec<Issue>) {
    if let Some(seconds) = seconds
        && !(1..=MAX_PROVIDER_TIMEOUT_SECONDS).contains(&seconds)
    {
        issues.push(
            Issue::new(
                at.clone(),
                format!("metric `{name}`: a timeout of {seconds} seconds is out of range"),
            )
            .hint(format!(
                "give between 1 and {MAX_PROVIDER_TIMEOUT_SECONDS} seconds"
            )),
        );
    }
}

/// A Stage's `spec.verification` on its own: timeout, template names, arg names.
pub(crate) fn verification(verification: &Verification) -> Vec<Issue> {
    let mut issues = Vec::new();
    let at = FieldPath::of(&["spec", "verification"]);
    if let Some(timeout) = &verification.timeout {
        issues.extend(durations::check(timeout, at.key("timeout")));
    }
    let mut templates = BTreeSet::new();
    for (i, reference) in verification.analysis_templates.iter().enumerate() {
        let path = at.key("analysisTemplates").index(i).key("name");
        issues.extend(names::check(
            &reference.name,
            MAX_LABEL,
            "AnalysisTemplate name",
            path.clone(),
        ));
        if let Some(kind) = reference
            .kind
            .as_deref()
            .filter(|k| !matches!(*k, "AnalysisTemplate" | "ClusterAnalysisTemplate"))
        {
            issues.push(
                Issue::new(
                    at.key("analysisTemplates").index(i).key("kind"),
                    format!("`{kind}` is not a kind of analysis template"),
                )
                .hint(
                    "remove `kind`, or write `AnalysisTemplate` or `ClusterAnalysisTemplate` \
                     (both name the project's AnalysisTemplate: apply a ClusterAnalysisTemplate \
                     into the project)",
                ),
            );
        }
        if !templates.insert(reference.name.as_str()) {
            issues.push(
                Issue::new(
                    path,
                    format!("AnalysisTemplate `{}` is listed twice", reference.name),
                )
                .hint("list it once"),
            );
        }
    }
    let mut args = BTreeSet::new();
    for (i, arg) in verification.args.iter().enumerate() {
        let path = at.key("args").index(i).key("name");
        if arg.name.trim().is_empty() {
            issues.push(
                Issue::new(path, "the arg's name is empty")
                    .hint("name it as the template's `spec.args[].name`"),
            );
        } else if !args.insert(arg.name.as_str()) {
            issues.push(
                Issue::new(path, format!("arg `{}` is given twice", arg.name))
                    .hint("give each arg once"),
            );
        }
    }
    issues
}
