//! Placing a hold on a Stage by hand (`dray hold set`): auto-promotion leaves the Stage
//! alone until the hold is lifted (`dray hold lift`) or someone promotes the newest
//! available Freight into it. The hold names who placed it, the Freight the Stage held
//! then, and why.

use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, Stage};
use crate::store::{Store, StoreError};

use super::request::set_hold;

/// The reason recorded when the person gave none.
pub fn default_reason(actor: &str) -> String {
    format!("`{actor}` placed a hold")
}

/// Places (or replaces) a hold on `project/stage` by `actor`, and returns it as stored.
pub async fn place_hold(
    store: &dyn Store,
    project: &str,
    stage: &str,
    actor: &str,
    reason: Option<&str>,
) -> Result<Value, StoreError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    let stored = store
        .get(&key)
        .await?
        .ok_or_else(|| StoreError::NotFound(key.clone()))?;
    let current = stored
        .to_typed::<Stage>()
        .ok()
        .and_then(|s| s.status)
        .and_then(|s| s.current_freight)
        .map(|f| f.name)
        .unwrap_or_default();
    let reason = reason
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map_or_else(|| default_reason(actor), str::to_owned);
    let hold = json!({
        "by": actor,
        "freight": current,
        "reason": reason,
        "since": jiff::Timestamp::now().to_string(),
    });
    set_hold(store, project, stage, Some(hold.clone())).await?;
    Ok(hold)
}
