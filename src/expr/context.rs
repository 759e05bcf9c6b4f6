//! What an expression can see: [`ExprContext`], and the conversions between JSON and CEL
//! values.
//!
//! The variables are `ctx` (`project`, `stage`, `promotion`, `actor`, `targetFreight`),
//! `vars`, `outputs`, inside a PromotionTask `task` (`task.outputs`), and any `extra` ones
//! (e.g. `response` for an HTTP gate). The caller fills
//! them in (merging `vars` stage < template < step); this module only shapes them. JSON
//! integers become CEL `int` (not `uint`, so `response.status + 1` works), other numbers
//! `double`. The functions (`imageFrom`, `success()`, …) live in `functions.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use serde_json::{Number, Value, json};

use crate::api::{Freight, FreightChart, FreightCommit, FreightImage, FreightOrigin, Metadata};

/// Everything an expression of one step can refer to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExprContext {
    /// `ctx.project`.
    pub project: String,
    /// `ctx.stage`.
    pub stage: String,
    /// `ctx.promotion`: the Promotion's name.
    pub promotion: String,
    /// `ctx.actor`: who asked for the Promotion.
    pub actor: String,
    /// `ctx.targetFreight`, and what `imageFrom()` and `commitFrom()` look in.
    pub freight: FreightView,
    /// `vars`, already merged by the caller (stage < template < step).
    pub vars: serde_json::Map<String, Value>,
    /// `outputs.<alias>.<key>`: the outputs of the earlier steps, by alias.
    pub outputs: serde_json::Map<String, Value>,
    /// `task.outputs.<key>`: set only for the steps of an expanded PromotionTask.
    pub task_outputs: Option<serde_json::Map<String, Value>>,
    /// `status(alias)`: the status of each earlier step (`Succeeded`, `Failed`, …).
    pub step_statuses: BTreeMap<String, String>,
    /// Whether an earlier step failed: `success()` and `failure()`.
    pub any_failed: bool,
    /// More top-level variables for one kind of expression, e.g. `response` for an HTTP
    /// gate's success condition. `ctx`, `vars`, `outputs` and `task` take precedence.
    pub extra: serde_json::Map<String, Value>,
    /// What `freightMetadata()` and `stageMetadata()` read (loaded by the caller).
    pub metadata: MetadataView,
}

/// The metadata of a project's Freight and Stages, as `freightMetadata(name)` and
/// `stageMetadata(name)` see it: a resource without metadata is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataView {
    /// By Freight name (id).
    pub freight: BTreeMap<String, Metadata>,
    /// By Stage name.
    pub stages: BTreeMap<String, Metadata>,
}

impl MetadataView {
    /// Freight `name`'s metadata, as a JSON object; `None` when it has none.
    pub fn freight_map(&self, name: &str) -> Option<serde_json::Map<String, Value>> {
        self.freight.get(name).map(to_object)
    }

    /// Stage `name`'s metadata, as a JSON object; `None` when it has none.
    pub fn stage_map(&self, name: &str) -> Option<serde_json::Map<String, Value>> {
        self.stages.get(name).map(to_object)
    }
}

fn to_object(metadata: &Metadata) -> serde_json::Map<String, Value> {
    metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The Freight being promoted, as expressions see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FreightView {
    /// The Freight's id (its name).
    pub id: String,
    /// Its friendly alias.
    pub alias: String,
    /// The Warehouse that minted it.
    pub origin: FreightOrigin,
    /// Its images, for `imageFrom()`.
    pub images: Vec<FreightImage>,
    /// Its commits, for `commitFrom()`.
    pub commits: Vec<FreightCommit>,
    /// Its Helm charts, for `chartFrom()`.
    pub charts: Vec<FreightChart>,
}

impl From<&Freight> for FreightView {
    fn from(freight: &Freight) -> Self {
        Self {
            id: freight.metadata.name.clone().unwrap_or_default(),
            alias: freight.spec.alias.clone(),
            origin: freight.spec.origin.clone(),
            images: freight.spec.images.clone(),
            commits: freight.spec.commits.clone(),
            charts: freight.spec.charts.clone(),
        }
    }
}

/// The names of the variables, for error messages.
pub(crate) const VARIABLES: &[&str] = &["ctx", "vars", "outputs", "task"];

impl ExprContext {
    /// The variables as JSON, by name: `ctx`, `vars`, `outputs`, inside a task `task`, and
    /// the `extra` ones.
    pub fn variables(&self) -> serde_json::Map<String, Value> {
        let freight = &self.freight;
        let mut variables = self.extra.clone();
        variables.insert(
            "ctx".into(),
            json!({
                "project": self.project,
                "stage": self.stage,
                "promotion": self.promotion,
                "actor": self.actor,
                "targetFreight": {
                    "id": freight.id,
                    "name": freight.id,
                    "alias": freight.alias,
                    "origin": freight.origin,
                },
            }),
        );
        variables.insert("vars".into(), Value::Object(self.vars.clone()));
        variables.insert("outputs".into(), Value::Object(self.outputs.clone()));
        if let Some(outputs) = &self.task_outputs {
            variables.insert("task".into(), json!({ "outputs": outputs }));
        }
        variables
    }
}

/// A JSON value as a CEL value: integers as `int` (or `uint` beyond `i64`), other numbers
/// as `double`, objects as maps with string keys.
pub fn json_to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Value::Object(fields) => cel::Value::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// A CEL value as JSON, or a description of what has no JSON form. Map keys become
/// strings; timestamps RFC 3339 strings; durations seconds (`"90s"`).
pub fn cel_to_json(value: &cel::Value) -> Result<Value, String> {
    Ok(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("the double `{f}`"))?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::Bytes(b) => Value::String(
            String::from_utf8(b.to_vec()).map_err(|_| "bytes that are not UTF-8".to_owned())?,
        ),
        cel::Value::List(items) => {
            Value::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        cel::Value::Map(map) => {
            let mut fields = serde_json::Map::new();
            for (key, value) in map.map.iter() {
                let key = match key {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                fields.insert(key, cel_to_json(value)?);
            }
            Value::Object(fields)
        }
        cel::Value::Timestamp(t) => Value::String(t.to_rfc3339()),
        cel::Value::Duration(d) => Value::String(format!("{}s", d.num_seconds())),
        other => return Err(format!("a CEL {}", other.type_of())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_integers_are_cel_ints() {
        assert_eq!(json_to_cel(&json!(200)), cel::Value::Int(200));
        assert_eq!(json_to_cel(&json!(-1)), cel::Value::Int(-1));
        assert_eq!(json_to_cel(&json!(u64::MAX)), cel::Value::UInt(u64::MAX));
        assert_eq!(json_to_cel(&json!(1.5)), cel::Value::Float(1.5));
    }

    #[test]
    fn json_round_trips() {
        let value = json!({"a": [1, 2.5, "s", true, null], "b": {"c": -3}});
        assert_eq!(cel_to_json(&json_to_cel(&value)).unwrap(), value);
        assert!(cel_to_json(&cel::Value::Float(f64::NAN)).is_err());
    }

    #[test]
    fn variables_shape_ctx_and_task() {
        let mut ctx = ExprContext {
            project: "shop".into(),
            freight: FreightView {
                id: "abc".into(),
                alias: "frosty-otter".into(),
                ..FreightView::default()
            },
            ..ExprContext::default()
        };
        let vars = ctx.variables();
        assert_eq!(vars["ctx"]["project"], "shop");
        assert_eq!(vars["ctx"]["targetFreight"]["alias"], "frosty-otter");
        assert_eq!(vars["ctx"]["targetFreight"]["origin"]["kind"], "Warehouse");
        assert!(!vars.contains_key("task"));
        ctx.task_outputs = Some(serde_json::Map::new());
        assert_eq!(ctx.variables()["task"], json!({"outputs": {}}));
        ctx.extra.insert("response".into(), json!({"status": 200}));
        ctx.extra.insert("vars".into(), json!("shadowed"));
        let vars = ctx.variables();
        assert_eq!(vars["response"]["status"], 200);
        assert_eq!(vars["vars"], json!({}));
    }
}
