//! Evaluating: a step's `config` (every string, recursively), one string, or an `if`
//! condition, against an [`ExprContext`].
//!
//! The CEL context (variables and functions) is built once per call, and only when a
//! string holds an expression. Compiling is the cache's (`compile.rs`); explaining runtime
//! errors is `explain.rs`'s.

use cel::Program;
use serde_json::Value;

use super::ExprError;
use super::compile::{ExprCache, join_field, on_cel_stack};
use super::context::{ExprContext, cel_to_json, json_to_cel};
use super::explain::explain;
use super::functions;
use super::template::{Segment, Template, has_expressions, to_text};

impl ExprCache {
    /// Evaluates every string in `value` (a step `config`): a string that is exactly one
    /// `${{ }}` keeps the result's type, other strings become text. Keys are kept as they
    /// are. An error names the field, relative to `value` (`checkout[0].commit`).
    pub fn evaluate_value(&self, value: &Value, ctx: &ExprContext) -> Result<Value, ExprError> {
        Scope::new(self, ctx).value(value, "")
    }

    /// Evaluates one string: itself if it has no `${{`, the result of its expression if it is
    /// exactly one `${{ }}`, otherwise the text with each expression's result in place.
    pub fn evaluate_string(&self, text: &str, ctx: &ExprContext) -> Result<Value, ExprError> {
        Scope::new(self, ctx).string(text)
    }

    /// Evaluates a step's `if`, written with or without `${{ }}`; it must be a bool.
    pub fn evaluate_condition(&self, text: &str, ctx: &ExprContext) -> Result<bool, ExprError> {
        let mut scope = Scope::new(self, ctx);
        let value = if has_expressions(text) {
            scope.string(text)?
        } else {
            scope.expression(text.trim())?
        };
        match value {
            Value::Bool(b) => Ok(b),
            other => Err(ExprError::NotBool {
                expr: text.trim().to_owned(),
                got: describe(&other),
            }),
        }
    }

    /// Evaluates bare CEL source (no `${{ }}`).
    pub fn evaluate_expression(&self, expr: &str, ctx: &ExprContext) -> Result<Value, ExprError> {
        Scope::new(self, ctx).expression(expr)
    }
}

/// One evaluation: the cache, the context, and the CEL context once built.
struct Scope<'a> {
    cache: &'a ExprCache,
    ctx: &'a ExprContext,
    activation: Option<Activation>,
}

/// The CEL context, and the variables as JSON for error messages.
struct Activation {
    cel: cel::Context<'static, 'static>,
    variables: serde_json::Map<String, Value>,
}

impl<'a> Scope<'a> {
    fn new(cache: &'a ExprCache, ctx: &'a ExprContext) -> Self {
        Self {
            cache,
            ctx,
            activation: None,
        }
    }

    fn value(&mut self, value: &Value, field: &str) -> Result<Value, ExprError> {
        let in_field = |err: ExprError| {
            if field.is_empty() {
                err
            } else {
                err.in_field(field)
            }
        };
        Ok(match value {
            Value::String(text) => self.string(text).map_err(in_field)?,
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.value(item, &format!("{field}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, item)| {
                        Ok((key.clone(), self.value(item, &join_field(field, key))?))
                    })
                    .collect::<Result<_, ExprError>>()?,
            ),
            other => other.clone(),
        })
    }

    fn string(&mut self, text: &str) -> Result<Value, ExprError> {
        if !has_expressions(text) {
            return Ok(Value::String(text.to_owned()));
        }
        let template = Template::parse(text)?;
        if let Some(expr) = template.single_expression() {
            return self.expression(&expr.source);
        }
        let mut out = String::new();
        for segment in template.segments() {
            match segment {
                Segment::Text(text) => out.push_str(text),
                Segment::Expr(expr) => out.push_str(&to_text(&self.expression(&expr.source)?)),
            }
        }
        Ok(Value::String(out))
    }

    fn expression(&mut self, expr: &str) -> Result<Value, ExprError> {
        let program = self.cache.compile(expr)?;
        let activation = self.activation();
        let result = on_cel_stack(|| {
            program
                .execute(&activation.cel)
                .map_err(|err| failed(expr, &err, &program, &activation.variables))
        })?;
        cel_to_json(&result).map_err(|what| ExprError::NotJson {
            field: None,
            expr: expr.to_owned(),
            what,
        })
    }

    fn activation(&mut self) -> &Activation {
        let (cache, ctx) = (self.cache, self.ctx);
        self.activation.get_or_insert_with(|| {
            let variables = ctx.variables();
            let mut cel = cel::Context::with_env(cache.env());
            for (name, value) in &variables {
                cel.add_variable_from_value(name.clone(), json_to_cel(value));
            }
            functions::register(&mut cel, ctx);
            Activation { cel, variables }
        })
    }
}

fn failed(
    expr: &str,
    err: &cel::ExecutionError,
    program: &Program,
    variables: &serde_json::Map<String, Value>,
) -> ExprError {
    ExprError::Eval {
        field: None,
        expr: expr.to_owned(),
        message: explain(err, program, variables),
    }
}

/// `the string "yes"`, `the number 1`, … for error messages.
fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    };
    let mut text = value.to_string();
    if text.len() > 60 {
        let cut = (0..=57)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    format!("the {kind} {text}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::api::{FreightCommit, FreightImage};
    use crate::expr::FreightView;

    fn ctx() -> ExprContext {
        let Value::Object(vars) = json!({
            "a": 7,
            "repoURL": "https://git/cfg.git",
            "imageRepo": "reg/app",
            "version": "1.0",
        }) else {
            unreachable!()
        };
        let Value::Object(outputs) = json!({
            "check": {"response": {"status": 200, "body": {"ok": true}}},
            "clone": {"commit": "deadbeef"},
        }) else {
            unreachable!()
        };
        ExprContext {
            project: "shop".into(),
            stage: "prod".into(),
            promotion: "prod.01".into(),
            actor: "ann".into(),
            freight: FreightView {
                id: "f1".into(),
                alias: "frosty-otter".into(),
                images: vec![FreightImage {
                    repo_url: "reg/app".into(),
                    tag: "1.2.0".into(),
                    digest: "sha256:abc".into(),
                    ..Default::default()
                }],
                commits: vec![FreightCommit {
                    repo_url: "https://git/cfg.git".into(),
                    id: "c0ffee".into(),
                    ..FreightCommit::default()
                }],
                ..FreightView::default()
            },
            vars,
            outputs,
            task_outputs: None,
            step_statuses: BTreeMap::from([
                ("clone".to_owned(), "Succeeded".to_owned()),
                ("check".to_owned(), "Failed".to_owned()),
            ]),
            any_failed: false,
            extra: serde_json::Map::new(),
            metadata: Default::default(),
        }
    }

    fn eval(text: &str) -> Result<Value, ExprError> {
        ExprCache::new().evaluate_string(text, &ctx())
    }

    #[test]
    fn literal_text_passes_through() {
        assert_eq!(eval("plain }} text {").unwrap(), json!("plain }} text {"));
        let config = json!({"a": [1, null, "x"], "b": {"c": true}});
        assert_eq!(
            ExprCache::new().evaluate_value(&config, &ctx()).unwrap(),
            config
        );
    }

    #[test]
    fn a_single_expression_keeps_its_type() {
        assert_eq!(eval("${{ vars.a }}").unwrap(), json!(7));
        assert_eq!(eval("${{ vars.a > 1 }}").unwrap(), json!(true));
        assert_eq!(
            eval("${{ outputs.check.response.body }}").unwrap(),
            json!({"ok": true})
        );
        assert_eq!(eval("${{ [1, 2.5] }}").unwrap(), json!([1, 2.5]));
    }

    #[test]
    fn text_and_expressions_concatenate() {
        assert_eq!(
            eval("${{ ctx.stage }}/${{ vars.a }}-${{ true }} ${{ [1] }}").unwrap(),
            json!("prod/7-true [1]")
        );
        assert_eq!(eval(" ${{ vars.a }}").unwrap(), json!(" 7"));
        assert_eq!(
            eval("${{ ctx.project }}:${{ ctx.promotion }}:${{ ctx.actor }}").unwrap(),
            json!("shop:prod.01:ann")
        );
        assert_eq!(
            eval("${{ ctx.targetFreight.alias }}@${{ ctx.targetFreight.id }}").unwrap(),
            json!("frosty-otter@f1")
        );
    }

    #[test]
    fn evaluate_value_walks_a_config_and_names_the_failing_field() {
        let cache = ExprCache::new();
        let config = json!({
            "images": [{"image": "${{ vars.imageRepo }}", "digest": "${{ imageFrom(vars.imageRepo).digest }}"}],
            "${{ keys }}": "${{ vars.a + 1 }}",
        });
        assert_eq!(
            cache.evaluate_value(&config, &ctx()).unwrap(),
            json!({
                "images": [{"image": "reg/app", "digest": "sha256:abc"}],
                "${{ keys }}": 8,
            })
        );
        let err = cache
            .evaluate_value(
                &json!({"checkout": [{"commit": "${{ vars.missing }}"}]}),
                &ctx(),
            )
            .unwrap_err();
        assert_eq!(err.field(), Some("checkout[0].commit"));
        assert_eq!(
            err.to_string(),
            "`checkout[0].commit`: expression `vars.missing` failed: no such key `missing` in \
             `vars` (known: a, imageRepo, repoURL, version)"
        );
    }

    #[test]
    fn image_and_commit_from_the_freight() {
        assert_eq!(
            eval(r#"${{ imageFrom("reg/app").digest }}"#).unwrap(),
            json!("sha256:abc")
        );
        assert_eq!(
            eval("${{ imageFrom(vars.imageRepo).repoURL }}:${{ imageFrom('reg/app').tag }}")
                .unwrap(),
            json!("reg/app:1.2.0")
        );
        assert_eq!(
            eval("${{ commitFrom(vars.repoURL).id }}").unwrap(),
            json!("c0ffee")
        );
        let err = eval("${{ commitFrom('https://git/other.git').id }}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "expression `commitFrom('https://git/other.git').id` failed: commitFrom(): no \
             commit from `https://git/other.git` in Freight `f1` (its commits: \
             `https://git/cfg.git`)"
        );
        let err = eval("${{ imageFrom(1) }}").unwrap_err();
        assert!(
            err.to_string()
                .contains("imageFrom(): expects a string, not a int"),
            "{err}"
        );
    }

    #[test]
    fn quote_keeps_strings_strings() {
        assert_eq!(
            eval("${{ quote(vars.version) }}").unwrap(),
            json!("\"1.0\"")
        );
        assert_eq!(eval("v: ${{ quote(vars.a) }}").unwrap(), json!("v: \"7\""));
    }

    #[test]
    fn json_integers_add_to_cel_ints() {
        assert_eq!(
            eval("${{ outputs.check.response.status + 1 }}").unwrap(),
            json!(201)
        );
        assert_eq!(
            eval("${{ outputs.check.response.status == 200 }}").unwrap(),
            json!(true)
        );
        let mut ctx = ctx();
        ctx.extra.insert("response".into(), json!({"status": 404}));
        let cache = ExprCache::new();
        assert!(
            cache
                .evaluate_condition("response.status + 1 == 405", &ctx)
                .unwrap()
        );
    }

    #[test]
    fn conditions() {
        let cache = ExprCache::new();
        let mut ctx = ctx();
        for (cond, ok, failed) in [
            ("success()", true, false),
            ("${{ success() }}", true, false),
            ("failure()", false, true),
            ("always()", true, true),
            (crate::expr::DEFAULT_CONDITION, true, false),
        ] {
            ctx.any_failed = false;
            assert_eq!(cache.evaluate_condition(cond, &ctx).unwrap(), ok, "{cond}");
            ctx.any_failed = true;
            assert_eq!(
                cache.evaluate_condition(cond, &ctx).unwrap(),
                failed,
                "{cond}"
            );
        }
        assert!(
            cache
                .evaluate_condition("status('clone') == 'Succeeded'", &ctx)
                .unwrap()
        );
        assert!(
            cache
                .evaluate_condition("${{ status(\"check\") == 'Failed' }}", &ctx)
                .unwrap()
        );
        assert_eq!(eval("${{ status('push') }}").unwrap(), json!(""));
        let err = cache.evaluate_condition("vars.a", &ctx).unwrap_err();
        assert_eq!(
            err.to_string(),
            "condition `vars.a` must evaluate to a bool, not the number 7"
        );
        assert!(cache.evaluate_condition("success() &&", &ctx).is_err());
    }

    #[test]
    fn the_cache_compiles_each_expression_once() {
        let cache = ExprCache::new();
        let config = json!([
            "${{ vars.a }}",
            "${{ vars.a }}",
            "x ${{ vars.a }} ${{ ctx.stage }}"
        ]);
        cache.evaluate_value(&config, &ctx()).unwrap();
        cache.evaluate_value(&config, &ctx()).unwrap();
        assert_eq!(cache.compilations(), 2);
    }

    #[test]
    fn task_outputs_only_inside_a_task() {
        let cache = ExprCache::new();
        let mut ctx = ctx();
        let err = cache
            .evaluate_string("${{ task.outputs.sha }}", &ctx)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("only defined in the steps of a PromotionTask")
        );
        let Value::Object(outputs) = json!({"sha": "abc"}) else {
            unreachable!()
        };
        ctx.task_outputs = Some(outputs);
        assert_eq!(
            cache
                .evaluate_string("${{ task.outputs.sha }}", &ctx)
                .unwrap(),
            json!("abc")
        );
    }

    #[test]
    fn syntax_and_delimiter_errors_surface() {
        let err = eval("${{ vars.a + }}").unwrap_err();
        assert!(
            matches!(
                err,
                ExprError::Syntax {
                    line: 1,
                    column: 9,
                    ..
                }
            ),
            "{err}"
        );
        let err = eval("tag: ${{ vars.a").unwrap_err();
        assert!(
            matches!(
                err,
                ExprError::Unterminated {
                    line: 1,
                    column: 6,
                    ..
                }
            ),
            "{err}"
        );
        let err = eval("${{ vars.a / 0 }}").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("expression `vars.a / 0` failed: "),
            "{err}"
        );
    }

    #[test]
    fn strings_extension_is_available() {
        assert_eq!(
            eval("${{ vars.imageRepo.upperAscii() }}").unwrap(),
            json!("REG/APP")
        );
        assert_eq!(eval("${{ 'a,b'.split(',') }}").unwrap(), json!(["a", "b"]));
    }
}
