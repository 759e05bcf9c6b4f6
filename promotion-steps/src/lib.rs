//! `dray-steps`: the [`Step`] trait and Dray's built-in promotion steps.
//!
//! The trait is the boundary between the engine and the things a promotion does:
//!
//! ```text
//!   dray (engine, pipeline, store, server)
//!     │  builds a StepContext, evaluates ${{ }} in the config, persists outcomes
//!     ▼
//!   dray-steps::Step  ◀── implemented here, one file per built-in step
//!     │  touches git, renderers, forges, Argo CD, HTTP — nothing else
//!     ▼
//!   the world
//! ```
//!
//! This crate never imports `dray`: a step receives a fully evaluated configuration and a
//! narrow [`StepContext`] (work directory, Freight, credentials, HTTP client, repository
//! cache, cancellation, a log sink), and answers with a [`StepOutcome`]. The binary
//! registers [`builtin_steps`] with the engine at start-up; the engine never names a
//! concrete step: each step declares what it may change ([`Step::writes`]) and reports
//! what it did change as typed [`Effect`]s with its outcome, which the engine records.
//!
//! Every step is idempotent: the engine may run the step that was in flight again after a
//! crash, with the state the step saved last time ([`StepContext::saved_state`]).

pub mod argocd;
mod context;
mod count;
pub mod duration;
mod effects;
pub mod forge;
#[doc(hidden)]
pub mod fuzzing;
mod git;
pub mod helm;
mod oci;
mod outcome;
pub mod preview;
mod registry;
#[cfg(test)]
mod schemas;
mod steps;
#[cfg(test)]
mod testing;
mod transient;
mod warm;
mod www_authenticate;

pub use context::{
    CredentialProvider, ExprEvaluator, FreightChart, FreightCommit, FreightImage, GitCredentials,
    LogSink, NoCredentials, NoExprs, RepoCache, StepContext, TargetFreight, ToolPaths,
};
pub use effects::{ArgocdApplication, Effect, MetadataKind, PullRequestRef, Writes};
pub use git::{MirrorLocks, PushLocks, credential_env};
pub use outcome::{StepOutcome, parse_config};
pub use registry::{StepRegistry, builtin_steps};
pub use transient::is_transient_status;
pub use warm::{park_worktrees, remove_warm_dir};
pub use www_authenticate::challenge_params;

use async_trait::async_trait;

/// One kind of promotion step, e.g. `git-clone`.
///
/// Implementations keep to one shape: a `KIND` constant, a typed `Config`
/// (`serde` + `JsonSchema`) parsed with [`parse_config`] before any side effect (a bad
/// config is [`StepOutcome::Failed`], never retried), then the work. The built-in steps
/// get that shape from the crate's `TypedStep`, which implements this trait for them.
#[async_trait]
pub trait Step: Send + Sync {
    /// The name used in `uses:`.
    fn kind(&self) -> &'static str;

    /// What a step of this kind may change outside the promotion's work directory. A
    /// promotion that has started a step that writes anything is never superseded, and a
    /// deployment step waiting after a push reads "written to git, waiting for sync". What
    /// a run did change comes back as [`Effect`]s in [`StepOutcome::Succeeded`].
    fn writes(&self) -> Writes;

    /// What a step of this kind with this evaluated `config` may change: [`Step::writes`]
    /// unless the config decides (an `http` request with a method that is not safe may
    /// change the service it calls, [`Writes::Service`]). A preview stops before the first
    /// step for which this is not [`Writes::Nothing`].
    fn writes_with(&self, _config: &serde_json::Value) -> Writes {
        self.writes()
    }

    /// The JSON schema of the step's configuration.
    fn config_schema(&self) -> schemars::Schema;

    /// Runs the step with its fully evaluated configuration.
    async fn run(&self, ctx: &StepContext, config: serde_json::Value) -> StepOutcome;

    /// How long the engine lets this step keep answering `Running` when the step's
    /// `retry.timeout` says nothing, given its evaluated configuration. Steps that wait for
    /// people (a review) wait longer, and as long as their own `timeout` says.
    fn default_timeout(&self, _config: &serde_json::Value) -> std::time::Duration {
        DEFAULT_STEP_TIMEOUT
    }

    /// What is wrong with `config` as written, known before any run (`dray apply` reports
    /// it); a field given as a `${{ }}` expression is not judged. Nothing, unless the
    /// step says.
    fn check_config(&self, _config: &serde_json::Value) -> Vec<ConfigProblem> {
        Vec::new()
    }
}

/// A problem with a step's configuration found before it runs (see
/// [`Step::check_config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The field of the step's `config` (`provider`).
    pub field: &'static str,
    /// What is wrong, with the value.
    pub message: String,
    /// What to do.
    pub hint: String,
}

/// How long a step may keep answering `Running` unless it or its `retry.timeout` says.
const DEFAULT_STEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
