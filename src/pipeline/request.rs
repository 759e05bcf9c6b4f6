//! Requesting a promotion: checks that the Stage and Freight exist and that the Stage
//! requests the Freight's origin, copies the Stage's plan into a new Promotion, and — with
//! the Stage's `queuePolicy: Supersede` (the default) — aborts the older pending
//! promotions of the Stage in the same write, and asks a running one that has not started
//! writing (to git, a forge, Argo CD) to abort. Also: aborting a promotion.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::annotations::{FREIGHT_LABEL, STAGE_LABEL};
use crate::api::label::label_value;
use crate::api::suggest::closest;
use crate::api::{
    API_VERSION, ClusterPromotionTask, Freight, Kind, ObjectKey, Promotion, PromotionPhase,
    PromotionSpec, QueuePolicy, ResourceBody as _, Stage, StepPhase, Verb,
};
use crate::expr::exprlang::ExprLanguage;
use crate::promotion::plan::{self, PlanError};
use crate::store::{Store, StoreError, StoredObject, Write, modify_object, modify_status};

use super::availability::{Reason, availability};
use super::door::{AuthorizeError, Authorizer};
use super::unblock;
use super::windows::{self, WindowError, WindowState};
use super::{
    ABORT_ANNOTATION, ACTOR_ANNOTATION, FREEZE_OVERRIDE_ANNOTATION, REQUESTED_AT_ANNOTATION,
    SIGNED_OFF_BY_ANNOTATION, WINDOW_OVERRIDE_ANNOTATION, signoff,
};

pub use super::door::PromoteRequest;

/// Why a promotion was not created.
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    /// The Stage does not exist.
    #[error("Stage `{stage}` does not exist in project `{project}`{}", did_you_mean(.meant))]
    NoStage {
        /// The project.
        project: String,
        /// The Stage.
        stage: String,
        /// The project's Stage most likely meant.
        meant: Option<String>,
    },
    /// The Freight does not exist.
    #[error("no Freight {what} in project `{project}`{}", did_you_mean(.meant))]
    NoFreight {
        /// The project.
        project: String,
        /// `with id `…`` or `with alias `…``.
        what: String,
        /// The id or alias (as asked) most likely meant.
        meant: Option<String>,
    },
    /// The one who asks may not.
    #[error("{message}")]
    Forbidden {
        /// Names user, verb and Stage.
        message: String,
        /// What to do about it.
        hint: String,
    },
    /// Neither or both of id and alias were given.
    #[error("name the Freight by id or by alias (exactly one)")]
    Ambiguous,
    /// A gate refused; each reason names itself and what would lift it.
    #[error("Freight `{freight}` may not be promoted to `{stage}`: {}", reasons.join("; "))]
    Refused {
        /// The project.
        project: String,
        /// The Freight's alias.
        freight: String,
        /// The Stage.
        stage: String,
        /// Every reason.
        reasons: Vec<String>,
    },
    /// The Stage's template cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AuthorizeError> for PromoteError {
    fn from(error: AuthorizeError) -> Self {
        match error {
            AuthorizeError::Denied { message, hint } => PromoteError::Forbidden { message, hint },
            AuthorizeError::Store(error) => PromoteError::Store(error),
        }
    }
}

/// `; did you mean `x`?` when something was likely meant.
fn did_you_mean(meant: &Option<String>) -> String {
    meant
        .as_deref()
        .map(|m| format!("; did you mean `{m}`?"))
        .unwrap_or_default()
}

/// [`PromoteError::NoStage`] for `stage`, with the project's Stage likely meant.
pub async fn no_stage(store: &dyn Store, project: &str, stage: &str) -> PromoteError {
    let names = store
        .list(Kind::Stage, Some(project))
        .await
        .unwrap_or_default();
    PromoteError::NoStage {
        project: project.to_owned(),
        stage: stage.to_owned(),
        meant: closest(stage, names.iter().map(|s| s.key.name.as_str())).map(str::to_owned),
    }
}

pub(super) async fn find_freight(
    store: &dyn Store,
    project: &str,
    request: &PromoteRequest,
) -> Result<Freight, PromoteError> {
    match (&request.freight, &request.alias) {
        (Some(id), None) => {
            let key = ObjectKey::namespaced(Kind::Freight, project, id);
            if let Some(stored) = store.get(&key).await? {
                return Ok(stored.to_typed()?);
            }
            let all = store.list(Kind::Freight, Some(project)).await?;
            Err(PromoteError::NoFreight {
                project: project.to_owned(),
                what: format!("with id `{id}`"),
                meant: closest(id, all.iter().map(|f| f.key.name.as_str())).map(str::to_owned),
            })
        }
        (None, Some(alias)) => {
            let all = store.list(Kind::Freight, Some(project)).await?;
            let alias_of = |f: &StoredObject| {
                f.object
                    .get("alias")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            if let Some(found) = all.iter().find(|f| alias_of(f).as_deref() == Some(alias)) {
                return Ok(found.to_typed()?);
            }
            let aliases: Vec<String> = all.iter().filter_map(alias_of).collect();
            Err(PromoteError::NoFreight {
                project: project.to_owned(),
                what: format!("with alias `{alias}`"),
                meant: closest(alias, aliases.iter().map(String::as_str)).map(str::to_owned),
            })
        }
        _ => Err(PromoteError::Ambiguous),
    }
}

/// The reasons `freight` may not enter `stage` now (empty when it may).
pub fn refusals(stage: &Stage, freight: &Freight) -> Vec<String> {
    availability(stage, freight, jiff::Timestamp::now())
        .reasons
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Each of `gates` once, with what would lift it (see [`unblock`]); reads the upstream
/// Stages the reasons name, for what their verification of the Freight is doing.
async fn explained(
    store: &dyn Store,
    project: &str,
    stage: &str,
    freight: &Freight,
    gates: &[Reason],
) -> Result<Vec<String>, StoreError> {
    let mut upstream = BTreeMap::new();
    for name in gates.iter().flat_map(unblock::upstream_names) {
        let key = ObjectKey::namespaced(Kind::Stage, project, &name);
        if let Some(stage) = store.get(&key).await?.and_then(|s| s.to_typed().ok()) {
            upstream.insert(name, stage);
        }
    }
    let target = unblock::Target {
        project,
        stage,
        alias: &freight.spec.alias,
        freight: freight.metadata.name.as_deref().unwrap_or_default(),
    };
    let now = jiff::Timestamp::now();
    let mut reasons: Vec<String> = Vec::new();
    for gate in gates {
        let said = unblock::explain(gate, &target, &upstream, now);
        if !reasons.contains(&said) {
            reasons.push(said);
        }
    }
    Ok(reasons)
}

/// The promotion windows of `project` as they apply to `stage` now.
pub async fn window_state(
    store: &dyn Store,
    project: &str,
    stage: &Stage,
) -> Result<Result<WindowState, WindowError>, StoreError> {
    let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let config: Option<crate::api::ProjectConfig> =
        store.get(&key).await?.and_then(|c| c.to_typed().ok());
    let windows_of_project = config.map(|c| c.spec.promotion_windows).unwrap_or_default();
    let name = stage.metadata.name.clone().unwrap_or_default();
    let labels = stage.metadata.labels.clone().unwrap_or_default();
    Ok(windows::evaluate(
        &windows_of_project,
        &name,
        &labels,
        jiff::Timestamp::now(),
    ))
}

/// The freezes of `stage` and its project that gate a promotion now ([`super::freeze`]).
async fn frozen(
    store: &dyn Store,
    project: &str,
    stage: &Stage,
) -> Result<Vec<Reason>, StoreError> {
    let of_project = super::freeze::load_project(store, project).await?;
    Ok(super::freeze::reasons(
        of_project.as_ref(),
        stage,
        jiff::Timestamp::now(),
    ))
}

/// `<stage>-<alias>-<8 hex>`, an RFC 1123 label whatever the alias (Freight minted before
/// aliases were checked may carry `Hot_Fix`): lowercased, other characters as `-`.
pub(super) fn promotion_name(stage: &str, alias: &str) -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let base = crate::api::label::to_label(&format!("{stage}-{alias}"), 54);
    format!("{base}-{}", &suffix[..8])
}

/// What the door found for a request once `who` may `promote` (and `override`) the Stage:
/// the Stage, the Freight, every reason a gate refuses (each with what would lift it), and
/// the window override to record.
pub(super) struct Checked {
    /// The Stage.
    pub(super) stage: Stage,
    /// The Freight.
    pub(super) freight: Freight,
    /// Why the gates refuse, each once (empty: they let it in).
    pub(super) reasons: Vec<String>,
    /// `<actor>: <reason> (window `w`)` when a closed window is overridden.
    pub(super) window_override: Option<String>,
    /// `frozen by …; overridden by <actor>: <reason>` when a freeze is overridden.
    pub(super) freeze_override: Option<String>,
}

/// Authorizes `who` and runs every gate for `request`; the refusals are returned, not
/// raised (the caller decides: a promotion refuses, a preview shows them).
pub(super) async fn check_gates(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    request: &PromoteRequest,
) -> Result<Checked, PromoteError> {
    let stages = Kind::Stage.plural();
    who.authorize(store, Verb::Promote, stages, project, &request.stage)
        .await?;
    if request.override_window.is_some() {
        who.authorize(store, Verb::Override, stages, project, &request.stage)
            .await?;
    }
    let actor = who.actor();
    let stage_key = ObjectKey::namespaced(Kind::Stage, project, &request.stage);
    let Some(stored) = store.get(&stage_key).await? else {
        return Err(no_stage(store, project, &request.stage).await);
    };
    let stage: Stage = stored.to_typed()?;
    let freight = find_freight(store, project, request).await?;
    let mut gates = availability(&stage, &freight, jiff::Timestamp::now()).reasons;
    // The sign-offs again, now that the promoter is known: their own does not count.
    gates.retain(|r| !matches!(r, Reason::SignoffsMissing { .. }));
    if !matches!(gates.first(), Some(Reason::OriginNotRequested { .. })) {
        gates.extend(signoff::missing(&stage, &freight, Some(actor.name())));
    }
    let windows = window_state(store, project, &stage).await?;
    let mut window_override = None;
    match (&windows, &request.override_window) {
        (Ok(state), _) if state.open => {}
        (Ok(state), Some(reason)) => {
            let window = state
                .blocked_by
                .as_ref()
                .map(|b| b.window.clone())
                .unwrap_or_default();
            window_override = Some(format!("{actor}: {reason} (window `{window}`)"));
        }
        (Ok(state), None) => {
            let blocked = state.blocked_by.clone();
            gates.push(Reason::WindowClosed {
                window: blocked
                    .as_ref()
                    .map(|b| b.window.clone())
                    .unwrap_or_default(),
                until: state.next_change.or(blocked.and_then(|b| b.until)),
            });
        }
        (Err(_), _) => {}
    }
    let frozen = frozen(store, project, &stage).await?;
    let mut freeze_override = None;
    if !frozen.is_empty() {
        match &request.override_window {
            Some(reason) => {
                let words: Vec<String> = frozen.iter().map(ToString::to_string).collect();
                let reason = reason.replace(['\r', '\n'], " ");
                freeze_override = Some(format!(
                    "{}; overridden by {actor}: {reason}",
                    words.join("; ")
                ));
            }
            None => gates.extend(frozen),
        }
    }
    let mut reasons = explained(store, project, &request.stage, &freight, &gates).await?;
    if let Err(error) = &windows {
        reasons.push(format!("{error} — {}", error.hint()));
    }
    Ok(Checked {
        stage,
        freight,
        reasons,
        window_override,
        freeze_override,
    })
}

/// The Promotion `name` of `freight` into `stage` as the door makes it: the Stage's plan
/// (steps and vars from its template) and `who` as its actor. Not stored.
pub(super) async fn promotion_object(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    name: &str,
    stage: &Stage,
    freight: &Freight,
) -> Result<Value, PromoteError> {
    let stage_name = stage.metadata.name.clone().unwrap_or_default();
    let tasks = plan::Tasks {
        project: store
            .list(Kind::PromotionTask, Some(project))
            .await?
            .iter()
            .filter_map(|t| Some((t.key.name.clone(), t.to_typed().ok()?)))
            .collect(),
        cluster: store
            .list(Kind::ClusterPromotionTask, None)
            .await?
            .iter()
            .filter_map(|t| {
                let task: ClusterPromotionTask = t.to_typed().ok()?;
                Some((t.key.name.clone(), task.as_task()))
            })
            .collect(),
    };
    let plan = plan::build(stage, &tasks)?;
    let freight_id = freight.metadata.name.clone().unwrap_or_default();
    let mut object = json!({
        "apiVersion": API_VERSION,
        "kind": "Promotion",
        "metadata": {
            "name": name,
            "namespace": project,
            "labels": {
                STAGE_LABEL: label_value(&stage_name),
                FREIGHT_LABEL: label_value(&freight_id),
            },
            "annotations": {
                ACTOR_ANNOTATION: who.actor().name(),
                REQUESTED_AT_ANNOTATION: jiff::Timestamp::now().to_string(),
            },
        },
        "spec": {
            "stage": stage_name,
            "freight": freight_id,
            "vars": plan.vars,
            "steps": plan.steps,
        },
        "status": {"phase": "Pending", "message": "waiting for its turn in the Stage's queue"},
    });
    if plan.language != ExprLanguage::Cel {
        object["metadata"]["annotations"][ExprLanguage::ANNOTATION] = json!(plan.language.as_str());
    }
    Ok(object)
}

/// The one door to a Stage (see [`super::door`]): creates a Promotion once `who` may
/// `promote` the Stage (and `override` to pass a closed window or a freeze, which is kept
/// on the Promotion for its commit's trailers) and every gate lets the Freight in, with the Stage's steps and `who` as its actor; supersedes older pending ones
/// when the Stage says so.
pub async fn request_promotion(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    request: &PromoteRequest,
) -> Result<StoredObject, PromoteError> {
    let checked = check_gates(store, who, project, request).await?;
    if !checked.reasons.is_empty() {
        return Err(PromoteError::Refused {
            project: project.to_owned(),
            freight: checked.freight.spec.alias.clone(),
            stage: request.stage.clone(),
            reasons: checked.reasons,
        });
    }
    let Checked {
        stage,
        freight,
        window_override,
        freeze_override,
        ..
    } = checked;
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| promotion_name(&request.stage, &freight.spec.alias));
    let actor = who.actor();
    let mut object = promotion_object(store, who, project, &name, &stage, &freight).await?;
    if let Some(window_override) = &window_override {
        object["metadata"]["annotations"][WINDOW_OVERRIDE_ANNOTATION] = json!(window_override);
    }
    let signed_off_by = signoff::trailer_values(&stage, &freight, actor.name());
    if !signed_off_by.is_empty() {
        object["metadata"]["annotations"][SIGNED_OFF_BY_ANNOTATION] =
            json!(signed_off_by.join("\n"));
    }
    if let Some(freeze_override) = &freeze_override {
        object["metadata"]["annotations"][FREEZE_OVERRIDE_ANNOTATION] = json!(freeze_override);
    }
    // The Promotion is created together with the aborts of the pending ones it supersedes,
    // each written against the version read: one the queue started in between is a
    // conflict, nothing is written, and the pending ones are read again (a started one is
    // then `supersede_running`'s).
    let mut attempt = 1;
    let mut written = loop {
        let mut writes = vec![Write::Create(object.clone())];
        if stage.spec.queue_policy == QueuePolicy::Supersede {
            for older in pending_in_stage(store, project, &request.stage).await? {
                let status = json!({
                    "phase": "Aborted",
                    "message": format!("superseded by `{name}` (Stage `{}` has queuePolicy Supersede)", request.stage),
                    "finishedAt": jiff::Timestamp::now().to_string(),
                });
                writes.push(Write::UpdateStatus {
                    key: older.key,
                    status,
                    resource_version: Some(older.resource_version),
                });
            }
        }
        let superseding = writes.len() > 1;
        match store.commit(writes).await {
            Err(StoreError::Conflict { .. }) if superseding && attempt < SUPERSEDE_ATTEMPTS => {
                attempt += 1;
            }
            written => break written?,
        }
    };
    if stage.spec.queue_policy == QueuePolicy::Supersede {
        supersede_running(store, project, &request.stage, &name).await?;
    }
    if !actor.is_auto_promotion() {
        update_hold(store, project, &stage, &freight, actor.name()).await?;
    }
    Ok(written.remove(0))
}

/// A person promoting Freight other than the newest available one (a rollback) holds
/// auto-promotion for the Stage — where auto-promotion is on, and not on the Stage's first
/// promotion (nothing is rolled back); promoting the newest lifts the hold.
async fn update_hold(
    store: &dyn Store,
    project: &str,
    stage: &Stage,
    freight: &Freight,
    actor: &str,
) -> Result<(), StoreError> {
    let stage_name = stage.metadata.name.as_deref().unwrap_or_default();
    let config_key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let config: Option<crate::api::ProjectConfig> = store
        .get(&config_key)
        .await?
        .and_then(|c| c.to_typed().ok());
    let is_auto = super::policy::auto_promotion(stage, config.iter()).is_some();
    let is_first = stage
        .status
        .as_ref()
        .is_none_or(|s| s.current_freight.is_none());
    if !is_auto || is_first {
        return set_hold(store, project, stage_name, None).await.map(|_| ());
    }
    let now = jiff::Timestamp::now();
    let mut all: Vec<(String, Freight)> = store
        .list(Kind::Freight, Some(project))
        .await?
        .into_iter()
        .filter_map(|f| {
            let created = f.object.creation_timestamp()?.to_owned();
            Some((created, f.to_typed().ok()?))
        })
        .collect();
    all.sort_by(|a, b| b.0.cmp(&a.0));
    let newest = all
        .iter()
        .find(|(_, f)| availability(stage, f, now).is_available())
        .and_then(|(_, f)| f.metadata.name.clone());
    let id = freight.metadata.name.clone().unwrap_or_default();
    let hold = (newest.as_deref() != Some(id.as_str())).then(|| {
        json!({
            "by": actor,
            "freight": id,
            "reason": format!("`{actor}` promoted `{}`, which is not the newest available Freight", freight.spec.alias),
            "since": now.to_string(),
        })
    });
    set_hold(store, project, stage_name, hold).await.map(|_| ())
}

/// Sets (`Some`) or lifts (`None`) a Stage's hold on auto-promotion; returns the hold
/// there was before (`None` when there was none).
pub async fn set_hold(
    store: &dyn Store,
    project: &str,
    stage: &str,
    hold: Option<Value>,
) -> Result<Option<Value>, StoreError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    let mut before = None;
    modify_status(store, &key, |_, status| {
        before = status.get("hold").filter(|h| !h.is_null()).cloned();
        if status.get("hold").unwrap_or(&Value::Null) == hold.as_ref().unwrap_or(&Value::Null) {
            return Ok(false);
        }
        match (&hold, status.as_object_mut()) {
            (Some(hold), Some(map)) => {
                map.insert("hold".into(), hold.clone());
            }
            (None, Some(map)) => {
                map.remove("hold");
            }
            _ => {}
        }
        Ok(true)
    })
    .await?;
    Ok(before)
}

/// Lifts the hold `promotion` (aborted before it started) set on its Stage: the Freight it
/// would have rolled back to never got in.
async fn release_hold(store: &dyn Store, promotion: &StoredObject) -> Result<(), StoreError> {
    let Ok(promotion) = promotion.to_typed::<Promotion>() else {
        return Ok(());
    };
    let project = promotion.metadata.namespace.as_deref().unwrap_or_default();
    let spec = &promotion.spec;
    crate::promotion::record::lift_hold_of(store, project, &spec.stage, &spec.freight).await
}

async fn pending_in_stage(
    store: &dyn Store,
    project: &str,
    stage: &str,
) -> Result<Vec<StoredObject>, StoreError> {
    in_stage(store, project, stage, PromotionPhase::Pending).await
}

async fn in_stage(
    store: &dyn Store,
    project: &str,
    stage: &str,
    phase: PromotionPhase,
) -> Result<Vec<StoredObject>, StoreError> {
    Ok(store
        .list(Kind::Promotion, Some(project))
        .await?
        .into_iter()
        .filter(|p| {
            p.object
                .spec::<PromotionSpec>()
                .is_some_and(|s| s.stage == stage)
        })
        .filter(|p| super::promotion_phase(&p.object) == phase)
        .collect())
}

/// Whether a promotion has started (or finished) a step that changes something outside
/// Dray (git, a forge, Argo CD: the step's `Step::writes`). Such a running promotion is not
/// superseded: it finishes first.
fn has_started_writing(promotion: &Value) -> bool {
    let Ok(promotion) = <Promotion as serde::Deserialize>::deserialize(promotion) else {
        return false;
    };
    let Some(status) = promotion.status else {
        return false;
    };
    let registry = dray_steps::builtin_steps();
    promotion
        .spec
        .steps
        .iter()
        .zip(&status.step_execution_metadata)
        .any(|(step, meta)| {
            let writes = registry
                .writes(step.uses.as_deref().unwrap_or_default())
                .is_some_and(|w| w.anything());
            writes && !matches!(meta.status, StepPhase::Pending | StepPhase::Skipped)
        })
}

/// How many times a request reads the pending promotions it supersedes again when one of
/// them changed under it (the queue started it).
const SUPERSEDE_ATTEMPTS: usize = 5;

/// With `queuePolicy: Supersede`, a running promotion of the Stage that has not started
/// writing (KARGO-LESSONS 5: e.g. one waiting at an `http` gate) is asked to abort, so
/// that `by` runs now instead of after the gate's timeout. The annotation is written
/// against the very version that was checked, so a promotion that moved on to a writing
/// step in between is left to finish.
async fn supersede_running(
    store: &dyn Store,
    project: &str,
    stage: &str,
    by: &str,
) -> Result<(), StoreError> {
    for running in in_stage(store, project, stage, PromotionPhase::Running).await? {
        // `by` itself may be running already: the queue can pick it up before this runs
        // (in a cluster, the controller sees it the moment it is created).
        if running.key.name == by {
            continue;
        }
        // Written against the version checked: one that moved on to a writing step in
        // between is read again and left alone.
        modify_object(store, running, |current, object| {
            let already = current.object.annotation(ABORT_ANNOTATION).is_some();
            if already
                || super::promotion_phase(&current.object) != PromotionPhase::Running
                || has_started_writing(&current.object)
            {
                return Ok(false);
            }
            object["metadata"]["annotations"][ABORT_ANNOTATION] =
                json!(format!("superseded by `{by}`"));
            Ok(true)
        })
        .await?;
    }
    Ok(())
}

/// What an abort request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortOutcome {
    /// A pending promotion was aborted at once.
    Aborted,
    /// A running promotion will stop at its next safe point.
    Requested,
    /// The promotion had already finished.
    AlreadyFinished(PromotionPhase),
}

/// Aborts a pending promotion at once, or asks a running one to stop.
pub async fn abort_promotion(
    store: &dyn Store,
    key: &ObjectKey,
    actor: &str,
) -> Result<AbortOutcome, StoreError> {
    for _ in 0..5 {
        let current = store
            .get(key)
            .await?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        match super::promotion_phase(&current.object) {
            PromotionPhase::Pending => {
                let mut status = current
                    .object
                    .get("status")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                status["phase"] = json!("Aborted");
                status["message"] = json!(format!("aborted by `{actor}` before it started"));
                status["finishedAt"] = json!(jiff::Timestamp::now().to_string());
                match store
                    .update_status(key, status, Some(current.resource_version))
                    .await
                {
                    Ok(_) => {
                        release_hold(store, &current).await?;
                        return Ok(AbortOutcome::Aborted);
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(error) => return Err(error),
                }
            }
            PromotionPhase::Running => {
                let mut object = crate::store::desired_state(&current.object);
                object["metadata"]["resourceVersion"] = json!(current.resource_version.to_string());
                if let Some(meta) = object["metadata"].as_object_mut() {
                    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                    annotations[ABORT_ANNOTATION] = json!(actor);
                }
                match store.update(object).await {
                    Ok(_) => return Ok(AbortOutcome::Requested),
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(error) => return Err(error),
                }
            }
            finished => return Ok(AbortOutcome::AlreadyFinished(finished)),
        }
    }
    Err(StoreError::Internal(format!(
        "{key} kept changing while an abort was requested"
    )))
}

/// Approves `freight` for `stage` once `who` may `approve` it: it becomes available there
/// regardless of verification and soak (not of sign-offs: [`signoff`]), on the record
/// (who, when, why). Returns the updated Freight.
pub async fn approve(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    stage_name: &str,
    which: &PromoteRequest,
    reason: &str,
) -> Result<StoredObject, PromoteError> {
    who.authorize(
        store,
        Verb::Approve,
        Kind::Stage.plural(),
        project,
        stage_name,
    )
    .await?;
    let actor = who.actor();
    let stage_key = ObjectKey::namespaced(Kind::Stage, project, stage_name);
    let Some(stored) = store.get(&stage_key).await? else {
        return Err(no_stage(store, project, stage_name).await);
    };
    let stage: Stage = stored.to_typed()?;
    let freight = find_freight(store, project, which).await?;
    if !stage
        .spec
        .requested_freight
        .iter()
        .any(|r| r.origin.name == freight.spec.origin.name)
    {
        return Err(PromoteError::Refused {
            project: project.to_owned(),
            freight: freight.spec.alias.clone(),
            stage: stage_name.to_owned(),
            reasons: vec![format!(
                "comes from Warehouse `{}`, which Stage `{stage_name}` does not request",
                freight.spec.origin.name
            )],
        });
    }
    let key = ObjectKey::namespaced(
        Kind::Freight,
        project,
        freight.metadata.name.as_deref().unwrap_or_default(),
    );
    let approved = modify_status(store, &key, |_, status| {
        status["approvedFor"][stage_name] = json!({
            "approvedAt": jiff::Timestamp::now().to_string(),
            "by": actor.name(),
            "reason": reason,
        });
        Ok(true)
    })
    .await?;
    approved.ok_or_else(|| StoreError::Internal(format!("{key} was not approved")).into())
}

/// Wakes every running promotion of `project` whose waiting step should look again now
/// (e.g. a pull request was merged or closed). Returns how many were woken.
pub async fn wake_running(store: &dyn Store, project: &str) -> Result<usize, StoreError> {
    let token = jiff::Timestamp::now().to_string();
    let mut woken = 0;
    for promotion in store.list(Kind::Promotion, Some(project)).await? {
        if super::promotion_phase(&promotion.object) != PromotionPhase::Running {
            continue;
        }
        let written = modify_object(store, promotion, |_, object| {
            object["metadata"]["annotations"][super::WAKE_ANNOTATION] = json!(token);
            Ok(true)
        })
        .await?;
        woken += usize::from(written.is_some());
    }
    Ok(woken)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    #[test]
    fn promotion_names_are_rfc_1123_labels_whatever_the_alias() {
        let name = super::promotion_name("dev", "Hot_Fix");
        assert!(name.starts_with("dev-hot-fix-"), "{name}");
        let long = super::promotion_name(&"s".repeat(60), "x");
        for name in [name, long] {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
    }

    use super::*;
    use crate::store::SqliteStore;

    /// A project `demo` with Stage `prod` (an `http` gate, then `git-push`) under
    /// `policy`, and Freight `f1`, `f2`, `f3`.
    async fn world(policy: &str) -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let mut objects = vec![
            json!({"apiVersion": API_VERSION, "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "prod", "namespace": "demo"},
                   "spec": {"queuePolicy": policy,
                            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                                  "sources": {"direct": true}}],
                            "promotionTemplate": {"spec": {"steps": [
                                {"uses": "http", "as": "gate", "config": {"url": "http://127.0.0.1:1/"}},
                                {"uses": "git-push", "as": "push", "config": {"path": "./out"}}]}}}}),
        ];
        for (name, alias) in [("f1", "one"), ("f2", "two"), ("f3", "three")] {
            objects.push(json!({"apiVersion": API_VERSION, "kind": "Freight",
                "metadata": {"name": name, "namespace": "demo"},
                "alias": alias, "origin": {"kind": "Warehouse", "name": "app"},
                "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}]}));
        }
        for object in objects {
            store.create(object).await.unwrap();
        }
        (dir, store)
    }

    async fn promote(store: &dyn Store, freight: &str) -> StoredObject {
        let request = PromoteRequest {
            stage: "prod".into(),
            freight: Some(freight.into()),
            ..Default::default()
        };
        let ann = super::super::door::tests::Allowed::person("ann");
        request_promotion(store, &ann, "demo", &request)
            .await
            .unwrap()
    }

    /// Marks `promotion` Running with its gate and push steps in these states.
    async fn running(store: &dyn Store, promotion: &StoredObject, gate: &str, push: &str) {
        let status = json!({"phase": "Running", "message": "running", "currentStep": 0,
            "stepExecutionMetadata": [{"alias": "gate", "status": gate},
                                      {"alias": "push", "status": push}]});
        store
            .update_status(&promotion.key, status, None)
            .await
            .unwrap();
    }

    async fn abort_note(store: &dyn Store, promotion: &StoredObject) -> Option<Value> {
        let now = store.get(&promotion.key).await.unwrap().unwrap();
        now.object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(ABORT_ANNOTATION))
            .cloned()
    }

    #[tokio::test]
    async fn supersede_aborts_a_running_promotion_that_has_not_started_writing() {
        let (_dir, store) = world("Supersede").await;
        let store = store.as_ref();
        let gate = promote(store, "f1").await;
        running(store, &gate, "Running", "Pending").await;
        let rollback = promote(store, "f2").await;
        assert_eq!(
            abort_note(store, &gate).await,
            Some(json!(format!("superseded by `{}`", rollback.key.name)))
        );
        // One that is pushing (or has pushed) is left to finish; the newer one waits.
        running(store, &rollback, "Succeeded", "Running").await;
        promote(store, "f3").await;
        assert_eq!(abort_note(store, &rollback).await, None);
    }

    #[tokio::test]
    async fn supersede_never_aborts_the_promotion_it_is_for() {
        // In a cluster the controller can start a new promotion before its request
        // returns: superseding then finds it Running, and must leave it alone.
        let (_dir, store) = world("Supersede").await;
        let store = store.as_ref();
        let new = promote(store, "f1").await;
        running(store, &new, "Running", "Pending").await;
        supersede_running(store, "demo", "prod", &new.key.name)
            .await
            .unwrap();
        assert_eq!(abort_note(store, &new).await, None);
    }

    /// A store whose first commit that aborts a pending promotion finds it just started
    /// (as the queue would, between the request's read and its write).
    struct StartsItFirst {
        inner: Arc<dyn Store>,
        started: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl crate::store::DeliveryLog for StartsItFirst {
        async fn claim_delivery(
            &self,
            receiver: &str,
            keys: &[String],
            now: i64,
            expires_at: i64,
        ) -> Result<bool, StoreError> {
            self.inner
                .claim_delivery(receiver, keys, now, expires_at)
                .await
        }

        async fn release_delivery(
            &self,
            receiver: &str,
            keys: &[String],
        ) -> Result<(), StoreError> {
            self.inner.release_delivery(receiver, keys).await
        }
    }

    #[async_trait::async_trait]
    impl Store for StartsItFirst {
        async fn get(&self, key: &ObjectKey) -> Result<Option<StoredObject>, StoreError> {
            self.inner.get(key).await
        }

        async fn list(
            &self,
            kind: Kind,
            namespace: Option<&str>,
        ) -> Result<Vec<StoredObject>, StoreError> {
            self.inner.list(kind, namespace).await
        }

        async fn commit(&self, writes: Vec<Write>) -> Result<Vec<StoredObject>, StoreError> {
            let aborted = writes.iter().find_map(|w| match w {
                Write::UpdateStatus { key, .. } => Some(key.clone()),
                _ => None,
            });
            if let Some(key) = aborted
                && !self.started.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                let pending = self.inner.get(&key).await?.unwrap();
                running(self.inner.as_ref(), &pending, "Running", "Pending").await;
            }
            self.inner.commit(writes).await
        }

        fn changes(&self) -> crate::store::ChangeFeed {
            self.inner.changes()
        }

        async fn changes_since(
            &self,
            revision: u64,
            limit: usize,
        ) -> Result<Vec<crate::store::Change>, StoreError> {
            self.inner.changes_since(revision, limit).await
        }
    }

    /// Supersede aborts the pending promotions it finds; one the queue started between
    /// the read and the write is superseded as a running one, and the request succeeds
    /// (it used to fail: "changed by someone else").
    #[tokio::test]
    async fn a_pending_promotion_started_while_it_is_superseded_does_not_fail_the_request() {
        let (_dir, inner) = world("Supersede").await;
        let pending = promote(inner.as_ref(), "f1").await;
        let store = StartsItFirst {
            inner: inner.clone(),
            started: Default::default(),
        };
        let newer = promote(&store, "f2").await;
        assert!(store.started.load(std::sync::atomic::Ordering::SeqCst));
        let pending_now = inner.get(&pending.key).await.unwrap().unwrap();
        assert_eq!(
            crate::pipeline::promotion_phase(&pending_now.object),
            PromotionPhase::Running,
            "it started; it was not aborted as pending"
        );
        assert_eq!(
            abort_note(inner.as_ref(), &pending).await,
            Some(json!(format!("superseded by `{}`", newer.key.name)))
        );
    }

    #[tokio::test]
    async fn queue_never_aborts_a_running_promotion() {
        let (_dir, store) = world("Queue").await;
        let store = store.as_ref();
        let gate = promote(store, "f1").await;
        running(store, &gate, "Running", "Pending").await;
        let next = promote(store, "f2").await;
        assert_eq!(abort_note(store, &gate).await, None);
        assert_eq!(
            crate::pipeline::promotion_phase(&store.get(&next.key).await.unwrap().unwrap().object),
            PromotionPhase::Pending
        );
    }
}
