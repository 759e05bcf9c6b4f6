//! Unknown-field detection: walks a document against its kind's `openAPIV3Schema` (the
//! one the CRDs carry) and reports every field the schema does not know, with the closest
//! known spelling. Also answers "what does the schema say about this field?" for hints.
//! Types are not checked here: [`super::typed`] does that with serde.

use serde_json::Value;

use crate::api::Kind;

use super::error::Issue;
use super::path::{FieldPath, Segment};
use crate::api::suggest;

/// Top-level fields every kind takes besides those of its schema.
const ENVELOPE: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// The `metadata` fields a manifest may set.
pub(crate) const METADATA_FIELDS: [&str; 4] = ["name", "namespace", "labels", "annotations"];
/// `metadata` fields that servers set; accepted in manifests and dropped.
pub(crate) const METADATA_IGNORED: [&str; 4] =
    ["resourceVersion", "uid", "creationTimestamp", "generation"];

/// A field the schema does not know.
#[derive(Debug, Clone)]
pub(crate) struct UnknownField {
    /// The error to report.
    pub(crate) issue: Issue,
    /// The known field it most likely misspells.
    pub(crate) meant: Option<String>,
}

/// Every field of `object` that `schema` does not know, including inside `metadata`.
pub(crate) fn unknown_fields(kind: Kind, object: &Value, schema: &Value) -> Vec<UnknownField> {
    let mut issues = Vec::new();
    let Some(map) = object.as_object() else {
        return issues;
    };
    let props = properties(schema);
    let mut allowed: Vec<&str> = ENVELOPE.to_vec();
    allowed.extend(props.iter().map(|(k, _)| k.as_str()));
    for (key, value) in map {
        let path = FieldPath::of(&[key]);
        if key == "metadata" {
            check_metadata(value, &mut issues);
        } else if let Some((_, child)) = props.iter().find(|(k, _)| *k == key) {
            walk(value, child, &path, &mut issues);
        } else if !ENVELOPE.contains(&key.as_str()) {
            if !kind.has_spec() && key == "spec" {
                let fields = props
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .filter(|k| *k != "status" && !ENVELOPE.contains(k));
                let issue = Issue::new(path, "unknown field `spec`").hint(format!(
                    "{kind} has no `spec`: write its fields ({}) at the top level",
                    suggest::list(fields, 4)
                ));
                issues.push(UnknownField { issue, meant: None });
            } else {
                issues.push(unknown(key, &allowed, path));
            }
        }
    }
    issues
}

fn check_metadata(metadata: &Value, issues: &mut Vec<UnknownField>) {
    let Some(map) = metadata.as_object() else {
        return;
    };
    for key in map.keys() {
        if !METADATA_FIELDS.contains(&key.as_str()) && !METADATA_IGNORED.contains(&key.as_str()) {
            issues.push(unknown(
                key,
                &METADATA_FIELDS,
                FieldPath::of(&["metadata", key]),
            ));
        }
    }
}

fn walk(value: &Value, schema: &Value, path: &FieldPath, issues: &mut Vec<UnknownField>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(map) => {
            let props = properties(schema);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if props.is_empty() && additional.is_none() {
                return;
            }
            let allowed: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
            for (key, child) in map {
                let child_path = path.key(key);
                match props
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, s)| *s)
                    .or(additional)
                {
                    Some(child_schema) => walk(child, child_schema, &child_path, issues),
                    None => issues.push(unknown(key, &allowed, child_path)),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item, item_schema, &path.index(i), issues);
                }
            }
        }
        _ => {}
    }
}

fn properties(schema: &Value) -> Vec<(&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().collect())
        .unwrap_or_default()
}

fn unknown(key: &str, allowed: &[&str], path: FieldPath) -> UnknownField {
    let meant = suggest::closest(key, allowed.iter().copied());
    let hint = match meant {
        Some(best) => format!("did you mean `{best}`?"),
        None if allowed.is_empty() => "this object takes no fields".to_owned(),
        None => format!(
            "the fields allowed here are {}",
            suggest::list(allowed.iter().copied(), 20)
        ),
    };
    let issue = Issue::new(path, format!("unknown field `{key}`")).hint(hint);
    UnknownField {
        issue,
        meant: meant.map(str::to_owned),
    }
}

/// A field renamed by [`respelled`]: where the author wrote it, and the field it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Respelling {
    /// The path as written, e.g. `spec.requestedFrieght`.
    pub(crate) written: FieldPath,
    /// The path it most likely means, e.g. `spec.requestedFreight`.
    pub(crate) meant: FieldPath,
}

/// A copy of `object` in which each misspelled field is renamed to the field it most likely
/// means (unless that one is also present), so that the type check and the rules after it
/// see what the author meant and can report the document's other problems too; and the
/// renamings made, so that those problems can be placed where the author wrote them.
pub(crate) fn respelled(object: &Value, unknown: &[UnknownField]) -> (Value, Vec<Respelling>) {
    let mut fixed = object.clone();
    let mut renamed = Vec::new();
    for field in unknown {
        let (Some(meant), Some(parent), Some(key)) = (
            &field.meant,
            field.issue.path.parent(),
            field.issue.path.last_key(),
        ) else {
            continue;
        };
        if let Some(map) = value_at_mut(&mut fixed, &parent).and_then(Value::as_object_mut) {
            if !map.contains_key(meant) {
                if let Some(value) = map.remove(key) {
                    map.insert(meant.clone(), value);
                    renamed.push(Respelling {
                        written: field.issue.path.clone(),
                        meant: parent.key(meant),
                    });
                }
            }
        }
    }
    (fixed, renamed)
}

fn value_at_mut<'a>(value: &'a mut Value, path: &FieldPath) -> Option<&'a mut Value> {
    let mut node = value;
    for segment in path.segments() {
        node = match segment {
            Segment::Key(k) => node.get_mut(k)?,
            Segment::Index(i) => node.get_mut(*i)?,
        };
    }
    Some(node)
}

/// The schema of the value at `path`, if the schema describes it.
pub(crate) fn schema_at<'a>(schema: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    let mut node = schema;
    for segment in path.segments() {
        node = match segment {
            Segment::Key(k) => node
                .get("properties")
                .and_then(|p| p.get(k))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
            Segment::Index(_) => node.get("items")?,
        };
    }
    Some(node)
}

/// What a schema node accepts, e.g. "one of `Supersede`, `Queue`" or "a duration such as
/// `30s`, `5m` or `1h30m`", followed by its description.
pub(crate) fn describe(node: &Value) -> Option<String> {
    let accepts = if let Some(values) = node.get("enum").and_then(Value::as_array) {
        let names: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        Some(format!("one of {}", suggest::list(names, 20)))
    } else if node
        .get("pattern")
        .and_then(Value::as_str)
        .is_some_and(|p| p.contains("ms|s|m|h"))
    {
        Some("a duration such as `30s`, `5m` or `1h30m`".to_owned())
    } else {
        node.get("type").and_then(Value::as_str).map(|t| {
            match t {
                "string" => "a string",
                "integer" => "an integer",
                "number" => "a number",
                "boolean" => "`true` or `false`",
                "array" => "a list",
                "object" => "a mapping",
                other => other,
            }
            .to_owned()
        })
    };
    let description = node
        .get("description")
        .and_then(Value::as_str)
        .and_then(|d| d.lines().next())
        .map(|d| d.trim_end_matches('.').to_owned());
    match (accepts, description) {
        (Some(a), Some(d)) => Some(format!("expected {a} ({d})")),
        (Some(a), None) => Some(format!("expected {a}")),
        (None, Some(d)) => Some(d),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::crd::schema;

    fn paths(found: &[UnknownField]) -> Vec<String> {
        found.iter().map(|u| u.issue.path.to_string()).collect()
    }

    #[test]
    fn reports_misspelled_fields_with_the_closest_spelling() {
        let stage = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "dev", "lables": {}, "uid": "x"},
            "spec": {
                "requestedFrieght": [],
                "promotionTemplate": {"spec": {"steps": [
                    {"uses": "git-clone", "config": {"anything": {"goes": 1}}, "retry": {"timout": "1m"}}
                ]}}
            },
            "extra": 1
        });
        let found = unknown_fields(Kind::Stage, &stage, &schema(Kind::Stage));
        let issues: Vec<&Issue> = found.iter().map(|u| &u.issue).collect();
        assert_eq!(
            paths(&found),
            vec![
                "extra",
                "metadata.lables",
                "spec.promotionTemplate.spec.steps[0].retry.timout",
                "spec.requestedFrieght"
            ]
        );
        assert_eq!(issues[1].hint.as_deref(), Some("did you mean `labels`?"));
        assert_eq!(issues[2].hint.as_deref(), Some("did you mean `timeout`?"));
        assert_eq!(issues[3].message, "unknown field `requestedFrieght`");
        assert_eq!(
            issues[3].hint.as_deref(),
            Some("did you mean `requestedFreight`?")
        );
        assert!(
            issues[0]
                .hint
                .as_deref()
                .unwrap()
                .starts_with("the fields allowed here are `apiVersion`")
        );
    }

    #[test]
    fn follows_maps_and_explains_freight_shape() {
        let freight = json!({
            "kind": "Freight", "metadata": {"name": "abc"}, "spec": {},
            "origin": {"kind": "Warehouse", "name": "app"},
            "status": {"verifiedIn": {"dev": {"verifiedAt": null, "bogus": 1}}}
        });
        let found = unknown_fields(Kind::Freight, &freight, &schema(Kind::Freight));
        assert_eq!(paths(&found), vec!["spec", "status.verifiedIn.dev.bogus"]);
        assert!(
            found[0]
                .issue
                .hint
                .as_deref()
                .unwrap()
                .contains("top level")
        );
        assert_eq!(found[0].meant, None);
    }

    #[test]
    fn respells_what_the_author_meant() {
        let stage = json!({"kind": "Stage", "metadata": {"name": "dev"},
                           "spec": {"requestedFrieght": [1], "Vars": [], "vars": [2]}});
        let found = unknown_fields(Kind::Stage, &stage, &schema(Kind::Stage));
        assert_eq!(
            respelled(&stage, &found).0["spec"],
            json!({"requestedFreight": [1], "Vars": [], "vars": [2]})
        );
    }

    #[test]
    fn describes_fields_for_hints() {
        let s = schema(Kind::Stage);
        let queue = schema_at(&s, &FieldPath::of(&["spec", "queuePolicy"])).unwrap();
        assert!(
            describe(queue)
                .unwrap()
                .starts_with("expected one of `Supersede`, `Queue`")
        );
        let soak = FieldPath::of(&["spec", "requestedFreight"])
            .index(0)
            .key("sources")
            .key("requiredSoakTime");
        assert!(
            describe(schema_at(&s, &soak).unwrap())
                .unwrap()
                .contains("duration")
        );
        assert!(schema_at(&s, &FieldPath::of(&["spec", "nope"])).is_none());
    }
}
