//! The pipeline decides what may run when: which promotion a Stage runs next
//! ([`queue`]), whether a promotion may be requested at all and what it supersedes
//! ([`request`]). It decides; `promotion` executes; `store` remembers.

pub mod auto;
pub mod availability;
pub mod queue;
pub mod request;
pub mod windows;

/// The annotation that asks to abort a promotion; its value is who asked.
pub const ABORT_ANNOTATION: &str = "dray.dev/abort";
/// The annotation that records who requested a promotion.
pub const ACTOR_ANNOTATION: &str = "dray.dev/actor";
/// The annotation that orders promotions in a Stage's queue (RFC 3339 with nanoseconds).
pub const REQUESTED_AT_ANNOTATION: &str = "dray.dev/requested-at";
/// The annotation that records a promotion through a closed window: `<user>: <reason>`.
pub const WINDOW_OVERRIDE_ANNOTATION: &str = "dray.dev/window-override";
/// The annotation that wakes a waiting promotion at once (set by webhooks); any new value.
pub const WAKE_ANNOTATION: &str = "dray.dev/wake";

/// The phase of a stored Promotion (`Pending` when it has no status yet).
pub fn promotion_phase(object: &serde_json::Value) -> crate::api::PromotionPhase {
    object
        .pointer("/status/phase")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
        .unwrap_or_default()
}
