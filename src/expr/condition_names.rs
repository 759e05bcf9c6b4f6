//! The apply-time name check of a CEL AnalysisTemplate condition: it may read only
//! `result`, and call only functions CEL knows. Both are read off the parsed expression:
//! its free variables, and each global call, tried on its own (`len(x)` with `x` bound to a
//! number, a list, a string and an object): a function that every one of those calls
//! finds undeclared is unknown, while one that exists answers something else (a value, or
//! "no such overload"). CEL's `&&` and `||` swallow an error beside a decisive side, so
//! the calls are tried apart from the condition.

use std::collections::BTreeSet;

use cel::common::ast::Expr;
use cel::{ExecutionError, Value};

use super::ExprError;
use super::compile::{ExprCache, on_cel_stack};

/// The one variable an analysis condition sees.
const RESULT: &str = "result";

/// Checks `condition` (bare CEL, `{{args.…}}` already replaced) for names it cannot use.
pub fn check_analysis_condition(cache: &ExprCache, condition: &str) -> Result<(), ExprError> {
    let condition = condition.trim();
    let program = cache.compile(condition)?;
    let problem = |message: String| ExprError::Eval {
        field: None,
        expr: condition.to_owned(),
        message,
    };
    let mut found = Vec::new();
    super::explain::free_names(program.expression(), &mut Vec::new(), &mut found);
    if let Some(name) = found.iter().find(|n| n.as_str() != RESULT) {
        return Err(problem(format!(
            "no variable `{name}`: an analysis condition sees only `result` (and \
             `{{{{args.NAME}}}}`, replaced before it runs)"
        )));
    }
    let mut calls = BTreeSet::new();
    super::explain::visit(program.expression(), &mut |node| {
        if let Expr::Call(call) = &node.expr
            && call.target.is_none()
            && call
                .func_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            && call
                .func_name
                .starts_with(|c: char| c.is_ascii_alphabetic())
        {
            calls.insert((call.func_name.clone(), call.args.len()));
        }
    });
    for (name, arity) in calls {
        if !is_declared(cache, &name, arity) {
            return Err(problem(format!(
                "no function `{name}` in CEL (this template's conditions are CEL: use \
                 `size(result)`, or annotate it `dray.dev/expression-language: expr-lang` \
                 for Argo Rollouts' `len(result)`)"
            )));
        }
    }
    Ok(())
}

/// Whether CEL knows a global function `name` taking `arity` arguments of some type.
fn is_declared(cache: &ExprCache, name: &str, arity: usize) -> bool {
    let args = vec!["x"; arity].join(", ");
    let Ok(program) = cache.compile(&format!("{name}({args})")) else {
        return true; // not ours to judge: the condition itself compiled
    };
    let samples = [
        Value::Float(0.5),
        Value::List(vec![Value::Float(0.5)].into()),
        Value::String(String::from("s").into()),
        Value::Map(cel::objects::Map {
            map: Default::default(),
        }),
    ];
    samples.into_iter().any(|sample| {
        let mut context = cel::Context::with_env(cache.env());
        context.add_variable_from_value("x", sample);
        !matches!(
            on_cel_stack(|| program.execute(&context)),
            Err(ExecutionError::UndeclaredReference(ref n)) if n.as_str() == name
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_result_and_known_functions_pass() {
        let cache = ExprCache::new();
        for good in [
            "result[0] < 0.05",
            "size(result) > 0 && result[0] < 0.05",
            "result.all(x, x > 0.1)",
            "double(result) > 0.1",
        ] {
            assert!(
                check_analysis_condition(&cache, good).is_ok(),
                "{good}: {:?}",
                check_analysis_condition(&cache, good)
            );
        }
        let err = check_analysis_condition(&cache, "len(result) > 0").unwrap_err();
        assert!(err.to_string().contains("no function `len`"), "{err}");
        // Behind `&&` with a false side, where a trial run of the whole would not see it.
        let err =
            check_analysis_condition(&cache, "len(result) > 0 && result[0] < 0.05").unwrap_err();
        assert!(err.to_string().contains("no function `len`"), "{err}");
        let err = check_analysis_condition(&cache, "results[0] < 1.0").unwrap_err();
        assert!(err.to_string().contains("no variable `results`"), "{err}");
    }
}
