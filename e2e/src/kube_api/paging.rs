//! List chunking (`limit` and `continue`) as the API server does it: a page of at most
//! `limit` items in key order, a `continue` token naming where the next page starts and
//! the revision of the first page, `remainingItemCount`; a token from before a compaction
//! is 410 `Expired`. Pages after the first read the current state (the real server reads
//! the first page's snapshot from etcd).
//!
//! It owns the token and the cut; the verbs list the objects.

use base64::Engine;
use serde_json::{Value, json};

use super::status::ApiError;

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) items: Vec<Value>,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining: Option<usize>,
    /// The revision the list reports: the first page's.
    pub(crate) rv: u64,
}

fn position(object: &Value) -> (String, String) {
    let text = |field: &str| {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    (text("namespace"), text("name"))
}

const TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Cuts `items` (in key order, at revision `rv`) by `limit` after `token`; `compacted` is
/// the newest forgotten revision.
pub(crate) fn page(
    items: Vec<Value>,
    limit: Option<usize>,
    token: Option<&str>,
    rv: u64,
    compacted: u64,
) -> Result<Page, ApiError> {
    let (list_rv, after) = match token.filter(|token| !token.is_empty()) {
        None => (rv, None),
        Some(token) => {
            let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token)
                .map_err(|_| bad())?;
            let decoded: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
            let from = decoded["rv"].as_u64().ok_or_else(bad)?;
            if from < compacted {
                return Err(ApiError::new(410, "Expired", TOO_OLD, None));
            }
            let start = (
                decoded["namespace"].as_str().unwrap_or_default().to_owned(),
                decoded["name"].as_str().unwrap_or_default().to_owned(),
            );
            (from, Some(start))
        }
    };
    let mut rest: Vec<Value> = items
        .into_iter()
        .filter(|object| after.as_ref().is_none_or(|after| position(object) > *after))
        .collect();
    let Some(limit) = limit.filter(|limit| *limit > 0 && rest.len() > *limit) else {
        return Ok(Page {
            items: rest,
            continue_token: None,
            remaining: None,
            rv: list_rv,
        });
    };
    let remaining = rest.len() - limit;
    rest.truncate(limit);
    let (namespace, name) = rest.last().map(position).unwrap_or_default();
    let token = json!({"rv": list_rv, "namespace": namespace, "name": name}).to_string();
    Ok(Page {
        items: rest,
        continue_token: Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token)),
        remaining: Some(remaining),
        rv: list_rv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<Value> {
        names
            .iter()
            .map(|n| json!({"metadata": {"name": n, "namespace": "demo"}}))
            .collect()
    }

    #[test]
    fn pages_follow_the_token_and_expire_with_compaction() {
        let first = page(named(&["a", "b", "c"]), Some(2), None, 7, 0).unwrap();
        assert_eq!(first.items.len(), 2);
        assert_eq!(first.remaining, Some(1));
        let token = first.continue_token.unwrap();
        let second = page(named(&["a", "b", "c"]), Some(2), Some(&token), 9, 0).unwrap();
        assert_eq!(second.items, named(&["c"]));
        assert!(second.continue_token.is_none());
        assert_eq!(second.rv, 7, "the first page's revision");
        assert_eq!(
            page(named(&["a"]), Some(2), Some(&token), 9, 8)
                .unwrap_err()
                .code,
            410
        );
    }
}
