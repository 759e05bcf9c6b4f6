//! `meta/v1` `Status` failures worded as the real API server words them (NotFound,
//! AlreadyExists, Conflict, Invalid, Forbidden, Unauthorized, …) and their HTTP responses.
//!
//! It owns error shapes only; who raises them is the verbs' business.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One `details.causes[]` entry of an `Invalid` Status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueTypeInvalid`.
    pub(crate) reason: &'static str,
    /// What is wrong, e.g. `Required value`.
    pub(crate) message: String,
    /// The field path, e.g. `spec.requestedFreight`.
    pub(crate) field: String,
}

/// A failed request: an HTTP code and the `Status` body the real server sends.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) body: Value,
}

/// `stages.dray.dev` for a group, `namespaces` for the core group.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    pub(crate) fn new(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            body["details"] = details;
        }
        Self { code, body }
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized", None)
    }

    /// The 404 for a path the server does not serve.
    pub(crate) fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(json!({})),
        )
    }

    fn details(group: &str, plural: &str, name: &str) -> Value {
        let mut details = json!({"kind": plural});
        if !name.is_empty() {
            details["name"] = json!(name);
        }
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        details
    }

    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
            Some(Self::details(group, plural, name)),
        )
    }

    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
            Some(Self::details(group, plural, name)),
        )
    }

    pub(crate) fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
            Some(Self::details(group, plural, name)),
        )
    }

    /// A precondition on delete (`preconditions.resourceVersion` or `uid`) that failed.
    pub(crate) fn precondition_failed(
        group: &str,
        plural: &str,
        name: &str,
        message: &str,
    ) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {message}",
                qualified(group, plural)
            ),
            Some(Self::details(group, plural, name)),
        )
    }

    /// 422 `Invalid`: `Stage.dray.dev "x" is invalid: spec.a: Required value`.
    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: &[Cause]) -> Self {
        let each: Vec<String> = causes
            .iter()
            .map(|cause| {
                if cause.field.is_empty() {
                    cause.message.clone()
                } else {
                    format!("{}: {}", cause.field, cause.message)
                }
            })
            .collect();
        let joined = if each.len() == 1 {
            each[0].clone()
        } else {
            format!("[{}]", each.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let mut details = json!({"name": name, "kind": kind, "causes": causes.iter().map(|cause| json!({
            "reason": cause.reason, "message": cause.message, "field": cause.field,
        })).collect::<Vec<_>>()});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
            Some(details),
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message, Some(json!({})))
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {content_type}"
            ),
            None,
        )
    }

    /// 403 with the RBAC message `User "ann" cannot update resource "stages" in API group …`.
    pub(crate) fn forbidden(group: &str, plural: &str, name: &str, message: &str) -> Self {
        let qualified = qualified(group, plural);
        let text = if name.is_empty() {
            format!("{qualified} is forbidden: {message}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {message}")
        };
        Self::new(
            403,
            "Forbidden",
            text,
            Some(Self::details(group, plural, name)),
        )
    }

    /// 410 `Expired`: `too old resource version: N (M)`.
    pub(crate) fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
            None,
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message, None)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, self.body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
