//! The promotion engine: runs a Promotion's steps in order, persisting its status after
//! every step, and resumes a Running promotion at the step that was in flight after a
//! crash (steps are idempotent, so running that step again is safe).
//!
//! Outcomes: a step that is `Running` is run again after its `retry_after` until its
//! `retry.timeout` (default 10m) passes — then it fails naming what it waited for; an
//! `Errored` step is retried until `retry.errorThreshold` consecutive errors (default 1);
//! after a `Failed` or `Errored` step, later steps are skipped unless their `if` uses
//! `failure()` or `always()`. Nothing waits without a deadline.
//!
//! The engine never names a concrete step: it asks the registry for the step a Promotion
//! `uses`, reads what that step may change from [`dray_steps::Step::writes`], and keeps
//! what it did change (the [`dray_steps::Effect`]s of its outcome) for the recorder.
//!
//! Where to read:
//! - [`Engine::run`] (here): marks the Stage's running promotion around a run;
//! - `run.rs`: one promotion, start or resume to end (abort, conclusion, record, clean up);
//! - `step.rs`: one step to its outcome (timeouts, error threshold, waking early);
//! - `frozen.rs`: holding a promotion at a freeze before its first writing step;
//! - `context.rs`: what steps and `${{ }}` expressions see;
//! - `state.rs`: the run in memory and in `status.state` (outputs, saved state, effects);
//! - `barrier.rs`: the crash tests' step barriers ([`STEP_BARRIER_ENV`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dray_steps::{StepRegistry, ToolPaths};
use tokio_util::sync::CancellationToken;

use crate::api::{ObjectKey, PromotionPhase, PromotionSpec, ResourceBody as _};
use crate::promotion::exprs::Exprs;
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError};

use super::record;

mod barrier;
mod context;
mod frozen;
mod preview;
mod run;
mod state;
mod step;
#[cfg(test)]
mod tests;
mod warm_dirs;

pub use barrier::{STEP_BARRIER_ENV, STEP_BARRIER_TIMEOUT};
pub use context::{argocd_target, target_freight};
pub use preview::{PREVIEW_TIMEOUT, PreviewReport, PreviewStep};

/// How many consecutive errors a step may have when `retry.errorThreshold` says nothing.
pub const DEFAULT_ERROR_THRESHOLD: u32 = 1;

/// How long one HTTP request of a step (a forge, Argo CD, an `http` gate) may take.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs promotions.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    steps: StepRegistry,
    exprs: Exprs,
    work_root: PathBuf,
    repos: Arc<dyn dray_steps::RepoCache>,
    secret_key: Arc<SecretKey>,
    http: reqwest::Client,
    tools: ToolPaths,
}

/// Why the engine could not be built, or a promotion could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The HTTP client the steps share could not be built.
    #[error(
        "cannot build the promotion engine's HTTP client (timeout {}s): {cause}; hint: this \
         usually means the system's TLS roots cannot be loaded — check the CA certificates \
         installed on this machine",
        HTTP_TIMEOUT.as_secs()
    )]
    HttpClient {
        /// What reqwest said.
        cause: reqwest::Error,
    },
    /// A preview's work directory could not be made.
    #[error(
        "cannot create the preview's work directory `{dir}`: {cause}; hint: check that Dray's \
         data directory is writable and has space"
    )]
    PreviewWorkDir {
        /// The directory.
        dir: String,
        /// Why.
        cause: std::io::Error,
    },
    /// A preview's steps did not end in time.
    #[error(
        "the preview of Stage `{stage}` did not finish within {}s; hint: a step before the \
         first one that writes is waiting (an `http` gate, a slow render): promote without \
         a preview, or make that step faster",
        after.as_secs()
    )]
    PreviewTimedOut {
        /// The Stage.
        stage: String,
        /// How long it was given.
        after: Duration,
    },
    /// The checkouts of a preview could not be diffed.
    #[error(
        "{0}; hint: this is a bug or a broken git mirror — try again, and report it if it stays"
    )]
    PreviewDiff(dray_steps::preview::PreviewError),
}

/// Everything the engine is built from.
pub struct EngineParts {
    /// Where resources live.
    pub store: Arc<dyn Store>,
    /// The built-in steps.
    pub steps: StepRegistry,
    /// Where promotions get their work directories.
    pub work_root: PathBuf,
    /// The shared git mirrors.
    pub repos: Arc<dyn dray_steps::RepoCache>,
    /// Opens Credentials.
    pub secret_key: Arc<SecretKey>,
    /// External tools.
    pub tools: ToolPaths,
}

impl Engine {
    /// An engine from its parts; fails when its HTTP client (with its
    /// [`HTTP_TIMEOUT`]) cannot be built, rather than run steps without a timeout.
    pub fn new(parts: EngineParts) -> Result<Self, EngineError> {
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .map_err(|cause| EngineError::HttpClient { cause })?;
        Ok(Engine {
            store: parts.store,
            steps: parts.steps,
            exprs: Exprs::new(),
            work_root: parts.work_root,
            repos: parts.repos,
            secret_key: parts.secret_key,
            http,
            tools: parts.tools,
        })
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs (or resumes) one promotion to its end, or until `cancel` fires. Returns the
    /// final phase.
    pub async fn run(
        &self,
        key: &ObjectKey,
        cancel: CancellationToken,
    ) -> Result<PromotionPhase, EngineError> {
        let stage = match self.store.get(key).await? {
            Some(stored) => stored
                .object
                .spec::<PromotionSpec>()
                .map(|spec| spec.stage)
                .unwrap_or_default(),
            None => return Err(StoreError::NotFound(key.clone()).into()),
        };
        let project = key.namespace.clone().unwrap_or_default();
        let store = self.store.as_ref();
        record::set_current_promotion(store, &project, &stage, Some(&key.name), &key.name).await?;
        let phase = self.run_promotion(key, cancel).await;
        record::set_current_promotion(store, &project, &stage, None, &key.name).await?;
        phase
    }
}
