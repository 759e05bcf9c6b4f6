//! Dray: a promotion orchestrator for GitOps.
//!
//! The layers, from the bottom up (see `docs/architecture.md`):
//!
//! - [`api`]: the resource model, one kind per file (serde + schemars + kube's derive);
//! - [`config`]: loading and validating YAML resources, with file:line errors and hints;
//! - [`store`]: persistence behind the [`store::Store`] trait (embedded SQLite today);
//! - [`server`]: the HTTP API of `dray serve` ([`server::router`] is the entry point;
//!   [`server::auth`] authenticates every `/api/v1` request and authorizes it by RBAC);
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
