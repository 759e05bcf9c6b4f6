//! Structural-schema handling of custom objects as the real API server does it: unknown
//! fields pruned (and reported), nulls pruned unless `nullable`, then validation of types,
//! `required`, `enum` and `pattern`, worded as the server's field errors.
//!
//! It owns one object against one schema; it does not know where either came from.

use serde_json::{Map, Value};

use super::status::Cause;

/// What checking an object found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Paths of the unknown fields that were pruned, e.g. `spec.foo`.
    pub(crate) unknown: Vec<String>,
    pub(crate) causes: Vec<Cause>,
}

/// Prunes and validates `object` (a whole custom object) against `schema`
/// (`openAPIV3Schema`); `metadata`, `apiVersion` and `kind` are the server's, not the schema's.
pub(crate) fn check(object: &mut Value, schema: &Value) -> Checked {
    let mut checked = Checked::default();
    let Some(fields) = object.as_object_mut() else {
        return checked;
    };
    let properties = schema["properties"].as_object();
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    let keys: Vec<String> = fields.keys().cloned().collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match properties.and_then(|properties| properties.get(&key)) {
            Some(sub) => {
                if let Some(value) = fields.get_mut(&key) {
                    walk(value, sub, &key, &mut checked);
                }
                if fields.get(&key).is_some_and(Value::is_null) && sub["nullable"] != true {
                    fields.remove(&key);
                }
            }
            None if preserve => {}
            None => {
                fields.remove(&key);
                checked.unknown.push(key);
            }
        }
    }
    apply_defaults(fields, schema, "", &mut checked);
    required(fields, schema, "", &mut checked);
    checked
}

/// Fills absent properties that have a `default` (then defaults and checks inside them),
/// as the server defaults custom objects after pruning.
fn apply_defaults(
    fields: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    checked: &mut Checked,
) {
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    for (name, sub) in properties {
        if fields.contains_key(name) || path.is_empty() && name == "metadata" {
            continue;
        }
        if let Some(default) = sub.get("default") {
            let mut value = default.clone();
            walk(&mut value, sub, &child(path, name), checked);
            fields.insert(name.clone(), value);
        }
    }
}

fn number(limit: f64) -> String {
    if limit.fract() == 0.0 && limit.abs() < 1e15 {
        format!("{}", limit as i64)
    } else {
        limit.to_string()
    }
}

/// `minimum`/`maximum` and `minLength`/`maxLength`, worded as the server's.
fn bounds(value: &Value, schema: &Value, path: &str, checked: &mut Checked) {
    let mut invalid = |message: String| {
        checked.causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {path} in body {message}", shown(value)),
            field: path.to_owned(),
        });
    };
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema["minimum"].as_f64() {
            if schema["exclusiveMinimum"] == true && n <= min {
                invalid(format!("should be greater than {}", number(min)));
            } else if n < min {
                invalid(format!(
                    "should be greater than or equal to {}",
                    number(min)
                ));
            }
        }
        if let Some(max) = schema["maximum"].as_f64() {
            if schema["exclusiveMaximum"] == true && n >= max {
                invalid(format!("should be less than {}", number(max)));
            } else if n > max {
                invalid(format!("should be less than or equal to {}", number(max)));
            }
        }
    }
    if let Some(text) = value.as_str() {
        let chars = text.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64().filter(|min| chars < *min) {
            invalid(format!("should be at least {min} chars long"));
        }
        if let Some(max) = schema["maxLength"].as_u64().filter(|max| chars > *max) {
            invalid(format!("should be at most {max} chars long"));
        }
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn required(fields: &Map<String, Value>, schema: &Value, path: &str, checked: &mut Checked) {
    for name in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str()
            && !fields.contains_key(name)
        {
            checked.causes.push(Cause {
                reason: "FieldValueRequired",
                message: "Required value".to_owned(),
                field: child(path, name),
            });
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text:?}"),
        Value::Object(_) => "\"object\"".to_owned(),
        Value::Array(_) => "\"array\"".to_owned(),
        other => other.to_string(),
    }
}

fn walk(value: &mut Value, schema: &Value, path: &str, checked: &mut Checked) {
    if value.is_null() {
        return;
    }
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if let Some(wanted) = schema["type"].as_str() {
        let actual = type_name(value);
        let fits = actual == wanted
            || (wanted == "number" && actual == "integer")
            || (int_or_string && (actual == "integer" || actual == "string"));
        if !fits {
            checked.causes.push(Cause {
                reason: "FieldValueTypeInvalid",
                message: format!(
                    "Invalid value: {}: {path} in body must be of type {wanted}: {}",
                    shown(value),
                    shown(&Value::String(actual.to_owned()))
                ),
                field: path.to_owned(),
            });
            return;
        }
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(shown).collect();
        checked.causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: {}",
                shown(value),
                supported.join(", ")
            ),
            field: path.to_owned(),
        });
    }
    if let (Some(pattern), Some(text)) = (schema["pattern"].as_str(), value.as_str())
        && let Ok(regex) = regex::Regex::new(pattern)
        && !regex.is_match(text)
    {
        checked.causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: {path} in body should match '{pattern}'",
                shown(value)
            ),
            field: path.to_owned(),
        });
    }
    bounds(value, schema, path, checked);
    match value {
        Value::Object(fields) => walk_object(fields, schema, path, checked),
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                walk(item, &schema["items"], &format!("{path}[{index}]"), checked);
            }
        }
        _ => {}
    }
}

fn walk_object(fields: &mut Map<String, Value>, schema: &Value, path: &str, checked: &mut Checked) {
    if schema["x-kubernetes-embedded-resource"] == true {
        return;
    }
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    let properties = schema["properties"].as_object();
    let additional = &schema["additionalProperties"];
    let keys: Vec<String> = fields.keys().cloned().collect();
    for key in keys {
        let sub = properties
            .and_then(|properties| properties.get(&key))
            .or_else(|| additional.is_object().then_some(additional));
        match sub {
            Some(sub) => {
                let nested = child(path, &key);
                if let Some(value) = fields.get_mut(&key) {
                    walk(value, sub, &nested, checked);
                }
                if fields.get(&key).is_some_and(Value::is_null) && sub["nullable"] != true {
                    fields.remove(&key);
                }
            }
            None if preserve || *additional == true => {}
            None => {
                fields.remove(&key);
                checked.unknown.push(child(path, &key));
            }
        }
    }
    apply_defaults(fields, schema, path, checked);
    required(fields, schema, path, checked);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_absent_fields_and_checks_bounds() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "limit": {"type": "integer", "default": 4, "minimum": 0.0},
            "policy": {"type": "object", "default": {}, "properties": {"mode": {"type": "string", "default": "Newest"}}},
            "name": {"type": "string", "minLength": 2}}}}});
        let mut object = json!({"spec": {"name": "a"}});
        let checked = check(&mut object, &schema);
        assert_eq!(object["spec"]["limit"], 4);
        assert_eq!(object["spec"]["policy"]["mode"], "Newest");
        assert_eq!(
            checked.causes[0].message,
            "Invalid value: \"a\": spec.name in body should be at least 2 chars long"
        );
        let mut negative = json!({"spec": {"limit": -1}});
        let checked = check(&mut negative, &schema);
        assert_eq!(
            checked.causes[0].message,
            "Invalid value: -1: spec.limit in body should be greater than or equal to 0"
        );
    }

    #[test]
    fn prunes_unknown_and_reports_required_and_types() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"},
                           "n": {"type": "integer"},
                           "mode": {"type": "string", "enum": ["A", "B"]},
                           "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut object = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"foo": 1, "n": "one", "mode": "C", "free": {"any": 1}}});
        let checked = check(&mut object, &schema);
        assert_eq!(checked.unknown, vec!["spec.foo"]);
        assert!(object["spec"].get("foo").is_none());
        assert_eq!(object["spec"]["free"]["any"], 1);
        let fields: Vec<&str> = checked.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["spec.mode", "spec.n", "spec.name"]);
        assert_eq!(checked.causes[2].message, "Required value");
        assert_eq!(
            checked.causes[1].message,
            "Invalid value: \"one\": spec.n in body must be of type integer: \"string\""
        );
    }
}
