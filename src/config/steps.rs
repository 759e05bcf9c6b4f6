//! Rules for one list of promotion steps (a Stage's template, a PromotionTask, a
//! Promotion) and for lists of variables, that need nothing but the list itself: `uses` xor
//! `task`, aliases valid and unique, retry timeouts that parse, variable names unique.
//! Whether a referenced task exists is checked in [`super::references`].

use std::collections::BTreeMap;

use crate::api::{PromotionStep, Var};
use crate::expr::exprlang::{
    ExprLangIssue, ExprLanguage, IssueKind, KnownShapes, check_exprlang_condition,
    check_exprlang_template, check_exprlang_value,
};

use super::durations;
use super::error::Issue;
use super::names;
use super::path::FieldPath;

/// The longest step alias.
const MAX_ALIAS: usize = 63;

/// Checks the steps at `at`, whose expressions are in `language`; `allow_tasks` is false
/// inside a PromotionTask.
pub(crate) fn check_steps(
    steps: &[PromotionStep],
    at: &FieldPath,
    allow_tasks: bool,
    language: ExprLanguage,
) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut aliases: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let path = at.index(i);
        check_kind(step, &path, allow_tasks, &mut issues);
        if let Some(timeout) = step.retry.as_ref().and_then(|r| r.timeout.as_deref()) {
            issues.extend(durations::check(timeout, path.key("retry").key("timeout")));
        }
        if let Some(alias) = step.as_.as_deref() {
            let alias_path = path.key("as");
            if let Some(issue) = check_alias(alias, alias_path.clone()) {
                issues.push(issue);
            } else if let Some(first) = aliases.insert(alias, i) {
                aliases.insert(alias, first);
                issues.push(
                    Issue::new(
                        alias_path,
                        format!("step alias `{alias}` is already used by step {first}"),
                    )
                    .hint("give every step a different `as`"),
                );
            }
        }
        issues.extend(check_vars(&step.vars, &path.key("vars")));
        check_kind_config(step, &path, &mut issues);
        match language {
            ExprLanguage::Cel => check_expressions(step, &path, &mut issues),
            ExprLanguage::ExprLang => check_exprlang(step, &path, &mut issues),
        }
    }
    issues
}

/// A field path relative to `base`, from text such as `checkout[0].commit`.
fn sub_path(base: &FieldPath, text: &str) -> FieldPath {
    let mut path = base.clone();
    for part in text.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            path = path.key(key);
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                path = path.index(i);
            }
        }
    }
    path
}

/// The step kind itself, and what the step can tell of its config before it runs.
fn check_kind_config(step: &PromotionStep, path: &FieldPath, issues: &mut Vec<Issue>) {
    if let Some(kind) = step.uses.as_deref().filter(|k| !k.trim().is_empty()) {
        let registry = dray_steps::builtin_steps();
        let kinds = registry.kinds();
        if !kinds.contains(&kind) {
            issues.push(
                Issue::new(path.key("uses"), format!("`{kind}` is not a built-in step")).hint(
                    crate::api::suggest::hint_for(kind, kinds.iter().copied(), "see docs/steps.md"),
                ),
            );
        }
        // What the step itself can tell of its config before it runs.
        if let (Some(known), Some(config)) = (registry.get(kind), &step.config) {
            for problem in known.check_config(config) {
                let at = path.key("config").key(problem.field);
                issues.push(Issue::new(at, problem.message).hint(problem.hint));
            }
        }
    }
}

/// `${{ }}` syntax in `config`, `if` and variable values, in CEL.
fn check_expressions(step: &PromotionStep, path: &FieldPath, issues: &mut Vec<Issue>) {
    let hint = "fix the CEL expression; see docs/steps.md for the variables and functions";
    if let Some(config) = &step.config {
        for error in crate::expr::validate_value(config, "") {
            let at = sub_path(&path.key("config"), error.field().unwrap_or_default());
            issues.push(Issue::new(at, error.to_string()).hint(hint));
        }
    }
    if let Some(condition) = &step.if_
        && let Err(error) = crate::expr::validate_condition(condition)
    {
        issues.push(Issue::new(path.key("if"), error.to_string()).hint(hint));
    }
    for (i, var) in step.vars.iter().enumerate() {
        if let Some(value) = &var.value
            && let Err(error) = crate::expr::validate_template(value)
        {
            issues.push(
                Issue::new(path.key("vars").index(i).key("value"), error.to_string()).hint(hint),
            );
        }
    }
}

fn check_kind(step: &PromotionStep, path: &FieldPath, allow_tasks: bool, issues: &mut Vec<Issue>) {
    match (&step.uses, &step.task) {
        (Some(_), Some(_)) => issues.push(
            Issue::new(
                path.clone(),
                "a step must set exactly one of `uses` and `task`, not both",
            )
            .hint("split it into two steps"),
        ),
        (None, None) => issues.push(
            Issue::new(
                path.clone(),
                "a step must set `uses` (a built-in step) or `task` (a PromotionTask)",
            )
            .hint("add e.g. `uses: git-clone`, or `task: {name: <task>}`"),
        ),
        (Some(uses), None) if uses.trim().is_empty() => issues.push(
            Issue::new(path.key("uses"), "`uses` is empty")
                .hint("name a built-in step, e.g. `git-clone`"),
        ),
        (Some(_), None) => {}
        (None, Some(task)) => {
            let task_path = path.key("task");
            if !allow_tasks {
                issues.push(
                    Issue::new(task_path.clone(), "a PromotionTask cannot run another task")
                        .hint("copy the other task's steps into this one, or call both tasks from the Stage"),
                );
            }
            issues.extend(names::check(
                &task.name,
                names::MAX_LABEL,
                "task name",
                task_path.key("name"),
            ));
            if task.task_kind().is_none() {
                let kind = task.kind.as_deref().unwrap_or_default();
                issues.push(
                    Issue::new(
                        task_path.key("kind"),
                        format!("task kind `{kind}` is not supported"),
                    )
                    .hint(
                        "remove `kind` (a PromotionTask of the project), or set it to \
                         `PromotionTask` or `ClusterPromotionTask`",
                    ),
                );
            }
        }
    }
}

/// Aliases appear in expressions as `outputs.<alias>`: a lowercase letter, then lowercase
/// letters, digits, `-` and `_`.
fn check_alias(alias: &str, path: FieldPath) -> Option<Issue> {
    let mut chars = alias.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if first_ok && rest_ok && alias.len() <= MAX_ALIAS {
        return None;
    }
    let hint = match names::suggest(alias, MAX_ALIAS)
        .filter(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        Some(valid) => format!("write `{valid}` instead"),
        None => "use a name such as `update-image`".to_owned(),
    };
    let message = format!(
        "`{alias}` is not a valid step alias: start with a lowercase letter, then use lowercase \
         letters, digits, `-` and `_`, at most {MAX_ALIAS} characters"
    );
    Some(Issue::new(path, message).hint(hint))
}

/// `${{ }}` and `${% %}` in `config`, `if` and variable values, in expr-lang (a Kargo
/// document): syntax, Kargo's functions and variables, and the fields of their results
/// (`commitFrom(r).ID`, not `.id`).
fn check_exprlang(step: &PromotionStep, path: &FieldPath, issues: &mut Vec<Issue>) {
    let hint = "fix the expr-lang expression (this document is Kargo's, so its expressions are \
                Kargo's); see docs/kargo-compatibility.md for the variables and functions";
    let mut shapes = KnownShapes::promotion();
    shapes.functions.retain(|f| !UNSERVED.contains(f));
    if let Some(config) = &step.config {
        for (field, issue) in check_exprlang_value(config, &shapes) {
            let at = sub_path(&path.key("config"), &field);
            issues.push(Issue::new(at, format!("`{field}`: {}", said(issue))).hint(hint));
        }
    }
    if let Some(condition) = &step.if_ {
        for issue in check_exprlang_condition(condition, &shapes) {
            issues.push(Issue::new(path.key("if"), said(issue)).hint(hint));
        }
    }
    for (i, var) in step.vars.iter().enumerate() {
        for issue in var
            .value
            .as_deref()
            .map(|v| check_exprlang_template(v, &shapes))
            .unwrap_or_default()
        {
            let at = path.key("vars").index(i).key("value");
            issues.push(Issue::new(at, said(issue)).hint(hint));
        }
    }
}

/// Kargo's functions that read what Dray does not keep (a project's Secrets and
/// ConfigMaps): refused at apply rather than answering empty when the step runs.
const UNSERVED: [&str; 4] = ["secret", "sharedSecret", "configMap", "sharedConfigMap"];

/// What an expr-lang issue says, with a call of an [`UNSERVED`] function explained.
fn said(issue: ExprLangIssue) -> String {
    let unserved = UNSERVED.iter().find(|f| {
        issue.kind == IssueKind::UnknownFunction
            && issue
                .message
                .starts_with(&format!("unknown function `{f}`"))
    });
    match unserved {
        Some(function) => format!(
            "`{function}()` is not served by Dray: it keeps no Secrets or ConfigMaps of a \
             project (credentials are Credentials, which steps find by repository URL)"
        ),
        None => issue.message,
    }
}

/// Variable names must be non-empty and unique within one list.
pub(crate) fn check_vars(vars: &[Var], at: &FieldPath) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, var) in vars.iter().enumerate() {
        let path = at.index(i).key("name");
        if var.name.trim().is_empty() {
            issues.push(
                Issue::new(path, "the variable name is empty")
                    .hint("name the variable, e.g. `image`"),
            );
        } else if let Some(first) = seen.get(var.name.as_str()) {
            let message = format!("variable `{}` is already set by {at}[{first}]", var.name);
            issues.push(Issue::new(path, message).hint("set each variable once"));
        } else {
            seen.insert(&var.name, i);
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps(value: serde_json::Value) -> Vec<PromotionStep> {
        serde_json::from_value(value).unwrap()
    }

    fn found(issues: &[Issue]) -> Vec<(String, String)> {
        issues
            .iter()
            .map(|i| (i.path.to_string(), i.message.clone()))
            .collect()
    }

    #[test]
    fn a_step_uses_a_builtin_or_a_task() {
        let at = FieldPath::of(&["spec", "steps"]);
        let issues = check_steps(
            &steps(json!([
                {"uses": "git-clone", "task": {"name": "t"}},
                {"as": "nothing"},
                {"uses": " "},
                {"task": {"name": "Bad_Task", "kind": "SharedTask"}},
                {"task": {"name": "ok", "kind": "ClusterPromotionTask"}},
            ])),
            &at,
            true,
            ExprLanguage::Cel,
        );
        let paths: Vec<_> = found(&issues).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            vec![
                "spec.steps[0]",
                "spec.steps[1]",
                "spec.steps[2].uses",
                "spec.steps[3].task.name",
                "spec.steps[3].task.kind"
            ]
        );
    }

    #[test]
    fn tasks_cannot_nest() {
        let issues = check_steps(
            &steps(json!([{"task": {"name": "t"}}])),
            &FieldPath::root(),
            false,
            ExprLanguage::Cel,
        );
        assert_eq!(
            found(&issues),
            vec![(
                "[0].task".into(),
                "a PromotionTask cannot run another task".into()
            )]
        );
    }

    #[test]
    fn aliases_are_valid_and_unique_and_timeouts_parse() {
        let issues = check_steps(
            &steps(json!([
                {"uses": "copy", "as": "clone"},
                {"uses": "delete", "as": "clone"},
                {"uses": "git-clear", "as": "Push_It"},
                {"uses": "git-commit", "retry": {"timeout": "soon"}},
            ])),
            &FieldPath::of(&["steps"]),
            true,
            ExprLanguage::Cel,
        );
        let found = found(&issues);
        assert_eq!(
            found[0],
            (
                "steps[1].as".into(),
                "step alias `clone` is already used by step 0".into()
            )
        );
        assert_eq!(found[1].0, "steps[2].as");
        assert_eq!(issues[1].hint.as_deref(), Some("write `push-it` instead"));
        assert_eq!(found[2].0, "steps[3].retry.timeout");
        assert!(found[2].1.contains("`soon` is not a duration"));
    }

    #[test]
    fn variables_are_named_once() {
        let vars: Vec<Var> =
            serde_json::from_value(json!([{"name": "a"}, {"name": ""}, {"name": "a"}])).unwrap();
        let issues = check_vars(&vars, &FieldPath::of(&["spec", "vars"]));
        assert_eq!(
            found(&issues),
            vec![
                (
                    "spec.vars[1].name".into(),
                    "the variable name is empty".into()
                ),
                (
                    "spec.vars[2].name".into(),
                    "variable `a` is already set by spec.vars[0]".into()
                )
            ]
        );
    }
}
