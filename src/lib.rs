//! Dray: a promotion orchestrator for GitOps.
//!
//! The layers, from the bottom up (see `docs/architecture.md`, "Layers and import rules";
//! the test in `layers.rs` fails when a module imports a layer above it):
//!
//! - [`api`]: the resource model, one kind per file (serde + schemars + kube's derive),
//!   and [`api::RepoUrl`], the one repository-URL normaliser;
//! - [`expr`]: CEL inside `${{ }}`; [`secrets`] beside it;
//! - [`store`]: persistence behind the [`store::Store`] trait (embedded SQLite today);
//! - [`runtime`]: the controller runtime (reflector, caches, `Controller::for_kind`);
//! - [`discovery`]: registries, git mirrors, Credentials, minting Freight, webhook matching;
//! - [`promotion`] and [`verification`]: running a promotion; verifying its outcome;
//! - [`pipeline`]: what may run when;
//! - [`config`]: loading and validating YAML resources, with file:line errors and hints;
//! - [`server`]: the HTTP API of `dray serve` ([`server::router`] is the entry point;
//!   [`server::auth`] authenticates every `/api/v1` request and authorizes it by RBAC);
//! - [`ui`]: the web UI, on top of the server;
//! - [`app`]: the composition root of `dray serve` (controllers, server, UI);
//! - [`cli`]: the `dray` command line, which talks to the server.
//!
//! A newcomer should start with [`api`], then [`server::router`].

pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod discovery;
pub mod expr;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
mod layers;
pub mod notify;
pub mod pipeline;
pub mod promotion;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod store;
pub mod ui;
pub mod verification;

/// Dray's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
