//! `toml-parse`: extracts values from a TOML file into the step's outputs (Kargo's
//! `toml-parse`); the shared run is in `parsed_outputs.rs`. TOML dates and times become
//! their RFC 3339 text.

use async_trait::async_trait;
use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item};

use super::parsed_outputs::{self, Config};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "toml-parse";

/// The `toml-parse` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TomlParse;

#[async_trait]
impl TypedStep for TomlParse {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match parsed_outputs::run(ctx, KIND, &config, parse) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn parse(text: &str) -> Result<Value, String> {
    let document: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    Ok(item(document.as_item()))
}

fn item(item: &Item) -> Value {
    match item {
        Item::None => Value::Null,
        Item::Value(v) => value(v),
        Item::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| (k.to_owned(), self::item(v)))
                .collect::<Map<_, _>>(),
        ),
        Item::ArrayOfTables(tables) => Value::Array(
            tables
                .iter()
                .map(|t| self::item(&Item::Table(t.clone())))
                .collect(),
        ),
    }
}

fn value(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => Value::from(s.value().as_str()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        T::Boolean(b) => Value::from(*b.value()),
        T::Datetime(d) => Value::from(d.value().to_string()),
        T::Array(items) => Value::Array(items.iter().map(self::value).collect()),
        T::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| (k.to_owned(), self::value(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[test]
    fn every_toml_type_becomes_plain_data() {
        let text = "title = \"x\"\nn = 3\nf = 1.5\nb = true\nd = 2026-12-01T10:00:00Z\n\
                    list = [1, 2]\ninline = { a = \"b\" }\n[image]\ntag = \"1.2.0\"\n\
                    [[svc]]\nname = \"a\"\n[[svc]]\nname = \"b\"\n";
        assert_eq!(
            parse(text).unwrap(),
            json!({"title": "x", "n": 3, "f": 1.5, "b": true, "d": "2026-12-01T10:00:00Z",
                   "list": [1, 2], "inline": {"a": "b"}, "image": {"tag": "1.2.0"},
                   "svc": [{"name": "a"}, {"name": "b"}]})
        );
    }

    #[tokio::test]
    async fn extracts_values_and_refuses_broken_files() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(
            w.join("app.toml"),
            "[package]\nversion = \"1.0.0\"\n[app]\nname = \"shop\"\n",
        )
        .unwrap();
        std::fs::write(w.join("broken.toml"), "[package\n").unwrap();
        let ctx = context(w);
        let one = |path: &str| {
            json!({"path": path, "outputs": [
            {"name": "v", "fromExpression": "document['package'].version"},
            {"name": "n", "fromExpression": "app.name"}]})
        };
        let out = outputs(TomlParse.run(&ctx, one("app.toml")).await);
        assert_eq!((&out["v"], &out["n"]), (&json!("1.0.0"), &json!("shop")));
        let reason = failed(TomlParse.run(&ctx, one("broken.toml")).await);
        assert!(
            reason.starts_with("`broken.toml` is not valid: "),
            "{reason}"
        );
    }
}
