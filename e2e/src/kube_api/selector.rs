//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`key) and field selectors
//! (`metadata.name`, `metadata.namespace`) as list and watch accept them.
//!
//! It owns parsing and matching; it knows nothing about storage.

use serde_json::Value;

use super::status::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for ch in text.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|part| part.trim().to_owned())
        .filter(|part| !part.is_empty())
        .collect()
}

fn set_values(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses `labelSelector`; a malformed one is a 400 as on the real server.
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::bad_request(format!(
                "unable to parse requirement: invalid label selector: {text:?}"
            ))
        };
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let requirement = if let Some((key, values)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().to_owned(), set_values(values).ok_or_else(bad)?)
            } else if let Some((key, values)) = part.split_once(" in ") {
                Requirement::In(key.trim().to_owned(), set_values(values).ok_or_else(bad)?)
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_owned())
            } else if part.contains(' ') || part.contains('(') {
                return Err(bad());
            } else {
                Requirement::Exists(part.clone())
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// Whether `labels` (a `metadata.labels` map or null) satisfy every requirement.
    pub(crate) fn matches(&self, labels: &Value) -> bool {
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => {
                label(key).is_some_and(|l| values.iter().any(|v| v == l))
            }
            Requirement::NotIn(key, values) => {
                label(key).is_none_or(|l| values.iter().all(|v| v != l))
            }
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::NotExists(key) => label(key).is_none(),
        })
    }

    /// Whether a `matchLabels`/`matchExpressions` LabelSelector object selects `labels`.
    pub(crate) fn object_matches(selector: &Value, labels: &Value) -> bool {
        if selector.is_null() {
            return true;
        }
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        let labels_ok = selector["matchLabels"].as_object().is_none_or(|wanted| {
            wanted
                .iter()
                .all(|(key, value)| label(key) == value.as_str())
        });
        let expressions_ok = selector["matchExpressions"].as_array().is_none_or(|exprs| {
            exprs.iter().all(|expr| {
                let key = expr["key"].as_str().unwrap_or_default();
                let values: Vec<&str> = expr["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match expr["operator"].as_str() {
                    Some("In") => label(key).is_some_and(|l| values.contains(&l)),
                    Some("NotIn") => label(key).is_none_or(|l| !values.contains(&l)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
        });
        labels_ok && expressions_ok
    }
}

/// A parsed field selector: `metadata.name`, `metadata.namespace` and any other dotted
/// path (`involvedObject.name` for events, `spec.nodeName`, …), `=`, `==`, `!=`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in split_top(text) {
            let (field, equal, value) = if let Some((field, value)) = part.split_once("!=") {
                (field, false, value)
            } else if let Some((field, value)) = part.split_once("==") {
                (field, true, value)
            } else if let Some((field, value)) = part.split_once('=') {
                (field, true, value)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field.is_empty() || field.split('.').any(str::is_empty) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field
                .split('.')
                .try_fold(object, |current, part| current.get(part))
                .map(|found| match found {
                    Value::String(text) => text.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let labels = json!({"app": "web", "tier": "front"});
        let yes = [
            "app=web",
            "app==web,tier",
            "app in (web, api)",
            "tier notin (back)",
            "!missing",
            "app!=api",
        ];
        for text in yes {
            assert!(
                LabelSelector::parse(text).unwrap().matches(&labels),
                "{text}"
            );
        }
        let no = ["app=api", "missing", "app notin (web)", "!app"];
        for text in no {
            assert!(
                !LabelSelector::parse(text).unwrap().matches(&labels),
                "{text}"
            );
        }
    }

    #[test]
    fn field_selector_on_name() {
        let object = json!({"metadata": {"name": "a", "namespace": "n"}});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&object)
        );
        assert!(
            !FieldSelector::parse("metadata.namespace!=n")
                .unwrap()
                .matches(&object)
        );
        assert!(FieldSelector::parse("spec..x=1").is_err());
        let event = json!({"involvedObject": {"name": "dev"}});
        assert!(
            FieldSelector::parse("involvedObject.name=dev")
                .unwrap()
                .matches(&event)
        );
    }
}
