//! OpenAPI v3 as the API server publishes it: `/openapi/v3` (the index of group/version
//! documents) and one document per group/version whose paths carry
//! `x-kubernetes-group-version-kind` and the `fieldValidation`/`dryRun`/`fieldManager`
//! query parameters (so kubectl leaves validation to the server), and whose schemas are
//! the CRDs' structural schemas (free-form ones for built-ins).
//!
//! It owns the documents; the served types come from [`super::resources`].

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// `api/v1` or `apis/{group}/{version}`.
fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The index: every served group/version and where its document is.
pub(crate) fn index(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for ty in types {
        let path = doc_path(&ty.group, &ty.version);
        let hash = format!(
            "{:016X}",
            fingerprint(&document(types, &ty.group, &ty.version))
        );
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

fn fingerprint(value: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// The schema name, reversed-domain style: `dev.dray.v1alpha1.Stage`, `io.k8s.api.core.v1.Secret`.
fn schema_name(ty: &ResourceType) -> String {
    if ty.custom {
        let reversed: Vec<&str> = ty.group.split('.').rev().collect();
        format!("{}.{}.{}", reversed.join("."), ty.version, ty.kind)
    } else {
        let group = if ty.group.is_empty() {
            "core"
        } else {
            ty.group.split('.').next().unwrap_or_default()
        };
        format!("io.k8s.api.{group}.{}.{}", ty.version, ty.kind)
    }
}

fn query(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(ty: &ResourceType, action: &str, params: &[&str], schema: &str) -> Value {
    let reference = json!({"$ref": format!("#/components/schemas/{schema}")});
    json!({
        "operationId": format!("{action}{}", ty.kind),
        "parameters": params.iter().map(|p| query(p)).collect::<Vec<_>>(),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": ty.group, "version": ty.version, "kind": ty.kind},
    })
}

fn object_schema(ty: &ResourceType) -> Value {
    let mut schema = ty
        .schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    let properties = schema
        .as_object_mut()
        .map(|fields| fields.entry("properties").or_insert_with(|| json!({})));
    if let Some(properties) = properties.and_then(Value::as_object_mut) {
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert(
            "metadata".into(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
    }
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": ty.group, "version": ty.version, "kind": ty.kind}]);
    schema
}

/// The document of one group/version.
pub(crate) fn document(types: &[ResourceType], group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
    let patch = [
        "dryRun",
        "fieldManager",
        "fieldValidation",
        "force",
        "pretty",
    ];
    for ty in types
        .iter()
        .filter(|ty| ty.group == group && ty.version == version)
    {
        let schema = schema_name(ty);
        schemas.insert(schema.clone(), object_schema(ty));
        let scoped = if ty.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", ty.plural)
        } else {
            format!("{prefix}/{}", ty.plural)
        };
        let mut collection = json!({"post": operation(ty, "post", &write, &schema)});
        if !ty.create_only {
            collection["get"] = operation(
                ty,
                "list",
                &["labelSelector", "fieldSelector", "watch"],
                &schema,
            );
            let item = json!({
                "get": operation(ty, "get", &["pretty"], &schema),
                "put": operation(ty, "put", &write, &schema),
                "patch": operation(ty, "patch", &patch, &schema),
                "delete": operation(ty, "delete", &["dryRun"], &schema),
            });
            paths.insert(format!("{scoped}/{{name}}"), item);
            if ty.status_subresource {
                paths.insert(
                    format!("{scoped}/{{name}}/status"),
                    json!({
                        "get": operation(ty, "get", &["pretty"], &schema),
                        "put": operation(ty, "put", &write, &schema),
                        "patch": operation(ty, "patch", &patch, &schema),
                    }),
                );
            }
        }
        paths.insert(scoped, collection);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}
