//! One look at one Application, with its side effects: read it, check it is authorised,
//! patch its sources when they differ, read it again, then carry out what
//! [`decide`](super::decide::decide) says — log, name the sync windows, or request a sync
//! (once per revision: the request is kept in the step's state).

use std::collections::BTreeMap;

use super::config::AppConfig;
use super::decide::{Action, Wanted, decide};
use super::patch::{authorised, sources, spec_patch};
use crate::argocd::{ArgocdError, SyncRefused, SyncRequest, Transport};
use crate::{StepContext, StepOutcome};

/// What one Application's look found.
pub(super) enum Look {
    /// Synced at the desired revisions.
    Done,
    /// Not yet: the cause.
    Waiting(String),
}

/// Why a look ended early: with the step's outcome, or because Argo CD cannot be asked
/// now (the step waits and asks again, until its timeout).
pub(crate) enum Stop {
    Outcome(StepOutcome),
    Unavailable(String),
}

impl From<StepOutcome> for Stop {
    fn from(outcome: StepOutcome) -> Self {
        Stop::Outcome(outcome)
    }
}

impl From<ArgocdError> for Stop {
    fn from(error: ArgocdError) -> Self {
        match error {
            ArgocdError::Aborted => Stop::Outcome(StepOutcome::failed(error.to_string())),
            ArgocdError::Failed(message) => Stop::Outcome(StepOutcome::errored(message)),
            ArgocdError::Unavailable(message) => Stop::Unavailable(message),
        }
    }
}

/// One look at one Application: patch, request a sync, or name what is in the way.
/// `requested` maps an Application (as shown) to the revision a sync was requested for.
pub(super) async fn look(
    ctx: &StepContext,
    api: &Transport,
    config: &AppConfig,
    requested: &mut BTreeMap<String, String>,
) -> Result<Look, Stop> {
    let reference = config.reference();
    let shown = reference.shown();
    let Some(mut app) = api.get(&reference, true).await? else {
        return Ok(Look::Waiting(format!(
            "Application `{shown}` is missing in {}",
            api.who()
        )));
    };
    let wanted = format!("{}:{}", ctx.project, ctx.stage);
    authorised(&app, &shown, &wanted).map_err(StepOutcome::failed)?;
    let found = sources(&app, config, &shown).map_err(StepOutcome::failed)?;
    // 2. targetRevision, kustomize.images, helm.parameters.
    let patch = spec_patch(&found);
    if !patch.fields.is_empty() {
        let fields = patch.fields.join(", ");
        api.patch_spec(&reference, &patch.spec)
            .await?
            .map_err(|refusal| {
                StepOutcome::errored(format!(
                    "cannot set {fields} of Application `{shown}` through {}: {} {}",
                    api.who(),
                    refusal.status,
                    refusal.message
                ))
            })?;
        ctx.log(&format!("set {fields} of `{shown}`"));
        if let Some(fresh) = api.get(&reference, false).await? {
            app = fresh;
        }
    }
    let desired: Vec<(usize, &str)> = found
        .matched
        .iter()
        .map(|(i, s)| (*i, s.desired_revision.as_str()))
        .collect();
    let wants = Wanted {
        shown: &shown,
        multi: found.multi,
        asked: requested.get(&shown).is_some_and(|r| r == desired[0].1),
        desired,
    };
    let rev = wants.rev();
    match decide(&app, &wants) {
        Action::Done { unhealthy } => {
            if let Some((state, message)) = unhealthy {
                ctx.log(&format!(
                    "Argo CD synced `{shown}` to `{rev}`, and it is {state}: {message} (the \
                     Stage's health check judges it)"
                ));
            }
            requested.remove(&shown);
            Ok(Look::Done)
        }
        Action::Wait { cause } => {
            // Fail fast: a sync to our revision held by pods that will not come up.
            let revisions: Vec<String> =
                wants.desired.iter().map(|(_, d)| (*d).to_owned()).collect();
            if crate::argocd::is_syncing_to(&app, &revisions)
                && let Some(reason) = api.fail_fast(&reference, &app).await
            {
                return Err(StepOutcome::failed(reason).into());
            }
            Ok(Look::Waiting(cause))
        }
        Action::WaitForWindow { whose, comparison } => {
            // Argo CD's controller holds the operation until the window opens.
            let windows = api.windows(&reference, &app).await?;
            Ok(Look::Waiting(format!(
                "a sync window to open: Argo CD blocks syncing `{shown}` to `{rev}`{whose} \
                 ({windows}){comparison}"
            )))
        }
        Action::Sync { then, comparison } => {
            let request = SyncRequest {
                revisions: wants
                    .desired
                    .iter()
                    .map(|(i, d)| (*i, (*d).to_owned()))
                    .collect(),
                multi: wants.multi,
                initiator: format!("dray:{}/{}", ctx.project, ctx.stage),
                reason: format!(
                    "Dray promotion `{}` of Freight `{}` to Stage `{}` by `{}`",
                    ctx.promotion, ctx.freight.alias, ctx.stage, ctx.actor
                ),
            };
            let waiting = match api.sync(&reference, &app, &request).await? {
                Ok(()) => {
                    requested.insert(shown.clone(), wants.desired[0].1.to_owned());
                    ctx.log(&format!("asked Argo CD to sync `{shown}` to `{rev}`"));
                    then
                }
                Err(SyncRefused::Window(windows)) => format!(
                    "a sync window to open: Argo CD blocks syncing `{shown}` to `{rev}` ({windows}){comparison}"
                ),
                Err(SyncRefused::Busy { by, message }) => format!(
                    "an operation already in progress on `{shown}`, started by {by}, to finish \
                     before syncing `{rev}` (Argo CD: {message}){comparison}"
                ),
                Err(SyncRefused::Conflict(message)) => format!(
                    "Application `{shown}` changed while Dray asked for a sync to `{rev}` \
                     ({message}); Dray looks again{comparison}"
                ),
            };
            Ok(Look::Waiting(waiting))
        }
    }
}
