//! Decoding of the protobuf bodies kubectl's typed commands send
//! (`Content-Type: application/vnd.kubernetes.protobuf`, e.g. `kubectl create namespace`,
//! `create secret|configmap|serviceaccount|role|rolebinding`, `auth can-i`) into the JSON
//! the verbs take: the `k8s\0` envelope (`runtime.Unknown`) and the field numbers of
//! those kinds' `generated.proto`. Empty strings, zeros and empty messages are dropped, as
//! JSON's `omitempty` would. Other kinds answer 415, as a server without the type would.
//!
//! It owns the wire format only.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::status::ApiError;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// How one field of a message maps to JSON.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Str,
    Bool,
    RepStr,
    StrMap,
    BytesMap,
    Msg(&'static [(u32, &'static str, Shape)]),
    RepMsg(&'static [(u32, &'static str, Shape)]),
}

const OBJECT_META: &[(u32, &str, Shape)] = &[
    (1, "name", Shape::Str),
    (2, "generateName", Shape::Str),
    (3, "namespace", Shape::Str),
    (11, "labels", Shape::StrMap),
    (12, "annotations", Shape::StrMap),
    (14, "finalizers", Shape::RepStr),
];
const META: (u32, &str, Shape) = (1, "metadata", Shape::Msg(OBJECT_META));

const NAMESPACE: &[(u32, &str, Shape)] = &[
    META,
    (2, "spec", Shape::Msg(&[(1, "finalizers", Shape::RepStr)])),
];
const CONFIG_MAP: &[(u32, &str, Shape)] = &[
    META,
    (2, "data", Shape::StrMap),
    (3, "binaryData", Shape::BytesMap),
    (4, "immutable", Shape::Bool),
];
const SECRET: &[(u32, &str, Shape)] = &[
    META,
    (2, "data", Shape::BytesMap),
    (3, "type", Shape::Str),
    (4, "stringData", Shape::StrMap),
    (5, "immutable", Shape::Bool),
];
const SERVICE_ACCOUNT: &[(u32, &str, Shape)] =
    &[META, (4, "automountServiceAccountToken", Shape::Bool)];
const POLICY_RULE: &[(u32, &str, Shape)] = &[
    (1, "verbs", Shape::RepStr),
    (2, "apiGroups", Shape::RepStr),
    (3, "resources", Shape::RepStr),
    (4, "resourceNames", Shape::RepStr),
    (5, "nonResourceURLs", Shape::RepStr),
];
const ROLE: &[(u32, &str, Shape)] = &[META, (2, "rules", Shape::RepMsg(POLICY_RULE))];
const SUBJECT: &[(u32, &str, Shape)] = &[
    (1, "kind", Shape::Str),
    (2, "apiGroup", Shape::Str),
    (3, "name", Shape::Str),
    (4, "namespace", Shape::Str),
];
const ROLE_REF: &[(u32, &str, Shape)] = &[
    (1, "apiGroup", Shape::Str),
    (2, "kind", Shape::Str),
    (3, "name", Shape::Str),
];
const ROLE_BINDING: &[(u32, &str, Shape)] = &[
    META,
    (2, "subjects", Shape::RepMsg(SUBJECT)),
    (3, "roleRef", Shape::Msg(ROLE_REF)),
];
const RESOURCE_ATTRIBUTES: &[(u32, &str, Shape)] = &[
    (1, "namespace", Shape::Str),
    (2, "verb", Shape::Str),
    (3, "group", Shape::Str),
    (4, "version", Shape::Str),
    (5, "resource", Shape::Str),
    (6, "subresource", Shape::Str),
    (7, "name", Shape::Str),
];
const NON_RESOURCE_ATTRIBUTES: &[(u32, &str, Shape)] =
    &[(1, "path", Shape::Str), (2, "verb", Shape::Str)];
const SELF_SUBJECT_ACCESS_REVIEW: &[(u32, &str, Shape)] = &[
    META,
    (
        2,
        "spec",
        Shape::Msg(&[
            (1, "resourceAttributes", Shape::Msg(RESOURCE_ATTRIBUTES)),
            (
                2,
                "nonResourceAttributes",
                Shape::Msg(NON_RESOURCE_ATTRIBUTES),
            ),
        ]),
    ),
];

fn schema(kind: &str) -> Option<&'static [(u32, &'static str, Shape)]> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => ROLE_BINDING,
        "SelfSubjectAccessReview" => SELF_SUBJECT_ACCESS_REVIEW,
        _ => return None,
    })
}

/// A protobuf wire value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The fields of one message, in order: (number, value).
fn fields(bytes: &[u8]) -> Option<Vec<(u32, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let tag = varint(bytes, &mut at)?;
        let number = u32::try_from(tag >> 3).ok()?;
        let value = match tag & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
                let slice = bytes.get(at..at.checked_add(len)?)?;
                at += len;
                Wire::Bytes(slice)
            }
            1 => {
                at += 8;
                continue;
            }
            5 => {
                at += 4;
                continue;
            }
            _ => return None,
        };
        out.push((number, value));
    }
    Some(out)
}

fn text(bytes: &[u8]) -> Option<String> {
    String::from_utf8(bytes.to_vec()).ok()
}

fn entry(bytes: &[u8]) -> Option<(String, Vec<u8>)> {
    let mut key = String::new();
    let mut value = Vec::new();
    for (number, wire) in fields(bytes)? {
        match (number, wire) {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b.to_vec(),
            _ => {}
        }
    }
    Some((key, value))
}

fn message(bytes: &[u8], schema: &[(u32, &str, Shape)]) -> Option<Value> {
    let mut out = Map::new();
    for (number, wire) in fields(bytes)? {
        let Some((_, name, shape)) = schema.iter().find(|(n, ..)| *n == number) else {
            continue;
        };
        let name = (*name).to_owned();
        match (shape, wire) {
            (Shape::Str, Wire::Bytes(b)) if !b.is_empty() => {
                out.insert(name, json!(text(b)?));
            }
            (Shape::Bool, Wire::Varint(v)) => {
                out.insert(name, json!(v != 0));
            }
            (Shape::RepStr, Wire::Bytes(b)) => {
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(items) = list.as_array_mut() {
                    items.push(json!(text(b)?));
                }
            }
            (Shape::StrMap | Shape::BytesMap, Wire::Bytes(b)) => {
                let (key, value) = entry(b)?;
                let value = if matches!(shape, Shape::StrMap) {
                    json!(text(&value)?)
                } else {
                    json!(base64::engine::general_purpose::STANDARD.encode(value))
                };
                let map = out.entry(name).or_insert_with(|| json!({}));
                map[key] = value;
            }
            (Shape::Msg(sub), Wire::Bytes(b)) => {
                let value = message(b, sub)?;
                if value.as_object().is_some_and(|m| !m.is_empty()) {
                    out.insert(name, value);
                }
            }
            (Shape::RepMsg(sub), Wire::Bytes(b)) => {
                let value = message(b, sub)?;
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(items) = list.as_array_mut() {
                    items.push(value);
                }
            }
            _ => {}
        }
    }
    Some(Value::Object(out))
}

/// The JSON object a protobuf request body carries.
pub(crate) fn to_json(body: &[u8]) -> Result<Value, ApiError> {
    let unsupported = || ApiError::unsupported_media_type(MEDIA_TYPE);
    let envelope = body.strip_prefix(b"k8s\0").ok_or_else(unsupported)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (number, wire) in fields(envelope).ok_or_else(unsupported)? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                for (n, w) in fields(type_meta).ok_or_else(unsupported)? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b).unwrap_or_default(),
                        (2, Wire::Bytes(b)) => kind = text(b).unwrap_or_default(),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let schema = schema(&kind).ok_or_else(unsupported)?;
    let mut object = message(raw, schema).ok_or_else(unsupported)?;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_kubectl_create_namespace() {
        // The body `kubectl create namespace demo` sends (captured from kubectl 1.32).
        let body = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1c\n\x14\n\x04demo\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00\"\x00";
        let object = to_json(body).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
        );
    }
}
