//! Expressions for steps: [`StepExprs`] implements `dray-steps`' [`ExprEvaluator`] over the
//! engine's [`Exprs`] in the promotion's language (CEL, or expr-lang for Kargo documents),
//! so a step (the `http` gate) can evaluate the expressions in its config against values it
//! produced (`response`).
//!
//! Owns only the bridge: compiling, caching and explaining errors are `crate::expr`'s. The
//! step's own variables go into [`ExprContext::extra`]; `ctx`, `vars`, `outputs` and
//! `task` of the step stay visible and take precedence.

use dray_steps::ExprEvaluator;
use serde_json::{Map, Value};

use super::exprs::Exprs;
use crate::expr::ExprContext;
use crate::expr::exprlang::ExprLanguage;

/// The evaluator one step gets: the shared caches, the promotion's language and the
/// step's expression context.
#[derive(Debug, Clone)]
pub struct StepExprs {
    exprs: Exprs,
    language: ExprLanguage,
    base: ExprContext,
}

impl StepExprs {
    /// An evaluator over `exprs` in `language` that sees what `base` holds (the step's
    /// `ctx`, `vars`, …).
    pub fn new(exprs: Exprs, language: ExprLanguage, base: ExprContext) -> Self {
        Self {
            exprs,
            language,
            base,
        }
    }

    fn context(&self, variables: &Map<String, Value>) -> ExprContext {
        let mut ctx = self.base.clone();
        ctx.extra.extend(variables.clone());
        ctx
    }
}

impl ExprEvaluator for StepExprs {
    fn condition(&self, expression: &str, variables: &Map<String, Value>) -> Result<bool, String> {
        self.exprs
            .evaluate_condition(self.language, expression, &self.context(variables))
    }

    fn evaluate(&self, expression: &str, variables: &Map<String, Value>) -> Result<Value, String> {
        let ctx = self.context(variables);
        if Exprs::has_expressions(self.language, expression) {
            self.exprs.evaluate_string(self.language, expression, &ctx)
        } else {
            self.exprs
                .evaluate_expression(self.language, expression.trim(), &ctx)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(status: i64, body: Value) -> Map<String, Value> {
        let mut vars = Map::new();
        vars.insert("response".into(), json!({"status": status, "body": body}));
        vars
    }

    #[test]
    fn response_integers_are_cel_ints() {
        let exprs = StepExprs::new(Exprs::new(), ExprLanguage::Cel, ExprContext::default());
        let vars = response(200, json!({"ready": 3}));
        assert!(exprs.condition("response.status == 200", &vars).unwrap());
        assert!(
            exprs
                .condition("response.body.ready + 1 == 4", &vars)
                .unwrap()
        );
        assert!(!exprs.condition("response.status >= 500", &vars).unwrap());
        assert_eq!(
            exprs.evaluate("response.body.ready * 2", &vars).unwrap(),
            json!(6)
        );
    }

    #[test]
    fn the_step_context_stays_visible_and_errors_name_the_expression() {
        let base = ExprContext {
            stage: "prod".into(),
            ..ExprContext::default()
        };
        let exprs = StepExprs::new(Exprs::new(), ExprLanguage::Cel, base);
        let vars = response(200, json!({}));
        assert!(exprs.condition("ctx.stage == 'prod'", &vars).unwrap());
        let err = exprs.condition("response.status", &vars).unwrap_err();
        assert!(err.contains("must evaluate to a bool"), "{err}");
        let err = exprs.condition("response.body.missing", &vars).unwrap_err();
        assert!(err.contains("response.body.missing"), "{err}");
    }

    #[test]
    fn a_kargo_promotion_reads_its_gates_in_expr_lang() {
        let exprs = StepExprs::new(Exprs::new(), ExprLanguage::ExprLang, ExprContext::default());
        let vars = response(200, json!({"approved": true, "text": "version=1.4.0 "}));
        assert!(
            exprs
                .condition(
                    "response.status == 200 && response.body.approved == true",
                    &vars
                )
                .unwrap()
        );
        assert!(
            exprs
                .condition("response.body.text contains \"version=1.4.0 \"", &vars)
                .unwrap()
        );
        // `contains` is expr-lang's operator, not CEL's.
        let cel = StepExprs::new(Exprs::new(), ExprLanguage::Cel, ExprContext::default());
        assert!(
            cel.condition("response.body.text contains \"version\"", &vars)
                .is_err()
        );
    }
}
