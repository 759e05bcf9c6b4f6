//! Argo Rollouts' AnalysisTemplate conditions: expr-lang over `result`, with the helpers
//! Argo Rollouts adds — `asInt`, `asFloat` (a string or number as a number), `isNaN`,
//! `isInf`, `isNil`, and `default(value, fallback)` (the fallback when `value` is nil).

use expr::{Environment, Value};

use super::value::type_name;

/// What a condition's `result` is bound to, as Argo Rollouts binds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AnalysisResult<'a> {
    /// A Prometheus vector: a list of floats.
    Samples(&'a [f64]),
    /// A web (or job) measurement: the JSON value.
    Json(&'a serde_json::Value),
}

impl AnalysisResult<'_> {
    /// The value of `result`.
    pub(crate) fn to_expr(self) -> Value {
        match self {
            AnalysisResult::Samples(values) => {
                Value::Array(values.iter().map(|v| Value::Float(*v)).collect())
            }
            AnalysisResult::Json(value) => super::value::json_to_expr(value),
        }
    }
}

/// The names of Argo Rollouts' helpers, for the apply-time checks.
pub const ROLLOUTS_FUNCTIONS: &[&str] = &["asInt", "asFloat", "isNaN", "isInf", "isNil", "default"];

/// Registers Argo Rollouts' helpers.
pub(crate) fn add_rollouts_functions(env: &mut Environment<'_>) {
    env.add_function("asInt", |call| match call.args.as_slice() {
        [Value::Integer(i)] => Ok(Value::Integer(*i)),
        [Value::Float(f)] if f.fract() == 0.0 && f.is_finite() => Ok(Value::Integer(*f as i64)),
        [Value::String(s)] => s
            .trim()
            .parse::<i64>()
            .map(Value::Integer)
            .map_err(|_| format!("asInt(): `{s}` is not an integer").into()),
        [other] => Err(format!("asInt(): cannot read a {} as an integer", type_name(other)).into()),
        args => Err(format!("asInt() takes 1 argument, got {}", args.len()).into()),
    });
    env.add_function("asFloat", |call| match call.args.as_slice() {
        [Value::Integer(i)] => Ok(Value::Float(*i as f64)),
        [Value::Float(f)] => Ok(Value::Float(*f)),
        [Value::String(s)] => s
            .trim()
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|_| format!("asFloat(): `{s}` is not a number").into()),
        [other] => Err(format!("asFloat(): cannot read a {} as a number", type_name(other)).into()),
        args => Err(format!("asFloat() takes 1 argument, got {}", args.len()).into()),
    });
    env.add_function("isNaN", |call| match call.args.as_slice() {
        [Value::Float(f)] => Ok(Value::Bool(f.is_nan())),
        [Value::Integer(_)] => Ok(Value::Bool(false)),
        [other] => Err(format!("isNaN(): expects a number, not a {}", type_name(other)).into()),
        args => Err(format!("isNaN() takes 1 argument, got {}", args.len()).into()),
    });
    env.add_function("isInf", |call| match call.args.as_slice() {
        [Value::Float(f)] => Ok(Value::Bool(f.is_infinite())),
        [Value::Integer(_)] => Ok(Value::Bool(false)),
        [other] => Err(format!("isInf(): expects a number, not a {}", type_name(other)).into()),
        args => Err(format!("isInf() takes 1 argument, got {}", args.len()).into()),
    });
    env.add_function("isNil", |call| match call.args.as_slice() {
        [value] => Ok(Value::Bool(value.is_nil())),
        args => Err(format!("isNil() takes 1 argument, got {}", args.len()).into()),
    });
    env.add_function("default", |call| match call.args.as_slice() {
        [Value::Nil, fallback] => Ok(fallback.clone()),
        [value, _] => Ok(value.clone()),
        args => Err(format!("default() takes 2 arguments, got {}", args.len()).into()),
    });
}
