//! Editing a YAML file in place the way a person would: the lossless `yaml-edit` tree
//! keeps comments, key order, indentation and quoting of everything the edit does not
//! touch, and every edit is checked against a plain parse (`serde_yaml_ng`) before it is
//! written, so an edit can never change more than it says.
//!
//! Not a step; `yaml-update` and `kustomize-set-image` use it.

use std::str::FromStr;

use serde_yaml_ng::Value;
use yaml_edit::{Document, ScalarValue, YamlFile, YamlNode};

use crate::StepOutcome;

/// A YAML file being edited: the lossless tree and the plain value it held before.
pub(crate) struct YamlEdit {
    file: YamlFile,
    /// The one document.
    pub(crate) doc: Document,
    /// The file's content as plain data, before any edit.
    pub(crate) before: Value,
}

impl YamlEdit {
    /// Parses `text`, the content of `shown`, which must hold exactly one YAML document.
    pub(crate) fn parse(text: &str, shown: &str) -> Result<Self, StepOutcome> {
        let mut docs = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(text) {
            let value = serde::Deserialize::deserialize(doc)
                .map_err(|e| StepOutcome::failed(format!("`{shown}` is not valid YAML: {e}")))?;
            docs.push(value);
        }
        if docs.len() > 1 {
            return Err(StepOutcome::failed(format!(
                "`{shown}` holds {} YAML documents; this step edits files with one document",
                docs.len()
            )));
        }
        let before = docs.pop().unwrap_or(Value::Null);
        let file = YamlFile::from_str(text).map_err(|e| {
            StepOutcome::failed(format!("`{shown}` could not be parsed for editing: {e}"))
        })?;
        let doc = file.ensure_document();
        Ok(YamlEdit { file, doc, before })
    }

    /// The edited text, after checking that it parses to `expected` and nothing else.
    pub(crate) fn finish(&self, expected: &Value, shown: &str) -> Result<String, StepOutcome> {
        let text = self.file.to_string();
        let after: Value = serde_yaml_ng::from_str(&text).map_err(|e| {
            StepOutcome::failed(format!(
                "editing `{shown}` produced invalid YAML ({e}); the file was left as it was"
            ))
        })?;
        if &after != expected {
            return Err(StepOutcome::failed(format!(
                "editing `{shown}` would change more than the requested keys (is a value shared \
                 through a YAML anchor or alias?); the file was left as it was"
            )));
        }
        Ok(text)
    }
}

/// A string scalar for `value` that keeps the quoting of the scalar it replaces (`"…"` stays
/// double-quoted, `'…'` single-quoted); otherwise plain, quoted only where YAML needs it
/// (`'1.20'`, `'true'`), so a string stays a string.
pub(crate) fn string_like(old: Option<&YamlNode>, value: &str) -> ScalarValue {
    match old {
        Some(YamlNode::Scalar(s)) if s.is_quoted() && s.value().starts_with('"') => {
            ScalarValue::double_quoted(value)
        }
        Some(YamlNode::Scalar(s)) if s.is_quoted() => ScalarValue::single_quoted(value),
        _ => ScalarValue::string(value),
    }
}

/// The string held by a scalar node, if it is one.
pub(crate) fn as_str(node: &YamlNode) -> Option<String> {
    match node {
        YamlNode::Scalar(s) => Some(s.as_string()),
        _ => None,
    }
}

/// The plain (`serde_yaml_ng`) form of a JSON value from a step's config.
pub(crate) fn plain(value: &serde_json::Value) -> Value {
    serde_yaml_ng::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_kept_and_escaped() {
        let text = "a: \"x\"\nb: 'y'\nc: z\n";
        let edit = YamlEdit::parse(text, "f.yaml").unwrap();
        let m = edit.doc.as_mapping().unwrap();
        for (key, value) in [("a", "say \"hi\"\\"), ("b", "it's"), ("c", "1.20")] {
            let old = m.get(key);
            m.set(key, string_like(old.as_ref(), value));
        }
        let mut expected = edit.before.clone();
        expected["a"] = Value::from("say \"hi\"\\");
        expected["b"] = Value::from("it's");
        expected["c"] = Value::from("1.20");
        let out = edit.finish(&expected, "f.yaml").unwrap();
        assert_eq!(out, "a: \"say \\\"hi\\\"\\\\\"\nb: 'it''s'\nc: '1.20'\n");
    }

    #[test]
    fn several_documents_and_broken_yaml_are_refused() {
        let Err(StepOutcome::Failed { reason }) = YamlEdit::parse("a: 1\n---\nb: 2\n", "f") else {
            panic!("accepted two documents")
        };
        assert!(reason.contains("holds 2 YAML documents"), "{reason}");
        let Err(StepOutcome::Failed { reason }) = YamlEdit::parse("a: [1\nb: 2\n", "f") else {
            panic!("accepted broken YAML")
        };
        assert!(reason.starts_with("`f` is not valid YAML"), "{reason}");
    }
}
