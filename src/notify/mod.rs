//! Telling others what happened: notifications (a JSON POST or a Slack message per
//! event, from a ProjectConfig's `spec.notifications`) and feedback to CI (commit
//! statuses on the commits Freight came from, for git and image subscriptions with
//! `commitStatuses: true`; an image's commit is the one its labels name).
//!
//! ```text
//!  Promotions, Stages, Freight (caches) ──events──▶ occurrences (stable ids)
//!                                                       │ outbox::take (watermark)
//!  ProjectConfig.status.outbox ◀────────────────────────┘
//!        │ deliver (webhook, Slack) / commit_statuses (GitHub, GitLab)
//!        ▼ outbox::settle: delivered, retried with backoff, or given up
//!  ProjectConfig.status.notifications[{name, lastError, lastDeliveredAt, failures}]
//! ```
//!
//! It owns no phase: the engine and verification never call it and never wait for it;
//! it reads what they wrote (`controller`'s contract says what it reads and writes).

pub mod commit_statuses;
pub mod controller;
pub mod deliver;
pub mod events;
pub mod outbox;

pub use controller::{Notifier, NotifyContext, reconcile};
pub use outbox::Backoff;

#[cfg(test)]
mod tests;
