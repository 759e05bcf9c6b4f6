//! Verification: after a promotion, the Stage's current Freight must prove itself before it
//! counts as verified there and may move on. Two parts, in order:
//!
//! 1. health — the Argo CD Applications the promotion registered must report the desired
//!    revision synced and Healthy, and hold it for the stabilisation window (`health.rs`);
//! 2. analysis — the Stage's AnalysisTemplates, run with Argo Rollouts' semantics
//!    (`analysis/`).
//!
//! A run lives in the Stage's `status.verification` (so a restart resumes it) and ends in
//! its `status.verificationHistory`; `state.rs` holds the pure transitions, `request.rs`
//! what a person asks for (`dray verify stage S [--abort]`), `controller.rs` the loop that
//! drives runs and keeps health fresh.

pub mod analysis;
pub mod controller;
pub mod health;
pub mod request;
pub mod state;

pub use controller::VerificationController;
