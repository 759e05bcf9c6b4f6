//! `meta.k8s.io/v1` Table output (`kubectl get`'s `Accept: application/json;as=Table;…`):
//! Name, the CRD's `additionalPrinterColumns` (simple JSONPaths) and Age, with each row's
//! object as `PartialObjectMetadata`, as the real server's table convertor builds it.
//!
//! It owns the table shape; objects come from the verbs.

use serde_json::{Value, json};

use super::resources::ResourceType;

/// Whether the Accept header asks for a Table first.
pub(crate) fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Follows a printer column's JSONPath (`.status.phase`, `.spec.items[0].name`).
fn at_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for part in path
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('.')
        .split('.')
    {
        if part.is_empty() {
            continue;
        }
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        if !name.is_empty() {
            current = current.get(name)?;
        }
        if let Some(index) = index {
            current = current.get(index)?;
        }
    }
    Some(current)
}

/// `5m`, `3h`, `2d`, as kubectl's HumanDuration prints an age.
fn age(timestamp: &str) -> String {
    let Ok(then) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let seconds = (jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn cell(value: Option<&Value>, kind: &str) -> Value {
    match value {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) if kind == "date" => json!(age(text)),
        Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => value.clone(),
        Some(other) => json!(other.to_string()),
    }
}

fn columns(ty: &ResourceType) -> Vec<(String, String, String, i64)> {
    let mut columns: Vec<(String, String, String, i64)> = ty
        .printer_columns
        .iter()
        .map(|column| {
            (
                column["name"].as_str().unwrap_or_default().to_owned(),
                column["type"].as_str().unwrap_or("string").to_owned(),
                column["jsonPath"].as_str().unwrap_or_default().to_owned(),
                column["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    if ty.plural == "customresourcedefinitions" {
        // The built-in CRD printer: the creation time as written, not an age.
        return vec![(
            "Created At".into(),
            "string".into(),
            ".metadata.creationTimestamp".into(),
            0,
        )];
    }
    if !columns.iter().any(|(name, ..)| name == "Age") {
        columns.push((
            "Age".into(),
            "date".into(),
            ".metadata.creationTimestamp".into(),
            0,
        ));
    }
    if ty.group.is_empty() && ty.plural == "namespaces" {
        columns.insert(
            0,
            ("Status".into(), "string".into(), ".status.phase".into(), 0),
        );
    }
    columns
}

/// The Table of `objects` at revision `rv`.
pub(crate) fn table(ty: &ResourceType, objects: &[Value], rv: u64) -> Value {
    let columns = columns(ty);
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    })];
    definitions.extend(columns.iter().map(|(name, kind, _, priority)| {
        json!({"name": name, "type": kind, "format": "", "description": "", "priority": priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![object["metadata"]["name"].clone()];
            cells.extend(
                columns
                    .iter()
                    .map(|(_, kind, path, _)| cell(at_path(object, path), kind)),
            );
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": object["metadata"],
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}
