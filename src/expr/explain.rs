//! Turning CEL's runtime errors, which carry no position, into messages that say what
//! failed: ``no such key `missing` in `vars` (known: repoURL, imageRepo)``.
//!
//! It reads the program's syntax tree to find where a missing key was looked up, and the
//! variables (as JSON) to list the keys that do exist. It does not evaluate anything.

use cel::ExecutionError;
use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

use super::context::VARIABLES;
use super::functions::FUNCTIONS;

/// A message for `err`, raised by `program` with `variables` in scope.
pub(crate) fn explain(
    err: &ExecutionError,
    program: &Program,
    variables: &serde_json::Map<String, Value>,
) -> String {
    match err {
        ExecutionError::NoSuchKey(key) => no_such_key(key, program.expression(), variables),
        ExecutionError::UndeclaredReference(name) => {
            undeclared(name, program.expression(), variables)
        }
        ExecutionError::FunctionError { function, message } => format!("{function}(): {message}"),
        other => other.to_string(),
    }
}

fn no_such_key(key: &str, root: &IdedExpr, variables: &serde_json::Map<String, Value>) -> String {
    let mut lookups = Vec::new();
    visit(root, &mut |expr| {
        if let Some((operand, field)) = lookup(expr) {
            if field == key {
                lookups.extend(path(operand));
            }
        }
    });
    for path in lookups {
        let Some(Value::Object(fields)) = resolve(variables, &path) else {
            continue;
        };
        if fields.contains_key(key) {
            continue;
        }
        let at = path.join(".");
        if fields.is_empty() {
            return format!("no such key `{key}` in `{at}` (it is empty)");
        }
        let mut known: Vec<&str> = fields.keys().map(String::as_str).collect();
        known.sort_unstable();
        return format!(
            "no such key `{key}` in `{at}` (known: {})",
            known.join(", ")
        );
    }
    format!("no such key `{key}`")
}

fn undeclared(name: &str, root: &IdedExpr, variables: &serde_json::Map<String, Value>) -> String {
    let mut called = false;
    visit(root, &mut |expr| {
        if let Expr::Call(call) = &expr.expr {
            called |= call.func_name == name;
        }
    });
    if called {
        return format!(
            "no function `{name}` (Dray's: {}; and CEL's standard ones)",
            FUNCTIONS.join(", ")
        );
    }
    if name == "task" {
        return "`task` is only defined in the steps of a PromotionTask".to_owned();
    }
    let mut others: Vec<&str> = variables
        .keys()
        .map(String::as_str)
        .filter(|v| !VARIABLES.contains(v))
        .collect();
    others.sort_unstable();
    let known: Vec<&str> = VARIABLES
        .iter()
        .copied()
        .filter(|v| variables.contains_key(*v))
        .chain(others)
        .collect();
    format!("no variable `{name}` (known: {})", known.join(", "))
}

/// `(operand, key)` of `operand.key` or `operand["key"]`.
fn lookup(expr: &IdedExpr) -> Option<(&IdedExpr, &str)> {
    match &expr.expr {
        Expr::Select(select) => Some((&select.operand, &select.field)),
        Expr::Call(call) if call.func_name == operators::INDEX && call.args.len() == 2 => {
            match &call.args[1].expr {
                Expr::Literal(LiteralValue::String(key)) => Some((&call.args[0], key.inner())),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `["outputs", "clone"]` for `outputs.clone` or `outputs["clone"]`; `None` for anything
/// computed.
fn path(expr: &IdedExpr) -> Option<Vec<String>> {
    match &expr.expr {
        Expr::Ident(name) => Some(vec![name.clone()]),
        _ => {
            let (operand, key) = lookup(expr)?;
            let mut path = path(operand)?;
            path.push(key.to_owned());
            Some(path)
        }
    }
}

fn resolve<'a>(
    variables: &'a serde_json::Map<String, Value>,
    path: &[String],
) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(variables.get(first)?, |value, key| value.get(key))
}

/// The names `expr` reads that no comprehension (`.all(x, …)`) binds, in order of first
/// use, into `found`; `bound` holds the names bound around `expr`.
pub(crate) fn free_names(expr: &IdedExpr, bound: &mut Vec<String>, found: &mut Vec<String>) {
    match &expr.expr {
        Expr::Ident(name) => {
            if !bound.contains(name) && !found.contains(name) {
                found.push(name.clone());
            }
        }
        Expr::Comprehension(c) => {
            free_names(&c.iter_range, bound, found);
            free_names(&c.accu_init, bound, found);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                free_names(e, bound, found);
            }
            bound.truncate(before);
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                free_names(target, bound, found);
            }
            call.args
                .iter()
                .for_each(|arg| free_names(arg, bound, found));
        }
        Expr::Select(select) => free_names(&select.operand, bound, found),
        Expr::List(list) => list
            .elements
            .iter()
            .for_each(|e| free_names(e, bound, found)),
        Expr::Map(_) | Expr::Struct(_) => visit_children_free(expr, bound, found),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn visit_children_free(expr: &IdedExpr, bound: &mut Vec<String>, found: &mut Vec<String>) {
    let mut entries = Vec::new();
    match &expr.expr {
        Expr::Map(map) => map.entries.iter().for_each(|e| entries.push(&e.expr)),
        Expr::Struct(st) => st.entries.iter().for_each(|e| entries.push(&e.expr)),
        _ => {}
    }
    for entry in entries {
        match entry {
            EntryExpr::MapEntry(entry) => {
                free_names(&entry.key, bound, found);
                free_names(&entry.value, bound, found);
            }
            EntryExpr::StructField(field) => free_names(&field.value, bound, found),
        }
    }
}

/// `(function, argument)` of every global call to one of `functions` whose first argument
/// is a string literal, e.g. `("imageFrom", "reg/app")`.
pub(crate) fn literal_calls(expr: &IdedExpr, functions: &[&str]) -> Vec<(String, String)> {
    let mut calls = Vec::new();
    visit(expr, &mut |node| {
        if let Expr::Call(call) = &node.expr
            && call.target.is_none()
            && functions.contains(&call.func_name.as_str())
        {
            if let Some(Expr::Literal(LiteralValue::String(arg))) =
                call.args.first().map(|a| &a.expr)
            {
                calls.push((call.func_name.clone(), arg.inner().to_owned()));
            } else if call.args.is_empty() {
                calls.push((call.func_name.clone(), String::new()));
            }
        }
    });
    calls
}

/// Calls `f` on `expr` and every expression in it.
pub(crate) fn visit(expr: &IdedExpr, f: &mut impl FnMut(&IdedExpr)) {
    f(expr);
    match &expr.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                visit(target, f);
            }
            call.args.iter().for_each(|arg| visit(arg, f));
        }
        Expr::Comprehension(c) => {
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(e, f);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|e| visit(e, f)),
        Expr::Map(map) => map
            .entries
            .iter()
            .for_each(|entry| visit_entry(&entry.expr, f)),
        Expr::Struct(st) => st
            .entries
            .iter()
            .for_each(|entry| visit_entry(&entry.expr, f)),
        Expr::Select(select) => visit(&select.operand, f),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn visit_entry(entry: &EntryExpr, f: &mut impl FnMut(&IdedExpr)) {
    match entry {
        EntryExpr::MapEntry(entry) => {
            visit(&entry.key, f);
            visit(&entry.value, f);
        }
        EntryExpr::StructField(field) => visit(&field.value, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn explain_src(src: &str, variables: Value) -> String {
        let program = Program::compile(src).unwrap();
        let Value::Object(variables) = variables else {
            unreachable!()
        };
        let mut cel_ctx = cel::Context::default();
        for (name, value) in &variables {
            cel_ctx
                .add_variable_from_value(name.clone(), super::super::context::json_to_cel(value));
        }
        let err = program.execute(&cel_ctx).unwrap_err();
        explain(&err, &program, &variables)
    }

    #[test]
    fn a_missing_key_lists_the_known_ones() {
        let vars = json!({"vars": {"repoURL": "r", "imageRepo": "i"}, "outputs": {"a": {}}});
        let msg = explain_src("vars.missing", vars.clone());
        assert!(
            msg.starts_with("no such key `missing` in `vars` (known: "),
            "{msg}"
        );
        assert!(
            msg.contains("repoURL") && msg.contains("imageRepo"),
            "{msg}"
        );
        let msg = explain_src("outputs['a'].sha + 'x'", vars.clone());
        assert_eq!(msg, "no such key `sha` in `outputs.a` (it is empty)");
        assert_eq!(explain_src("{'k': 1}.nope", vars), "no such key `nope`");
    }

    #[test]
    fn undeclared_names_say_what_exists() {
        let vars = json!({"response": {}, "ctx": {}, "vars": {}, "outputs": {}});
        assert_eq!(
            explain_src("vrs.x", vars.clone()),
            "no variable `vrs` (known: ctx, vars, outputs, response)"
        );
        assert_eq!(
            explain_src("task.outputs.x", vars.clone()),
            "`task` is only defined in the steps of a PromotionTask"
        );
        assert!(explain_src("imageFor('x')", vars).starts_with("no function `imageFor`"));
    }
}
