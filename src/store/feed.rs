//! The change feed: every write, in order, with a way to wait for the next one.
//!
//! Controllers remember the last revision they handled and call
//! [`ChangeFeed::wait_past`], which returns as soon as a newer write lands (or the timeout
//! they chose passes), instead of polling on a timer.

use std::time::Duration;

use tokio::sync::watch;

use crate::api::ObjectKey;

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeOp {
    /// A resource was created.
    Created,
    /// Its metadata or spec changed.
    Updated,
    /// Its status changed.
    StatusUpdated,
    /// It was deleted.
    Deleted,
}

/// One write, as seen on the feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The store revision of the write.
    pub revision: u64,
    /// The resource.
    pub key: ObjectKey,
    /// What happened.
    pub op: ChangeOp,
}

/// A subscription to the store's revision counter.
#[derive(Clone, Debug)]
pub struct ChangeFeed {
    latest: watch::Receiver<u64>,
}

impl ChangeFeed {
    pub(crate) fn new(latest: watch::Receiver<u64>) -> Self {
        ChangeFeed { latest }
    }

    /// The newest revision written so far.
    pub fn latest(&self) -> u64 {
        *self.latest.borrow()
    }

    /// Waits until a write newer than `revision` lands, at most `timeout`. Returns the
    /// newest revision, or `None` when the timeout passed first (or the store closed).
    pub async fn wait_past(&mut self, revision: u64, timeout: Duration) -> Option<u64> {
        let wait = self.latest.wait_for(|latest| *latest > revision);
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(latest)) => Some(*latest),
            _ => None,
        }
    }
}
