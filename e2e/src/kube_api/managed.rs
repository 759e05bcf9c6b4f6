//! Field ownership for server-side apply, as the real server tracks it in `managedFields`:
//! each leaf field (lists are atomic) is owned by the managers that set it; an apply that
//! changes a field another manager owns is a 409 conflict unless forced; an update or
//! patch takes the fields it changes; a removed field has no owner.
//!
//! It owns the ownership sets; the verbs decide which operation happened.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::status::ApiError;

/// Leaf path (`.spec.holderIdentity`) → managers.
pub(crate) type Owners = BTreeMap<String, BTreeSet<String>>;

/// Who writes and how.
#[derive(Debug, Clone)]
pub(crate) enum Writer {
    /// A create, update or patch by this manager.
    Update(String),
    /// A server-side apply of `applied` by this manager.
    Apply { manager: String, applied: Value },
}

fn leaves(value: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, sub) in fields {
                leaves(sub, &format!("{path}.{key}"), out);
            }
        }
        other => {
            out.insert(path.to_owned(), other.clone());
        }
    }
}

/// The fields that count for ownership: everything but server-owned metadata.
fn owned_leaves(object: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Value::Object(fields) = object {
        for (key, sub) in fields {
            match key.as_str() {
                "apiVersion" | "kind" => {}
                "metadata" => {
                    for part in ["labels", "annotations", "finalizers"] {
                        if let Some(value) = sub.get(part) {
                            leaves(value, &format!(".metadata.{part}"), &mut out);
                        }
                    }
                }
                _ => leaves(sub, &format!(".{key}"), &mut out),
            }
        }
    }
    out
}

/// The conflicts an apply by `manager` of `applied` onto `current` has with other owners.
/// `next` is the object the apply would make (merged and defaulted): a field the apply
/// names conflicts when it changes from `current` and someone else owns it.
pub(crate) fn conflicts(
    owners: Option<&Owners>,
    current: &Value,
    next: &Value,
    applied: &Value,
    manager: &str,
    api_version: &str,
) -> Result<(), ApiError> {
    let Some(owners) = owners else {
        return Ok(());
    };
    let now = owned_leaves(current);
    let then = owned_leaves(next);
    let mut found: Vec<(String, String)> = Vec::new();
    for path in owned_leaves(applied).into_keys() {
        if now.get(&path) == then.get(&path) {
            continue;
        }
        for other in owners.get(&path).into_iter().flatten() {
            if other != manager {
                found.push((other.clone(), path.clone()));
            }
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let message = if found.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {:?} using {api_version}: {}",
            found[0].0, found[0].1
        )
    } else {
        let lines: Vec<String> = found
            .iter()
            .map(|(other, path)| format!("conflict with {other:?} using {api_version}: {path}"))
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            found.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = found
        .iter()
        .map(|(other, path)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {other:?} using {api_version}"), "field": path}))
        .collect();
    Err(ApiError::new(
        409,
        "Conflict",
        message,
        Some(json!({"causes": causes})),
    ))
}

/// Records what a write did to the owners of `old` → `new`.
pub(crate) fn record(
    owners: &mut Owners,
    old: Option<&Value>,
    new: &Value,
    writer: &Writer,
    force: bool,
) {
    let before = old.map(owned_leaves).unwrap_or_default();
    let after = owned_leaves(new);
    owners.retain(|path, _| after.contains_key(path));
    match writer {
        Writer::Update(manager) => {
            for (path, value) in &after {
                if before.get(path) != Some(value) {
                    owners.insert(path.clone(), BTreeSet::from([manager.clone()]));
                }
            }
        }
        Writer::Apply { manager, applied } => {
            let applying = owned_leaves(applied);
            for (path, set) in owners.iter_mut() {
                if !applying.contains_key(path) {
                    set.remove(manager);
                }
            }
            for (path, _) in applying {
                if !after.contains_key(&path) {
                    continue;
                }
                let set = owners.entry(path).or_default();
                if force {
                    set.clear();
                }
                set.insert(manager.clone());
            }
        }
    }
}
