//! Judging one measurement: the value a provider observed, the metric's conditions over
//! `result` (CEL for Dray's templates, expr-lang for Argo Rollouts' `argoproj.io` ones),
//! and Argo Rollouts' rules for combining them. An empty result or NaN is never
//! Successful.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

use crate::api::VerificationPhase;
use crate::expr::exprlang::{AnalysisResult, ExprLangEngine, ExprLanguage};
use crate::expr::{ExprCache, json_to_cel};

use super::spec::MetricSpec;

/// The most characters of a value kept in a measurement.
const MAX_VALUE_CHARS: usize = 200;

/// What a provider observed.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A JSON value (web): `result` is the value.
    Json(Value),
    /// Sample values (Prometheus): `result` is a list of doubles.
    Samples(Vec<f64>),
}

impl Observed {
    /// The value as text for the measurement's `value`, shortened.
    pub fn text(&self) -> String {
        let text = match self {
            Observed::Json(Value::String(s)) => s.clone(),
            Observed::Json(v) => v.to_string(),
            Observed::Samples(values) => {
                let items: Vec<String> = values.iter().map(|v| sample_text(*v)).collect();
                format!("[{}]", items.join(", "))
            }
        };
        shorten(&text)
    }

    fn as_analysis_result(&self) -> AnalysisResult<'_> {
        match self {
            Observed::Json(v) => AnalysisResult::Json(v),
            Observed::Samples(values) => AnalysisResult::Samples(values),
        }
    }

    fn to_cel(&self) -> cel::Value {
        match self {
            Observed::Json(v) => json_to_cel(v),
            Observed::Samples(values) => cel::Value::List(Arc::new(
                values.iter().map(|v| cel::Value::Float(*v)).collect(),
            )),
        }
    }
}

/// A sample as Prometheus writes it (`NaN`, `+Inf`, `0.97`).
fn sample_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        v.to_string()
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_VALUE_CHARS - 1).collect();
    out.push('…');
    out
}

/// A measurement's phase and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `Successful`, `Failed`, `Inconclusive` or `Error`.
    pub phase: VerificationPhase,
    /// Why.
    pub message: String,
}

impl Verdict {
    fn new(phase: VerificationPhase, message: impl Into<String>) -> Self {
        Self {
            phase,
            message: message.into(),
        }
    }

    /// An `Error` measurement.
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(VerificationPhase::Error, message)
    }
}

/// Judges `observed` by `metric`'s conditions, as Argo Rollouts does: the failure
/// condition wins; a lone success condition that is false fails; a lone failure condition
/// that is false succeeds; both false is Inconclusive; neither set succeeds. An empty
/// result or NaN is Inconclusive before any condition is looked at.
pub(super) fn judge(cache: &ExprCache, metric: &MetricSpec, observed: &Observed) -> Verdict {
    use VerificationPhase::{Failed, Inconclusive, Successful};
    match observed {
        Observed::Samples(values) if values.is_empty() => {
            return Verdict::new(Inconclusive, "query returned no data");
        }
        Observed::Samples(values) if values.iter().any(|v| v.is_nan()) => {
            return Verdict::new(Inconclusive, "result is NaN");
        }
        Observed::Json(Value::Null) => {
            return Verdict::new(Inconclusive, "result is empty (null)");
        }
        Observed::Json(Value::Number(n)) if n.as_f64().is_some_and(f64::is_nan) => {
            return Verdict::new(Inconclusive, "result is NaN");
        }
        _ => {}
    }
    let result = match metric.language {
        ExprLanguage::Cel => Some(observed.to_cel()),
        ExprLanguage::ExprLang => None,
    };
    let evaluate = |condition: &Option<String>| -> Result<Option<bool>, Verdict> {
        condition
            .as_deref()
            .map(|c| match &result {
                Some(result) => evaluate(cache, c, result),
                None => EXPR_LANG
                    .evaluate_analysis_condition(c, observed.as_analysis_result())
                    .map_err(|e| e.to_string()),
            })
            .transpose()
            .map_err(Verdict::error)
    };
    let success = match evaluate(&metric.success_condition) {
        Ok(v) => v,
        Err(verdict) => return verdict,
    };
    let failure = match evaluate(&metric.failure_condition) {
        Ok(v) => v,
        Err(verdict) => return verdict,
    };
    let s = metric.success_condition.as_deref().unwrap_or_default();
    let f = metric.failure_condition.as_deref().unwrap_or_default();
    match (success, failure) {
        (_, Some(true)) => Verdict::new(Failed, format!("failureCondition `{f}` is true")),
        (Some(true), _) => Verdict::new(Successful, format!("successCondition `{s}` is true")),
        (Some(false), None) => Verdict::new(Failed, format!("successCondition `{s}` is false")),
        (None, Some(false)) => Verdict::new(Successful, format!("failureCondition `{f}` is false")),
        (Some(false), Some(false)) => Verdict::new(
            Inconclusive,
            "neither successCondition nor failureCondition is true",
        ),
        (None, None) => Verdict::new(Successful, "no condition: any result succeeds"),
    }
}

/// The expr-lang programs of Argo Rollouts' conditions, shared by every analyzer.
static EXPR_LANG: LazyLock<ExprLangEngine> = LazyLock::new(ExprLangEngine::new);

/// Evaluates one CEL condition with `result` bound; it must be a bool.
fn evaluate(cache: &ExprCache, condition: &str, result: &cel::Value) -> Result<bool, String> {
    let program = cache.compile(condition).map_err(|e| e.to_string())?;
    let mut context = cel::Context::with_env(cache.env());
    context.add_variable_from_value("result", result.clone());
    match crate::expr::on_cel_stack(|| program.execute(&context)) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!(
            "condition `{condition}` must evaluate to a bool, not a {}",
            other.type_of()
        )),
        Err(e) => Err(format!("condition `{condition}` failed: {e}")),
    }
}
