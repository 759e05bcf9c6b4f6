//! [`ExprError`]: what can go wrong with a `${{ }}` expression, at apply time (syntax) or
//! while a promotion runs (evaluation).
//!
//! Syntax errors carry CEL's line and column *within the expression* (1-based) and, when
//! found in a JSON document, the field path (`config.checkout[0].commit`). Evaluation errors
//! name the expression and what failed; the caller adds the step alias. This module does
//! not explain CEL runtime errors: `explain.rs` turns them into messages.

use thiserror::Error;

/// An error parsing, compiling or evaluating an expression.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExprError {
    /// A `${{` without its closing `}}`.
    #[error(
        "{}unterminated `${{{{` at line {line}, column {column} of `{text}`; hint: close the \
         expression with `}}}}`",
        prefix(.field)
    )]
    Unterminated {
        /// The JSON field the text was found in, if known.
        field: Option<String>,
        /// The whole text.
        text: String,
        /// Line of the `${{` in the text, from 1.
        line: usize,
        /// Column (in characters) of the `${{` in its line, from 1.
        column: usize,
    },
    /// CEL could not parse an expression.
    #[error(
        "{}syntax error in expression `{expr}` at line {line}, column {column}: {message}",
        prefix(.field)
    )]
    Syntax {
        /// The JSON field the expression was found in, if known.
        field: Option<String>,
        /// The expression, without `${{ }}`.
        expr: String,
        /// Line in the expression, from 1.
        line: usize,
        /// Column in that line, from 1.
        column: usize,
        /// CEL's explanation.
        message: String,
    },
    /// Evaluating an expression failed.
    #[error("{}expression `{expr}` failed: {message}", prefix(.field))]
    Eval {
        /// The JSON field the expression was found in, if known.
        field: Option<String>,
        /// The expression, without `${{ }}`.
        expr: String,
        /// What failed, e.g. ``no such key `missing` in `vars` (known: repoURL)``.
        message: String,
    },
    /// An expression reads a field its value does not have (`commitFrom(r).ID`: Dray's
    /// results are lower-case), caught before anything runs.
    #[error("{}expression `{expr}`: {message}", prefix(.field))]
    UnknownField {
        /// The JSON field the expression was found in, if known.
        field: Option<String>,
        /// The expression, without `${{ }}`.
        expr: String,
        /// What is wrong, with "did you mean" when a field is close.
        message: String,
    },
    /// A step condition (`if`) that is not a bool.
    #[error("condition `{expr}` must evaluate to a bool, not {got}")]
    NotBool {
        /// The condition as written.
        expr: String,
        /// What it evaluated to.
        got: String,
    },
    /// An expression's result has no JSON form (e.g. a CEL type or non-UTF-8 bytes).
    #[error("{}expression `{expr}` evaluated to {what}, which has no JSON form", prefix(.field))]
    NotJson {
        /// The JSON field the expression was found in, if known.
        field: Option<String>,
        /// The expression, without `${{ }}`.
        expr: String,
        /// A description of the result.
        what: String,
    },
}

fn prefix(field: &Option<String>) -> String {
    match field {
        Some(field) if !field.is_empty() => format!("`{field}`: "),
        _ => String::new(),
    }
}

impl ExprError {
    /// The JSON field the error was found in, if known.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Unterminated { field, .. }
            | Self::Syntax { field, .. }
            | Self::Eval { field, .. }
            | Self::UnknownField { field, .. }
            | Self::NotJson { field, .. } => field.as_deref(),
            Self::NotBool { .. } => None,
        }
    }

    /// The same error, found in `field` (which replaces any field already set).
    pub fn in_field(mut self, new: impl Into<String>) -> Self {
        match &mut self {
            Self::Unterminated { field, .. }
            | Self::Syntax { field, .. }
            | Self::Eval { field, .. }
            | Self::UnknownField { field, .. }
            | Self::NotJson { field, .. } => *field = Some(new.into()),
            Self::NotBool { .. } => {}
        }
        self
    }

    /// `(line, column)` of a syntax error or an unterminated `${{`, from 1.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            Self::Unterminated { line, column, .. } | Self::Syntax { line, column, .. } => {
                Some((*line, *column))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field_and_position() {
        let err = ExprError::Syntax {
            field: None,
            expr: "a +".into(),
            line: 1,
            column: 4,
            message: "mismatched input '<EOF>'".into(),
        }
        .in_field("config.commit");
        assert_eq!(err.field(), Some("config.commit"));
        assert_eq!(err.position(), Some((1, 4)));
        assert_eq!(
            err.to_string(),
            "`config.commit`: syntax error in expression `a +` at line 1, column 4: \
             mismatched input '<EOF>'"
        );
        let err = ExprError::Unterminated {
            field: None,
            text: "a ${{ b".into(),
            line: 1,
            column: 3,
        };
        assert_eq!(
            err.to_string(),
            "unterminated `${{` at line 1, column 3 of `a ${{ b`; hint: close the expression \
             with `}}`"
        );
    }
}
