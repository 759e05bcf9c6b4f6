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
use super::template::{Template, has_expressions};

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
    env.compile(expr)
        .map_err(|errors| syntax_error(expr, &errors))
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
            .filter_map(|expr| compile_with(&ENV, &expr.source).err())
            .collect(),
        Err(err) => vec![err],
    }
}

/// Checks a step condition (`if`), written with or without `${{ }}`.
pub fn validate_condition(text: &str) -> Result<(), ExprError> {
    if has_expressions(text) {
        validate_template(text)
    } else {
        compile_with(&ENV, text.trim()).map(drop)
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
}
