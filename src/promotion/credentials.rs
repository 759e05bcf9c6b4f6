//! The credentials a promotion's steps may use: discovery's
//! [`ProjectCredentials`](crate::discovery::project_credentials::ProjectCredentials), the
//! one Credential lookup of Dray (verification uses it too), re-exported for the engine.

pub use crate::discovery::project_credentials::ProjectCredentials;
