//! The reconciler of Stages that keeps their health fresh and drives verification runs:
//!
//! - every Stage with registered Applications has its health re-read (every
//!   [`HEALTH_POLL_WHILE_VERIFYING`] while a run waits on it, [`HEALTH_POLL`] otherwise);
//!   the status is written only when the verdict or its message changes;
//! - a `Pending` run starts its analysis once health has held `Healthy` for the Stage's
//!   stabilisation window (default 30s; at once when no Applications are registered), and
//!   ends in `Error` naming the last health it saw when that takes longer than the health
//!   timeout (default 10m);
//! - a `Running` run takes the measurements that are due (`analysis::Analyzer`) until it
//!   ends, bounded by the Stage's `verification.timeout` (default 30m); the end is filed in
//!   the history and recorded on the Freight (`state::record_on_freight`).
//!
//! Contract of [`reconcile`]:
//! - reads the Stage (from the caches), its project's Credentials (Argo CD), its
//!   AnalysisTemplates and the Freight it verifies; Argo CD and the metric providers;
//! - writes the Stage's `status.health`, `status.verification` and history, and the
//!   verification's end on the Freight;
//! - wakes on the Stage's changes and on AnalysisTemplate changes in its project, and
//!   requeues for its next due measurement or health look (at least every 30s while it
//!   has something to watch). Each Stage reconciles on its own (at most
//!   [`MAX_LOOKS_IN_FLIGHT`] at once), so a slow Argo CD or metric provider for one Stage
//!   never delays another's measurements.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::api::{
    AnalysisTemplate, Freight, HealthState, Kind, ObjectKey, Stage, StageHealth, Time,
    VerificationInfo, VerificationPhase, parse_duration,
};
use crate::discovery::project_credentials::ProjectCredentials;
use crate::expr::{ExprCache, ExprContext, FreightView};
use crate::runtime::{Action, Cache, Controller, Resource};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError, StoredObject};

use super::analysis::{Analyzer, prepare};
use super::{health, state};

const MAX_SLEEP: Duration = Duration::from_secs(30);
/// At most this many Stages are looked at at once; the others wait for a look to end.
pub const MAX_LOOKS_IN_FLIGHT: usize = 32;
/// How often health is read while nothing waits on it.
pub const HEALTH_POLL: Duration = Duration::from_secs(30);
/// How often health is read while a verification waits on it.
pub const HEALTH_POLL_WHILE_VERIFYING: Duration = Duration::from_secs(2);
/// How long health must hold before analysis starts, unless the Stage says otherwise.
pub const DEFAULT_STABILIZATION: Duration = Duration::from_secs(30);
/// How long a run waits for health, unless the Stage says otherwise.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(600);
/// A run's deadline, unless the Stage's `verification.timeout` says otherwise.
pub const DEFAULT_VERIFICATION_TIMEOUT: Duration = Duration::from_secs(1800);

/// What [`reconcile`] works with.
pub struct VerificationContext {
    controller: VerificationController,
    cache: Cache,
}

/// Looks at one Stage: health when due, then its run; see the module doc.
pub async fn reconcile(
    stage: Arc<Stage>,
    context: Arc<VerificationContext>,
) -> Result<Action, StoreError> {
    let key = stage.key_of();
    let Some(stored) = context.cache.get_stored(&key) else {
        return Ok(Action::await_change());
    };
    let controller = &context.controller;
    if !needs_a_look(&stored.object) {
        controller.forget_health(&key);
        return Ok(Action::await_change());
    }
    let look = controller
        .look(&stored, &CredentialCache::default())
        .await?;
    Ok(match look.wake_at {
        Some(at) => Action::requeue_at(at),
        None => Action::requeue(MAX_SLEEP),
    })
}

/// Keeps health fresh and drives verification runs.
pub struct VerificationController {
    store: Arc<dyn Store>,
    secret_key: Arc<SecretKey>,
    http: reqwest::Client,
    analyzer: Analyzer,
    exprs: ExprCache,
    next_health_look: Mutex<HashMap<ObjectKey, Timestamp>>,
}

/// What one look at a Stage asks of the loop.
struct Look {
    wake_at: Option<Timestamp>,
}

/// The project's credentials for one look, loaded once, when the look first needs them.
type CredentialCache = OnceCell<Arc<ProjectCredentials>>;

fn after(now: Timestamp, duration: Duration) -> Timestamp {
    now.saturating_add(SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX))
        .unwrap_or(now)
}

fn duration_of(text: Option<&str>, default: Duration) -> Duration {
    text.and_then(|t| parse_duration(t).ok()).unwrap_or(default)
}

impl VerificationController {
    /// A controller over `store`; `secret_key` opens the project's credentials for Argo CD.
    /// Fails when the HTTP client (with its 30s timeout) cannot be built, rather than go on
    /// with one that has no timeout.
    pub fn new(store: Arc<dyn Store>, secret_key: Arc<SecretKey>) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(VerificationController {
            store,
            secret_key,
            analyzer: Analyzer::new(http.clone()),
            http,
            exprs: ExprCache::new(),
            next_health_look: Mutex::default(),
        })
    }

    /// Runs until `shutdown` is cancelled, looking at the Stages in `cache`; looks in
    /// flight are then dropped (a run's state is in the store, and the next start goes on
    /// from it).
    pub async fn run(self, cache: Cache, shutdown: CancellationToken) {
        let context = Arc::new(VerificationContext {
            controller: self,
            cache: cache.clone(),
        });
        Controller::<Stage>::for_kind("verification", &cache)
            .watches(Kind::AnalysisTemplate, |changed, cache| {
                let project = changed.change.key.namespace.as_deref().unwrap_or_default();
                cache
                    .list::<Stage>(Some(project))
                    .iter()
                    .map(|s| s.key_of())
                    .collect()
            })
            .concurrency(MAX_LOOKS_IN_FLIGHT)
            .run(
                reconcile,
                |_, _: &StoreError, _| Action::requeue(MAX_SLEEP),
                context,
                shutdown,
            )
            .await;
    }

    /// Forgets when `key`'s health was due (it has nothing to watch any more).
    fn forget_health(&self, key: &ObjectKey) {
        self.next_health_look
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// When `key`'s health is next due.
    fn health_due(&self, key: &ObjectKey) -> Option<Timestamp> {
        self.next_health_look
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
    }

    /// `project`'s credentials, loaded at most once per look.
    async fn credentials(
        &self,
        project: &str,
        cache: &CredentialCache,
    ) -> Result<Arc<ProjectCredentials>, StoreError> {
        let loaded = cache
            .get_or_try_init(|| async {
                ProjectCredentials::load(self.store.as_ref(), &self.secret_key, project)
                    .await
                    .map(Arc::new)
            })
            .await?;
        Ok(Arc::clone(loaded))
    }

    /// One look at one Stage: health when due, then its run.
    async fn look(
        &self,
        stored: &StoredObject,
        credentials: &CredentialCache,
    ) -> Result<Look, StoreError> {
        let stage: Stage = stored.to_typed()?;
        let status = stage.status.clone().unwrap_or_default();
        let run = status
            .verification
            .clone()
            .filter(|r| !r.phase.is_terminal());
        let project = stored.key.namespace.clone().unwrap_or_default();
        let now = Timestamp::now();
        let mut health = status.health.clone();
        let mut wake_at = None;
        if !status.applications.is_empty() {
            // A run that started after the last look (a new promotion) needs a fresh one.
            let stale = run.as_ref().is_some_and(|run| {
                let checked = health.as_ref().and_then(|h| h.checked_at.as_ref());
                match (checked, &run.start_time) {
                    (Some(checked), Some(started)) => checked.0 < started.0,
                    _ => true,
                }
            });
            let due = stale || self.health_due(&stored.key).is_none_or(|at| at <= now);
            if due {
                let creds = self.credentials(&project, credentials).await?;
                let argocd = health::project_argocd(self.store.as_ref(), &project).await?;
                let fresh = health::check(
                    &self.http,
                    creds.as_ref(),
                    argocd.as_ref(),
                    &status.applications,
                    health.as_ref(),
                    now,
                )
                .await;
                if health_changed(health.as_ref(), &fresh) {
                    let written = fresh.clone();
                    state::modify_stage(self.store.as_ref(), &stored.key, |_, status| {
                        status.health = Some(written.clone());
                        Ok(Some(()))
                    })
                    .await?;
                }
                health = Some(fresh);
                let every = if run.is_some() {
                    HEALTH_POLL_WHILE_VERIFYING
                } else {
                    HEALTH_POLL
                };
                self.next_health_look
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(stored.key.clone(), after(now, every));
            }
            wake_at = self.health_due(&stored.key);
        }
        let Some(run) = run else {
            return Ok(Look { wake_at });
        };
        let next = self
            .advance_run(&stored.key, &stage, run, health.as_ref(), now)
            .await?;
        Ok(Look {
            wake_at: match (wake_at, next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        })
    }

    /// Moves a run on; returns when to look again.
    async fn advance_run(
        &self,
        key: &ObjectKey,
        stage: &Stage,
        mut run: VerificationInfo,
        health: Option<&StageHealth>,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let project = key.namespace.clone().unwrap_or_default();
        let status = stage.status.clone().unwrap_or_default();
        let started = run.start_time.as_ref().map(|t| t.0).unwrap_or(now);
        let mut wake_at = None;
        if run.phase == VerificationPhase::Pending {
            let policy = stage.spec.health.as_ref();
            let window = duration_of(
                policy.and_then(|p| p.stabilization_window.as_deref()),
                DEFAULT_STABILIZATION,
            );
            let limit = duration_of(
                policy.and_then(|p| p.timeout.as_deref()),
                DEFAULT_HEALTH_TIMEOUT,
            );
            if !status.applications.is_empty() {
                let healthy_since = health
                    .filter(|h| h.status == HealthState::Healthy)
                    .and_then(|h| h.since.as_ref())
                    .map(|t| t.0);
                let stable_at = healthy_since.map(|since| after(since, window));
                match stable_at {
                    Some(at) if at <= now => {}
                    // Healthy but not for the whole window yet: wait for it, even past the
                    // health timeout (flapping back to unhealthy ends the wait below).
                    Some(at) => {
                        run.message = format!(
                            "Healthy; holding for the stabilisation window ({}) before the analysis starts",
                            humantime::format_duration(window)
                        );
                        self.save(key, &run).await?;
                        return Ok(Some(at));
                    }
                    None if after(started, limit) <= now => {
                        let seen = health
                            .map(|h| format!("{:?}: {}", h.status, h.message))
                            .unwrap_or_else(|| "never read".to_owned());
                        run.phase = VerificationPhase::Error;
                        run.message = format!(
                            "the Stage did not become healthy within {}; last health seen: {seen}",
                            humantime::format_duration(limit)
                        );
                        return self.finish(key, &project, run, now).await.map(|()| None);
                    }
                    None => {
                        run.message = match health {
                            Some(h) if !h.message.is_empty() => {
                                format!(
                                    "waiting for the Stage to be healthy: {:?}: {}",
                                    h.status, h.message
                                )
                            }
                            _ => "waiting for the Stage to be healthy".to_owned(),
                        };
                        self.save(key, &run).await?;
                        return Ok(None);
                    }
                }
            }
            let templates = &stage
                .spec
                .verification
                .as_ref()
                .map(|v| v.analysis_templates.clone())
                .unwrap_or_default();
            if templates.is_empty() {
                run.phase = VerificationPhase::Successful;
                run.message = format!(
                    "healthy for the stabilisation window ({}); no analysis configured",
                    humantime::format_duration(window)
                );
                return self.finish(key, &project, run, now).await.map(|()| None);
            }
            run.phase = VerificationPhase::Running;
            run.analysis_start_time = Some(Time(now));
            run.message = "analysis running".to_owned();
        }
        // Running: measure what is due.
        let verification = stage.spec.verification.clone().unwrap_or_default();
        let deadline = after(
            run.analysis_start_time.as_ref().map(|t| t.0).unwrap_or(now),
            duration_of(
                verification.timeout.as_deref(),
                DEFAULT_VERIFICATION_TIMEOUT,
            ),
        );
        match self.metrics(&project, stage, &run, &verification).await? {
            Err(reason) => {
                run.phase = VerificationPhase::Error;
                run.message = reason;
            }
            Ok(metrics) => {
                wake_at = self
                    .analyzer
                    .advance(&metrics, &mut run, now, deadline)
                    .await;
            }
        }
        if run.phase.is_terminal() {
            return self.finish(key, &project, run, now).await.map(|()| None);
        }
        self.save(key, &run).await?;
        Ok(wake_at)
    }

    /// The run's metrics: its Stage's templates with the args evaluated for its Freight.
    async fn metrics(
        &self,
        project: &str,
        stage: &Stage,
        run: &VerificationInfo,
        verification: &crate::api::Verification,
    ) -> Result<Result<Vec<super::analysis::MetricSpec>, String>, StoreError> {
        let mut templates: Vec<AnalysisTemplate> = Vec::new();
        for reference in &verification.analysis_templates {
            let key = ObjectKey::namespaced(Kind::AnalysisTemplate, project, &reference.name);
            match self.store.get(&key).await? {
                Some(stored) => templates.push(stored.to_typed()?),
                None => {
                    return Ok(Err(format!(
                        "AnalysisTemplate `{}` does not exist in project `{project}`; hint: apply it, or \
                         remove it from the Stage's `verification.analysisTemplates`",
                        reference.name
                    )));
                }
            }
        }
        let freight_key = ObjectKey::namespaced(Kind::Freight, project, &run.freight);
        let view = match self.store.get(&freight_key).await? {
            Some(stored) => FreightView::from(&stored.to_typed::<Freight>()?),
            None => FreightView {
                id: run.freight.clone(),
                ..Default::default()
            },
        };
        let ctx = ExprContext {
            project: project.to_owned(),
            stage: stage.metadata.name.clone().unwrap_or_default(),
            actor: run.actor.clone(),
            freight: view,
            ..Default::default()
        };
        let mut args = BTreeMap::new();
        for arg in &verification.args {
            match self.exprs.evaluate_string(&arg.value, &ctx) {
                Ok(value) => {
                    args.insert(arg.name.clone(), crate::expr::to_text(&value));
                }
                Err(error) => {
                    return Ok(Err(format!(
                        "cannot evaluate the Stage's `verification.args` `{}`: {error}",
                        arg.name
                    )));
                }
            }
        }
        Ok(prepare(&templates, &args).map_err(|e| e.to_string()))
    }

    /// Writes the run back, unless a newer one replaced it meanwhile.
    async fn save(&self, key: &ObjectKey, run: &VerificationInfo) -> Result<(), StoreError> {
        state::modify_stage(self.store.as_ref(), key, |_, status| {
            match &mut status.verification {
                Some(current) if current.id == run.id && current != run => {
                    if current.phase.is_terminal() {
                        return Ok(None);
                    }
                    *current = run.clone();
                    Ok(Some(()))
                }
                _ => Ok(None),
            }
        })
        .await
        .map(|_| ())
    }

    /// Ends the run: files it and records it on the Freight.
    async fn finish(
        &self,
        key: &ObjectKey,
        project: &str,
        mut run: VerificationInfo,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if run.finish_time.is_none() {
            run.finish_time = Some(Time(now));
        }
        let written = state::modify_stage(self.store.as_ref(), key, |_, status| {
            match &status.verification {
                Some(current) if current.id == run.id && !current.phase.is_terminal() => {
                    status.verification = Some(run.clone());
                    state::file(status, run.clone());
                    Ok(Some(()))
                }
                _ => Ok(None),
            }
        })
        .await?;
        if written.is_some() {
            tracing::info!(stage = %key, freight = %run.freight, phase = ?run.phase, message = %run.message, "verification ended");
            state::record_on_freight(self.store.as_ref(), project, &key.name, &run).await?;
        }
        Ok(())
    }
}

/// Whether a Stage has Applications to watch or a run to drive, read from its JSON so that
/// the many Stages with neither cost no parsing on every turn of the loop.
fn needs_a_look(stage: &serde_json::Value) -> bool {
    let status = &stage["status"];
    status["applications"]
        .as_array()
        .is_some_and(|apps| !apps.is_empty())
        || matches!(
            status["verification"]["phase"].as_str(),
            Some("Pending" | "Running")
        )
}

/// Whether a fresh health reading is worth writing (its `checkedAt` alone is not).
fn health_changed(previous: Option<&StageHealth>, fresh: &StageHealth) -> bool {
    match previous {
        None => true,
        Some(previous) => {
            previous.status != fresh.status
                || previous.message != fresh.message
                || previous.applications != fresh.applications
        }
    }
}
