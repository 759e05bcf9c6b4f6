//! Explaining why a condition is false: ``imageFrom('reg/app').tag` is "1.3.0" but
//! `commitFrom('https://git/cfg.git').tag` is "v1.2.0"``.
//!
//! It walks the program's syntax tree from the root: a false `&&` is explained by its
//! first false operand, a false comparison by the values of both sides, anything else by
//! its own text. It evaluates sub-expressions again (they are pure) and decides nothing;
//! runtime errors are `explain.rs`'s.

use cel::common::ast::{Expr, IdedExpr, operators};
use cel::{Context, Program};

use super::context::cel_to_json;
use super::explain::visit;

/// The comparisons whose two sides are worth showing.
const COMPARISONS: &[&str] = &[
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::IN,
];

/// Why `program`, evaluated in `cel`, is false.
pub(crate) fn why_false(program: &Program, cel: &Context<'_, '_>) -> String {
    explain(program, program.expression(), cel)
}

fn explain(program: &Program, node: &IdedExpr, cel: &Context<'_, '_>) -> String {
    if let Expr::Call(call) = &node.expr {
        if call.func_name == operators::LOGICAL_AND {
            if let Some(false_arg) = call.args.iter().find(|arg| is_false(arg, cel)) {
                return explain(program, false_arg, cel);
            }
        } else if call.func_name == operators::LOGICAL_NOT && call.args.len() == 1 {
            return format!("`{}` is true", text(program, &call.args[0]));
        } else if COMPARISONS.contains(&call.func_name.as_str()) && call.args.len() == 2 {
            let op = call.func_name.trim_matches(['_', '@']);
            let whole = format!(
                "{} {op} {}",
                text(program, &call.args[0]),
                text(program, &call.args[1])
            );
            let side = |arg: &IdedExpr| {
                let value = cel::Value::resolve(arg, cel)
                    .ok()
                    .and_then(|v| cel_to_json(&v).ok())
                    .map_or_else(|| "unknown".to_owned(), |v| v.to_string());
                format!("`{}` is {value}", text(program, arg))
            };
            return format!(
                "`{whole}` is false: {} and {}",
                side(&call.args[0]),
                side(&call.args[1])
            );
        }
    }
    format!("`{}` is false", text(program, node))
}

fn is_false(node: &IdedExpr, cel: &Context<'_, '_>) -> bool {
    matches!(cel::Value::resolve(node, cel), Ok(cel::Value::Bool(false)))
}

/// The source text of `node`: the span of every token in it, extended to close the
/// brackets it opened (a call's `)` is no node's token), forward over a selected field's
/// name and back over a global call's name.
fn text(program: &Program, node: &IdedExpr) -> String {
    if let Expr::Select(select) = &node.expr
        && !select.test
    {
        return format!("{}.{}", text(program, &select.operand), select.field);
    }
    let source = &program.source_info().source;
    let mut span: Option<(usize, usize)> = None;
    visit(node, &mut |n| {
        if let Some((start, stop)) = program.source_info().offset_for(n.id) {
            let (start, stop) = (start as usize, stop as usize);
            span = Some(span.map_or((start, stop), |(a, b)| (a.min(start), b.max(stop))));
        }
    });
    let Some((start, mut stop)) = span else {
        return source.trim().to_owned();
    };
    stop = stop.min(source.len());
    // A global call's node is its `(`: take in the function's name before it.
    let start = source
        .get(..start.min(stop))
        .unwrap_or_default()
        .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_')
        .len();
    // A selection's node is its `.`: take in the field's name after it.
    let ident_end = |at: usize| {
        let rest = source.get(at..).unwrap_or_default();
        at + rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_')
                .len()
    };
    let mut stop = ident_end(stop);
    let mut open = unclosed(source.get(start..stop).unwrap_or_default());
    let mut end = stop;
    for (i, c) in source.get(stop..).unwrap_or_default().char_indices() {
        if open == 0 {
            break;
        }
        match c {
            ')' | ']' | '}' => open -= 1,
            '(' | '[' | '{' => open += 1,
            _ => {}
        }
        end = stop + i + c.len_utf8();
    }
    stop = end;
    source.get(start..stop).unwrap_or(source).trim().to_owned()
}

/// How many brackets `text` opens and does not close, outside string literals.
fn unclosed(text: &str) -> usize {
    let mut open = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => open += 1,
                ')' | ']' | '}' => open = open.saturating_sub(1),
                _ => {}
            },
        }
    }
    open
}
