//! Compiling: the [`ExprCache`] (each expression compiled once, shared by clones and
//! threads) and the syntax checks `dray apply` runs before accepting a resource
//! ([`validate_template`], [`validate_condition`], [`validate_value`]).
//!
//! Validation is syntax only: an unknown variable or function is found when the step runs.
//! Evaluating lives in `eval.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use cel::{Env, ParseErrors, Program};
use serde_json::Value;

use super::ExprError;
use super::template::{MAX_NESTING, MAX_OPERATORS, Template, has_expressions, shape};

/// The CEL environment: the standard library and the strings extension.
pub(crate) fn new_env() -> Env {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .unwrap_or_else(|err| panic!("CEL strings extension: {err}"));
    env
}

/// The environment of validation, which needs no cache.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(new_env()));

/// Compiled programs by expression text. Cheap to clone: clones share the programs.
#[derive(Clone)]
pub struct ExprCache {
    inner: Arc<Inner>,
}

struct Inner {
    env: Arc<Env>,
    programs: RwLock<HashMap<String, Arc<Program>>>,
    compilations: AtomicUsize,
}

impl ExprCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                env: Arc::clone(&ENV),
                programs: RwLock::default(),
                compilations: AtomicUsize::new(0),
            }),
        }
    }

    /// The program for `expr` (CEL source, without `${{ }}`), compiled on first use.
    /// Syntax errors are not cached.
    pub fn compile(&self, expr: &str) -> Result<Arc<Program>, ExprError> {
        let programs = &self.inner.programs;
        if let Some(program) = programs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(expr)
        {
            return Ok(Arc::clone(program));
        }
        // Compile under the write lock, so that each expression is compiled once.
        let mut programs = programs.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(program) = programs.get(expr) {
            return Ok(Arc::clone(program));
        }
        self.inner.compilations.fetch_add(1, Ordering::Relaxed);
        let program = Arc::new(compile_with(&self.inner.env, expr)?);
        programs.insert(expr.to_owned(), Arc::clone(&program));
        Ok(program)
    }

    /// How many times a program was compiled: each expression counts once.
    pub fn compilations(&self) -> usize {
        self.inner.compilations.load(Ordering::Relaxed)
    }

    /// How many programs the cache holds.
    pub fn len(&self) -> usize {
        self.inner
            .programs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the cache holds no program.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The environment evaluations run in.
    pub(crate) fn env(&self) -> Arc<Env> {
        Arc::clone(&self.inner.env)
    }
}

impl Default for ExprCache {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ExprCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExprCache")
            .field("programs", &self.len())
            .field("compilations", &self.compilations())
            .finish()
    }
}

fn compile_with(env: &Env, expr: &str) -> Result<Program, ExprError> {
    let shape = shape(expr);
    let too_large = |at: usize, message: String| {
        let before = &expr[..at];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        ExprError::Syntax {
            field: None,
            expr: expr.to_owned(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message,
        }
    };
    if shape.depth > MAX_NESTING {
        return Err(too_large(
            shape.depth_at,
            format!(
                "brackets and conditionals nest {} deep, more than the {MAX_NESTING} allowed; \
                 hint: split the expression, e.g. into `vars`",
                shape.depth
            ),
        ));
    }
    if shape.operators > MAX_OPERATORS {
        return Err(too_large(
            shape.operators_at,
            format!(
                "the expression has {} operators, more than the {MAX_OPERATORS} allowed; hint: \
                 split the expression, e.g. into `vars`",
                shape.operators
            ),
        ));
    }
    on_cel_stack(|| env.compile(expr)).map_err(|errors| syntax_error(expr, &errors))
}

/// The stack CEL's parser and interpreter get for one expression: enough for the deepest
/// and longest one accepted ([`MAX_NESTING`], [`MAX_OPERATORS`]) in a debug build, whose
/// frames are the largest, with room to spare.
const CEL_STACK: usize = 64 << 20;

/// Runs `f` (parsing or evaluating CEL) with at least [`CEL_STACK`] of stack: on a stack of
/// its own when the thread has less left (a Tokio worker has 2 MiB). The memory is
/// reserved, not used: pages are only touched as deep as the expression goes.
pub(crate) fn on_cel_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(CEL_STACK, CEL_STACK, f)
}

/// The first of CEL's parse errors (the others usually follow from it).
fn syntax_error(expr: &str, errors: &ParseErrors) -> ExprError {
    let (line, column, message) = match errors.errors.first() {
        Some(err) => {
            let message = err.msg.strip_prefix("Syntax error: ").unwrap_or(&err.msg);
            (err.pos.0, err.pos.1, message.to_owned())
        }
        None => (1, 1, "invalid expression".to_owned()),
    };
    ExprError::Syntax {
        field: None,
        expr: expr.to_owned(),
        line: usize::try_from(line).unwrap_or(1).max(1),
        column: usize::try_from(column).unwrap_or(1).max(1),
        message,
    }
}

/// Checks the syntax of every `${{ }}` in `text`; the first error, if any.
pub fn validate_template(text: &str) -> Result<(), ExprError> {
    match template_errors(text).into_iter().next() {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// All the syntax errors of `text`: an unterminated `${{`, or one per invalid expression.
fn template_errors(text: &str) -> Vec<ExprError> {
    if !has_expressions(text) {
        return Vec::new();
    }
    match Template::parse(text) {
        Ok(template) => template
            .expressions()
            .flat_map(|expr| expression_errors(&expr.source))
            .collect(),
        Err(err) => vec![err],
    }
}

/// A syntax error in one bare expression, else the result fields it reads that do not exist
/// (see [`super::exprlang::check_cel_result_fields`]).
fn expression_errors(source: &str) -> Vec<ExprError> {
    if let Err(error) = compile_with(&ENV, source) {
        return vec![error];
    }
    super::exprlang::check_cel_result_fields(source)
        .into_iter()
        .map(|issue| ExprError::UnknownField {
            field: None,
            expr: source.trim().to_owned(),
            message: issue.message,
        })
        .collect()
}

/// Checks a step condition (`if`), written with or without `${{ }}`.
pub fn validate_condition(text: &str) -> Result<(), ExprError> {
    if has_expressions(text) {
        validate_template(text)
    } else {
        expression_errors(text.trim())
            .into_iter()
            .next()
            .map_or(Ok(()), Err)
    }
}

/// All the syntax errors in the strings of a JSON value (e.g. a step `config` as `field`),
/// each with its field path: `config.checkout[0].commit`. Keys are not expressions.
pub fn validate_value(value: &Value, field: &str) -> Vec<ExprError> {
    let mut errors = Vec::new();
    walk(value, field, &mut errors);
    errors
}

fn walk(value: &Value, field: &str, errors: &mut Vec<ExprError>) {
    match value {
        Value::String(text) => errors.extend(
            template_errors(text)
                .into_iter()
                .map(|err| err.in_field(field)),
        ),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{field}[{i}]"), errors);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                walk(item, &join_field(field, key), errors);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `parent.key`, or `key` at the root.
pub(crate) fn join_field(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cache_compiles_each_expression_once() {
        let cache = ExprCache::new();
        let clone = cache.clone();
        for _ in 0..3 {
            cache.compile("vars.a + 1").unwrap();
            clone.compile("vars.a + 1").unwrap();
        }
        cache.compile("vars.b").unwrap();
        assert_eq!(cache.compilations(), 2);
        assert_eq!(clone.len(), 2);
    }

    #[test]
    fn a_kargo_field_name_in_a_dray_expression_is_refused_before_it_runs() {
        let config = json!({"message": "deploy ${{ commitFrom(vars.repo).ID }}",
                            "ok": "${{ commitFrom(vars.repo).id }}"});
        let errors = validate_value(&config, "config");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field(), Some("config.message"));
        assert!(
            errors[0]
                .to_string()
                .ends_with("it has no field `ID`; did you mean `id`?"),
            "{}",
            errors[0]
        );
        let condition = validate_condition("imageFrom(vars.repo).Tag == '1.0'").unwrap_err();
        assert!(
            condition.to_string().contains("did you mean `tag`?"),
            "{condition}"
        );
        assert!(validate_condition("imageFrom(vars.repo).tag == '1.0'").is_ok());
    }

    #[test]
    fn the_cache_is_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ExprCache>();
        let cache = ExprCache::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| cache.compile("1 + 2").unwrap());
            }
        });
        assert_eq!(cache.compilations(), 1);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = ExprCache::new().compile("vars.a +").unwrap_err();
        assert_eq!(err.position(), Some((1, 9)), "{err}");
        let err = validate_template("x ${{ a\n  + + b }}").unwrap_err();
        assert_eq!(err.position(), Some((2, 5)), "{err}");
        assert!(validate_template("${{ vars.a }}-${{ ctx.stage }}").is_ok());
        assert!(validate_template("no expressions }}").is_ok());
    }

    #[test]
    fn validate_value_finds_every_field_path() {
        let config = json!({
            "checkout": [
                {"commit": "${{ commitFrom(vars.repo).id }}"},
                {"commit": "${{ commitFrom(vars.repo)..id }}"},
            ],
            "path": "${{ vars.a }",
            "${{ keys are not checked": 1,
            "n": 3,
        });
        let errors = validate_value(&config, "config");
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(errors[0].field(), Some("config.checkout[1].commit"));
        assert_eq!(errors[0].position(), Some((1, 23)), "{}", errors[0]);
        assert!(errors[0].to_string().starts_with(
            "`config.checkout[1].commit`: syntax error in expression \
             `commitFrom(vars.repo)..id` at line 1, column 23"
        ));
        assert_eq!(errors[1].field(), Some("config.path"));
        assert!(matches!(
            errors[1],
            ExprError::Unterminated { column: 1, .. }
        ));
        assert!(validate_value(&json!({"a": ["${{ 1 }}"]}), "").is_empty());
    }

    #[test]
    fn conditions_may_omit_the_delimiters() {
        assert!(validate_condition("success() && vars.deploy").is_ok());
        assert!(validate_condition("${{ failure() }}").is_ok());
        assert!(validate_condition("status('clone') ==").is_err());
    }

    /// Runs `f` on a thread with a Tokio worker's stack (2 MiB), as the server would.
    fn on_worker_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(f)
            .expect("a thread")
            .join()
            .expect("no panic");
    }

    /// Found by fuzzing: CEL's parser recursed past a 2 MiB stack on 16 nested brackets (a
    /// debug build), and on thousands in any build: the process aborted.
    #[test]
    fn fuzz_cel_nested_deep_is_an_error_not_a_stack_overflow() {
        on_worker_stack(|| {
            let cache = ExprCache::new();
            let ctx = crate::expr::ExprContext::default();
            for (open, close) in [("(", ")"), ("[", "]"), ("{1: ", "}"), ("size(", ")")] {
                // The deepest accepted compiles and runs on a worker's stack.
                let text = format!("{}1{}", open.repeat(MAX_NESTING), close.repeat(MAX_NESTING));
                assert!(validate_condition(&text).is_ok(), "{text}");
                let _ = cache.evaluate_expression(&text, &ctx);
                // Deeper is refused with the reason, before CEL parses it.
                for n in [MAX_NESTING + 1, 10_000] {
                    let text = format!("{}1{}", open.repeat(n), close.repeat(n));
                    let err = validate_condition(&text).unwrap_err().to_string();
                    assert!(err.contains("nest"), "{err}");
                    assert!(err.contains("split the expression"), "{err}");
                }
            }
            let ternaries = format!("true{}", " ? 1 : true".repeat(10_000));
            assert!(
                validate_condition(&ternaries)
                    .unwrap_err()
                    .to_string()
                    .contains("nest")
            );
            // Brackets inside strings do not count.
            let quoted = format!("'{}' == ''", "(".repeat(10_000));
            assert!(validate_condition(&quoted).is_ok());
        });
    }

    /// Found by fuzzing: a chain of 1,600 `+` (each one level of CEL's syntax tree)
    /// overflowed a 2 MiB stack.
    #[test]
    fn fuzz_cel_operator_chain_ten_thousand_long_is_an_error_not_a_stack_overflow() {
        on_worker_stack(|| {
            let cache = ExprCache::new();
            let ctx = crate::expr::ExprContext::default();
            for op in [" + 1", " || true", " == 1", "[0]", ".size()", " - -1"] {
                // The longest chain accepted, inside the deepest nesting accepted.
                let parens = MAX_NESTING - 1;
                let most = (MAX_OPERATORS - parens) / shape(op).operators;
                let text = format!(
                    "{}1{}{}",
                    "(".repeat(parens),
                    op.repeat(most),
                    ")".repeat(parens)
                );
                assert!(shape(&text).operators <= MAX_OPERATORS);
                assert!(validate_condition(&text).is_ok(), "{op}");
                let _ = cache.evaluate_expression(&text, &ctx);
                let text = format!("1{}", op.repeat(10_000));
                let err = validate_condition(&text).unwrap_err().to_string();
                assert!(
                    err.contains("operators, more than the 500 allowed"),
                    "{err}"
                );
            }
        });
    }
}
