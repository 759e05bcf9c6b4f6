//! What `json-parse`, `yaml-parse` and `toml-parse` share: the configuration (a file and
//! the outputs to extract from it) and the run — read the file, parse it with the step's
//! format, evaluate each `fromExpression` with the document's top-level keys as variables
//! (beside the promotion's own: `ctx`, `vars`, `outputs`), publish the results. The whole
//! document is also `document` (unless it has a key of that name), for keys that are not
//! identifiers or are reserved words of the expression language: `document['package']`.
//!
//! Not a step; each format is its own step file with its parser.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::files::{read_text, resolve};
use crate::{StepContext, StepOutcome};

/// Configuration of the `*-parse` steps.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The file to parse, relative to the work directory.
    path: String,
    /// The values to extract, each published as `outputs.<alias>.<name>`.
    #[schemars(length(min = 1))]
    outputs: Vec<Extract>,
}

/// One value to extract.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Extract {
    /// The output's name.
    name: String,
    /// An expression (without `${{ }}`) over the document's top-level keys (and the whole
    /// document as `document`), e.g. `image.tag`, `apps[ctx.stage]` or
    /// `document['package'].version`.
    from_expression: String,
}

/// The variable holding the whole document.
const DOCUMENT: &str = "document";

/// Parses text of one format into plain data, or says why it cannot.
pub(crate) type Parser = fn(&str) -> Result<Value, String>;

/// Runs a `*-parse` step of `kind` whose files `parse` reads.
pub(crate) fn run(
    ctx: &StepContext,
    kind: &str,
    config: &Config,
    parse: Parser,
) -> Result<StepOutcome, StepOutcome> {
    if config.outputs.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{kind}` config at `outputs`: name at least one value to extract"
        )));
    }
    let file = resolve(ctx, &config.path, true)?;
    let text = read_text(&file, &config.path)?;
    let document = parse(&text)
        .map_err(|why| StepOutcome::failed(format!("`{}` is not valid: {why}", config.path)))?;
    let variables = match document {
        Value::Object(mut fields) => {
            if !fields.contains_key(DOCUMENT) {
                let whole = Value::Object(fields.clone());
                fields.insert(DOCUMENT.to_owned(), whole);
            }
            fields
        }
        other => {
            return Err(StepOutcome::failed(format!(
                "`{}` holds a {} at the top, not a map of keys to extract from",
                config.path,
                type_name(&other)
            )));
        }
    };
    let mut outputs = Map::new();
    for extract in &config.outputs {
        let value = ctx
            .exprs
            .evaluate(&extract.from_expression, &variables)
            .map_err(|why| {
                StepOutcome::failed(format!(
                    "output `{}` (`{}`) of `{}`: {why}",
                    extract.name, extract.from_expression, config.path
                ))
            })?;
        outputs.insert(extract.name.clone(), value);
    }
    Ok(StepOutcome::succeeded(outputs))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}
