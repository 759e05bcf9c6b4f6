//! What the server does to an object's metadata and shape on each write: type stamping,
//! names (`generateName`, RFC 1123), uid and timestamps, the status subresource split,
//! generation bumps, CustomResourceDefinition conditions, and simplified `managedFields`.
//!
//! It owns these object-level rules; the verbs decide when they apply.

use serde_json::{Map, Value, json};

use super::resources::ResourceType;
use super::status::{ApiError, Cause};

/// Now, as the API server writes timestamps (seconds, UTC).
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `object` with the served `apiVersion` and `kind`.
pub(crate) fn typed(ty: &ResourceType, mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut() {
        fields.insert("apiVersion".into(), json!(ty.api_version()));
        fields.insert("kind".into(), json!(ty.kind));
    }
    object
}

/// A body that is not an object, or whose `metadata` (or a Namespace's `spec`) is not an
/// object, is a 400: the server cannot decode it.
pub(crate) fn check_shape(ty: &ResourceType, object: &Value) -> Result<(), ApiError> {
    let nested_ok = |field: &str| {
        object
            .get(field)
            .is_none_or(|v| v.is_object() || v.is_null())
    };
    let meta_ok = |field: &str, array: bool| {
        object["metadata"]
            .get(field)
            .is_none_or(|v| v.is_null() || if array { v.is_array() } else { v.is_object() })
    };
    let metadata_ok =
        meta_ok("labels", false) && meta_ok("annotations", false) && meta_ok("finalizers", true);
    if !object.is_object()
        || !nested_ok("metadata")
        || !metadata_ok
        || (ty.plural == "namespaces" && !nested_ok("spec"))
    {
        return Err(ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: the body is not a {} object",
            ty.kind, ty.version, ty.kind, ty.kind
        )));
    }
    Ok(())
}

/// A body whose `apiVersion`/`kind` are not the URL's is a 400, as on the real server.
pub(crate) fn check_type(ty: &ResourceType, object: &Value) -> Result<(), ApiError> {
    check_shape(ty, object)?;
    if let Some(api_version) = object["apiVersion"].as_str()
        && api_version != ty.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            ty.api_version()
        )));
    }
    if let Some(kind) = object["kind"].as_str()
        && kind != ty.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            ty.kind
        )));
    }
    Ok(())
}

/// The name to create under: `metadata.name`, or `generateName` plus five characters.
pub(crate) fn name_for_create(object: &mut Value) -> Option<String> {
    if let Some(name) = object["metadata"]["name"]
        .as_str()
        .filter(|name| !name.is_empty())
    {
        return Some(name.to_owned());
    }
    let prefix = object["metadata"]["generateName"]
        .as_str()
        .filter(|p| !p.is_empty())?;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..5]
        .iter()
        .map(|byte| ALPHABET[usize::from(*byte) % ALPHABET.len()] as char)
        .collect();
    let name = format!("{prefix}{suffix}");
    object["metadata"]["name"] = json!(name);
    Some(name)
}

/// RFC 1123 subdomain check on `metadata.name`, worded as the server's.
pub(crate) fn check_name(name: &str) -> Vec<Cause> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        return Vec::new();
    }
    vec![Cause {
        reason: "FieldValueInvalid",
        message: format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ),
        field: "metadata.name".into(),
    }]
}

/// A CRD must be named `<plural>.<group>`.
pub(crate) fn check_crd(crd: &Value) -> Vec<Cause> {
    let spec = &crd["spec"];
    let expected = format!(
        "{}.{}",
        spec["names"]["plural"].as_str().unwrap_or_default(),
        spec["group"].as_str().unwrap_or_default()
    );
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if name == expected {
        return Vec::new();
    }
    vec![Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        field: "metadata.name".into(),
    }]
}

/// The server's part of a new object: uid, creationTimestamp, generation 1; no
/// resourceVersion; `.status` dropped where status has its own subresource (custom
/// resources), set for CRDs and Namespaces.
pub(crate) fn prepare_create(ty: &ResourceType, object: &mut Value) {
    let metadata = object
        .as_object_mut()
        .map(|fields| fields.entry("metadata").or_insert_with(|| json!({})));
    if let Some(Value::Object(metadata)) = metadata {
        metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), json!(now()));
        metadata.insert("generation".into(), json!(1));
        metadata.remove("resourceVersion");
        metadata.remove("deletionTimestamp");
    }
    if ty.custom
        && ty.status_subresource
        && let Some(fields) = object.as_object_mut()
    {
        fields.remove("status");
    }
    if ty.plural == "customresourcedefinitions" {
        establish_crd(object);
    }
    if ty.group.is_empty()
        && ty.plural == "secrets"
        && object["type"].as_str().is_none_or(str::is_empty)
    {
        object["type"] = json!("Opaque");
    }
    if ty.group.is_empty() && ty.plural == "namespaces" {
        object["spec"]["finalizers"] = json!(["kubernetes"]);
        object["status"] = json!({"phase": "Active"});
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] =
            object["metadata"]["name"].clone();
    }
}

/// Sets a CRD's `status`: names accepted, established, stored versions.
pub(crate) fn establish_crd(crd: &mut Value) {
    let names = crd["spec"]["names"].clone();
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["storage"] == true)
        .map(|version| version["name"].clone())
        .collect();
    let when = crd["status"]["conditions"][0]["lastTransitionTime"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(now);
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": when,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": when,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "storedVersions": stored,
    });
}

/// The object an update or patch `body` makes of `current`: the server's metadata kept;
/// with a status subresource, `/status` changes only `.status` and the main resource
/// never does.
pub(crate) fn next_version(
    ty: &ResourceType,
    subresource: &str,
    current: &Value,
    body: Value,
) -> Value {
    if subresource == "status" {
        let mut next = current.clone();
        match body.get("status") {
            Some(status) => next["status"] = status.clone(),
            None => {
                if let Some(fields) = next.as_object_mut() {
                    fields.remove("status");
                }
            }
        }
        return next;
    }
    let mut next = body;
    if !next["metadata"].is_object() {
        next["metadata"] = json!({});
    }
    for field in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match current["metadata"].get(field) {
            Some(value) => next["metadata"][field] = value.clone(),
            None => {
                if let Some(metadata) = next["metadata"].as_object_mut() {
                    metadata.remove(field);
                }
            }
        }
    }
    if next["metadata"].get("managedFields").is_none()
        && let Some(managed) = current["metadata"].get("managedFields")
    {
        next["metadata"]["managedFields"] = managed.clone();
    }
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    if ty.status_subresource || ty.plural == "customresourcedefinitions" {
        match current.get("status") {
            Some(status) => next["status"] = status.clone(),
            None => {
                if let Some(fields) = next.as_object_mut() {
                    fields.remove("status");
                }
            }
        }
    }
    next
}

fn without(object: &Value, drop_status: bool) -> Value {
    let mut copy = object.clone();
    if let Some(fields) = copy.as_object_mut() {
        fields.remove("metadata");
        fields.remove("apiVersion");
        fields.remove("kind");
        if drop_status {
            fields.remove("status");
        }
    }
    copy
}

/// `metadata.generation` + 1 when anything but metadata (and status, where it has its own
/// subresource) changed.
pub(crate) fn bump_generation(ty: &ResourceType, current: &Value, next: &mut Value) {
    let status_apart = ty.status_subresource;
    if without(current, status_apart) != without(next, status_apart) {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
        next["metadata"]["generation"] = json!(generation + 1);
    }
}

/// Whether a write would change nothing (a no-op update keeps the resourceVersion).
pub(crate) fn same(current: &Value, next: &Value) -> bool {
    let strip = |object: &Value| {
        let mut copy = object.clone();
        if let Some(fields) = copy.as_object_mut() {
            fields.remove("apiVersion");
            fields.remove("kind");
            if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
                metadata.remove("managedFields");
            }
        }
        copy
    };
    strip(current) == strip(next)
}

fn field_set(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut set = Map::new();
            for (key, sub) in fields {
                set.insert(format!("f:{key}"), field_set(sub));
            }
            Value::Object(set)
        }
        _ => json!({}),
    }
}

/// Records `manager`'s applied fields in `metadata.managedFields` (simplified FieldsV1).
pub(crate) fn set_managed(object: &mut Value, manager: &str, api_version: &str, applied: &Value) {
    let mut fields = applied.clone();
    if let Some(map) = fields.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            metadata.remove("name");
            metadata.remove("namespace");
        }
    }
    let entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": field_set(&fields),
    });
    let mut managed: Vec<Value> = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|existing| !(existing["manager"] == manager && existing["operation"] == "Apply"))
        .collect();
    managed.push(entry);
    object["metadata"]["managedFields"] = json!(managed);
}
