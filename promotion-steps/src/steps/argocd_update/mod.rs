//! `argocd-update`: asks Argo CD to sync Applications to the revision a promotion wrote,
//! and waits until Argo CD reports that exact revision synced — saying, while it waits,
//! what it sees in the way.
//!
//! Transport (`crate::argocd`): the step's `apiServer` when set (Argo CD's API server),
//! else the project's ProjectConfig `spec.argocd` ([`StepContext::argocd`]): its API server,
//! or the Kubernetes API of Argo CD's cluster (Application objects patched directly, a sync
//! being an `operation` that Argo CD's controller runs), reached as its
//! [`KubeAccess`](crate::argocd::KubeAccess) says: inferred, a kubeconfig, or a server
//! URL. The bearer token, where one is needed, is the project's credential for that URL.
//! `apps[]` name Applications by `name` or by a label `selector`.
//!
//! Per Application, on each run:
//! 1. it must carry `dray.dev/authorized-stage: <project>:<stage>` naming this Stage, or the
//!    step fails naming it (Dray touches nothing it was not given);
//! 2. each `sources[]` entry must match one of its sources by `repoURL`; the source's
//!    `targetRevision` (with `updateTargetRevision`), `kustomize.images` and
//!    `helm.parameters` (from `helm.images`) are patched when they differ (idempotent);
//! 3. done only when `status.sync.revision` and `status.operationState.syncResult.revision`
//!    both equal `desiredRevision` and the operation `Succeeded`; health is not judged here
//!    (a `Degraded` Application is logged): the step reports each Application as an
//!    [`Effect::RegisteredApplication`] (and in `outputs.apps`), which registers it for
//!    the Stage's health check, which judges it with [`crate::argocd::judge`] after a
//!    stabilisation window;
//! 4. otherwise it requests a sync to `desiredRevision` once per revision (the request is
//!    saved in the step's state, so a re-run never triggers a second sync) and answers
//!    `Running`, naming the cause it sees: a sync window (which), an operation already
//!    set or running (whose — never replaced), a comparison error, a failed sync (Argo CD's
//!    message, and the sync is requested again), a missing Application; by default the
//!    promotion reads "waiting for Argo CD to sync `app` to `rev` (the change is written to
//!    git)".
//!
//! It never waits forever: the engine fails it at the step's `retry.timeout` (default 10m)
//! with the last cause.
//!
//! Module layout: `config.rs` (the typed config and its checks), `patch.rs` (authorisation,
//! source matching and the spec patch, pure), `decide.rs` (the Application's JSON → one
//! [`decide::Action`], pure, with its decision table), `look.rs` (one look at one
//! Application: the requests that carry an action out), and this file (the step: every
//! Application in turn, then the outcome and the Applications it registered).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::http::duration_or;
use super::typed::TypedStep;
use crate::argocd::{ArgocdTarget, Transport};
use crate::{ArgocdApplication, Effect, StepContext, StepOutcome, Writes};

mod config;
mod decide;
mod look;
mod patch;

use config::{AppConfig, check_apps};
pub(crate) use config::{Config, target};
pub(crate) use look::Stop;

use look::{Look, look};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "argocd-update";

/// How long to wait between two looks when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The `argocd-update` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ArgocdUpdate;

#[async_trait]
impl TypedStep for ArgocdUpdate {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Deployment;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

/// What the step waits for while Argo CD cannot be asked.
pub(crate) fn unavailable(message: &str) -> String {
    format!("Argo CD to answer again ({message}); Dray asks again")
}

async fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    let invalid =
        |reason: String| StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
    let poll = duration_or(
        config.poll_interval.as_deref(),
        DEFAULT_POLL_INTERVAL,
        "pollInterval",
    )
    .map_err(invalid)?;
    let target = target(ctx, config.api_server.as_ref()).map_err(invalid)?;
    check_apps(&config.apps).map_err(invalid)?;
    let token = target
        .token_url()
        .and_then(|url| ctx.credentials.token(url));
    let api = match Transport::connect(
        ctx.http.clone(),
        token,
        target.clone(),
        Some(ctx.cancel.clone()),
    )
    .await
    {
        Ok(api) => api,
        Err(error) => {
            return match Stop::from(error) {
                Stop::Outcome(outcome) => Err(outcome),
                Stop::Unavailable(message) => Ok(StepOutcome::Running {
                    retry_after: poll,
                    waiting_for: unavailable(&message),
                    state: ctx.saved_state.clone(),
                }),
            };
        }
    };
    let mut requested: BTreeMap<String, String> = ctx
        .saved_state
        .as_ref()
        .and_then(|s| s.get("requested"))
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default();
    let mut causes = Vec::new();
    let mut done = Vec::new();
    let mut apps = Vec::new();
    for app in &config.apps {
        match &app.selector {
            None => apps.push(app.clone()),
            Some(selector) => {
                let matched = match api.list(selector, app.namespace.as_deref()).await {
                    Ok(matched) => matched,
                    Err(error) => match Stop::from(error) {
                        Stop::Outcome(outcome) => return Err(outcome),
                        Stop::Unavailable(message) => {
                            causes.push(unavailable(&message));
                            continue;
                        }
                    },
                };
                if matched.is_empty() {
                    causes.push(format!(
                        "an Application matching `{selector}` in {}",
                        api.who()
                    ));
                }
                apps.extend(
                    matched
                        .iter()
                        .filter_map(|item| item["metadata"]["name"].as_str())
                        .map(|name| AppConfig {
                            name: name.to_owned(),
                            selector: None,
                            ..app.clone()
                        }),
                );
            }
        }
    }
    for app in &apps {
        match look(ctx, &api, app, &mut requested).await {
            Ok(Look::Done) => done.push(registered(&api, &target, app)),
            Ok(Look::Waiting(cause)) => causes.push(cause),
            Err(Stop::Unavailable(message)) => causes.push(unavailable(&message)),
            Err(Stop::Outcome(outcome)) => return Err(outcome),
        }
    }
    if causes.is_empty() {
        let mut outputs = Map::new();
        let shown = done.iter().map(output).collect();
        outputs.insert("apps".into(), Value::Array(shown));
        ctx.log(&format!(
            "Argo CD reports {} Application(s) synced",
            apps.len()
        ));
        let effects = done.into_iter().map(Effect::RegisteredApplication);
        return Ok(StepOutcome::wrote(outputs, effects.collect()));
    }
    Ok(StepOutcome::Running {
        retry_after: poll,
        waiting_for: causes.join("; "),
        state: Some(json!({ "requested": requested })),
    })
}

/// An Application registered for the Stage's health.
fn registered(api: &Transport, target: &ArgocdTarget, app: &AppConfig) -> ArgocdApplication {
    let namespace = app.namespace.as_deref().or(api.default_namespace());
    // Where the credential authenticates, the URL it is kept under; else the cluster's
    // URL as the kubeconfig (or the service account) resolved it.
    let (api_server, kubernetes) = match target {
        ArgocdTarget::ApiServer { url } => (Some(url.clone()), None),
        ArgocdTarget::Kubernetes { access, .. } => (
            None,
            access.token_url().or(api.cluster_url()).map(str::to_owned),
        ),
    };
    ArgocdApplication {
        name: app.name.clone(),
        namespace: namespace.map(str::to_owned),
        api_server,
        kubernetes,
        desired_revisions: app
            .sources
            .iter()
            .map(|s| s.desired_revision.clone())
            .collect(),
    }
}

/// A registered Application as `outputs.<alias>.apps[]` shows it: its fields, plus
/// `revision` (the first desired revision, kept for expressions written before).
fn output(app: &ArgocdApplication) -> Value {
    let mut entry = json!(app);
    entry["revision"] = json!(app.desired_revisions.first());
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[tokio::test]
    async fn bad_configs_fail_before_any_request() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let app = |rev: &str| json!({"apiServer": "http://127.0.0.1:1", "apps": [{"name": "a", "sources": [{"repoURL": "x", "desiredRevision": rev}]}]});
        let reason = failed(ArgocdUpdate.run(&ctx, app("stage/prod")).await);
        assert!(
            reason.contains("`desiredRevision` `stage/prod` of app `a` is not a commit id"),
            "{reason}"
        );
        let reason = failed(
            ArgocdUpdate
                .run(&ctx, json!({"apiServer": "argocd", "apps": []}))
                .await,
        );
        assert!(reason.contains("not an http(s) URL"), "{reason}");
    }

    #[tokio::test]
    async fn without_a_transport_it_names_the_projectconfig_field() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        let config = json!({"apps": [{"name": "a", "sources": [{"repoURL": "x", "desiredRevision": "4b825dc6"}]}]});
        let reason = failed(ArgocdUpdate.run(&ctx, config.clone()).await);
        assert!(reason.contains("ProjectConfig"), "{reason}");
        assert!(reason.contains("`spec.argocd`"), "{reason}");
        ctx.argocd = Some(ArgocdTarget::Kubernetes {
            access: crate::argocd::KubeAccess::Server {
                url: "kubernetes.default.svc".into(),
                certificate_authority_data: None,
            },
            namespace: "argocd".into(),
        });
        let reason = failed(ArgocdUpdate.run(&ctx, config).await);
        assert!(
            reason.contains(
                "ProjectConfig `spec.argocd`: `kubernetes.default.svc` is not an http(s) URL"
            ),
            "{reason}"
        );
    }
}
