//! The per-Stage promotion queue: one running promotion per Stage, the oldest pending one
//! next (ordered by the `dray.dev/requested-at` annotation). A promotion found Running
//! with nobody running it (after a crash or restart) is resumed at its step. An abort
//! request (the `dray.dev/abort` annotation) cancels a running promotion, which stops at
//! its next safe point. A pending promotion waits while the Stage's current Freight is
//! being verified, and says so in its message.
//!
//! The loop waits on the store's change feed (and on its own promotions finishing), with
//! a 30s ceiling, never on a fixed poll.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::{Kind, ObjectKey, PromotionPhase};
use crate::promotion::Engine;
use crate::store::StoredObject;

use super::{ABORT_ANNOTATION, REQUESTED_AT_ANNOTATION};

const MAX_SLEEP: Duration = Duration::from_secs(30);

/// Starts and resumes promotions.
pub struct PromotionController {
    engine: Engine,
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn stage_of(promotion: &StoredObject) -> (String, String) {
    (
        promotion.key.namespace.clone().unwrap_or_default(),
        text(&promotion.object, "/spec/stage").to_owned(),
    )
}

fn wants_abort(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ABORT_ANNOTATION))
        .is_some()
}

impl PromotionController {
    /// A controller running promotions with `engine`.
    pub fn new(engine: Engine) -> Self {
        PromotionController { engine }
    }

    /// Runs until `shutdown` is cancelled; running promotions are cancelled with it and
    /// resume on the next start.
    pub async fn run(self, shutdown: CancellationToken) {
        let store = self.engine.store().clone();
        let mut feed = store.changes();
        let mut running: HashMap<ObjectKey, CancellationToken> = HashMap::new();
        let mut tasks: JoinSet<ObjectKey> = JoinSet::new();
        loop {
            let seen = feed.latest();
            match store.list(Kind::Promotion, None).await {
                Ok(promotions) => {
                    // The Stages are read only when something waits to start, and a Stage
                    // whose verification cannot be read starts nothing this turn.
                    let verifying = if promotions
                        .iter()
                        .any(|p| super::promotion_phase(&p.object) == PromotionPhase::Pending)
                    {
                        match store.list(Kind::Stage, None).await {
                            Ok(stages) => Some(verifying_stages(&stages)),
                            Err(error) => {
                                tracing::error!(%error, "cannot list stages; no pending promotion starts until they can be read");
                                None
                            }
                        }
                    } else {
                        Some(BTreeMap::new())
                    };
                    let held = self.dispatch(
                        promotions,
                        verifying.as_ref(),
                        &mut running,
                        &mut tasks,
                        &shutdown,
                    );
                    for (promotion, reason) in held {
                        say_why_held(store.as_ref(), &promotion, &reason).await;
                    }
                }
                Err(error) => tracing::error!(%error, "cannot list promotions"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = feed.wait_past(seen, MAX_SLEEP) => {}
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Ok(key) = done {
                        running.remove(&key);
                    }
                }
            }
            while let Some(done) = tasks.try_join_next() {
                if let Ok(key) = done {
                    running.remove(&key);
                }
            }
        }
        for token in running.values() {
            token.cancel();
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Starts what may start; returns the pending promotions held back by a verification,
    /// with the reason.
    fn dispatch(
        &self,
        promotions: Vec<StoredObject>,
        verifying: Option<&BTreeMap<(String, String), String>>,
        running: &mut HashMap<ObjectKey, CancellationToken>,
        tasks: &mut JoinSet<ObjectKey>,
        shutdown: &CancellationToken,
    ) -> Vec<(StoredObject, String)> {
        let mut held = Vec::new();
        let mut busy: BTreeMap<(String, String), ()> = BTreeMap::new();
        let mut pending: BTreeMap<(String, String), Vec<&StoredObject>> = BTreeMap::new();
        for promotion in &promotions {
            let stage = stage_of(promotion);
            if let Some(token) = running.get(&promotion.key) {
                busy.insert(stage, ());
                if wants_abort(&promotion.object) && !token.is_cancelled() {
                    tracing::info!(promotion = %promotion.key, "abort requested");
                    token.cancel();
                }
                continue;
            }
            match super::promotion_phase(&promotion.object) {
                PromotionPhase::Running => {
                    busy.insert(stage, ());
                    self.spawn(promotion, running, tasks, shutdown);
                }
                PromotionPhase::Pending => pending.entry(stage).or_default().push(promotion),
                _ => {}
            }
        }
        for (stage, mut queue) in pending {
            if busy.contains_key(&stage) {
                continue;
            }
            queue.sort_by(|a, b| {
                let at = |p: &StoredObject| {
                    text(
                        &p.object,
                        &format!(
                            "/metadata/annotations/{}",
                            REQUESTED_AT_ANNOTATION.replace('/', "~1")
                        ),
                    )
                    .to_owned()
                };
                (at(a), a.key.name.clone()).cmp(&(at(b), b.key.name.clone()))
            });
            let Some(next) = queue.first() else { continue };
            let Some(verifying) = verifying else { continue };
            if let Some(reason) = verifying.get(&stage) {
                held.push(((*next).clone(), reason.clone()));
                continue;
            }
            self.spawn(next, running, tasks, shutdown);
        }
        held
    }

    fn spawn(
        &self,
        promotion: &StoredObject,
        running: &mut HashMap<ObjectKey, CancellationToken>,
        tasks: &mut JoinSet<ObjectKey>,
        shutdown: &CancellationToken,
    ) {
        let token = shutdown.child_token();
        if wants_abort(&promotion.object) {
            token.cancel();
        }
        running.insert(promotion.key.clone(), token.clone());
        let engine = self.engine.clone();
        let key = promotion.key.clone();
        tracing::info!(promotion = %key, "starting promotion");
        tasks.spawn(async move {
            if let Err(error) = engine.run(&key, token).await {
                tracing::error!(promotion = %key, %error, "promotion could not run");
            }
            key
        });
    }
}

/// The Stages whose current Freight is being verified, with what a promotion queued behind
/// says while it waits: the next promotion never skips the verification of the Freight
/// before it (the run always ends: its health wait and its analysis have deadlines).
fn verifying_stages(stages: &[StoredObject]) -> BTreeMap<(String, String), String> {
    stages
        .iter()
        .filter_map(|stage| {
            let run = stage.object.pointer("/status/verification")?;
            let phase = text(run, "/phase");
            if phase != "Pending" && phase != "Running" {
                return None;
            }
            let project = stage.key.namespace.clone().unwrap_or_default();
            let name = stage.key.name.clone();
            let alias = stage
                .object
                .pointer("/status/currentFreight/alias")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| text(run, "/freight"));
            let reason = format!(
                "waiting for the verification of Freight `{alias}` in Stage `{name}` to end \
                 ({phase}); hint: `dray verify stage {name} --abort` stops it"
            );
            Some(((project, name), reason))
        })
        .collect()
}

/// Writes why a pending promotion waits into its `status.message`, once.
async fn say_why_held(store: &dyn crate::store::Store, promotion: &StoredObject, reason: &str) {
    if text(&promotion.object, "/status/message") == reason {
        return;
    }
    let mut status = promotion
        .object
        .get("status")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"phase": "Pending"}));
    if let Some(map) = status.as_object_mut() {
        map.insert("message".into(), Value::String(reason.to_owned()));
    }
    if let Err(error) = store
        .update_status(&promotion.key, status, Some(promotion.resource_version))
        .await
    {
        tracing::debug!(promotion = %promotion.key, %error, "cannot say why the promotion waits");
    }
}
