//! Notifications and feedback to CI, as resources say them: a `ProjectConfig`'s
//! `spec.notifications` (where to send which events), the events and their payload, and
//! what Dray records on the `ProjectConfig`'s status (each notification's deliveries, and
//! the outbox of what it still has to deliver). Deciding and delivering is
//! `crate::notify`'s; this module only names things.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Time;

/// One place to tell about events: exactly one of `webhook` and `slack`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// The notification's name, unique in the project; its deliveries are recorded under
    /// it in the ProjectConfig's `status.notifications`.
    pub name: String,
    /// A JSON POST of each event (Dray's payload), signed when `secretRef` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookNotification>,
    /// A message to a Slack incoming webhook (`{text, blocks}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackNotification>,
    /// The events to send; at least one.
    pub events: Vec<NotificationEvent>,
}

impl Notification {
    /// The key its deliveries are recorded under: its name.
    pub fn record_name(&self) -> &str {
        &self.name
    }
}

/// A JSON POST per event.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookNotification {
    /// Where to POST: `https://…` (or `http://` to a loopback address only).
    pub url: String,
    /// A Credential of type `webhook` in the project whose `token` signs each body:
    /// `X-Dray-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, as GitHub signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
}

/// A Slack incoming webhook. Its URL is itself the secret, so it is best kept in a
/// Credential: exactly one of `url` and `urlSecretRef`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlackNotification {
    /// The incoming webhook's URL (`https://hooks.slack.com/services/…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A Credential of type `webhook` in the project whose `token` is the incoming
    /// webhook's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_secret_ref: Option<String>,
}

/// Something that happened that a notification may be sent for.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum NotificationEvent {
    /// A promotion ended `Succeeded`.
    PromotionSucceeded,
    /// A promotion ended `Failed` (a gate, a reviewer or a check said no).
    PromotionFailed,
    /// A promotion ended `Errored` (something broke).
    PromotionErrored,
    /// Freight was verified in a Stage (its verification succeeded, or the Stage has no
    /// verification and the promotion succeeded).
    FreightVerified,
    /// A verification ended `Failed`, `Inconclusive` or `Error`.
    VerificationFailed,
    /// Freight was rejected for a Stage (fires once rejecting Freight lands).
    FreightRejected,
    /// A Stage was frozen (fires once freezing a Stage lands).
    StageFrozen,
}

impl NotificationEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [NotificationEvent; 7] = [
        NotificationEvent::PromotionSucceeded,
        NotificationEvent::PromotionFailed,
        NotificationEvent::PromotionErrored,
        NotificationEvent::FreightVerified,
        NotificationEvent::VerificationFailed,
        NotificationEvent::FreightRejected,
        NotificationEvent::StageFrozen,
    ];

    /// The event's name, as written in `events` and sent in `X-Dray-Event`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationEvent::PromotionSucceeded => "PromotionSucceeded",
            NotificationEvent::PromotionFailed => "PromotionFailed",
            NotificationEvent::PromotionErrored => "PromotionErrored",
            NotificationEvent::FreightVerified => "FreightVerified",
            NotificationEvent::VerificationFailed => "VerificationFailed",
            NotificationEvent::FreightRejected => "FreightRejected",
            NotificationEvent::StageFrozen => "StageFrozen",
        }
    }
}

impl std::fmt::Display for NotificationEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Freight an event is about.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventFreight {
    /// Its name (the content id).
    pub name: String,
    /// Its alias.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
}

/// What a webhook notification POSTs for one event (Slack gets it as words instead).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPayload {
    /// What happened.
    pub event: NotificationEvent,
    /// The project.
    pub project: String,
    /// The Stage.
    pub stage: String,
    /// The Freight.
    pub freight: EventFreight,
    /// The promotion, for promotion events (and the one that promoted the verified
    /// Freight, when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<String>,
    /// The promotion's or the verification's phase, e.g. `Succeeded`, `Failed`.
    pub phase: String,
    /// Why, in words.
    #[serde(default)]
    pub message: String,
    /// When it happened.
    pub at: Time,
    /// The Stage's page in Dray's web UI.
    pub url: String,
}

/// How one notification's deliveries went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationStatus {
    /// The notification's name (`commitStatuses` for the commit statuses Dray posts).
    pub name: String,
    /// Why the last delivery that gave up failed (cleared by the next success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When a delivery last succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivered_at: Option<Time>,
    /// How many deliveries gave up after every attempt.
    #[serde(default)]
    pub failures: u64,
}

/// What Dray still has to deliver, and how far it has looked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outbox {
    /// Events up to this time have been put in the outbox (events before the first
    /// notification was configured are never sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The events at exactly `since` already put in the outbox, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// Deliveries not yet made, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingDelivery>,
}

/// One delivery to make: to a notification, or a commit status to a forge.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingDelivery {
    /// The delivery's id, sent as `X-Dray-Delivery` (the same on every attempt).
    pub id: String,
    /// The notification it goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<String>,
    /// The commit status it posts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_status: Option<CommitStatusDelivery>,
    /// The event.
    pub event: EventPayload,
    /// Attempts made so far.
    #[serde(default)]
    pub attempts: u32,
    /// Not before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Time>,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A commit status to post to the commit a Freight came from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitStatusDelivery {
    /// The repository, as the Warehouse subscribes to it (or as the image's
    /// `org.opencontainers.image.source` names it).
    pub repo_url: String,
    /// The commit.
    pub sha: String,
    /// The state to post.
    pub state: CommitState,
    /// The image subscription (its `repoURL`) whose image named this commit in its
    /// labels; unset for a git subscription's commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A commit status' state, in Dray's words (GitHub's and GitLab's differ).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CommitState {
    /// Promoted into the Stage, not verified yet.
    Pending,
    /// Verified in the Stage.
    Success,
    /// The verification (or the promotion) failed.
    Failure,
}
