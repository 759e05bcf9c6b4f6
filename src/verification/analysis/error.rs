//! [`AnalysisError`]: why a Stage's AnalysisTemplates could not be turned into metrics to
//! run. Each names the template, the metric and the field, and says what to change.
//! Problems *during* a run are not errors: they are measurements in `Error` phase.

use thiserror::Error;

/// A template that cannot run as written (with the Stage's args).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AnalysisError {
    /// A metric uses `{{args.NAME}}` and neither the Stage nor the template gives a value.
    #[error(
        "AnalysisTemplate `{template}`, metric `{metric}`: `{field}` uses `{{{{args.{arg}}}}}`, \
         which has no value; hint: add `{{name: {arg}, value: …}}` to the Stage's \
         `verification.args`, or a default `value` to the template's arg `{arg}`"
    )]
    MissingArg {
        /// The template's name.
        template: String,
        /// The metric's name.
        metric: String,
        /// The field that uses it, e.g. `provider.prometheus.query`.
        field: String,
        /// The argument's name.
        arg: String,
    },
    /// A metric uses `{{args.NAME}}` that the template does not declare.
    #[error(
        "AnalysisTemplate `{template}`, metric `{metric}`: `{field}` uses `{{{{args.{arg}}}}}`, \
         but the template declares no arg `{arg}`; hint: add `- name: {arg}` to the \
         template's `spec.args`"
    )]
    UndeclaredArg {
        /// The template's name.
        template: String,
        /// The metric's name.
        metric: String,
        /// The field that uses it.
        field: String,
        /// The argument's name.
        arg: String,
    },
    /// A field of a metric is invalid (a duration, a condition, the provider, …).
    #[error("AnalysisTemplate `{template}`, metric `{metric}`: `{field}`: {message}; hint: {hint}")]
    InvalidMetric {
        /// The template's name.
        template: String,
        /// The metric's name.
        metric: String,
        /// The field, e.g. `interval`.
        field: String,
        /// What is wrong.
        message: String,
        /// What to do.
        hint: String,
    },
    /// Two metrics of the Stage's templates share a name (results are kept by name).
    #[error(
        "metric `{metric}` is defined by AnalysisTemplate `{first}` and by `{second}`; hint: \
         rename one of them: a Stage's metrics need distinct names"
    )]
    DuplicateMetric {
        /// The metric's name.
        metric: String,
        /// The first template defining it.
        first: String,
        /// The second.
        second: String,
    },
}
