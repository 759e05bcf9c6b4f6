//! Key paths of the file-editing steps (`yaml-update`, `json-update`, `toml-update`): map
//! keys separated by dots, list items by number, a literal dot written `\.` —
//! `spec.template.spec.containers.0.image`, `metadata.annotations.example\.com/x`.
//!
//! Not a step; each step walks its own format with the parts.

use std::path::Path;

use serde_json::{Map, Value};

use super::files::write_if_changed;
use crate::{StepContext, StepOutcome};

/// Splits `a.b\.c.0` into `["a", "b.c", "0"]`; `kind` names the step in the error.
pub(crate) fn parse(kind: &str, key: &str) -> Result<Vec<String>, StepOutcome> {
    let mut parts = vec![String::new()];
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.clone().next() == Some('.') => {
                chars.next();
                parts.last_mut().into_iter().for_each(|p| p.push('.'));
            }
            '.' => parts.push(String::new()),
            c => parts.last_mut().into_iter().for_each(|p| p.push(c)),
        }
    }
    if parts.iter().any(String::is_empty) {
        return Err(StepOutcome::failed(format!(
            "invalid `{kind}` config: key `{key}` has an empty part; separate keys with single \
             dots, e.g. `image.tag`"
        )));
    }
    Ok(parts)
}

/// Where `parts[..depth]` is, in words: `the top level` or `` `a.b` ``.
pub(crate) fn place(parts: &[String]) -> String {
    if parts.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{}`", parts.join("."))
    }
}

/// Writes an edited file (`text`) unless it already holds it, logs which, and gives the
/// edit's `commitMessage` output: `update values.yaml: image.tag = 1.2.0, n = 3`.
pub(crate) fn write_edit<'a>(
    ctx: &StepContext,
    file: &Path,
    shown: &str,
    text: &str,
    updates: impl Iterator<Item = (&'a str, &'a Value)>,
) -> Result<StepOutcome, StepOutcome> {
    if write_if_changed(file, text)? {
        ctx.log(&format!("updated `{shown}`"));
    } else {
        ctx.log(&format!("`{shown}` already had these values"));
    }
    let changes = updates
        .map(|(key, value)| match value {
            Value::String(s) => format!("{key} = {s}"),
            other => format!("{key} = {other}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut outputs = Map::new();
    outputs.insert(
        "commitMessage".to_owned(),
        Value::from(format!("update {shown}: {changes}")),
    );
    Ok(StepOutcome::succeeded(outputs))
}

/// One value to set by `json-update` or `toml-update`.
#[derive(serde::Deserialize, schemars::JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Update {
    /// The key path: keys separated by dots, list items by number (`image.tag`,
    /// `containers.0.image`); write a dot inside a key as `\.`.
    pub(crate) key: String,
    /// The new value: a string, number or boolean (lists and maps are written inline).
    pub(crate) value: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_split_and_escaped_dots_stay() {
        assert_eq!(parse("x", "a.b\\.c.0").unwrap(), ["a", "b.c", "0"]);
        assert_eq!(parse("x", "a").unwrap(), ["a"]);
        for bad in ["", "a..b", ".a", "a."] {
            assert!(parse("x", bad).is_err(), "{bad}");
        }
    }
}
