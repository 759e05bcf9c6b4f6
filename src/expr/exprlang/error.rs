//! [`ExprLangError`]: what can go wrong with an expr-lang expression (Kargo's `${{ }}` and
//! `${% %}`, Argo Rollouts' conditions), at apply time or while it is evaluated. Each names
//! the expression, the byte offset in it when known, the cause, and what to do next.

use thiserror::Error;

/// An error parsing, checking or evaluating an expr-lang expression.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExprLangError {
    /// A `${{` or `${%` without its closing delimiter.
    #[error(
        "unterminated `{open}` at offset {offset} of `{text}`; hint: close the expression with \
         `{close}`"
    )]
    Unterminated {
        /// The whole text.
        text: String,
        /// `${{` or `${%`.
        open: &'static str,
        /// `}}` or `%}`.
        close: &'static str,
        /// Byte offset of the opening delimiter in the text.
        offset: usize,
    },
    /// expr-lang could not parse an expression.
    #[error(
        "syntax error in expr-lang expression `{expr}` at offset {offset}: {message}; hint: fix \
         the expression (expr-lang syntax: https://expr-lang.org/docs/language-definition)"
    )]
    Syntax {
        /// The expression, without delimiters.
        expr: String,
        /// Byte offset in the expression.
        offset: usize,
        /// What the parser expected.
        message: String,
    },
    /// An expression nested deeper than [`super::MAX_NESTING`] brackets.
    #[error(
        "expr-lang expression `{expr}` nests brackets more than {max} deep at offset {offset}; \
         hint: split it, e.g. with `let`"
    )]
    TooDeep {
        /// The expression (shortened).
        expr: String,
        /// The most brackets allowed.
        max: usize,
        /// Where the limit was passed.
        offset: usize,
    },
    /// Evaluating an expression failed.
    #[error("expr-lang expression `{expr}` failed: {message}; hint: {hint}")]
    Eval {
        /// The expression, without delimiters.
        expr: String,
        /// What failed.
        message: String,
        /// What to do next.
        hint: String,
    },
    /// A condition that is not a bool.
    #[error(
        "condition `{expr}` must evaluate to a bool, not {got}; hint: compare the value, e.g. \
         `result[0] < 0.05`"
    )]
    NotBool {
        /// The condition as written.
        expr: String,
        /// What it gave (its expr-lang type and value).
        got: String,
    },
    /// The result of an expression has no JSON form (e.g. NaN, a date).
    #[error("expr-lang expression `{expr}` gave {what}, which has no JSON form; hint: {hint}")]
    NotJson {
        /// The expression.
        expr: String,
        /// What it gave.
        what: String,
        /// What to do next.
        hint: String,
    },
}

impl ExprLangError {
    /// An evaluation error of `expr`.
    pub(crate) fn eval(expr: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let hint = hint_for(&message);
        Self::Eval {
            expr: expr.to_owned(),
            message,
            hint,
        }
    }
}

/// What to do next after expr-lang's runtime `message`.
fn hint_for(message: &str) -> String {
    if message.starts_with("unknown variable") {
        "the variables are `ctx`, `vars`, `outputs` and `task` (`result` in a condition)".into()
    } else if message.starts_with("Unknown function") {
        "see docs/kargo-compatibility.md for the functions Dray provides".into()
    } else {
        "check the types of the values the expression reads, and guard missing ones with `??`"
            .into()
    }
}
