//! What goes into the store and what comes out of it.

use std::sync::Arc;

use serde_json::Value;

use crate::api::{Kind, ObjectKey, ResourceBody as _};

use super::StoreError;

/// A resource as stored: its identity, version and whole JSON body (with
/// `metadata.resourceVersion`, `uid`, `generation` and `creationTimestamp` filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredObject {
    /// The identity.
    pub key: ObjectKey,
    /// The store revision of the last write to this resource.
    pub resource_version: u64,
    /// The whole object.
    pub object: Value,
}

impl StoredObject {
    /// Deserialises the body into a typed resource.
    pub fn to_typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        // Deserialize from a borrow: cloning the whole object first cost a fifth of the
        // project page's CPU at 1,000 Stages (docs/benchmarks.md).
        T::deserialize(&self.object)
            .map_err(|e| StoreError::Invalid(format!("{} does not match its kind: {e}", self.key)))
    }
}

/// A few fields of a stored resource ([`super::Store::list_fields`]), at their places in
/// the resource (`{"spec": {"requestedFreight": [..]}}`); a field the resource lacks is
/// absent. Never a whole resource, so there is nothing here to write back.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectFields {
    /// The identity.
    pub key: ObjectKey,
    /// The fields asked for.
    pub fields: Value,
}

/// A shared `list_fields` answer ([`super::Store::list_fields`]).
pub type Picked = Arc<Vec<ObjectFields>>;

impl ObjectFields {
    /// The fields at `pointers` (JSON pointers, `/spec/requestedFreight`) of `object`.
    pub fn of(object: &StoredObject, pointers: &[&str]) -> Self {
        let mut fields = ObjectFields {
            key: object.key.clone(),
            fields: Value::Object(serde_json::Map::new()),
        };
        for pointer in pointers {
            if let Some(value) = object.object.pointer(pointer) {
                fields.insert(pointer, value.clone());
            }
        }
        fields
    }

    /// Puts `value` at `pointer`, making the objects on the way.
    pub(super) fn insert(&mut self, pointer: &str, value: Value) {
        let mut place = &mut self.fields;
        let mut steps = pointer.split('/').skip(1).peekable();
        while let Some(step) = steps.next() {
            let Some(map) = place.as_object_mut() else {
                return;
            };
            if steps.peek().is_none() {
                map.insert(step.to_owned(), value);
                return;
            }
            place = map
                .entry(step.to_owned())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }

    /// Deserialises the fields into a type that names only them.
    pub fn to_typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        T::deserialize(&self.fields)
            .map_err(|e| StoreError::Invalid(format!("{} does not match its kind: {e}", self.key)))
    }
}

/// One write in a [`super::Store::commit`] batch.
#[derive(Clone, Debug)]
pub enum Write {
    /// Create a resource that must not exist.
    Create(Value),
    /// Replace metadata and spec, keeping status; checks `metadata.resourceVersion` when set.
    Update(Value),
    /// Replace the status only.
    UpdateStatus {
        /// The resource.
        key: ObjectKey,
        /// The new status.
        status: Value,
        /// When set, the stored version must equal it.
        resource_version: Option<u64>,
    },
    /// Delete a resource.
    Delete {
        /// The resource.
        key: ObjectKey,
        /// When set, the stored version must equal it.
        resource_version: Option<u64>,
    },
}

/// Reads the identity of a JSON resource (`kind`, `metadata.namespace`, `metadata.name`).
pub fn key_of(object: &Value) -> Result<ObjectKey, StoreError> {
    let kind_text = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = Kind::from_manifest_kind(kind_text)
        .ok_or_else(|| StoreError::Invalid(format!("unknown kind `{kind_text}`")))?;
    let meta = object.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| StoreError::Invalid(format!("a {kind} without metadata.name")))?;
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    match (kind.is_namespaced(), namespace) {
        (true, Some(ns)) if !ns.is_empty() => Ok(ObjectKey::namespaced(kind, ns, name)),
        (true, _) => Err(StoreError::Invalid(format!(
            "{kind} `{name}` has no metadata.namespace (its project)"
        ))),
        (false, _) => Ok(ObjectKey::cluster(kind, name)),
    }
}

/// The `metadata.resourceVersion` of a JSON resource, if it names one.
pub fn resource_version_of(object: &Value) -> Result<Option<u64>, StoreError> {
    match object
        .metadata()
        .and_then(|meta| meta.get("resourceVersion"))
    {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| {
            StoreError::Invalid(format!("metadata.resourceVersion `{s}` is not a number"))
        }),
        Some(Value::Number(n)) => Ok(n.as_u64()),
        Some(other) => Err(StoreError::Invalid(format!(
            "metadata.resourceVersion must be a string, not {other}"
        ))),
    }
}

/// Everything of an object that a user writes: all but `status` and server-set metadata.
/// Two objects with equal desired state need no update.
pub fn desired_state(object: &Value) -> Value {
    let mut desired = object.clone();
    if let Some(map) = desired.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for server_field in [
                "resourceVersion",
                "uid",
                "generation",
                "creationTimestamp",
                "managedFields",
            ] {
                meta.remove(server_field);
            }
            for maybe_empty in ["labels", "annotations"] {
                if meta
                    .get(maybe_empty)
                    .is_some_and(|v| v.as_object().is_some_and(|o| o.is_empty()))
                {
                    meta.remove(maybe_empty);
                }
            }
        }
    }
    desired
}

/// The part of an object whose change bumps `metadata.generation`: all but metadata and status.
pub(crate) fn spec_part(object: &Value) -> Value {
    let mut spec = object.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove("status");
        map.remove("metadata");
    }
    spec
}
