//! Expressions: CEL inside `${{ … }}` in the strings of promotion step configs, and step
//! `if` conditions; Warehouse `freightCreationCriteria` and subscription `expressionFilter`s.
//!
//! This module owns parsing templates, compiling (once, in an [`ExprCache`]), evaluating
//! against an [`ExprContext`] and Dray's functions. It does not decide which strings are
//! evaluated or when (the promotion engine does), nor merge `vars` (the caller does).
//!
//! - `template.rs`: split a string into text and `${{ }}` expressions;
//! - `compile.rs`: the cache, and syntax validation for `dray apply`;
//! - `context.rs`: the variables (`ctx`, `vars`, `outputs`, `task`), JSON ↔ CEL;
//! - `functions.rs`: `imageFrom`, `commitFrom`, `chartFrom`, `quote`, `success`, `failure`, `always`,
//!   `status`, `freightMetadata`, `stageMetadata`;
//! - `eval.rs`: evaluating values, strings and conditions; `explain.rs`: runtime errors;
//! - `predicate.rs`: Warehouse criteria and subscription filters (a [`Verdict`], and the
//!   apply-time [`check_predicate`]); `why.rs`: why a condition is false;
//! - `exprlang/`: expr-lang, for Kargo's and Argo Rollouts' documents (an
//!   [`ExprLanguage`](exprlang::ExprLanguage) per document).
//!
//! ```
//! use dray::expr::{ExprCache, ExprContext};
//! use serde_json::json;
//!
//! let cache = ExprCache::new();
//! let mut ctx = ExprContext::default();
//! ctx.vars.insert("replicas".into(), json!(2));
//! let config = json!({"count": "${{ vars.replicas + 1 }}", "name": "app-${{ vars.replicas }}"});
//! let out = cache.evaluate_value(&config, &ctx).unwrap();
//! assert_eq!(out, json!({"count": 3, "name": "app-2"}));
//! ```

mod compile;
mod condition_names;
mod context;
mod error;
mod eval;
mod explain;
pub mod exprlang;
mod functions;
mod predicate;
mod template;
mod why;

pub(crate) use compile::on_cel_stack;
pub use compile::{ExprCache, validate_condition, validate_template, validate_value};
pub use condition_names::check_analysis_condition;
pub use context::{ExprContext, FreightView, MetadataView, cel_to_json, json_to_cel};
pub use error::ExprError;
pub use predicate::{
    COMMIT_FIELDS, IMAGE_FIELDS, KARGO_COMMIT_FIELDS, PredicateCache, PredicateScope, Verdict,
    check_filter, check_predicate, commit_fields,
};
pub use template::{ExprSegment, Segment, Template, has_expressions, to_text};

/// The condition of a step without `if`: run unless an earlier step failed.
pub const DEFAULT_CONDITION: &str = "success()";
