//! Asking Warehouses to look again: sets the `dray.dev/refresh` annotation, which the
//! Warehouse controller answers, and optionally waits (bounded) for the answer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{
    Kind, ObjectKey, RepoSubscription, ResourceBody as _, WarehouseSpec, WarehouseStatus,
};
use crate::discovery::controller::{REFRESH_ANNOTATION, new_refresh_token};
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

/// Refreshes every Warehouse of `project` subscribed to one of `repo_urls` (all of them
/// when `repo_urls` is empty). Returns the names refreshed.
pub async fn refresh_subscribers(
    store: &dyn Store,
    project: &str,
    repo_urls: &[String],
) -> Result<Vec<String>, StoreError> {
    let wanted: Vec<String> = repo_urls.iter().map(|u| normalise(u)).collect();
    let mut refreshed = Vec::new();
    for warehouse in store.list(Kind::Warehouse, Some(project)).await? {
        let spec: Option<WarehouseSpec> = warehouse.object.spec();
        let subscribed: Vec<String> = spec
            .iter()
            .flat_map(|spec| &spec.subscriptions)
            .filter_map(RepoSubscription::repo_url)
            .map(normalise)
            .collect();
        let matches = wanted.is_empty()
            || subscribed
                .iter()
                .any(|s| wanted.iter().any(|w| same_repository(s, w)));
        if matches {
            refreshed.push(warehouse.key.name.clone());
            request_on(store, warehouse).await?;
        }
    }
    Ok(refreshed)
}

/// A repository URL without scheme, credentials, `.git` suffix, trailing slash or case.
pub fn normalise(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let without_user = without_scheme
        .split_once('@')
        .map_or(without_scheme, |(_, rest)| rest);
    let ssh_style = without_user.replacen(
        ':',
        "/",
        usize::from(!url.contains("://") && url.contains('@')),
    );
    ssh_style
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .to_ascii_lowercase()
}

/// Whether two normalised URLs name the same repository; a name without a host
/// (`team/app`, from a registry event) matches by path suffix.
fn same_repository(subscribed: &str, named: &str) -> bool {
    subscribed == named || subscribed.ends_with(&format!("/{named}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalise_across_schemes_and_suffixes() {
        assert_eq!(
            normalise("https://GitHub.com/acme/config.git"),
            "github.com/acme/config"
        );
        assert_eq!(
            normalise("git@github.com:acme/config.git"),
            "github.com/acme/config"
        );
        assert_eq!(
            normalise("http://user@127.0.0.1:8080/config.git/"),
            "127.0.0.1:8080/config"
        );
        assert_eq!(
            normalise("127.0.0.1:5000/demo/app"),
            "127.0.0.1:5000/demo/app"
        );
        assert!(same_repository("ghcr.io/acme/app", "acme/app"));
        assert!(!same_repository("ghcr.io/acme/app2", "acme/app"));
    }
}
