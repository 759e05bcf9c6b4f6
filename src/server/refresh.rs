//! Asking Warehouses to look again: sets the `dray.dev/refresh` annotation, which the
//! Warehouse controller answers, and optionally waits (bounded) for the answer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, ResourceBody as _, Warehouse, WarehouseStatus};
use crate::discovery::controller::{REFRESH_ANNOTATION, new_refresh_token};
use crate::discovery::webhook_match::{self, Announced};
use crate::store::{Store, StoreError, StoredObject, modify_object};

/// The longest a refresh request waits for discovery to finish.
pub const MAX_REFRESH_WAIT: Duration = Duration::from_secs(120);

/// Sets a new refresh token on a Warehouse and returns it.
pub async fn request(store: &dyn Store, key: &ObjectKey) -> Result<String, StoreError> {
    let current = store
        .get(key)
        .await?
        .ok_or_else(|| StoreError::NotFound(key.clone()))?;
    request_on(store, current).await
}

/// Sets a new refresh token on the Warehouse `current` (read again on a conflict) and
/// returns it.
async fn request_on(store: &dyn Store, current: StoredObject) -> Result<String, StoreError> {
    let key = current.key.clone();
    let token = new_refresh_token();
    modify_object(store, current, |_, object| {
        let annotations = object["metadata"]
            .as_object_mut()
            .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
        if let Some(Value::Object(annotations)) = annotations {
            annotations.insert(REFRESH_ANNOTATION.into(), json!(token));
        }
        Ok(true)
    })
    .await?
    .ok_or(StoreError::NotFound(key))?;
    Ok(token)
}

/// Waits until the Warehouse reports the refresh `token` handled, at most `timeout`.
/// Returns the Warehouse as it is then, and whether the refresh was handled.
pub async fn wait(
    store: &dyn Store,
    key: &ObjectKey,
    token: &str,
    timeout: Duration,
) -> Result<(Value, bool), StoreError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut feed = store.changes();
    loop {
        let seen = feed.latest();
        let current = store
            .get(key)
            .await?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        let handled = current
            .object
            .status::<WarehouseStatus>()
            .and_then(|status| status.last_handled_refresh);
        if handled.as_deref() == Some(token) {
            return Ok((current.object, true));
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok((current.object, false));
        }
        feed.wait_past(seen, left).await;
    }
}

/// Refreshes the Warehouses of `project` that `announced` refreshes (the decision is
/// discovery's: [`webhook_match`]). Returns the names refreshed.
pub async fn refresh_subscribers(
    store: &dyn Store,
    project: &str,
    announced: &Announced,
) -> Result<Vec<String>, StoreError> {
    let mut warehouses = Vec::new();
    for stored in store.list(Kind::Warehouse, Some(project)).await? {
        match stored.to_typed::<Warehouse>() {
            Ok(typed) => warehouses.push((stored, typed)),
            Err(error) => {
                tracing::warn!(warehouse = %stored.key, %error, "cannot read Warehouse; not refreshed")
            }
        }
    }
    let chosen = webhook_match::to_refresh(warehouses.iter().map(|(s, w)| (s, w)), announced);
    let mut refreshed = Vec::new();
    for warehouse in chosen {
        refreshed.push(warehouse.key.name.clone());
        request_on(store, warehouse.clone()).await?;
    }
    Ok(refreshed)
}
