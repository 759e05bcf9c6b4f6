//! Apply-time checks of expr-lang expressions, pure and without evaluating: syntax (with
//! the offset), unknown functions, unknown top-level variables, unknown `ctx` fields, and
//! field names against the known result shapes (`commitFrom(…).id` is refused: Kargo's
//! commit has `ID`). Each [`ExprLangIssue`] carries its byte offset in the checked text
//! and the closest names as candidates, for the caller to phrase "did you mean".

use std::collections::HashSet;

use super::ExprLangError;
use super::engine::compile_source;
use super::functions::{
    KARGO_CHART_FIELDS, KARGO_COMMIT_FIELDS, KARGO_IMAGE_FIELDS, KARGO_ORIGIN_FIELDS,
    KARGO_SEMVER_FIELDS,
};
use super::lexer::{Token, TokenKind, tokenize};
use super::rollouts::ROLLOUTS_FUNCTIONS;
use super::template::{Piece, has_kargo_expressions, split};

/// expr-lang's builtin functions (as the `expr-lang` crate registers them; a test keeps
/// the list honest).
pub const EXPR_LANG_BUILTINS: &[&str] = &[
    "all",
    "any",
    "one",
    "none",
    "map",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "count",
    "sum",
    "reduce",
    "groupBy",
    "sort",
    "sortBy",
    "bitand",
    "bitor",
    "bitxor",
    "bitnand",
    "bitnot",
    "bitshl",
    "bitshr",
    "bitushr",
    "join",
    "first",
    "last",
    "take",
    "reverse",
    "uniq",
    "concat",
    "flatten",
    "int",
    "float",
    "string",
    "fromJSON",
    "toJSON",
    "keys",
    "values",
    "len",
    "type",
    "get",
    "toBase64",
    "fromBase64",
    "toPairs",
    "fromPairs",
    "max",
    "min",
    "abs",
    "ceil",
    "floor",
    "round",
    "mean",
    "median",
    "trim",
    "trimPrefix",
    "trimSuffix",
    "upper",
    "lower",
    "split",
    "splitAfter",
    "replace",
    "repeat",
    "indexOf",
    "lastIndexOf",
    "hasPrefix",
    "hasSuffix",
    "now",
    "duration",
    "timezone",
    "date",
];

/// Kargo's functions, as `functions.rs` provides them.
pub const KARGO_FUNCTIONS: &[&str] = &[
    "imageFrom",
    "commitFrom",
    "chartFrom",
    "warehouse",
    "quote",
    "unsafeQuote",
    "freightMetadata",
    "stageMetadata",
    "secret",
    "sharedSecret",
    "configMap",
    "sharedConfigMap",
    "status",
    "success",
    "failure",
    "always",
    "semverParse",
    "semverDiff",
];

/// Words of the language that are not names.
const KEYWORDS: &[&str] = &[
    "let",
    "in",
    "not",
    "and",
    "or",
    "true",
    "false",
    "nil",
    "if",
    "else",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
];

/// Functions whose last argument is a predicate over `#` (names there may be its fields).
const PREDICATE_FUNCTIONS: &[&str] = &[
    "all",
    "any",
    "one",
    "none",
    "map",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "count",
    "sum",
    "reduce",
    "groupBy",
    "sortBy",
];

/// The result shapes of the CEL functions of Dray's own documents (lower-case fields).
const CEL_SHAPES: &[(&str, &[&str])] = &[
    ("imageFrom", &["repoURL", "tag", "digest"]),
    (
        "commitFrom",
        &["repoURL", "id", "branch", "tag", "message", "author"],
    ),
    ("chartFrom", &["repoURL", "name", "version", "digest"]),
];

/// The functions whose result has a known shape, and its fields.
const SHAPES: &[(&str, &[&str])] = &[
    ("imageFrom", KARGO_IMAGE_FIELDS),
    ("commitFrom", KARGO_COMMIT_FIELDS),
    ("chartFrom", KARGO_CHART_FIELDS),
    ("warehouse", KARGO_ORIGIN_FIELDS),
    ("semverParse", KARGO_SEMVER_FIELDS),
];

/// What an expression may name where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownShapes {
    /// The top-level variables.
    pub variables: Vec<&'static str>,
    /// The functions besides expr-lang's builtins.
    pub functions: Vec<&'static str>,
    /// Whether `ctx` is Kargo's promotion context (its fields are checked).
    pub promotion_ctx: bool,
    /// The functions whose results have known fields, and those fields.
    pub results: &'static [(&'static str, &'static [&'static str])],
    /// Only fields are checked (CEL: its functions and variables are checked elsewhere).
    pub fields_only: bool,
}

impl KnownShapes {
    /// A promotion step's templates and `if`: `ctx`, `vars`, `outputs`, `task`, and
    /// Kargo's functions.
    pub fn promotion() -> Self {
        Self {
            variables: vec!["ctx", "vars", "outputs", "task"],
            functions: KARGO_FUNCTIONS.to_vec(),
            promotion_ctx: true,
            results: SHAPES,
            fields_only: false,
        }
    }

    /// An Argo Rollouts condition: `result`, and Argo Rollouts' helpers.
    pub fn analysis() -> Self {
        let mut functions = ROLLOUTS_FUNCTIONS.to_vec();
        functions.extend(["semverParse", "semverDiff"]);
        Self {
            variables: vec!["result"],
            functions,
            promotion_ctx: false,
            results: SHAPES,
            fields_only: false,
        }
    }

    /// A Warehouse predicate in a Kargo document: a subscription's `expressionFilter` over
    /// `variables` (a commit's or tag's fields), or with `artifact_functions`
    /// `freightCreationCriteria` over `imageFrom()`, `commitFrom()` and `chartFrom()`.
    pub fn predicate(variables: &[&'static str], artifact_functions: bool) -> Self {
        Self {
            variables: variables.to_vec(),
            functions: if artifact_functions {
                vec!["imageFrom", "commitFrom", "chartFrom"]
            } else {
                Vec::new()
            },
            promotion_ctx: false,
            results: SHAPES,
            fields_only: false,
        }
    }

    /// The field checks of Dray's CEL (`commitFrom(repo).id`: `.ID` is the mistake there).
    pub fn cel_results() -> Self {
        Self {
            variables: Vec::new(),
            functions: Vec::new(),
            promotion_ctx: false,
            results: CEL_SHAPES,
            fields_only: true,
        }
    }

    /// The same, with more top-level variables (e.g. `response` for an HTTP step).
    pub fn with_variables(mut self, more: &[&'static str]) -> Self {
        self.variables.extend_from_slice(more);
        self
    }
}

/// What kind of problem an issue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueKind {
    /// The text or expression does not parse (or passes a limit).
    Syntax,
    /// A function that does not exist.
    UnknownFunction,
    /// A top-level name that is not a variable.
    UnknownVariable,
    /// A field that the value it is read from does not have.
    UnknownField,
}

/// One problem in an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprLangIssue {
    /// What kind.
    pub kind: IssueKind,
    /// Byte offset in the checked text (the whole template, or the bare expression).
    pub offset: usize,
    /// The problem, as a sentence (with "did you mean" when there is a close name).
    pub message: String,
    /// The closest known names, best first (empty when none is close).
    pub candidates: Vec<String>,
}

/// Checks every `${{ }}`/`${% %}` expression in `text`; no delimiter, no issue.
pub fn check_exprlang_template(text: &str, shapes: &KnownShapes) -> Vec<ExprLangIssue> {
    if !has_kargo_expressions(text) {
        return Vec::new();
    }
    let pieces = match split(text) {
        Ok(pieces) => pieces,
        Err(err) => return vec![syntax_issue(&err, 0)],
    };
    let mut issues = Vec::new();
    for piece in pieces {
        if let Piece::Expr { source, offset, .. } = piece {
            issues.extend(
                check_exprlang_expression(source, shapes)
                    .into_iter()
                    .map(|mut i| {
                        i.offset += offset;
                        i
                    }),
            );
        }
    }
    issues
}

/// Checks a step condition (`if`) or an analysis condition: delimited or bare.
pub fn check_exprlang_condition(text: &str, shapes: &KnownShapes) -> Vec<ExprLangIssue> {
    if has_kargo_expressions(text) {
        check_exprlang_template(text, shapes)
    } else {
        check_exprlang_expression(text, shapes)
    }
}

/// Checks one bare expression (no delimiters); offsets are in `source`.
pub fn check_exprlang_expression(source: &str, shapes: &KnownShapes) -> Vec<ExprLangIssue> {
    if let Err(err) = compile_source(source) {
        let lead = source.len() - source.trim_start().len();
        return vec![syntax_issue(&err, lead)];
    }
    Names::new(tokenize(source), shapes).check()
}

/// The calls of `functions` in `source` whose first argument is a string literal, as
/// `(function, argument)`; a call without arguments gives an empty argument.
pub fn literal_calls(source: &str, functions: &[&str]) -> Vec<(String, String)> {
    let tokens = tokenize(source);
    let mut calls = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let is_call = token.kind == TokenKind::Ident
            && functions.contains(&token.text.as_str())
            && !(i > 0 && matches!(tokens[i - 1].text.as_str(), "." | "?."))
            && tokens.get(i + 1).is_some_and(|t| t.text == "(");
        if !is_call {
            continue;
        }
        match tokens.get(i + 2) {
            Some(arg) if arg.kind == TokenKind::Literal && is_quoted(&arg.text) => {
                calls.push((token.text.clone(), unquote(&arg.text)));
            }
            Some(close) if close.text == ")" => calls.push((token.text.clone(), String::new())),
            _ => {}
        }
    }
    calls
}

fn is_quoted(text: &str) -> bool {
    text.len() >= 2 && matches!(text.as_bytes()[0], b'\'' | b'"' | b'`')
}

/// A string literal's text without its quotes; `\\` and an escaped quote read as one
/// character, as in repository URLs.
fn unquote(text: &str) -> String {
    let inner = &text[1..text.len() - 1];
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Checks the result fields read in a CEL expression of a Dray document (bare, no
/// `${{ }}`) against Dray's lower-case shapes: `commitFrom(r).ID` is refused ("did you mean
/// `id`?"). Syntax, functions and variables are CEL's own checks.
pub fn check_cel_result_fields(source: &str) -> Vec<ExprLangIssue> {
    Names::new(tokenize(source), &KnownShapes::cel_results()).check()
}

/// Checks every string of a JSON value (a step `config`), each issue with its field path
/// relative to `value` (`checkout[0].commit`). Keys are not expressions.
pub fn check_exprlang_value(
    value: &serde_json::Value,
    shapes: &KnownShapes,
) -> Vec<(String, ExprLangIssue)> {
    let mut out = Vec::new();
    walk(value, String::new(), shapes, &mut out);
    out
}

fn walk(
    value: &serde_json::Value,
    path: String,
    shapes: &KnownShapes,
    out: &mut Vec<(String, ExprLangIssue)>,
) {
    match value {
        serde_json::Value::String(text) => {
            out.extend(
                check_exprlang_template(text, shapes)
                    .into_iter()
                    .map(|i| (path.clone(), i)),
            );
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{path}[{i}]"), shapes, out);
            }
        }
        serde_json::Value::Object(fields) => {
            for (key, item) in fields {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(item, path, shapes, out);
            }
        }
        _ => {}
    }
}

fn syntax_issue(err: &ExprLangError, lead: usize) -> ExprLangIssue {
    let offset = match err {
        ExprLangError::Syntax { offset, .. } => lead + offset,
        ExprLangError::TooDeep { offset, .. } | ExprLangError::Unterminated { offset, .. } => {
            *offset
        }
        _ => 0,
    };
    ExprLangIssue {
        kind: IssueKind::Syntax,
        offset,
        message: err.to_string(),
        candidates: Vec::new(),
    }
}

/// The fields of Kargo's `ctx` at `path` (`["ctx", "targetFreight"]`), if known.
fn ctx_fields(path: &[&str]) -> Option<&'static [&'static str]> {
    Some(match path {
        ["ctx"] => &[
            "project",
            "stage",
            "promotion",
            "actor",
            "targetFreight",
            "meta",
        ],
        ["ctx", "targetFreight"] => &["name", "origin", "id", "alias"],
        ["ctx", "targetFreight", "origin"] => &["kind", "name"],
        ["ctx", "meta"] => &["promotion"],
        ["ctx", "meta", "promotion"] => &["actor", "rollback"],
        _ => return None,
    })
}

/// The name checks over one expression's tokens.
struct Names<'a> {
    tokens: Vec<Token>,
    shapes: &'a KnownShapes,
    bound: HashSet<String>,
    issues: Vec<ExprLangIssue>,
}

impl<'a> Names<'a> {
    fn new(tokens: Vec<Token>, shapes: &'a KnownShapes) -> Self {
        let bound = tokens
            .windows(2)
            .filter(|w| w[0].text == "let" && w[1].kind == TokenKind::Ident)
            .map(|w| w[1].text.clone())
            .collect();
        Self {
            tokens,
            shapes,
            bound,
            issues: Vec::new(),
        }
    }

    fn text(&self, i: usize) -> &str {
        self.tokens.get(i).map_or("", |t| t.text.as_str())
    }

    fn is_member(&self, i: usize) -> bool {
        i > 0 && matches!(self.text(i - 1), "." | "?.")
    }

    fn check(mut self) -> Vec<ExprLangIssue> {
        // open brackets: the bracket, and whether it opens a predicate function's arguments
        let mut open: Vec<(String, bool)> = Vec::new();
        for i in 0..self.tokens.len() {
            let token = &self.tokens[i];
            match token.kind {
                TokenKind::Punct => {
                    match token.text.as_str() {
                        "(" | "[" | "{" => {
                            let predicate = token.text == "("
                                && i > 0
                                && PREDICATE_FUNCTIONS.contains(&self.text(i - 1));
                            open.push((token.text.clone(), predicate));
                        }
                        ")" | "]" | "}" => {
                            open.pop();
                        }
                        _ => {}
                    }
                    continue;
                }
                TokenKind::Literal => continue,
                TokenKind::Ident => {}
            }
            let name = token.text.clone();
            let offset = token.offset;
            if self.is_member(i) {
                self.field(i);
                continue;
            }
            if self.shapes.fields_only
                || KEYWORDS.contains(&name.as_str())
                || name.starts_with('#')
                || name == "$env"
            {
                continue;
            }
            if self.text(i + 1) == "(" {
                self.function(&name, offset);
                continue;
            }
            let in_map = open.last().is_some_and(|(b, _)| b == "{");
            if in_map
                && self.text(i + 1) == ":"
                && matches!(self.text(i.wrapping_sub(1)), "{" | ",")
            {
                continue; // a map literal's key
            }
            if self.bound.contains(&name) || open.iter().any(|(_, predicate)| *predicate) {
                continue;
            }
            if !self.shapes.variables.contains(&name.as_str()) {
                let known: Vec<&str> = self.shapes.variables.clone();
                let candidates = closest(&name, &known);
                let list = known
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                self.issues.push(ExprLangIssue {
                    kind: IssueKind::UnknownVariable,
                    offset,
                    message: format!(
                        "unknown variable `{name}`: the variables here are {list}{}",
                        did_you_mean(&candidates)
                    ),
                    candidates,
                });
            }
        }
        self.issues
    }

    fn function(&mut self, name: &str, offset: usize) {
        if EXPR_LANG_BUILTINS.contains(&name) || self.shapes.functions.contains(&name) {
            return;
        }
        let known: Vec<&str> = EXPR_LANG_BUILTINS
            .iter()
            .chain(self.shapes.functions.iter())
            .copied()
            .collect();
        let candidates = closest(name, &known);
        self.issues.push(ExprLangIssue {
            kind: IssueKind::UnknownFunction,
            offset,
            message: format!("unknown function `{name}`{}", did_you_mean(&candidates)),
            candidates,
        });
    }

    /// A member access at token `i`: checked when its receiver's shape is known.
    fn field(&mut self, i: usize) {
        let name = self.tokens[i].text.clone();
        let offset = self.tokens[i].offset;
        let Some(receiver) = i.checked_sub(2) else {
            return;
        };
        let (what, fields): (String, &[&str]) = if self.text(receiver) == ")" {
            let Some(open) = self.matching_open(receiver) else {
                return;
            };
            let function = open.checked_sub(1).map(|f| (f, self.text(f)));
            let Some((f, function)) = function else {
                return;
            };
            if self.is_member(f) {
                return;
            }
            match self.shapes.results.iter().find(|(n, _)| *n == function) {
                Some((n, fields)) => (format!("`{n}(…)` returns"), fields),
                None => return,
            }
        } else if self.shapes.promotion_ctx && self.tokens[receiver].kind == TokenKind::Ident {
            let Some(path) = self.path_to(receiver) else {
                return;
            };
            if path[0] != "ctx" || self.bound.contains("ctx") {
                return;
            }
            match ctx_fields(&path) {
                Some(fields) => (format!("`{}` is", path.join(".")), fields),
                None => return,
            }
        } else {
            return;
        };
        if fields.contains(&name.as_str()) {
            return;
        }
        let candidates = closest(&name, fields);
        self.issues.push(ExprLangIssue {
            kind: IssueKind::UnknownField,
            offset,
            message: format!(
                "{what} {{{}}}: it has no field `{name}`{}",
                fields.join(", "),
                did_you_mean(&candidates)
            ),
            candidates,
        });
    }

    /// The index of the `(` matching the `)` at `close`.
    fn matching_open(&self, close: usize) -> Option<usize> {
        let mut depth = 0usize;
        for j in (0..=close).rev() {
            match self.text(j) {
                ")" => depth += 1,
                "(" => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(j);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The names of `a.b.c` ending at token `last`, if it is a plain chain from a variable.
    fn path_to(&self, last: usize) -> Option<Vec<&str>> {
        let mut path = vec![self.text(last)];
        let mut i = last;
        while self.is_member(i) {
            let before = i.checked_sub(2)?;
            if self.tokens[before].kind != TokenKind::Ident {
                return None;
            }
            path.push(self.text(before));
            i = before;
        }
        path.reverse();
        Some(path)
    }
}

/// The known names closest to `name`: a case-insensitive match, else those within a few
/// edits, best first.
fn closest(name: &str, known: &[&str]) -> Vec<String> {
    if let Some(exact) = known.iter().find(|k| k.eq_ignore_ascii_case(name)) {
        return vec![(*exact).to_owned()];
    }
    let limit = (name.chars().count() / 3).max(1);
    let mut near: Vec<(usize, &str)> = known
        .iter()
        .map(|k| {
            (
                strsim::levenshtein(&name.to_lowercase(), &k.to_lowercase()),
                *k,
            )
        })
        .filter(|(d, _)| *d <= limit)
        .collect();
    near.sort();
    near.dedup_by(|a, b| a.1 == b.1);
    near.into_iter()
        .take(3)
        .map(|(_, k)| k.to_owned())
        .collect()
}

fn did_you_mean(candidates: &[String]) -> String {
    match candidates {
        [] => String::new(),
        [one] => format!("; did you mean `{one}`?"),
        many => format!(
            "; did you mean {}?",
            many.iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    }
}
