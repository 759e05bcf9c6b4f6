//! Kargo's expression functions on expr-lang, with Kargo's result field names
//! (`commitFrom(…).ID`, not Dray's `.id`): `imageFrom`, `commitFrom`, `chartFrom`,
//! `warehouse`, `quote`, `unsafeQuote`, `freightMetadata`, `stageMetadata`, `secret`,
//! `sharedSecret`, `configMap`, `sharedConfigMap`, `status`, `success`, `failure`,
//! `always`, `semverParse`, `semverDiff`, and `toJSON`/`fromJSON`. What lives outside the
//! Freight (metadata, secrets, ConfigMaps) comes from a [`KargoHost`] the caller provides.
//! The one mapping from Dray's Freight shapes to Kargo's is here ([`kargo_image`], …).

use std::collections::BTreeMap;

use expr::{Environment, Value};
use serde_json::json;

use crate::api::{FreightChart, FreightCommit, FreightImage};
use crate::expr::functions::{find_chart, find_commit, find_image};
use crate::expr::{ExprContext, FreightView, MetadataView};

use super::semver;
use super::value::{expr_to_json, go_json, json_to_expr, type_name};

/// What Kargo's functions look up outside the Freight, provided by the engine that
/// evaluates (a promotion knows its project). Every lookup returns `None` when there is
/// nothing: `freightMetadata` and `stageMetadata` then give `nil`, `secret`, `configMap`
/// and their shared forms an empty map, as Kargo's do.
pub trait KargoHost: Sync {
    /// `freightMetadata(name)`: the metadata recorded on Freight `name`.
    fn freight_metadata(
        &self,
        _freight: &str,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }
    /// `stageMetadata(name)`: the metadata recorded on Stage `name`.
    fn stage_metadata(&self, _stage: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }
    /// `secret(name)`: the project's Secret's data.
    fn secret(&self, _name: &str) -> Option<BTreeMap<String, String>> {
        None
    }
    /// `sharedSecret(name)`: a Secret shared by all projects.
    fn shared_secret(&self, _name: &str) -> Option<BTreeMap<String, String>> {
        None
    }
    /// `configMap(name)`: the project's ConfigMap's data.
    fn config_map(&self, _name: &str) -> Option<BTreeMap<String, String>> {
        None
    }
    /// `sharedConfigMap(name)`: a ConfigMap shared by all projects.
    fn shared_config_map(&self, _name: &str) -> Option<BTreeMap<String, String>> {
        None
    }
    /// `ctx.meta.promotion.rollback`: whether the Promotion rolls a Stage back.
    fn rollback(&self) -> bool {
        false
    }
}

/// The metadata a promotion loaded into its [`ExprContext`] answers `freightMetadata` and
/// `stageMetadata` (the functions also fall back to `ctx.metadata` when a host has none).
impl KargoHost for MetadataView {
    fn freight_metadata(
        &self,
        freight: &str,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.freight_map(freight)
    }
    fn stage_metadata(&self, stage: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.stage_map(stage)
    }
}

/// A host with nothing to look up (apply-time checks, tests, analysis conditions).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHost;

impl KargoHost for NoHost {}

/// The fields of Kargo's result shapes, for the apply-time field checks.
pub const KARGO_IMAGE_FIELDS: &[&str] = &["RepoURL", "Tag", "Digest"];
/// `commitFrom()`'s fields.
pub const KARGO_COMMIT_FIELDS: &[&str] = &[
    "RepoURL",
    "ID",
    "Branch",
    "Tag",
    "Message",
    "Author",
    "Committer",
];
/// `chartFrom()`'s fields.
pub const KARGO_CHART_FIELDS: &[&str] = &["RepoURL", "Name", "Version"];
/// `warehouse()`'s fields (a Freight origin).
pub const KARGO_ORIGIN_FIELDS: &[&str] = &["Kind", "Name"];
/// `semverParse()`'s fields (also callable as methods: `.Major()`).
pub const KARGO_SEMVER_FIELDS: &[&str] = &[
    "Major",
    "Minor",
    "Patch",
    "Prerelease",
    "Metadata",
    "Original",
];

/// Kargo's image: `{RepoURL, Tag, Digest}`.
pub fn kargo_image(image: &FreightImage) -> serde_json::Value {
    json!({"RepoURL": image.repo_url, "Tag": image.tag, "Digest": image.digest})
}

/// Kargo's commit: `{RepoURL, ID, Branch, Tag, Message, Author, Committer}` (Dray keeps no
/// committer: `""`, as are a missing branch and tag).
pub fn kargo_commit(commit: &FreightCommit) -> serde_json::Value {
    json!({
        "RepoURL": commit.repo_url,
        "ID": commit.id,
        "Branch": commit.branch.clone().unwrap_or_default(),
        "Tag": commit.tag.clone().unwrap_or_default(),
        "Message": commit.message,
        "Author": commit.author,
        "Committer": "",
    })
}

/// Kargo's chart: `{RepoURL, Name, Version}`.
pub fn kargo_chart(chart: &FreightChart) -> serde_json::Value {
    json!({"RepoURL": chart.repo_url, "Name": chart.name, "Version": chart.version})
}

/// Registers Kargo's functions in `env`, reading `ctx` and `host`.
pub(crate) fn add_kargo_functions<'a>(
    env: &mut Environment<'a>,
    ctx: &'a ExprContext,
    host: &'a dyn KargoHost,
) {
    let freight = &ctx.freight;
    env.add_function("warehouse", |call| {
        let name = string_arg(&call.args, 0, 1, "warehouse")?;
        if name.is_empty() {
            return Err("warehouse(): the name must not be empty".to_owned().into());
        }
        Ok([
            ("Kind", Value::from("Warehouse")),
            ("Name", Value::from(name)),
        ]
        .into_iter()
        .collect())
    });
    env.add_function("imageFrom", move |call| {
        let repo = repo_arg(&call.args, "imageFrom", 2)?;
        origin_arg(freight, call.args.get(1), "imageFrom")?;
        let image = find_image(freight, &repo)?;
        Ok(json_to_expr(&kargo_image(image)))
    });
    env.add_function("commitFrom", move |call| {
        let repo = repo_arg(&call.args, "commitFrom", 2)?;
        origin_arg(freight, call.args.get(1), "commitFrom")?;
        let commit = find_commit(freight, &repo)?;
        Ok(json_to_expr(&kargo_commit(commit)))
    });
    env.add_function("chartFrom", move |call| {
        let repo = repo_arg(&call.args, "chartFrom", 3)?;
        let (name, origin) = match (call.args.get(1), call.args.get(2)) {
            (Some(Value::String(name)), origin) => (Some(name.as_str()), origin),
            (Some(origin @ Value::Map(_)), None) => (None, Some(origin)),
            (Some(other), _) => {
                return Err(format!(
                    "chartFrom(): the second argument must be a chart name or warehouse(…), not \
                     a {}",
                    type_name(other)
                )
                .into());
            }
            (None, _) => (None, None),
        };
        origin_arg(freight, origin, "chartFrom")?;
        let chart = find_chart(freight, &repo, name)?;
        Ok(json_to_expr(&kargo_chart(chart)))
    });
    env.add_function("quote", |call| {
        let value = one_arg(&call.args, "quote")?;
        match value {
            Value::String(s) => Ok(Value::String(go_quote(s))),
            other => Ok(Value::String(unsafe_quote(other)?)),
        }
    });
    env.add_function("unsafeQuote", |call| {
        let value = one_arg(&call.args, "unsafeQuote")?;
        Ok(Value::String(unsafe_quote(value)?))
    });
    env.add_function("freightMetadata", move |call| {
        metadata(&call.args, "freightMetadata", |name| {
            host.freight_metadata(name)
                .or_else(|| ctx.metadata.freight_map(name))
        })
    });
    env.add_function("stageMetadata", move |call| {
        metadata(&call.args, "stageMetadata", |name| {
            host.stage_metadata(name)
                .or_else(|| ctx.metadata.stage_map(name))
        })
    });
    env.add_function("secret", move |call| {
        data(string_arg(&call.args, 0, 1, "secret")?, |n| host.secret(n))
    });
    env.add_function("sharedSecret", move |call| {
        data(string_arg(&call.args, 0, 1, "sharedSecret")?, |n| {
            host.shared_secret(n)
        })
    });
    env.add_function("configMap", move |call| {
        data(string_arg(&call.args, 0, 1, "configMap")?, |n| {
            host.config_map(n)
        })
    });
    env.add_function("sharedConfigMap", move |call| {
        data(string_arg(&call.args, 0, 1, "sharedConfigMap")?, |n| {
            host.shared_config_map(n)
        })
    });
    env.add_function("status", move |call| {
        let alias = string_arg(&call.args, 0, 1, "status")?;
        if alias.is_empty() {
            return Err("status(): the step alias must not be empty"
                .to_owned()
                .into());
        }
        Ok(Value::String(
            ctx.step_statuses.get(&alias).cloned().unwrap_or_default(),
        ))
    });
    env.add_function("success", move |call| {
        no_args(&call.args, "success")?;
        Ok(Value::Bool(!ctx.any_failed))
    });
    env.add_function("failure", move |call| {
        no_args(&call.args, "failure")?;
        Ok(Value::Bool(ctx.any_failed))
    });
    env.add_function("always", |call| {
        no_args(&call.args, "always")?;
        Ok(Value::Bool(true))
    });
    add_common_functions(env);
}

/// Functions both Kargo templates and Argo Rollouts conditions get: semver, and JSON
/// (expr-lang's `json` feature is off, see docs/decisions.md).
pub(crate) fn add_common_functions(env: &mut Environment<'_>) {
    env.add_function("semverParse", |call| {
        let text = string_arg(&call.args, 0, 1, "semverParse")?;
        semver::parse(&text)
            .map(|v| json_to_expr(&v.to_json()))
            .ok_or_else(|| format!("semverParse(): invalid semantic version `{text}`").into())
    });
    env.add_function("semverDiff", |call| {
        let a = string_arg(&call.args, 0, 2, "semverDiff")?;
        let b = string_arg(&call.args, 1, 2, "semverDiff")?;
        Ok(Value::from(semver::diff(&a, &b)))
    });
    env.add_function("toJSON", |call| {
        let value = one_arg(&call.args, "toJSON")?;
        let json = expr_to_json(value).map_err(|what| format!("toJSON(): cannot write {what}"))?;
        serde_json::to_string_pretty(&json)
            .map(Value::String)
            .map_err(|e| format!("toJSON(): {e}").into())
    });
    env.add_function("fromJSON", |call| {
        let text = string_arg(&call.args, 0, 1, "fromJSON")?;
        serde_json::from_str::<serde_json::Value>(&text)
            .map(|v| json_to_expr(&v))
            .map_err(|e| format!("fromJSON(): invalid JSON: {e}").into())
    });
}

type Outcome<T> = Result<T, expr::Error>;

fn one_arg<'v>(args: &'v [Value], name: &str) -> Outcome<&'v Value> {
    match args {
        [value] => Ok(value),
        _ => Err(format!("{name}() takes 1 argument, got {}", args.len()).into()),
    }
}

fn no_args(args: &[Value], name: &str) -> Outcome<()> {
    if args.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}() takes no argument, got {}", args.len()).into())
    }
}

/// The string argument `index` of a function taking at most `max`.
fn string_arg(args: &[Value], index: usize, max: usize, name: &str) -> Outcome<String> {
    if args.len() <= index || args.len() > max {
        let wanted = if max == 1 {
            "1 argument".to_owned()
        } else {
            format!("{} to {max} arguments", index + 1)
        };
        return Err(format!("{name}() takes {wanted}, got {}", args.len()).into());
    }
    match &args[index] {
        Value::String(s) => Ok(s.clone()),
        other => Err(format!(
            "{name}(): argument {} must be a string, not a {}",
            index + 1,
            type_name(other)
        )
        .into()),
    }
}

fn repo_arg(args: &[Value], name: &str, max: usize) -> Outcome<String> {
    string_arg(args, 0, max, name)
}

/// Checks a `warehouse(…)` argument against the one Freight Dray promotes.
fn origin_arg(freight: &FreightView, origin: Option<&Value>, name: &str) -> Outcome<()> {
    let Some(origin) = origin else {
        return Ok(());
    };
    let wanted = origin
        .as_map()
        .and_then(|m| m.get("Name"))
        .and_then(Value::as_string)
        .ok_or_else(|| format!("{name}(): the origin must be warehouse(\"name\")"))?;
    if wanted == freight.origin.name {
        Ok(())
    } else {
        Err(format!(
            "{name}(): the Freight being promoted (`{}`) comes from Warehouse `{}`, not `{wanted}`",
            freight.id, freight.origin.name
        )
        .into())
    }
}

/// `freightMetadata(name[, key])`, `stageMetadata(name[, key])`: the map, or one value,
/// `nil` when absent.
fn metadata(
    args: &[Value],
    name: &str,
    lookup: impl Fn(&str) -> Option<serde_json::Map<String, serde_json::Value>>,
) -> Outcome<Value> {
    let object = string_arg(args, 0, 2, name)?;
    if object.is_empty() {
        return Err(format!("{name}(): the name must not be empty").into());
    }
    let key = if args.len() == 2 {
        Some(string_arg(args, 1, 2, name)?)
    } else {
        None
    };
    let Some(map) = lookup(&object) else {
        return Ok(Value::Nil);
    };
    Ok(match key {
        Some(key) => map.get(&key).map_or(Value::Nil, json_to_expr),
        None => json_to_expr(&serde_json::Value::Object(map)),
    })
}

/// `secret(name)` and the like: the data, or an empty map.
fn data(name: String, lookup: impl Fn(&str) -> Option<BTreeMap<String, String>>) -> Outcome<Value> {
    Ok(lookup(&name).unwrap_or_default().into_iter().collect())
}

/// Go's `%q` of a string: a double-quoted literal with Go's escapes.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Kargo's `unsafeQuote(x)`: `x` as JSON, in quotes.
fn unsafe_quote(value: &Value) -> Outcome<String> {
    let json = expr_to_json(value).map_err(|what| format!("cannot quote {what}"))?;
    Ok(format!("\"{}\"", go_json(&json)))
}
