//! Credentials at the API boundary: secrets are sealed before they reach the store and
//! removed from everything the API answers.

use serde_json::Value;

use crate::secrets::{self, SecretKey};
use crate::store::{StoredObject, desired_state};

use super::error::ApiError;

fn is_credential(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Credential")
}

/// What the API shows of an object: Credentials without their secrets.
pub(crate) fn present(mut object: Value) -> Value {
    if is_credential(&object) {
        secrets::redact(&mut object);
    }
    object
}

/// Seals a Credential's secrets in place (keeping `previous`' when none are given);
/// other kinds pass through.
pub(crate) fn seal(
    key: &SecretKey,
    object: &mut Value,
    previous: Option<&StoredObject>,
) -> Result<(), ApiError> {
    if !is_credential(object) {
        return Ok(());
    }
    secrets::seal_credential(key, object, previous.map(|p| &p.object)).map_err(ApiError::internal)
}

/// Whether applying `object` over `current` changes nothing, secrets included.
pub(crate) fn is_unchanged(
    key: &SecretKey,
    current: &StoredObject,
    object: &Value,
) -> Result<bool, ApiError> {
    if !is_credential(object) {
        return Ok(desired_state(&current.object) == desired_state(object));
    }
    let mut stored = current.object.clone();
    let mut wanted = object.clone();
    secrets::redact(&mut stored);
    secrets::redact(&mut wanted);
    if desired_state(&stored) != desired_state(&wanted) {
        return Ok(false);
    }
    match secrets::plaintext_secrets(object) {
        None => Ok(true),
        Some(given) => {
            let kept =
                secrets::open_credential(key, &current.object).map_err(ApiError::internal)?;
            Ok(kept == given)
        }
    }
}
