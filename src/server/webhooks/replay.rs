//! Replay protection: what a delivery would repeat if replayed, and remembering it in the
//! store (`store::deliveries`) for [`REPLAY_WINDOW`], so that a restart does not reopen it.
//!
//! A delivery's keys are its delivery id, where the sender gives one (GitHub
//! `X-GitHub-Delivery`, Gitea `X-Gitea-Delivery`, Bitbucket Cloud `X-Request-UUID`,
//! Bitbucket Server `X-Request-Id`), and, where the body is signed (GitHub, Gitea,
//! Bitbucket, Artifactory), the digest of the body: the id header is not signed, so a
//! replay may change or drop it. The same key within the window is a replay. Only
//! authenticated deliveries are remembered, and a delivery that fails is forgotten again
//! so that the sender may redeliver it.

use std::time::Duration;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::api::WebhookProvider;
use crate::store::{Store, StoreError};

use super::doors::header;
use crate::server::error::ApiError;

/// How long a delivery is remembered: a replay within it does nothing.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The longest delivery id taken (the senders' are 36-character UUIDs).
const MAX_DELIVERY_ID: usize = 128;

/// A delivery, as remembered against replays.
pub(super) struct Delivery {
    /// The sender's delivery id, or `(no id)`.
    pub(super) id: String,
    /// Whose deliveries: `project/receiver`.
    receiver: String,
    /// What a replay would repeat.
    keys: Vec<String>,
}

/// The headers that carry `provider`'s delivery id.
fn id_headers(provider: WebhookProvider) -> &'static [&'static str] {
    match provider {
        WebhookProvider::GitHub => &["x-github-delivery"],
        WebhookProvider::Gitea => &["x-gitea-delivery"],
        WebhookProvider::Bitbucket => &["x-request-uuid", "x-request-id"],
        _ => &[],
    }
}

/// Whether `provider` signs the body (so the body itself identifies a replay).
fn signs_body(provider: WebhookProvider) -> bool {
    matches!(
        provider,
        WebhookProvider::GitHub
            | WebhookProvider::Gitea
            | WebhookProvider::Bitbucket
            | WebhookProvider::Artifactory
    )
}

/// What an authenticated delivery to `project/receiver` would repeat if replayed; `None`
/// for senders that give neither an id nor a signed body.
pub(super) fn delivery(
    provider: WebhookProvider,
    project: &str,
    receiver: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Option<Delivery>, ApiError> {
    let mut keys = Vec::new();
    let mut id = None;
    for name in id_headers(provider) {
        let Some(value) = header(headers, name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
        else {
            continue;
        };
        if value.len() > MAX_DELIVERY_ID {
            return Err(ApiError::bad_request(format!(
                "`{name}` is longer than {MAX_DELIVERY_ID} bytes; {} sends a UUID",
                provider.field()
            ))
            .with_hint("send the headers the service sends; Dray uses the id to ignore replays"));
        }
        keys.push(format!("delivery:{value}"));
        id.get_or_insert_with(|| value.to_owned());
    }
    if signs_body(provider) {
        keys.push(format!("body:{:x}", Sha256::digest(body)));
    }
    if keys.is_empty() {
        return Ok(None);
    }
    Ok(Some(Delivery {
        id: id.unwrap_or_else(|| "(no id)".to_owned()),
        receiver: format!("{project}/{receiver}"),
        keys,
    }))
}

fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Remembers `delivery` for [`REPLAY_WINDOW`]; `false` when it is a replay.
pub(super) async fn claim(store: &dyn Store, delivery: &Delivery) -> Result<bool, StoreError> {
    let now = unix_now();
    let until = now.saturating_add(REPLAY_WINDOW.as_secs().try_into().unwrap_or(i64::MAX));
    store
        .claim_delivery(&delivery.receiver, &delivery.keys, now, until)
        .await
}

/// Forgets `delivery` (it failed, so a redelivery may be taken).
pub(super) async fn release(store: &dyn Store, delivery: &Delivery) -> Result<(), StoreError> {
    store
        .release_delivery(&delivery.receiver, &delivery.keys)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn each_sender_is_remembered_by_its_own_id_and_signed_bodies_by_their_digest() {
        let gitea = headers(&[("x-gitea-delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473")]);
        let d = delivery(WebhookProvider::Gitea, "demo", "gitea", &gitea, b"{}")
            .unwrap()
            .unwrap();
        assert_eq!(d.id, "f6266f16-1bf3-46a5-9ea4-602e06ead473");
        assert_eq!(d.keys.len(), 2, "{:?}", d.keys);
        let cloud = headers(&[("x-request-uuid", "afe2bd41-cfc8-4bc7-9b36-66f0c8c52d0f")]);
        let d = delivery(WebhookProvider::Bitbucket, "demo", "bb", &cloud, b"{}")
            .unwrap()
            .unwrap();
        assert_eq!(d.id, "afe2bd41-cfc8-4bc7-9b36-66f0c8c52d0f");
        let server = headers(&[("x-request-id", "d4d1a3f0-2a1d-4c8e-9b4c-5a1e2b3c4d5e")]);
        let d = delivery(WebhookProvider::Bitbucket, "demo", "bb", &server, b"{}")
            .unwrap()
            .unwrap();
        assert_eq!(d.id, "d4d1a3f0-2a1d-4c8e-9b4c-5a1e2b3c4d5e");
        // Docker Hub gives no id and signs nothing: nothing to remember.
        assert!(
            delivery(WebhookProvider::DockerHub, "demo", "hub", &gitea, b"{}")
                .unwrap()
                .is_none()
        );
        let long = "x".repeat(MAX_DELIVERY_ID + 1);
        let too_long = headers(&[("x-gitea-delivery", long.as_str())]);
        assert!(delivery(WebhookProvider::Gitea, "demo", "gitea", &too_long, b"{}").is_err());
    }
}
