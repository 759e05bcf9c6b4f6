//! [`ExprLangEngine`]: compiling expr-lang once per expression (with the nesting and length
//! limits that keep any input from exhausting the stack), and evaluating Kargo templates,
//! step conditions and Argo Rollouts conditions against an [`ExprContext`].

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use expr::{Context, Environment, Program, Value};

use crate::expr::{ExprContext, on_cel_stack};

use super::functions::{KargoHost, NoHost, add_common_functions, add_kargo_functions};
use super::lexer::{tokenize, too_deep};
use super::rewrite::{MAX_RANGE, oversized_range, rewrite};
use super::rollouts::{AnalysisResult, add_rollouts_functions};
use super::template::{Piece, coerce, has_kargo_expressions, split};
use super::value::{expr_to_json, go_json, type_name};
use super::{ExprLangError, MAX_LENGTH, MAX_NESTING};

/// The most programs a cache keeps; past it, it starts over.
const MAX_CACHED: usize = 4096;

/// Compiled expr-lang programs by source. Cheap to clone: clones share the programs.
#[derive(Clone, Default)]
pub struct ExprLangEngine {
    programs: Arc<RwLock<HashMap<String, Arc<Program>>>>,
}

impl std::fmt::Debug for ExprLangEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExprLangEngine")
            .field("programs", &self.len())
            .finish()
    }
}

impl ExprLangEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many programs are cached.
    pub fn len(&self) -> usize {
        self.programs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no program is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The program for `source` (without delimiters), compiled on first use.
    pub fn compile(&self, source: &str) -> Result<Arc<Program>, ExprLangError> {
        if let Some(program) = self
            .programs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(source)
        {
            return Ok(Arc::clone(program));
        }
        let program = Arc::new(compile_source(source)?);
        let mut programs = self
            .programs
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if programs.len() >= MAX_CACHED {
            programs.clear();
        }
        programs.insert(source.to_owned(), Arc::clone(&program));
        Ok(program)
    }

    /// Evaluates every string in `value` (a step `config`) as a Kargo template; keys are
    /// kept as they are.
    pub fn evaluate_value(
        &self,
        value: &serde_json::Value,
        ctx: &ExprContext,
        host: &dyn KargoHost,
    ) -> Result<serde_json::Value, ExprLangError> {
        let scope = Scope::promotion(ctx, host);
        self.value(value, &scope)
    }

    /// Evaluates one string as Kargo does: itself without a delimiter; else each
    /// expression's result in place (a string as is, anything else as JSON), and the whole
    /// read back as a number, bool, JSON or text (see `template.rs`).
    pub fn evaluate_string(
        &self,
        text: &str,
        ctx: &ExprContext,
        host: &dyn KargoHost,
    ) -> Result<serde_json::Value, ExprLangError> {
        let scope = Scope::promotion(ctx, host);
        self.string(text, &scope)
    }

    /// Evaluates a step's `if`, written with or without delimiters; it must be a bool.
    pub fn evaluate_condition(
        &self,
        text: &str,
        ctx: &ExprContext,
        host: &dyn KargoHost,
    ) -> Result<bool, ExprLangError> {
        let scope = Scope::promotion(ctx, host);
        if has_kargo_expressions(text) {
            match self.string(text, &scope)? {
                serde_json::Value::Bool(b) => Ok(b),
                other => Err(ExprLangError::NotBool {
                    expr: text.trim().to_owned(),
                    got: format!("`{other}`"),
                }),
            }
        } else {
            let value = self.run(text.trim(), &scope)?;
            as_bool(text.trim(), &value)
        }
    }

    /// Evaluates bare expr-lang source with the promotion's variables; the raw result.
    pub fn evaluate_expression(
        &self,
        source: &str,
        ctx: &ExprContext,
        host: &dyn KargoHost,
    ) -> Result<Value, ExprLangError> {
        self.run(source, &Scope::promotion(ctx, host))
    }

    /// Evaluates a Warehouse predicate written in a Kargo document: a subscription's
    /// `expressionFilter` over one candidate's `variables` (a commit's or tag's fields,
    /// times as expr-lang times), or `freightCreationCriteria.expression` over `artifacts`
    /// through `imageFrom()`, `commitFrom()` and `chartFrom()`; it must be a bool.
    pub fn evaluate_predicate(
        &self,
        source: &str,
        variables: &[(&str, Value)],
        artifacts: &ExprContext,
    ) -> Result<bool, ExprLangError> {
        let mut context = Context::default();
        for (name, value) in variables {
            context.insert(*name, value.clone());
        }
        let mut env = Environment::new();
        add_kargo_functions(&mut env, artifacts, &NoHost);
        let scope = Scope { context, env };
        let value = self.run(source.trim(), &scope)?;
        as_bool(source.trim(), &value)
    }

    /// Evaluates an Argo Rollouts `successCondition`/`failureCondition` with `result`
    /// bound; it must be a bool.
    pub fn evaluate_analysis_condition(
        &self,
        condition: &str,
        result: AnalysisResult<'_>,
    ) -> Result<bool, ExprLangError> {
        let scope = Scope::analysis(result);
        let value = self.run(condition.trim(), &scope)?;
        as_bool(condition.trim(), &value)
    }

    fn value(
        &self,
        value: &serde_json::Value,
        scope: &Scope<'_>,
    ) -> Result<serde_json::Value, ExprLangError> {
        Ok(match value {
            serde_json::Value::String(text) => self.string(text, scope)?,
            serde_json::Value::Array(items) => serde_json::Value::Array(
                items
                    .iter()
                    .map(|item| self.value(item, scope))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::Object(fields) => {
                let mut out = serde_json::Map::new();
                for (key, item) in fields {
                    out.insert(key.clone(), self.value(item, scope)?);
                }
                serde_json::Value::Object(out)
            }
            other => other.clone(),
        })
    }

    fn string(&self, text: &str, scope: &Scope<'_>) -> Result<serde_json::Value, ExprLangError> {
        if !has_kargo_expressions(text) {
            return Ok(serde_json::Value::String(text.to_owned()));
        }
        let mut out = String::new();
        for piece in split(text)? {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Expr { source, .. } => match self.run(source, scope)? {
                    Value::String(s) => out.push_str(&s),
                    other => {
                        let json = expr_to_json(&other).map_err(|what| ExprLangError::NotJson {
                            expr: source.trim().to_owned(),
                            what,
                            hint: "convert it, e.g. with `string(…)`".into(),
                        })?;
                        out.push_str(&go_json(&json));
                    }
                },
            }
        }
        Ok(coerce(out))
    }

    fn run(&self, source: &str, scope: &Scope<'_>) -> Result<Value, ExprLangError> {
        let program = self.compile(source)?;
        let run = std::panic::AssertUnwindSafe(|| scope.env.run(&program, &scope.context));
        match on_cel_stack(|| std::panic::catch_unwind(run)) {
            Ok(result) => result.map_err(|e| ExprLangError::eval(source.trim(), e.to_string())),
            Err(_) => Err(ExprLangError::eval(
                source.trim(),
                "the expr-lang evaluator failed (an internal error)",
            )),
        }
    }
}

fn as_bool(source: &str, value: &Value) -> Result<bool, ExprLangError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(ExprLangError::NotBool {
            expr: source.to_owned(),
            got: format!("a {} (`{other}`)", type_name(other)),
        }),
    }
}

/// What one evaluation sees: the variables, and the functions (built once per scope).
struct Scope<'a> {
    context: Context,
    env: Environment<'a>,
}

impl<'a> Scope<'a> {
    /// A promotion's variables in Kargo's shape: `ctx` (with `targetFreight.name` and
    /// `.origin.name`, `meta.promotion.actor` and `.rollback`), `vars`, `outputs`, `task`.
    fn promotion(ctx: &'a ExprContext, host: &'a dyn KargoHost) -> Self {
        let mut variables = ctx.variables();
        if let Some(serde_json::Value::Object(fields)) = variables.get_mut("ctx") {
            fields.insert(
                "meta".into(),
                serde_json::json!({"promotion": {"actor": ctx.actor, "rollback": host.rollback()}}),
            );
        }
        let mut context = Context::default();
        for (name, value) in &variables {
            context.insert(name.clone(), super::value::json_to_expr(value));
        }
        let mut env = Environment::new();
        add_kargo_functions(&mut env, ctx, host);
        Self { context, env }
    }

    fn analysis(result: AnalysisResult<'_>) -> Self {
        let mut context = Context::default();
        context.insert("result", result.to_expr());
        let mut env = Environment::new();
        add_common_functions(&mut env);
        add_rollouts_functions(&mut env);
        Self { context, env }
    }
}

/// Parses `source` after the length, nesting and range limits, with the rewrites of
/// `rewrite.rs`. A panic inside the crate is caught and reported as an error.
pub(crate) fn compile_source(source: &str) -> Result<Program, ExprLangError> {
    let shown = || shorten(source);
    if source.len() > MAX_LENGTH {
        return Err(ExprLangError::Syntax {
            expr: shown(),
            offset: MAX_LENGTH,
            message: format!("longer than {MAX_LENGTH} bytes"),
        });
    }
    let tokens = tokenize(source);
    if let Some(offset) = too_deep(&tokens, MAX_NESTING) {
        return Err(ExprLangError::TooDeep {
            expr: shown(),
            max: MAX_NESTING,
            offset,
        });
    }
    if let Some(offset) = oversized_range(&tokens) {
        return Err(ExprLangError::Syntax {
            expr: shown(),
            offset,
            message: format!("a range of more than {MAX_RANGE} numbers"),
        });
    }
    let rewritten = rewrite(source, &tokens);
    let compiled = on_cel_stack(|| std::panic::catch_unwind(|| expr::compile(&rewritten.text)));
    match compiled {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(err)) => Err(syntax(source, &err, |offset| {
            rewritten.source_offset(offset)
        })),
        Err(_) => Err(ExprLangError::Syntax {
            expr: shown(),
            offset: 0,
            message: "the expr-lang parser failed on this expression (an internal error)".into(),
        }),
    }
}

fn syntax(source: &str, err: &expr::Error, to_source: impl Fn(usize) -> usize) -> ExprLangError {
    let (offset, message) = match err {
        expr::Error::PestError(e) => {
            let offset = match e.location {
                pest::error::InputLocation::Pos(p) => p,
                pest::error::InputLocation::Span((start, _)) => start,
            };
            (to_source(offset), e.variant.message().into_owned())
        }
        other => (0, other.to_string()),
    };
    // offsets count from the expression as shown: without its leading blanks
    let lead = source.len() - source.trim_start().len();
    let offset = offset.saturating_sub(lead);
    ExprLangError::Syntax {
        expr: shorten(source),
        offset,
        message,
    }
}

fn shorten(source: &str) -> String {
    const SHOWN: usize = 120;
    if source.chars().count() <= SHOWN {
        return source.trim().to_owned();
    }
    let mut out: String = source.chars().take(SHOWN).collect();
    out.push('…');
    out
}
