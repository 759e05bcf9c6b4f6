//! Kubernetes API errors as [`StoreError`]s: 404 → `NotFound`, 409 `AlreadyExists` →
//! `AlreadyExists`, 409 `Conflict` → `Conflict` (a stale `resourceVersion`, never written
//! over), 422 → `Invalid` with the server's causes; the rest keeps its code and message.

use kube::core::Status;

use crate::api::ObjectKey;
use crate::store::StoreError;

/// What a failed request for `key` means to the store. `expected` is the
/// `resourceVersion` the write named; `current` reads the one stored now (for the
/// conflict's message).
pub(super) fn store_error(
    error: kube::Error,
    what: &str,
    key: &ObjectKey,
    expected: Option<u64>,
    current: impl FnOnce() -> Option<u64>,
) -> StoreError {
    match error {
        kube::Error::Api(response) => from_response(*response, what, key, expected, current),
        other => StoreError::Kubernetes {
            what: what.to_owned(),
            code: 0,
            message: other.to_string(),
        },
    }
}

fn from_response(
    response: Status,
    what: &str,
    key: &ObjectKey,
    expected: Option<u64>,
    current: impl FnOnce() -> Option<u64>,
) -> StoreError {
    match (response.code, response.reason.as_str()) {
        (404, _) => StoreError::NotFound(key.clone()),
        (409, "AlreadyExists") => StoreError::AlreadyExists(key.clone()),
        (409, _) => StoreError::Conflict {
            key: key.clone(),
            expected: expected.unwrap_or_default(),
            actual: current().unwrap_or_default(),
        },
        (422, _) => StoreError::Invalid(format!("{key}: {}", response.message)),
        (code, _) => StoreError::Kubernetes {
            what: what.to_owned(),
            code,
            message: response.message,
        },
    }
}
