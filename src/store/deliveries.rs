//! Which webhook deliveries a receiver has already taken, so that a replayed delivery does
//! nothing, even after a restart. A row is keyed by the receiver (`project/name`) and a
//! key the receiver chooses (GitHub: the `X-GitHub-Delivery` id, and the digest of the
//! signed body); it lives until `expires_at` (Unix seconds), after which it is dropped.
//!
//! The store only remembers; the receiver decides what counts as the same delivery and
//! remembers only deliveries it has authenticated.

use async_trait::async_trait;
use rusqlite::params;

use super::{SqliteStore, StoreError};

/// Where receivers remember the deliveries they took.
#[async_trait]
pub trait DeliveryLog: Send + Sync {
    /// Claims `keys` for `receiver` until `expires_at`, unless one of them is already held
    /// (not expired at `now`): then nothing changes and the answer is `false`. Expired
    /// claims are dropped first. The check and the claim are one transaction, so two
    /// copies of a delivery arriving together cannot both win.
    async fn claim_delivery(
        &self,
        receiver: &str,
        keys: &[String],
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError>;

    /// Gives a claim back (the delivery could not be handled, so a redelivery may be).
    async fn release_delivery(&self, receiver: &str, keys: &[String]) -> Result<(), StoreError>;
}

#[async_trait]
impl DeliveryLog for SqliteStore {
    async fn claim_delivery(
        &self,
        receiver: &str,
        keys: &[String],
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let receiver = receiver.to_owned();
        let keys = keys.to_vec();
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM webhook_deliveries WHERE expires_at <= ?1",
                params![now],
            )?;
            for key in &keys {
                let held: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                        WHERE receiver = ?1 AND key = ?2)",
                    params![receiver, key],
                    |r| r.get(0),
                )?;
                if held {
                    return Ok(false);
                }
            }
            for key in &keys {
                tx.execute(
                    "INSERT INTO webhook_deliveries (receiver, key, expires_at) VALUES (?1, ?2, ?3)",
                    params![receiver, key, expires_at],
                )?;
            }
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    async fn release_delivery(&self, receiver: &str, keys: &[String]) -> Result<(), StoreError> {
        let receiver = receiver.to_owned();
        let keys = keys.to_vec();
        self.with_connection(move |c| {
            let tx = c.transaction()?;
            for key in &keys {
                tx.execute(
                    "DELETE FROM webhook_deliveries WHERE receiver = ?1 AND key = ?2",
                    params![receiver, key],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|k| (*k).to_owned()).collect()
    }

    #[tokio::test]
    async fn a_delivery_is_taken_once_until_it_expires_even_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let first = keys(&["delivery:72d3", "body:aa"]);
        assert!(
            store
                .claim_delivery("demo/github", &first, 100, 700)
                .await
                .unwrap()
        );
        // The same id, or the same body under another id, is a replay.
        assert!(
            !store
                .claim_delivery("demo/github", &first, 200, 800)
                .await
                .unwrap()
        );
        let same_body = keys(&["delivery:other", "body:aa"]);
        assert!(
            !store
                .claim_delivery("demo/github", &same_body, 200, 800)
                .await
                .unwrap()
        );
        // A refused claim remembers nothing: `delivery:other` is still free.
        assert!(
            store
                .claim_delivery("demo/github", &keys(&["delivery:other"]), 200, 800)
                .await
                .unwrap()
        );
        // Another receiver keeps its own record.
        assert!(
            store
                .claim_delivery("demo/other", &first, 200, 800)
                .await
                .unwrap()
        );
        drop(store);
        let store = SqliteStore::open(dir.path()).unwrap();
        assert!(
            !store
                .claim_delivery("demo/github", &first, 699, 1299)
                .await
                .unwrap()
        );
        assert!(
            store
                .claim_delivery("demo/github", &first, 700, 1300)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn a_released_claim_can_be_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let first = keys(&["delivery:1", "body:bb"]);
        assert!(
            store
                .claim_delivery("demo/github", &first, 0, 600)
                .await
                .unwrap()
        );
        store.release_delivery("demo/github", &first).await.unwrap();
        assert!(
            store
                .claim_delivery("demo/github", &first, 1, 601)
                .await
                .unwrap()
        );
    }
}
