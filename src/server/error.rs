//! One error type for every API route, with a stable JSON shape:
//! `{"error": {"code": "...", "message": "...", "hint": "...", "details": [...]}}`.
//! Internal failures are logged in full and answered with a generic message. A resource
//! that does not exist is answered alike on every route ([`ApiError::missing`]):
//! ``<Kind> `name` does not exist in project `P` `` (with "did you mean" when a name is
//! close), and a hint with the command that lists them, `-p` included.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::api::{Kind, ObjectKey, suggest};
use crate::config::ConfigErrors;
use crate::pipeline::door::{Refusal, RefusalKind};
use crate::store::{Store, StoreError};

/// The body of every error response.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong, for people and programs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ErrorDetail {
    /// A stable, machine-readable code: `unauthenticated`, `forbidden`, `not_found`,
    /// `conflict`, `invalid`, `internal`, …
    pub code: String,
    /// What went wrong, naming the resource.
    pub message: String,
    /// What to do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Structured details, e.g. every validation error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// An error answered by the API.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    detail: ErrorDetail,
}

impl ApiError {
    /// An error with a status, code and message.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: ErrorDetail {
                code: code.to_owned(),
                message: message.into(),
                hint: None,
                details: None,
            },
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.detail.hint = Some(hint.into());
        self
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401: no valid credentials.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    /// 403: authenticated, but not allowed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404: no such resource or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 404 for a resource of a project, in the one shape every route answers:
    /// ``Stage `prd` does not exist in project `demo`; did you mean `prod`?`` (the closest
    /// of `names`, the project's resources of that kind), with the command that lists them.
    pub fn missing<'a>(
        kind: Kind,
        name: &str,
        project: &str,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let meant = suggest::closest(name, names)
            .map(|m| format!("; did you mean `{m}`?"))
            .unwrap_or_default();
        if !kind.is_namespaced() {
            return ApiError::not_found(format!("{kind} `{name}` does not exist{meant}"))
                .with_hint(format!("run `dray get {}` to list them", kind.plural()));
        }
        ApiError::not_found(format!(
            "{kind} `{name}` does not exist in project `{project}`{meant}"
        ))
        .with_hint(list_them(kind, project))
    }

    /// [`ApiError::missing`] for `key`, with the names of its kind read from `store`.
    /// When the key's project does not exist either, that is what is said.
    pub async fn missing_from(store: &dyn Store, key: &ObjectKey) -> Self {
        let project = key.namespace.as_deref().unwrap_or_default();
        let project_key = ObjectKey::cluster(Kind::Project, project);
        if key.kind.is_namespaced() && matches!(store.get(&project_key).await, Ok(None)) {
            return Box::pin(Self::missing_from(store, &project_key)).await;
        }
        let names = store
            .list(key.kind, key.namespace.as_deref())
            .await
            .unwrap_or_default();
        ApiError::missing(
            key.kind,
            &key.name,
            project,
            names.iter().map(|o| o.key.name.as_str()),
        )
    }

    /// 409: the request conflicts with the stored state.
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500: something broke; the cause is logged, not returned.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle the request; its log has the details",
        )
    }

    /// Attaches structured details (e.g. every reason a gate refused).
    pub fn set_details(&mut self, details: serde_json::Value) {
        self.detail.details = Some(details);
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.detail })).into_response()
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let (status, code) = match refusal.kind() {
            RefusalKind::Invalid => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            RefusalKind::NotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "not_allowed"),
            RefusalKind::Conflict => (StatusCode::CONFLICT, "conflict"),
        };
        ApiError::new(status, code, refusal.to_string()).with_hint(refusal.hint())
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::NotFound(key) => match key.namespace.as_deref() {
                Some(project) => ApiError::missing(key.kind, &key.name, project, []),
                None => ApiError::not_found(format!("{} `{}` does not exist", key.kind, key.name))
                    .with_hint(format!("run `dray get {}` to list them", key.kind.plural())),
            },
            StoreError::AlreadyExists(_) => ApiError::conflict(error.to_string())
                .with_hint("use `dray apply` to update an existing resource"),
            StoreError::Conflict { .. } => ApiError::conflict(error.to_string()),
            StoreError::Invalid(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                error.to_string(),
            ),
            StoreError::Kubernetes { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "kubernetes", error.to_string())
            }
            StoreError::Open { .. } | StoreError::Database(_) | StoreError::Internal(_) => {
                ApiError::internal(error)
            }
        }
    }
}

impl From<ConfigErrors> for ApiError {
    fn from(errors: ConfigErrors) -> Self {
        let count = errors.0.len();
        let mut error = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            format!(
                "{count} error{} in the configuration; nothing was stored",
                plural(count)
            ),
        )
        .with_hint("fix every error listed and apply again");
        error.detail.details = serde_json::to_value(&errors.0).ok();
        error
    }
}

/// The hint of every not-found answer: the command that lists what exists.
pub fn list_them(kind: Kind, project: &str) -> String {
    format!("run `dray get {} -p {project}` to list them", kind.plural())
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

impl std::fmt::Display for ApiError {
    /// The message, every validation error on its own line, then the hint.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.detail.message)?;
        if let Some(details) = &self.detail.details {
            let errors: Vec<crate::config::ConfigError> =
                serde_json::from_value(details.clone()).unwrap_or_default();
            for error in errors {
                write!(f, "\n{error}")?;
            }
        }
        if let Some(hint) = &self.detail.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}
