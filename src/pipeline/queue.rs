//! The per-Stage promotion queue, a reconciler of Stages: one running promotion per
//! Stage, the oldest pending one next (ordered by the `dray.dev/requested-at`
//! annotation, then name). A promotion found Running with nobody running it (after a
//! crash or restart) is resumed at its step. An abort request (the `dray.dev/abort`
//! annotation) cancels a running promotion, which stops at its next safe point. A pending
//! promotion waits while the Stage's current Freight is being verified, and says so in
//! its message.
//!
//! Contract of [`reconcile`]:
//! - reads (from the caches) the Stage and the project's Promotions for that Stage;
//! - writes a held promotion's `status.message` (once per reason); starts the engine on
//!   a promotion in a task of its own, which writes everything else;
//! - wakes on the Stage's changes (its verification ending), on any change to a
//!   Promotion of the Stage (→ [`promotion_stage`]), and when a promotion it started
//!   ends (its task triggers the Stage once the caches hold the promotion's last write);
//!   it never requeues on a timer.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{
    Kind, ObjectKey, Promotion, PromotionPhase, PromotionSpec, ResourceBody as _, Stage,
    VerificationPhase, annotations,
};
use crate::promotion::Engine;
use crate::runtime::{Action, Cache, Changed, Controller, Resource, Trigger, trigger};

/// How long a finished promotion's task waits for the caches to hold its last write.
const CATCH_UP: Duration = Duration::from_secs(10);

/// Starts and resumes promotions.
pub struct PromotionController {
    engine: Engine,
}

/// What [`reconcile`] works with.
pub struct QueueContext {
    engine: Engine,
    cache: Cache,
    /// The promotions running here, each with the token that cancels it.
    running: Mutex<HashMap<ObjectKey, CancellationToken>>,
    tasks: TaskTracker,
    trigger: Trigger,
    shutdown: CancellationToken,
}

impl PromotionController {
    /// A controller running promotions with `engine`.
    pub fn new(engine: Engine) -> Self {
        PromotionController { engine }
    }

    /// Runs until `shutdown` is cancelled; running promotions are cancelled with it and
    /// resume on the next start.
    pub async fn run(self, cache: Cache, shutdown: CancellationToken) {
        let (trigger, triggers) = trigger();
        let context = Arc::new(QueueContext {
            engine: self.engine,
            cache: cache.clone(),
            running: Mutex::default(),
            tasks: TaskTracker::new(),
            trigger,
            shutdown: shutdown.clone(),
        });
        Controller::<Stage>::for_kind("promotion-queue", &cache)
            .watches(Kind::Promotion, |changed, _| {
                promotion_stage(changed).into_iter().collect()
            })
            .triggered_by(triggers)
            .concurrency(16)
            .run(
                reconcile,
                |_, error: &Infallible, _| match *error {},
                context.clone(),
                shutdown,
            )
            .await;
        context.tasks.close();
        context.tasks.wait().await;
    }
}

/// The Stage a changed Promotion belongs to.
pub fn promotion_stage(changed: &Changed) -> Option<ObjectKey> {
    let stored = changed.latest()?;
    let spec: PromotionSpec = stored.object.spec()?;
    let project = changed.change.key.namespace.as_deref()?;
    Some(ObjectKey::namespaced(Kind::Stage, project, &spec.stage))
}

/// Starts, resumes or aborts the Stage's promotions; see the module doc.
pub async fn reconcile(
    stage: Arc<Stage>,
    context: Arc<QueueContext>,
) -> Result<Action, Infallible> {
    let mut promotions: Vec<Arc<Promotion>> = context
        .cache
        .list::<Promotion>(Some(stage.project()))
        .into_iter()
        .filter(|p| p.spec.stage == stage.name())
        .collect();
    let mut busy = false;
    for promotion in &promotions {
        let key = promotion.key_of();
        let token = context.running_token(&key);
        match token {
            Some(token) => {
                busy = true;
                if wants_abort(promotion) && !token.is_cancelled() {
                    tracing::info!(promotion = %key, "abort requested");
                    token.cancel();
                }
            }
            None if phase(promotion) == PromotionPhase::Running => {
                busy = true;
                context.start(&stage, promotion);
            }
            None => {}
        }
    }
    if busy {
        return Ok(Action::await_change());
    }
    promotions.retain(|p| phase(p) == PromotionPhase::Pending);
    promotions.sort_by_cached_key(|p| (requested_at(p), p.name().to_owned()));
    let Some(next) = promotions.first() else {
        return Ok(Action::await_change());
    };
    match verifying(&stage) {
        Some(reason) => say_why_held(&context.cache, next, &reason).await,
        None => context.start(&stage, next),
    }
    Ok(Action::await_change())
}

impl QueueContext {
    fn running_token(&self, promotion: &ObjectKey) -> Option<CancellationToken> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(promotion)
            .cloned()
    }

    /// Runs `promotion` in a task of its own; when it ends, the Stage is looked at again.
    fn start(self: &Arc<Self>, stage: &Stage, promotion: &Promotion) {
        let key = promotion.key_of();
        let token = self.shutdown.child_token();
        if wants_abort(promotion) {
            token.cancel();
        }
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), token.clone());
        tracing::info!(promotion = %key, "starting promotion");
        let this = self.clone();
        let stage_key = stage.key_of();
        self.tasks.spawn(async move {
            if let Err(error) = this.engine.run(&key, token).await {
                tracing::error!(promotion = %key, %error, "promotion could not run");
            }
            this.running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            // The next look must see this promotion ended, not Running with nobody on it.
            this.cache.catch_up(CATCH_UP).await;
            this.trigger.reconcile(stage_key);
        });
    }
}

fn phase(promotion: &Promotion) -> PromotionPhase {
    promotion
        .status
        .as_ref()
        .map(|s| s.phase)
        .unwrap_or_default()
}

fn annotation<'a>(promotion: &'a Promotion, key: &str) -> Option<&'a str> {
    promotion
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn wants_abort(promotion: &Promotion) -> bool {
    annotation(promotion, annotations::ABORT).is_some()
}

fn requested_at(promotion: &Promotion) -> String {
    annotation(promotion, annotations::REQUESTED_AT)
        .unwrap_or_default()
        .to_owned()
}

/// While the Stage's current Freight is being verified, what a promotion queued behind
/// it says: the next promotion never skips the verification of the Freight before it
/// (the run always ends: its health wait and its analysis have deadlines).
fn verifying(stage: &Stage) -> Option<String> {
    let status = stage.status.as_ref()?;
    let run = status.verification.as_ref()?;
    let phase = match run.phase {
        VerificationPhase::Pending => "Pending",
        VerificationPhase::Running => "Running",
        _ => return None,
    };
    let name = stage.name();
    let alias = status
        .current_freight
        .as_ref()
        .map(|c| c.alias.as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or(run.freight.as_str());
    Some(format!(
        "waiting for the verification of Freight `{alias}` in Stage `{name}` to end \
         ({phase}); hint: `dray verify stage {name} --abort` stops it"
    ))
}

/// Writes why a pending promotion waits into its `status.message`, once.
async fn say_why_held(cache: &Cache, promotion: &Promotion, reason: &str) {
    let key = promotion.key_of();
    let Some(stored) = cache.get_stored(&key) else {
        return;
    };
    let mut status = promotion.status.clone().unwrap_or_default();
    if status.message == reason {
        return;
    }
    status.message = reason.to_owned();
    let Ok(status) = serde_json::to_value(&status) else {
        return;
    };
    if let Err(error) = cache
        .store()
        .update_status(&key, status, Some(stored.resource_version))
        .await
    {
        tracing::debug!(promotion = %key, %error, "cannot say why the promotion waits");
    }
}
