//! The two expression languages a promotion's steps may be written in, behind one
//! evaluator: CEL for Dray's own documents, expr-lang for Kargo's (`kargo.akuity.io`
//! documents, whose Promotions carry the `dray.dev/expression-language: expr-lang`
//! annotation copied from their Stage). The engine and the steps' own expressions
//! ([`super::step_exprs::StepExprs`]) ask this with the promotion's [`ExprLanguage`]; they
//! never call a language directly.

use std::sync::Arc;

use serde_json::Value;

use crate::expr::exprlang::{ExprLangEngine, ExprLanguage, KargoHost, expr_to_json};
use crate::expr::{ExprCache, ExprContext};

/// Both languages' compiled-program caches, shared by every promotion.
#[derive(Debug, Clone, Default)]
pub struct Exprs {
    cel: ExprCache,
    exprlang: Arc<ExprLangEngine>,
}

/// What Kargo's functions look up outside the Freight during a promotion. Freight and
/// Stage metadata come from the expression context (the engine loads them before a step
/// that asks). Secrets and ConfigMaps are not kept by Dray: `dray apply` refuses a Kargo
/// document calling `secret()` or `configMap()` (docs/kargo-compatibility.md), so they
/// answer as Kargo's do when there is nothing (an empty map) only for a stored document
/// older than that check.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromotionHost;

impl KargoHost for PromotionHost {}

impl Exprs {
    /// Empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every string of a step's `config`, evaluated as templates.
    pub fn evaluate_value(
        &self,
        language: ExprLanguage,
        value: &Value,
        ctx: &ExprContext,
    ) -> Result<Value, String> {
        match language {
            ExprLanguage::Cel => self
                .cel
                .evaluate_value(value, ctx)
                .map_err(|e| e.to_string()),
            ExprLanguage::ExprLang => self
                .exprlang
                .evaluate_value(value, ctx, &PromotionHost)
                .map_err(|e| e.to_string()),
        }
    }

    /// One template string (a variable's value).
    pub fn evaluate_string(
        &self,
        language: ExprLanguage,
        text: &str,
        ctx: &ExprContext,
    ) -> Result<Value, String> {
        match language {
            ExprLanguage::Cel => self
                .cel
                .evaluate_string(text, ctx)
                .map_err(|e| e.to_string()),
            ExprLanguage::ExprLang => self
                .exprlang
                .evaluate_string(text, ctx, &PromotionHost)
                .map_err(|e| e.to_string()),
        }
    }

    /// A condition (a step's `if`, an HTTP gate's success expression), with or without
    /// delimiters; it must be a bool.
    pub fn evaluate_condition(
        &self,
        language: ExprLanguage,
        text: &str,
        ctx: &ExprContext,
    ) -> Result<bool, String> {
        match language {
            ExprLanguage::Cel => self
                .cel
                .evaluate_condition(text, ctx)
                .map_err(|e| e.to_string()),
            ExprLanguage::ExprLang => self
                .exprlang
                .evaluate_condition(text, ctx, &PromotionHost)
                .map_err(|e| e.to_string()),
        }
    }

    /// One bare expression (no delimiters), as JSON.
    pub fn evaluate_expression(
        &self,
        language: ExprLanguage,
        source: &str,
        ctx: &ExprContext,
    ) -> Result<Value, String> {
        match language {
            ExprLanguage::Cel => self
                .cel
                .evaluate_expression(source, ctx)
                .map_err(|e| e.to_string()),
            ExprLanguage::ExprLang => self
                .exprlang
                .evaluate_expression(source, ctx, &PromotionHost)
                .map_err(|e| e.to_string())
                .and_then(|value| expr_to_json(&value)),
        }
    }

    /// Whether `text` holds template delimiters in `language` (`${{ }}` in both; expr-lang
    /// also reads `${% %}`).
    pub fn has_expressions(language: ExprLanguage, text: &str) -> bool {
        match language {
            ExprLanguage::Cel => crate::expr::has_expressions(text),
            ExprLanguage::ExprLang => crate::expr::exprlang::has_kargo_expressions(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::FreightImage;
    use crate::expr::FreightView;

    fn ctx() -> ExprContext {
        ExprContext {
            stage: "dev".into(),
            freight: FreightView {
                images: vec![FreightImage {
                    repo_url: "registry.example.com/myapp".into(),
                    tag: "1.4.0".into(),
                    digest: "sha256:ab".into(),
                    ..Default::default()
                }],
                ..FreightView::default()
            },
            ..ExprContext::default()
        }
    }

    #[test]
    fn each_language_reads_its_own_field_names_and_operators() {
        let exprs = Exprs::new();
        let kargo = exprs.evaluate_value(
            ExprLanguage::ExprLang,
            &json!({"tag": "${{ imageFrom(\"registry.example.com/myapp\").Tag + \"@\" + imageFrom(\"registry.example.com/myapp\").Digest }}",
                    "branch": "stage/${{ ctx.stage }}"}),
            &ctx(),
        );
        assert_eq!(
            kargo.unwrap(),
            json!({"tag": "1.4.0@sha256:ab", "branch": "stage/dev"})
        );
        let dray = exprs.evaluate_string(
            ExprLanguage::Cel,
            "${{ imageFrom(\"registry.example.com/myapp\").tag }}",
            &ctx(),
        );
        assert_eq!(dray.unwrap(), json!("1.4.0"));
        // Kargo's spelling is not Dray's, and the reverse.
        assert!(
            exprs
                .evaluate_string(
                    ExprLanguage::Cel,
                    "${{ imageFrom(\"registry.example.com/myapp\").Tag }}",
                    &ctx()
                )
                .is_err()
        );
        assert!(
            exprs
                .evaluate_condition(ExprLanguage::ExprLang, "\"dev\" in [ctx.stage]", &ctx())
                .unwrap()
        );
        assert_eq!(
            exprs
                .evaluate_expression(ExprLanguage::ExprLang, "ctx.stage + \"-x\"", &ctx())
                .unwrap(),
            json!("dev-x")
        );
    }
}
