//! Predicates outside a promotion: a Warehouse's `freightCreationCriteria` (over a
//! candidate combination of artifacts, through `imageFrom()` and `commitFrom()`) and a
//! subscription's `expressionFilter` (over one candidate's fields, as variables).
//!
//! Owns evaluating such an expression to a [`Verdict`] (a false one carries the reason,
//! from `why.rs`) and the apply-time check [`check_predicate`] (syntax, unknown variables
//! and functions, repositories the Warehouse does not subscribe to). It does not decide
//! what happens to a refused candidate: discovery does.

use serde_json::Value;

use super::ExprError;
use super::compile::{ExprCache, on_cel_stack};
use super::context::{ExprContext, FreightView, json_to_cel};
use super::explain::explain;
use super::exprlang::{
    ExprLangEngine, ExprLangError, ExprLanguage, IssueKind, KnownShapes, check_exprlang_expression,
    json_to_expr, literal_calls, time_to_expr,
};
use super::functions;
use super::why::why_false;

/// The variables a git subscription's `expressionFilter` sees (one commit's fields).
pub const COMMIT_FIELDS: &[&str] = &[
    "id",
    "subject",
    "message",
    "author",
    "committer",
    "commitDate",
    "branch",
    "tag",
];

/// The variables a git subscription's `expressionFilter` sees in a Kargo document: Kargo's
/// (`id`, `commitDate`, `author`, `committer`, `subject`; for tags `tag` and
/// `creatorDate`, the commit's date) and Dray's (`message`, `branch`). `commitDate` and
/// `creatorDate` are times there (`commitDate.Year()`).
pub const KARGO_COMMIT_FIELDS: &[&str] = &[
    "id",
    "subject",
    "message",
    "author",
    "committer",
    "commitDate",
    "creatorDate",
    "branch",
    "tag",
];

/// Kargo's filter variables Dray has no value for, and why.
const KARGO_UNREAD_FIELDS: &[(&str, &str)] = &[
    (
        "tagger",
        "Dray does not read annotated tags' taggers; filter on `author` or `committer`",
    ),
    (
        "annotation",
        "Dray does not read annotated tags' messages; filter on `subject` or `tag`",
    ),
];

/// The candidate fields that are times in expr-lang (Go's `time.Time` to Kargo).
const TIME_FIELDS: &[&str] = &["commitDate", "creatorDate"];

/// The variables an image subscription's `expressionFilter` sees (a tag, before anything
/// is read from the registry).
pub const IMAGE_FIELDS: &[&str] = &["tag"];

/// The variables a git subscription's `expressionFilter` sees in `language`.
pub fn commit_fields(language: ExprLanguage) -> &'static [&'static str] {
    match language {
        ExprLanguage::Cel => COMMIT_FIELDS,
        ExprLanguage::ExprLang => KARGO_COMMIT_FIELDS,
    }
}

/// Checks a subscription's `expressionFilter` in `language` whose variables are `fields`
/// ([`commit_fields`], [`IMAGE_FIELDS`]): syntax, and only those variables.
pub fn check_filter(
    language: ExprLanguage,
    expression: &str,
    fields: &'static [&'static str],
) -> Result<(), ExprError> {
    check_predicate(
        expression,
        &PredicateScope {
            language,
            variables: fields,
            ..PredicateScope::default()
        },
    )
}

/// A Warehouse's predicates, evaluated in the language its document is written in
/// (CEL for Dray's, expr-lang for Kargo's), each compiled once.
#[derive(Clone, Debug)]
pub enum PredicateCache {
    /// CEL programs.
    Cel(ExprCache),
    /// expr-lang programs.
    ExprLang(ExprLangEngine),
}

impl Default for PredicateCache {
    fn default() -> Self {
        Self::new(ExprLanguage::default())
    }
}

impl PredicateCache {
    /// An empty cache for predicates in `language`.
    pub fn new(language: ExprLanguage) -> Self {
        match language {
            ExprLanguage::Cel => Self::Cel(ExprCache::new()),
            ExprLanguage::ExprLang => Self::ExprLang(ExprLangEngine::new()),
        }
    }

    /// Evaluates `expr` with only `variables` in scope and `imageFrom()`/`commitFrom()`/
    /// `chartFrom()` looking in `artifacts`; it must be a bool. A runtime error is an
    /// error, never a verdict.
    pub fn evaluate(
        &self,
        expr: &str,
        variables: &serde_json::Map<String, Value>,
        artifacts: &FreightView,
    ) -> Result<Verdict, ExprError> {
        match self {
            Self::Cel(cel) => cel.evaluate_predicate(expr, variables, artifacts),
            Self::ExprLang(engine) => {
                let values: Vec<(&str, expr::Value)> = variables
                    .iter()
                    .map(|(name, value)| (name.as_str(), exprlang_variable(name, value)))
                    .collect();
                let scope = ExprContext {
                    freight: artifacts.clone(),
                    ..ExprContext::default()
                };
                let expr = expr.trim();
                match engine.evaluate_predicate(expr, &values, &scope) {
                    Ok(true) => Ok(Verdict::Accepted),
                    Ok(false) => Ok(Verdict::Refused(format!("`{expr}` is false"))),
                    Err(ExprLangError::NotBool { got, .. }) => Err(ExprError::NotBool {
                        expr: expr.to_owned(),
                        got,
                    }),
                    Err(error) => Err(ExprError::Eval {
                        field: None,
                        expr: expr.to_owned(),
                        message: error.to_string(),
                    }),
                }
            }
        }
    }
}

/// A candidate's field as expr-lang sees it: times as times, the rest as JSON reads.
fn exprlang_variable(name: &str, value: &Value) -> expr::Value {
    match value.as_str().map(str::parse::<jiff::Timestamp>) {
        Some(Ok(at)) if TIME_FIELDS.contains(&name) => time_to_expr(at),
        _ => json_to_expr(value),
    }
}

/// What a predicate said about a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The expression is true.
    Accepted,
    /// The expression is false, and why (``imageFrom('r').tag` is "1.3.0" …``).
    Refused(String),
}

/// The Dray functions a predicate may call: the artifact look-ups.
const PREDICATE_FUNCTIONS: &[&str] = &["imageFrom", "commitFrom", "chartFrom"];

impl ExprCache {
    /// Evaluates `expr` with only `variables` in scope and `imageFrom()`/`commitFrom()`
    /// looking in `artifacts`; it must be a bool. A runtime error (a repository the
    /// candidate lacks, a missing key) is an error, never a verdict.
    pub fn evaluate_predicate(
        &self,
        expr: &str,
        variables: &serde_json::Map<String, Value>,
        artifacts: &FreightView,
    ) -> Result<Verdict, ExprError> {
        let expr = expr.trim();
        let program = self.compile(expr)?;
        let mut cel = cel::Context::with_env(self.env());
        for (name, value) in variables {
            cel.add_variable_from_value(name.clone(), json_to_cel(value));
        }
        let scope = ExprContext {
            freight: artifacts.clone(),
            ..ExprContext::default()
        };
        functions::register(&mut cel, &scope);
        on_cel_stack(|| match program.execute(&cel) {
            Ok(cel::Value::Bool(true)) => Ok(Verdict::Accepted),
            Ok(cel::Value::Bool(false)) => Ok(Verdict::Refused(why_false(&program, &cel))),
            Ok(other) => Err(ExprError::NotBool {
                expr: expr.to_owned(),
                got: format!("a {}", other.type_of()),
            }),
            Err(err) => Err(ExprError::Eval {
                field: None,
                expr: expr.to_owned(),
                message: explain(&err, &program, variables),
            }),
        })
    }
}

/// What [`check_predicate`] checks an expression against.
#[derive(Clone, Debug, Default)]
pub struct PredicateScope<'a> {
    /// The language the expression is written in (its Warehouse's).
    pub language: ExprLanguage,
    /// The variables the expression may name (a commit's fields), none for criteria.
    pub variables: &'a [&'static str],
    /// Whether `imageFrom()` and `commitFrom()` may be called (criteria).
    pub artifact_functions: bool,
    /// The image repositories `imageFrom('…')` may name.
    pub images: &'a [&'a str],
    /// The git repositories `commitFrom('…')` may name.
    pub commits: &'a [&'a str],
    /// The chart repositories `chartFrom('…')` may name.
    pub charts: &'a [&'a str],
}

/// Checks `expr` for `dray apply`: its syntax, that it names only the variables of
/// `scope`, and that each `imageFrom('…')`/`commitFrom('…')` with a literal names a
/// subscribed repository. Unknown functions are found by a trial evaluation; an
/// expression whose unknown function is behind a short-circuit is found when it runs.
pub fn check_predicate(expr: &str, scope: &PredicateScope<'_>) -> Result<(), ExprError> {
    match scope.language {
        ExprLanguage::Cel => check_cel_predicate(expr.trim(), scope),
        ExprLanguage::ExprLang => check_exprlang_predicate(expr.trim(), scope),
    }
}

/// [`check_predicate`] for expr-lang: syntax, functions, variables and result fields
/// from the source's tokens, then the repositories named.
fn check_exprlang_predicate(expr: &str, scope: &PredicateScope<'_>) -> Result<(), ExprError> {
    let problem = |message: String| ExprError::Eval {
        field: None,
        expr: expr.to_owned(),
        message,
    };
    let shapes = KnownShapes::predicate(scope.variables, scope.artifact_functions);
    if let Some(issue) = check_exprlang_expression(expr, &shapes).into_iter().next() {
        let named: String = expr
            .get(issue.offset..)
            .unwrap_or_default()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let unread = KARGO_UNREAD_FIELDS
            .iter()
            .find(|(field, _)| issue.kind == IssueKind::UnknownVariable && *field == named);
        return Err(problem(match unread {
            Some((field, why)) => format!("Kargo's `{field}` is not available: {why}"),
            None if issue.kind == IssueKind::UnknownVariable && !scope.variables.is_empty() => {
                format!("{} (known: {})", issue.message, scope.variables.join(", "))
            }
            None => issue.message,
        }));
    }
    subscribed_repositories(literal_calls(expr, PREDICATE_FUNCTIONS), scope).map_err(problem)?;
    // expr-lang has no methods on strings (CEL's `subject.startsWith('x')`): a trial run
    // finds them. Other failures depend on the values, so they wait for a real one.
    let (variables, artifacts) = placeholders(scope);
    match PredicateCache::new(ExprLanguage::ExprLang).evaluate(expr, &variables, &artifacts) {
        Err(ExprError::Eval { message, .. }) if message.contains("has no method") => {
            Err(problem(format!(
                "{message}; expr-lang writes these as operators: `subject contains 'x'`, \
                 `subject startsWith 'x'`, `tag endsWith 'x'`, `tag matches '^v'`"
            )))
        }
        _ => Ok(()),
    }
}

/// [`check_predicate`] for CEL.
fn check_cel_predicate(expr: &str, scope: &PredicateScope<'_>) -> Result<(), ExprError> {
    let cache = ExprCache::new();
    let program = cache.compile(expr)?;
    let problem = |message: String| ExprError::Eval {
        field: None,
        expr: expr.to_owned(),
        message,
    };
    let mut found = Vec::new();
    super::explain::free_names(program.expression(), &mut Vec::new(), &mut found);
    for name in &found {
        if !scope.variables.contains(&name.as_str()) {
            let known = if scope.variables.is_empty() {
                "none: look artifacts up with imageFrom(repoURL) or commitFrom(repoURL)".to_owned()
            } else {
                scope.variables.join(", ")
            };
            return Err(problem(format!("no variable `{name}` (known: {known})")));
        }
    }
    subscribed_repositories(
        super::explain::literal_calls(program.expression(), PREDICATE_FUNCTIONS),
        scope,
    )
    .map_err(problem)?;
    // A trial run over placeholder artifacts finds unknown functions.
    let (variables, artifacts) = placeholders(scope);
    match cache.evaluate_predicate(expr, &variables, &artifacts) {
        Err(ExprError::Eval { message, .. }) if message.starts_with("no function") => {
            Err(problem(message))
        }
        _ => Ok(()),
    }
}

/// Empty values of `scope`'s variables (the current time for times) and placeholder
/// artifacts of its subscribed repositories: what a trial run evaluates over.
fn placeholders(scope: &PredicateScope<'_>) -> (serde_json::Map<String, Value>, FreightView) {
    let variables: serde_json::Map<String, Value> = scope
        .variables
        .iter()
        .map(|name| {
            let value = if TIME_FIELDS.contains(name) {
                jiff::Timestamp::now().to_string()
            } else {
                String::new()
            };
            ((*name).to_owned(), Value::String(value))
        })
        .collect();
    let artifacts = FreightView {
        images: scope
            .images
            .iter()
            .map(|repo| crate::api::FreightImage {
                repo_url: (*repo).to_owned(),
                ..Default::default()
            })
            .collect(),
        commits: scope
            .commits
            .iter()
            .map(|repo| crate::api::FreightCommit {
                repo_url: (*repo).to_owned(),
                ..Default::default()
            })
            .collect(),
        charts: scope
            .charts
            .iter()
            .map(|repo| crate::api::FreightChart {
                repo_url: (*repo).to_owned(),
                ..Default::default()
            })
            .collect(),
        ..FreightView::default()
    };
    (variables, artifacts)
}

/// Each `imageFrom('…')`/`commitFrom('…')`/`chartFrom('…')` of `calls` names a repository
/// `scope` subscribes to, and only where artifact functions are defined; why not, if not.
fn subscribed_repositories(
    calls: Vec<(String, String)>,
    scope: &PredicateScope<'_>,
) -> Result<(), String> {
    for (function, repo) in calls {
        if !scope.artifact_functions {
            return Err(format!(
                "`{function}()` is only defined in a Warehouse's freightCreationCriteria"
            ));
        }
        let (subscribed, what) = match function.as_str() {
            "imageFrom" => (scope.images, "image"),
            "chartFrom" => (scope.charts, "chart"),
            _ => (scope.commits, "git"),
        };
        if !subscribed.contains(&repo.as_str()) {
            let list = if subscribed.is_empty() {
                "none".to_owned()
            } else {
                subscribed
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "`{function}('{repo}')` names no {what} subscription of this Warehouse (its \
                 {what} subscriptions: {list})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FreightCommit, FreightImage};
    use serde_json::json;

    fn artifacts(tag: &str, commit_tag: &str) -> FreightView {
        FreightView {
            images: vec![FreightImage {
                repo_url: "reg/app".into(),
                tag: tag.into(),
                digest: "sha256:aa".into(),
                ..Default::default()
            }],
            commits: vec![FreightCommit {
                repo_url: "https://git/cfg.git".into(),
                id: "c0ffee".into(),
                tag: Some(commit_tag.into()),
                ..FreightCommit::default()
            }],
            ..FreightView::default()
        }
    }

    const SAME_TAG: &str = "imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag";

    fn verdict(expr: &str, found: &FreightView) -> Result<Verdict, ExprError> {
        ExprCache::new().evaluate_predicate(expr, &serde_json::Map::new(), found)
    }

    #[test]
    fn criteria_accept_matching_artifacts() {
        assert_eq!(
            verdict(SAME_TAG, &artifacts("v1.2.0", "v1.2.0")).unwrap(),
            Verdict::Accepted
        );
    }

    #[test]
    fn a_false_comparison_shows_both_sides() {
        let Verdict::Refused(why) = verdict(SAME_TAG, &artifacts("v1.3.0", "v1.2.0")).unwrap()
        else {
            panic!("refused")
        };
        assert_eq!(
            why,
            "`imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag` is false: \
             `imageFrom('reg/app').tag` is \"v1.3.0\" and \
             `commitFrom('https://git/cfg.git').tag` is \"v1.2.0\""
        );
    }

    #[test]
    fn a_false_conjunction_names_its_false_part() {
        let expr =
            "imageFrom('reg/app').tag.startsWith('v') && !(imageFrom('reg/app').tag in ['v1.3.0'])";
        let Verdict::Refused(why) = verdict(expr, &artifacts("v1.3.0", "")).unwrap() else {
            panic!("refused")
        };
        assert_eq!(why, "`imageFrom('reg/app').tag in ['v1.3.0']` is true");
        let Verdict::Refused(why) =
            verdict("size(imageFrom('reg/app').tag) > 9", &artifacts("v1", "")).unwrap()
        else {
            panic!("refused")
        };
        assert!(
            why.contains("`size(imageFrom('reg/app').tag)` is 2"),
            "{why}"
        );
    }

    #[test]
    fn errors_are_errors_not_refusals() {
        let err = verdict("imageFrom('reg/other').tag == ''", &artifacts("v1", ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("imageFrom(): no image from `reg/other`"),
            "{err}"
        );
        let err = verdict("imageFrom('reg/app').tag", &artifacts("v1", ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("must evaluate to a bool, not a string"),
            "{err}"
        );
    }

    #[test]
    fn filters_see_their_variables() {
        let Value::Object(commit) = json!({"subject": "wip: try", "tag": ""}) else {
            unreachable!()
        };
        let cache = ExprCache::new();
        let none = FreightView::default();
        assert_eq!(
            cache
                .evaluate_predicate("!subject.startsWith('wip')", &commit, &none)
                .unwrap(),
            Verdict::Refused("`subject.startsWith('wip')` is true".into())
        );
    }

    #[test]
    fn apply_time_checks_name_what_is_wrong() {
        let criteria = PredicateScope {
            artifact_functions: true,
            images: &["reg/app"],
            commits: &["https://git/cfg.git"],
            ..PredicateScope::default()
        };
        assert!(check_predicate(SAME_TAG, &criteria).is_ok());
        let err = check_predicate("imageFrom('reg/ap').tag == ''", &criteria)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`imageFrom('reg/ap')` names no image subscription of this Warehouse (its image subscriptions: `reg/app`)"),
            "{err}"
        );
        let err = check_predicate("tag == 'x'", &criteria)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no variable `tag`"), "{err}");
        let err = check_predicate("imageFor('reg/app') == 1", &criteria)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no function `imageFor`"), "{err}");
        assert!(check_predicate("imageFrom('reg/app').tag ==", &criteria).is_err());

        let filter = PredicateScope {
            variables: &["subject", "tag"],
            ..PredicateScope::default()
        };
        assert!(check_predicate("!subject.contains('skip') && [1].all(x, x > 0)", &filter).is_ok());
        let err = check_predicate("commitFrom('g').id == ''", &filter)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("only defined in a Warehouse's freightCreationCriteria"),
            "{err}"
        );
        let err = check_predicate("msg == ''", &filter)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no variable `msg` (known: subject, tag)"),
            "{err}"
        );
    }
}
