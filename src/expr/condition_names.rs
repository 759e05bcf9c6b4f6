//! The apply-time name check of a CEL AnalysisTemplate condition: it may read only
//! `result`, and call only functions CEL knows. Variables are found in the parsed
//! expression (exactly); unknown functions by trial runs over a few shapes of `result`
//! (a list of numbers, a number, an object), so a call behind a branch none of them takes
//! is found when the analysis runs.

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
    let samples = [
        Value::List(vec![Value::Float(0.5)].into()),
        Value::Float(0.5),
        Value::Map(cel::objects::Map {
            map: Default::default(),
        }),
    ];
    for sample in samples {
        let mut context = cel::Context::with_env(cache.env());
        context.add_variable_from_value(RESULT, sample);
        if let Err(ExecutionError::UndeclaredReference(name)) =
            on_cel_stack(|| program.execute(&context))
        {
            return Err(problem(format!(
                "no function `{name}` in CEL (this template's conditions are CEL: use \
                 `size(result)`, or annotate it `dray.dev/expression-language: expr-lang` \
                 for Argo Rollouts' `len(result)`)"
            )));
        }
    }
    Ok(())
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
        let err = check_analysis_condition(&cache, "results[0] < 1.0").unwrap_err();
        assert!(err.to_string().contains("no variable `results`"), "{err}");
    }
}
