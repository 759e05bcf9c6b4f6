//! The pipeline decides what may run when: which promotion a Stage runs next
//! ([`queue`]), whether a promotion may be requested at all and what it supersedes
//! ([`request`]; a hold placed by hand: [`hold`]; sign-offs: [`signoff`]), who holds a Freight that is about to be
//! ([`request`]; a hold placed by hand: [`hold`]; Freight rejected by hand: [`reject`];
//! the line stopped by hand: [`freeze`], both failing as [`lever`] says), who holds a Freight that is about to be
//! deleted ([`in_use`]), what a cascading delete removes ([`cascade`]), what each Stage's
//! gates and windows say now ([`board`], which the API and the web UI show), and what runs
//! where across projects ([`release_board`], the release board of the API, the UI and
//! `dray get board`); [`unblock`] words what would lift each reason a promotion is
//! refused; [`dora`] measures each Stage's delivery (the four DORA numbers). It decides; `promotion` executes; `store` remembers.

pub mod auto;
pub mod availability;
pub mod board;
pub mod cascade;
pub mod door;
pub mod dora;
pub mod freeze;
pub mod hold;
pub mod in_use;
pub mod lever;
pub mod policy;
pub mod preview;
pub mod queue;
mod referrers;
pub mod reject;
pub mod release_board;
pub mod request;
pub mod signoff;
pub mod unblock;
pub mod windows;

use crate::api::ResourceBody as _;

pub use crate::api::annotations::{
    ABORT as ABORT_ANNOTATION, ACTOR as ACTOR_ANNOTATION,
    FREEZE_OVERRIDE as FREEZE_OVERRIDE_ANNOTATION, REQUESTED_AT as REQUESTED_AT_ANNOTATION,
    SIGNED_OFF_BY as SIGNED_OFF_BY_ANNOTATION, WAKE as WAKE_ANNOTATION,
    WINDOW_OVERRIDE as WINDOW_OVERRIDE_ANNOTATION,
};

/// The phase of a stored Promotion (`Pending` when it has no status yet).
pub fn promotion_phase(object: &serde_json::Value) -> crate::api::PromotionPhase {
    /// Only the phase: a queue reads every Promotion of a Stage, logs and all.
    #[derive(serde::Deserialize)]
    struct Phase {
        #[serde(default)]
        phase: crate::api::PromotionPhase,
    }
    object
        .status::<Phase>()
        .map(|status| status.phase)
        .unwrap_or_default()
}
