//! The patch types the server accepts: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
//! strategic merge patch for built-ins (a merge patch whose lists of objects merge by
//! `name`, directives dropped) and server-side apply (the applied configuration merged in,
//! fields this manager applied before and no longer applies removed).
//!
//! It owns document transformation only; preconditions and storage are the verbs' business.

use serde_json::{Map, Value};

use super::status::ApiError;

/// A patch's media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    /// From the request's `Content-Type`; `None` for a type the server does not know.
    pub(crate) fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        match essence {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Parses a body as JSON (or YAML for apply), naming the failure as the server does.
pub(crate) fn parse_body(body: &[u8], yaml: bool) -> Result<Value, ApiError> {
    if yaml {
        serde_yaml_ng::from_slice::<Value>(body)
            .map_err(|err| ApiError::bad_request(format!("error decoding YAML: {err}")))
    } else {
        serde_json::from_slice::<Value>(body).map_err(|err| {
            ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: {err}"
            ))
        })
    }
}

/// Applies a merge, JSON or strategic patch to `current`.
pub(crate) fn apply_patch(
    current: &Value,
    kind: PatchType,
    patch: &Value,
) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match kind {
        PatchType::Merge => json_patch::merge(&mut doc, patch),
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|err| {
                ApiError::bad_request(format!(
                    "the server rejected our request due to an error in our request: {err}"
                ))
            })?;
            for op in ops.0 {
                // As the server's json-patch: testing a missing path against null passes
                // (kube-runtime's finalizer helper relies on it).
                if let json_patch::PatchOperation::Test(test) = &op
                    && test.value.is_null()
                    && doc.pointer(test.path.as_str()).is_none_or(Value::is_null)
                {
                    continue;
                }
                json_patch::patch(&mut doc, &[op]).map_err(|err| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {err}"
                        ),
                        None,
                    )
                })?;
            }
        }
        PatchType::Strategic => strategic(&mut doc, patch),
        PatchType::Apply => return Err(ApiError::internal("apply is not a plain patch")),
    }
    Ok(doc)
}

fn is_directive(key: &str) -> bool {
    key.starts_with("$setElementOrder/")
        || key == "$retainKeys"
        || key == "$patch"
        || key.starts_with("$deleteFromPrimitiveList/")
}

fn strategic(target: &mut Value, patch: &Value) {
    let Value::Object(patch_fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch_fields {
        if is_directive(key) {
            continue;
        }
        match value {
            Value::Null => {
                fields.remove(key);
            }
            Value::Object(_) => strategic(fields.entry(key.clone()).or_insert(Value::Null), value),
            Value::Array(items)
                if items.iter().all(|item| item.get("name").is_some()) && !items.is_empty() =>
            {
                let existing = fields
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(current) = existing else {
                    *existing = value.clone();
                    continue;
                };
                for item in items {
                    let deleting = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match current
                        .iter()
                        .position(|old| old.get("name") == item.get("name"))
                    {
                        Some(index) if deleting => {
                            current.remove(index);
                        }
                        Some(index) => strategic(&mut current[index], item),
                        None if deleting => {}
                        None => {
                            let mut fresh = Value::Object(Map::new());
                            strategic(&mut fresh, item);
                            current.push(fresh);
                        }
                    }
                }
            }
            other => {
                fields.insert(key.clone(), other.clone());
            }
        }
    }
}

/// Server-side apply: `applied` merged into `current`; fields in `previous` (this manager's
/// last applied configuration) that `applied` no longer has are removed when `sole_owner`
/// says this manager alone owns them (a leaf path such as `.spec.interval`).
pub(crate) fn server_side_apply(
    current: &Value,
    previous: Option<&Value>,
    applied: &Value,
    sole_owner: &dyn Fn(&str) -> bool,
) -> Value {
    let mut doc = current.clone();
    if let Some(previous) = previous {
        remove_dropped(&mut doc, previous, applied, "", sole_owner);
    }
    deep_merge(&mut doc, applied);
    doc
}

fn remove_dropped(
    doc: &mut Value,
    previous: &Value,
    applied: &Value,
    path: &str,
    sole_owner: &dyn Fn(&str) -> bool,
) {
    let (Value::Object(fields), Value::Object(before)) = (doc, previous) else {
        return;
    };
    for (key, old) in before {
        if path.is_empty() && (key == "apiVersion" || key == "kind") {
            continue;
        }
        let nested = format!("{path}.{key}");
        let now = applied.get(key);
        match (old, now) {
            (Value::Object(_), Some(now)) if now.is_object() => {
                if let Some(sub) = fields.get_mut(key) {
                    remove_dropped(sub, old, now, &nested, sole_owner);
                }
            }
            (Value::Object(map), None) if !map.is_empty() => {
                if let Some(sub) = fields.get_mut(key) {
                    remove_dropped(sub, old, &Value::Object(Map::new()), &nested, sole_owner);
                    if sub.as_object().is_some_and(Map::is_empty) {
                        fields.remove(key);
                    }
                }
            }
            (_, None) if sole_owner(&nested) => {
                fields.remove(key);
            }
            _ => {}
        }
    }
}

fn deep_merge(doc: &mut Value, applied: &Value) {
    match (doc, applied) {
        (Value::Object(fields), Value::Object(applied)) => {
            for (key, value) in applied {
                match fields.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        deep_merge(existing, value);
                    }
                    _ => {
                        fields.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (doc, applied) => *doc = applied.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_named_lists() {
        let current = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
        let patch = json!({"spec": {"$setElementOrder/containers": [], "containers": [{"name": "b", "image": "2"}]}});
        let out = apply_patch(&current, PatchType::Strategic, &patch).unwrap();
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}})
        );
    }

    #[test]
    fn json_patch_test_of_a_missing_path_against_null_passes() {
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["dray.dev/cleanup"]},
        ]);
        let out =
            apply_patch(&json!({"metadata": {"name": "a"}}), PatchType::Json, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["dray.dev/cleanup"]));
        let stale = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
        assert_eq!(
            apply_patch(&out, PatchType::Json, &stale).unwrap_err().code,
            422
        );
    }

    #[test]
    fn apply_removes_what_the_manager_dropped() {
        let current = json!({"spec": {"a": 1, "b": 2, "c": 3}});
        let previous = json!({"spec": {"a": 1, "b": 2}});
        let applied = json!({"spec": {"a": 5}});
        let out = server_side_apply(&current, Some(&previous), &applied, &|_| true);
        assert_eq!(out, json!({"spec": {"a": 5, "c": 3}}));
    }
}
