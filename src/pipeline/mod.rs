//! The pipeline decides what may run when: which promotion a Stage runs next
//! ([`queue`]), whether a promotion may be requested at all and what it supersedes
//! ([`request`]), and what each Stage's gates and windows say now ([`board`], which the API
//! and the web UI show). It decides; `promotion` executes; `store` remembers.

pub mod auto;
pub mod availability;
pub mod board;
pub mod door;
pub mod queue;
pub mod request;
pub mod windows;

pub use crate::api::annotations::{
    ABORT as ABORT_ANNOTATION, ACTOR as ACTOR_ANNOTATION, REQUESTED_AT as REQUESTED_AT_ANNOTATION,
    WAKE as WAKE_ANNOTATION, WINDOW_OVERRIDE as WINDOW_OVERRIDE_ANNOTATION,
};

/// The phase of a stored Promotion (`Pending` when it has no status yet).
pub fn promotion_phase(object: &serde_json::Value) -> crate::api::PromotionPhase {
    object
        .pointer("/status/phase")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
        .unwrap_or_default()
}
