//! The promotion engine: expands a Stage's template into a plan ([`plan`]), runs it step by
//! step with `${{ }}` expressions evaluated ([`engine`]), and records the outcome on the
//! Stage and the Freight ([`record`]). It executes; what may run when is decided in
//! `pipeline`, and the steps themselves live in the `dray-steps` crate.

pub mod audit;
mod credentials;
pub mod engine;
pub mod exprs;
pub mod freight_diff;
pub mod metadata;
pub mod plan;
pub mod record;
mod repos;
pub mod step_exprs;
pub mod step_log;
pub mod truth;

pub use credentials::ProjectCredentials;
pub use engine::{Engine, EngineError, EngineParts};
pub use repos::SharedMirrors;
pub use step_exprs::StepExprs;
pub use truth::StageTruth;
