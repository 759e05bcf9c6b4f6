//! `toml-update`: sets values of existing keys in a TOML file by key path, keeping
//! comments, order and formatting (Kargo's `toml-update`), with `toml_edit`'s lossless
//! document. Key paths are `key_path.rs`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value as Json;
use toml_edit::{DocumentMut, Item, Table, Value};

use super::files::{read_text, resolve};
use super::key_path::{self, Update, place};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "toml-update";

/// Configuration of `toml-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The TOML file to edit, relative to the work directory.
    path: String,
    /// The values to set, in order.
    #[schemars(length(min = 1))]
    updates: Vec<Update>,
}

/// The `toml-update` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TomlUpdate;

#[async_trait]
impl TypedStep for TomlUpdate {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, &config) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    if config.updates.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `updates`: list at least one key to set"
        )));
    }
    let file = resolve(ctx, &config.path, true)?;
    let text = read_text(&file, &config.path)?;
    let mut document: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        StepOutcome::failed(format!("`{}` is not valid TOML: {e}", config.path))
    })?;
    for update in &config.updates {
        let parts = key_path::parse(KIND, &update.key)?;
        let cannot = |why: String| {
            StepOutcome::failed(format!(
                "cannot set `{}` in `{}`: {why}",
                update.key, config.path
            ))
        };
        let new = to_toml(&update.value).map_err(cannot)?;
        set_in_table(document.as_table_mut(), &parts, 0, new).map_err(cannot)?;
    }
    key_path::write_edit(
        ctx,
        &file,
        &config.path,
        &document.to_string(),
        config.updates.iter().map(|u| (u.key.as_str(), &u.value)),
    )
}

fn set_in_table(
    table: &mut Table,
    parts: &[String],
    depth: usize,
    new: Value,
) -> Result<(), String> {
    let part = &parts[depth];
    let Some(child) = table.get_mut(part) else {
        return Err(format!(
            "{} has no key `{part}`; check the key (toml-update sets existing keys)",
            place(&parts[..depth])
        ));
    };
    set_in_item(child, parts, depth + 1, new)
}

fn set_in_item(item: &mut Item, parts: &[String], depth: usize, new: Value) -> Result<(), String> {
    let here = place(&parts[..depth]);
    match item {
        Item::Value(value) if depth == parts.len() => {
            replace(value, new);
            Ok(())
        }
        Item::Value(value) => set_in_value(value, parts, depth, new),
        Item::Table(table) if depth < parts.len() => set_in_table(table, parts, depth, new),
        Item::ArrayOfTables(tables) if depth < parts.len() => {
            let index = index(parts, depth)?;
            let len = tables.len();
            let table = tables
                .get_mut(index)
                .ok_or_else(|| format!("{here} has {len} tables, so there is no table {index}"))?;
            set_in_table(table, parts, depth + 1, new)
        }
        _ => Err(format!(
            "{here} is a table; toml-update sets values, not whole tables"
        )),
    }
}

fn set_in_value(
    value: &mut Value,
    parts: &[String],
    depth: usize,
    new: Value,
) -> Result<(), String> {
    let here = place(&parts[..depth]);
    let part = &parts[depth];
    let child = match value {
        Value::Array(items) => {
            let index = index(parts, depth)?;
            let len = items.len();
            items.get_mut(index).ok_or_else(|| {
                format!("{here} has {len} items, so there is no item {index} (lists never grow)")
            })?
        }
        Value::InlineTable(table) => table.get_mut(part).ok_or_else(|| {
            format!("{here} has no key `{part}`; check the key (toml-update sets existing keys)")
        })?,
        _ => return Err(format!("{here} is a single value, so it has no `{part}`")),
    };
    if depth + 1 == parts.len() {
        replace(child, new);
        Ok(())
    } else {
        set_in_value(child, parts, depth + 1, new)
    }
}

fn index(parts: &[String], depth: usize) -> Result<usize, String> {
    parts[depth].parse().map_err(|_| {
        format!(
            "{} is a list: use an item number instead of `{}`",
            place(&parts[..depth]),
            parts[depth]
        )
    })
}

/// Replaces `slot` with `new`, keeping the spaces and comments around the old value.
fn replace(slot: &mut Value, mut new: Value) {
    *new.decor_mut() = slot.decor().clone();
    *slot = new;
}

fn to_toml(value: &Json) -> Result<Value, String> {
    Ok(match value {
        Json::Null => return Err("TOML has no null; give a string, number or boolean".to_owned()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(f)) => Value::from(f),
            (None, None) => return Err(format!("{n} does not fit a TOML number")),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::Array(
            items
                .iter()
                .map(to_toml)
                .collect::<Result<toml_edit::Array, _>>()?,
        ),
        Json::Object(fields) => {
            let mut table = toml_edit::InlineTable::new();
            for (key, value) in fields {
                table.insert(key, to_toml(value)?);
            }
            Value::InlineTable(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    const SETTINGS: &str = "# app settings\n[image]\ntag = \"1.0.0\"   # the tag\npull = \"IfNotPresent\"\n\n[labels]\n\"example.com/version\" = \"1.0.0\"\n\nvalues = [1, 2, 3]\n\n[[svc]]\nname = \"a\"\nport = 80\n";

    #[tokio::test]
    async fn sets_values_keeping_comments_and_layout() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(w.join("s.toml"), SETTINGS).unwrap();
        let ctx = context(w);
        let out = outputs(
            TomlUpdate
                .run(
                    &ctx,
                    json!({"path": "s.toml", "updates": [
                        {"key": "image.tag", "value": "1.2.0"},
                        {"key": "labels.example\\.com/version", "value": "1.2.0"},
                        {"key": "labels.values.1", "value": 20},
                        {"key": "svc.0.port", "value": 8080}]}),
                )
                .await,
        );
        let expected = SETTINGS
            .replace("tag = \"1.0.0\"", "tag = \"1.2.0\"")
            .replace(
                "\"example.com/version\" = \"1.0.0\"",
                "\"example.com/version\" = \"1.2.0\"",
            )
            .replace("[1, 2, 3]", "[1, 20, 3]")
            .replace("port = 80", "port = 8080");
        assert_eq!(std::fs::read_to_string(w.join("s.toml")).unwrap(), expected);
        assert!(
            out["commitMessage"]
                .as_str()
                .unwrap()
                .starts_with("update s.toml: image.tag = 1.2.0")
        );
    }

    #[tokio::test]
    async fn names_what_cannot_be_set() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(w.join("s.toml"), SETTINGS).unwrap();
        std::fs::write(w.join("broken.toml"), "[image\n").unwrap();
        let ctx = context(w);
        let set = |path: &str, key: &str, value: Json| json!({"path": path, "updates": [{"key": key, "value": value}]});
        for (key, value, wanted) in [
            ("image.tga", json!("x"), "`image` has no key `tga`"),
            ("image", json!("x"), "`image` is a table"),
            (
                "labels.values.7",
                json!(1),
                "has 3 items, so there is no item 7",
            ),
            ("svc.x.port", json!(1), "`svc` is a list"),
            ("image.tag", Json::Null, "TOML has no null"),
        ] {
            let reason = failed(TomlUpdate.run(&ctx, set("s.toml", key, value)).await);
            assert!(reason.contains(wanted), "{key}: {reason}");
        }
        assert_eq!(std::fs::read_to_string(w.join("s.toml")).unwrap(), SETTINGS);
        let reason = failed(
            TomlUpdate
                .run(&ctx, set("broken.toml", "a", json!(1)))
                .await,
        );
        assert!(reason.contains("is not valid TOML"), "{reason}");
    }
}
