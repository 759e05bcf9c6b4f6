//! expr-lang, the expression language of Kargo and Argo Rollouts, beside the CEL that
//! Dray-native documents use: Kargo's templates (`${{ expr }}` and `${% expr %}`, the same
//! to Kargo) with Kargo's context shape and functions, and Argo Rollouts' AnalysisTemplate
//! conditions over `result`. Which language a document speaks is an [`ExprLanguage`],
//! chosen by its `apiVersion`.
//!
//! The `expr-lang` crate parses and evaluates (docs/decisions.md); this module owns the
//! rest:
//!
//! - `template.rs`: splitting a string on both delimiters, and Kargo's reading of the
//!   result (a whole-string number stays a number, `quote(…)` keeps a string);
//! - `engine.rs`: the [`ExprLangEngine`]: compiling once (length and nesting limits, so no
//!   input overflows the stack), evaluating values, strings, conditions and analysis
//!   conditions against the same [`ExprContext`](crate::expr::ExprContext) CEL uses;
//! - `functions.rs`: Kargo's functions and the one mapping from Dray's Freight shapes to
//!   Kargo's field names (`ID`, `Tag`, …); lookups outside the Freight via [`KargoHost`];
//! - `rollouts.rs`: Argo Rollouts' helpers (`asInt`, `asFloat`, `isNaN`, `isInf`, `isNil`,
//!   `default`) and [`AnalysisResult`];
//! - `semver.rs`: `semverParse`, `semverDiff`;
//! - `rewrite.rs`: source rewrites that make the crate read what Go's expr-lang reads
//!   (map literals with computed values, `.Major()`), and the range budget;
//! - `check.rs`: apply-time checks (syntax, unknown functions, variables and fields);
//! - `lexer.rs`: the tokens those checks read; `value.rs`: JSON ↔ expr-lang values and
//!   Go's JSON text; `error.rs`: [`ExprLangError`].
//!
//! ```
//! use dray::expr::ExprContext;
//! use dray::expr::exprlang::{ExprLangEngine, NoHost};
//! use serde_json::json;
//!
//! let engine = ExprLangEngine::new();
//! let mut ctx = ExprContext::default();
//! ctx.vars.insert("replicas".into(), json!(2));
//! let config = json!({"count": "${{ vars.replicas + 1 }}", "name": "app-${% vars.replicas %}"});
//! let out = engine.evaluate_value(&config, &ctx, &NoHost).unwrap();
//! assert_eq!(out, json!({"count": 3, "name": "app-2"}));
//! ```

mod check;
mod engine;
mod error;
mod functions;
mod lexer;
mod rewrite;
mod rollouts;
mod semver;
mod template;
mod value;

#[cfg(test)]
mod tests;

pub use check::{
    EXPR_LANG_BUILTINS, ExprLangIssue, IssueKind, KARGO_FUNCTIONS, KnownShapes,
    check_cel_result_fields, check_exprlang_condition, check_exprlang_expression,
    check_exprlang_template, check_exprlang_value, literal_calls,
};
pub use engine::ExprLangEngine;
pub use error::ExprLangError;
pub use functions::{
    KARGO_CHART_FIELDS, KARGO_COMMIT_FIELDS, KARGO_IMAGE_FIELDS, KARGO_ORIGIN_FIELDS,
    KARGO_SEMVER_FIELDS, KargoHost, NoHost, kargo_chart, kargo_commit, kargo_image,
};
pub use rollouts::{AnalysisResult, ROLLOUTS_FUNCTIONS};
pub use template::{Delimiter, Piece, coerce, has_kargo_expressions, split};
pub use value::{expr_to_json, json_to_expr, time_to_expr};

/// The longest expression accepted, in bytes: bounds the parser's and evaluator's
/// recursion (a chain of operators nests one level per operator).
pub const MAX_LENGTH: usize = 8192;

/// The deepest bracket nesting accepted.
pub const MAX_NESTING: usize = 64;

/// Which expression language a document's expressions are written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ExprLanguage {
    /// CEL: Dray's own documents (`dray.dev/…`).
    #[default]
    Cel,
    /// expr-lang: Kargo's (`kargo.akuity.io/…`) and Argo Rollouts' (`argoproj.io/…`).
    ExprLang,
}

impl ExprLanguage {
    /// The annotation that records, on a stored Dray object, the language its expressions
    /// were written in (when it came from a Kargo or Argo Rollouts document).
    pub const ANNOTATION: &'static str = "dray.dev/expression-language";

    /// The language of a document with `api_version`.
    pub fn for_api_version(api_version: &str) -> Self {
        let group = api_version.split('/').next().unwrap_or_default();
        match group {
            "kargo.akuity.io" | "argoproj.io" => ExprLanguage::ExprLang,
            _ => ExprLanguage::Cel,
        }
    }

    /// The annotation's value: `cel` or `expr-lang`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExprLanguage::Cel => "cel",
            ExprLanguage::ExprLang => "expr-lang",
        }
    }

    /// The language an annotation value names, if any.
    pub fn from_annotation(value: &str) -> Option<Self> {
        match value {
            "cel" => Some(ExprLanguage::Cel),
            "expr-lang" => Some(ExprLanguage::ExprLang),
            _ => None,
        }
    }

    /// The language recorded in `annotations` (CEL when none is).
    pub fn of_annotations(
        annotations: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Self {
        annotations
            .and_then(|a| a.get(Self::ANNOTATION))
            .and_then(|v| Self::from_annotation(v))
            .unwrap_or_default()
    }
}

impl std::fmt::Display for ExprLanguage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
