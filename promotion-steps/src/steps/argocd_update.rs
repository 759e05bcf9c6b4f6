//! `argocd-update`: asks Argo CD to sync Applications to the revision a promotion wrote,
//! and waits until Argo CD reports that exact revision synced — saying, while it waits,
//! what it sees in the way.
//!
//! Transport (`crate::argocd`): the step's `apiServer` when set (Argo CD's API server),
//! else the project's ProjectConfig `spec.argocd` ([`StepContext::argocd`]): its API server,
//! or the Kubernetes API of Argo CD's cluster (Application objects patched directly, a sync
//! being an `operation` that Argo CD's controller runs). The bearer token is the project's
//! credential for that URL. `apps[]` name Applications by `name` or by a label `selector`.
//!
//! Per Application, on each run:
//! 1. it must carry `dray.dev/authorized-stage: <project>:<stage>` naming this Stage, or the
//!    step fails naming it (Dray touches nothing it was not given);
//! 2. each `sources[]` entry must match one of its sources by `repoURL`; the source's
//!    `targetRevision` (with `updateTargetRevision`), `kustomize.images` and
//!    `helm.parameters` (from `helm.images`) are patched when they differ (idempotent);
//! 3. done only when `status.sync.revision` and `status.operationState.syncResult.revision`
//!    both equal `desiredRevision` and the operation `Succeeded`; health is not judged here
//!    (a `Degraded` Application is logged): the outputs register the Applications
//!    (`outputs.apps`) for the Stage's health check, which judges them with
//!    [`crate::argocd::judge`] after a stabilisation window;
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

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http::duration_or;
use super::typed::TypedStep;
use crate::argocd::{
    ApplicationRef, ArgocdError, ArgocdTarget, BLOCKED_BY_WINDOW, SyncRefused, SyncRequest,
    Transport, initiator, is_commit, same_commit,
};
use crate::{StepContext, StepOutcome};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "argocd-update";

/// The annotation that authorises a Stage to touch an Application.
pub(crate) const AUTHORIZED_STAGE: &str = "dray.dev/authorized-stage";

/// How long to wait between two looks when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Kustomize image overrides for a source (Argo CD's `spec.source.kustomize.images`).
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KustomizeOverride {
    /// Images as Argo CD writes them: `repo:tag`, `repo@sha256:…`, or
    /// `old=repo:tag`; each replaces the override of the same image, or is added.
    images: Vec<String>,
}

/// A Helm value that holds an image reference.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HelmImage {
    /// The Helm parameter's name, e.g. `image.tag`.
    key: String,
    /// Its value, e.g. `${{ imageFrom("registry.example.com/app").tag }}`.
    value: String,
}

/// Helm overrides for a source (set into Argo CD's `spec.source.helm.parameters`).
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HelmOverride {
    /// Parameters to set; each replaces the parameter of the same name, or is added.
    images: Vec<HelmImage>,
}

/// A source of an Application to move.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SourceConfig {
    /// The source's `repoURL`, as the Application spells it (a trailing `.git` or `/` is
    /// ignored).
    #[serde(rename = "repoURL")]
    repo_url: String,
    /// The commit Argo CD must report synced, e.g. `${{ outputs.push.commit }}`.
    desired_revision: String,
    /// Also set the source's `targetRevision` to `desiredRevision`.
    #[serde(default)]
    update_target_revision: bool,
    /// Set Kustomize image overrides on the source.
    #[serde(default)]
    kustomize: Option<KustomizeOverride>,
    /// Set Helm parameters on the source.
    #[serde(default)]
    helm: Option<HelmOverride>,
}

/// An Application to move.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AppConfig {
    /// `metadata.name` (or `selector`).
    #[serde(default)]
    name: String,
    /// A label selector (`team=shop,env=prod`) instead of `name`: every Application it
    /// matches, each of which must be authorised for this Stage.
    #[serde(default)]
    selector: Option<String>,
    /// `metadata.namespace` (Argo CD's `appNamespace`), when not Argo CD's own.
    #[serde(default)]
    namespace: Option<String>,
    /// The sources to move.
    sources: Vec<SourceConfig>,
}

impl AppConfig {
    fn reference(&self) -> ApplicationRef {
        ApplicationRef {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// The configuration of `argocd-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// Argo CD's API server, e.g. `https://argocd.example.com`, overriding the project's
    /// ProjectConfig `spec.argocd`; its token is the project's credential for this URL.
    #[serde(default)]
    api_server: Option<String>,
    /// The Applications.
    apps: Vec<AppConfig>,
    /// How long to wait between two looks (default `5s`).
    #[serde(default)]
    poll_interval: Option<String>,
}

/// The `argocd-update` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ArgocdUpdate;

#[async_trait]
impl TypedStep for ArgocdUpdate {
    const KIND: &'static str = KIND;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

/// What one Application's look found.
enum Look {
    Done,
    Waiting(String),
}

/// Why a look ended early: with the step's outcome, or because Argo CD cannot be asked
/// now (the step waits and asks again, until its timeout).
enum Stop {
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

/// What the step waits for while Argo CD cannot be asked.
fn unavailable(message: &str) -> String {
    format!("Argo CD to answer again ({message}); Dray asks again")
}

/// The step's own `apiServer`, else the project's `spec.argocd`.
fn target(ctx: &StepContext, config: &Config) -> Result<ArgocdTarget, String> {
    let target = match (&config.api_server, &ctx.argocd) {
        (Some(url), _) => ArgocdTarget::ApiServer { url: url.clone() },
        (None, Some(target)) => target.clone(),
        (None, None) => {
            return Err(format!(
                "Dray does not know how to reach Argo CD for project `{}`; hint: set \
                 `spec.argocd` in the project's ProjectConfig (`apiServer: <url>` or \
                 `kubernetes: {{server: <url>}}`), or `apiServer` in this step's config",
                ctx.project
            ));
        }
    };
    target.check().map_err(|e| match &target {
        ArgocdTarget::ApiServer { url } if config.api_server.is_some() => {
            format!(
                "`apiServer` `{}` is not an http(s) URL",
                url.trim_end_matches('/')
            )
        }
        _ => format!("ProjectConfig `spec.argocd`: {e}"),
    })?;
    Ok(target)
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
    let target = target(ctx, &config).map_err(invalid)?;
    if config.apps.is_empty() {
        return Err(invalid("`apps` is empty".to_owned()));
    }
    for app in &config.apps {
        if app.name.is_empty() == app.selector.is_none() {
            return Err(invalid(
                "each of `apps` needs exactly one of `name` and `selector`".to_owned(),
            ));
        }
        if app.sources.is_empty() {
            return Err(invalid(format!("app `{}` has no `sources`", app.name)));
        }
        for source in &app.sources {
            if !is_commit(&source.desired_revision) {
                return Err(invalid(format!(
                    "`desiredRevision` `{}` of app `{}` is not a commit id; hint: use the commit \
                     a step wrote, e.g. `${{{{ outputs.push.commit }}}}`",
                    source.desired_revision, app.name
                )));
            }
            let kustomize = source.kustomize.iter().flat_map(|k| &k.images);
            if let Some(bad) = kustomize.into_iter().find(|i| image_name(i).is_empty()) {
                return Err(invalid(format!(
                    "`kustomize.images` entry `{bad}` of app `{}` names no image; hint: write \
                     `repo:tag` or `repo@sha256:…`",
                    app.name
                )));
            }
            if source
                .helm
                .iter()
                .flat_map(|h| &h.images)
                .any(|i| i.key.trim().is_empty())
            {
                return Err(invalid(format!(
                    "a `helm.images` entry of app `{}` has an empty `key`; hint: name the Helm \
                     parameter, e.g. `image.tag`",
                    app.name
                )));
            }
        }
    }
    let api = Transport::new(
        ctx.http.clone(),
        ctx.credentials.token(target.url()),
        target.clone(),
        Some(ctx.cancel.clone()),
    );
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
        outputs.insert("apps".into(), Value::Array(done));
        ctx.log(&format!(
            "Argo CD reports {} Application(s) synced",
            apps.len()
        ));
        return Ok(StepOutcome::Succeeded {
            outputs,
            state: None,
        });
    }
    Ok(StepOutcome::Running {
        retry_after: poll,
        waiting_for: causes.join("; "),
        state: Some(json!({ "requested": requested })),
    })
}

/// An Application registered for the Stage's health: the shape of `RegisteredApplication`
/// (plus `revision`, the first desired revision, kept for expressions written before).
fn registered(api: &Transport, target: &ArgocdTarget, app: &AppConfig) -> Value {
    let mut entry = json!({
        "name": app.name,
        "revision": app.sources[0].desired_revision,
        "desiredRevisions": app.sources.iter().map(|s| s.desired_revision.clone()).collect::<Vec<_>>(),
    });
    let namespace = app.namespace.as_deref().or(api.default_namespace());
    if let Some(ns) = namespace {
        entry["namespace"] = json!(ns);
    }
    match target {
        ArgocdTarget::ApiServer { url } => entry["apiServer"] = json!(url),
        ArgocdTarget::Kubernetes { server, .. } => entry["kubernetes"] = json!(server),
    }
    entry
}

/// The image an override is for: the part before `=`, else the reference without its
/// tag or digest (a `:` before the last `/` is a registry port).
fn image_name(image: &str) -> &str {
    if let Some((name, _)) = image.split_once('=') {
        return name;
    }
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(colon) if colon > image.rfind('/').unwrap_or(0) => &image[..colon],
        _ => image,
    }
}

/// `current` with each of `images` replacing the entry for the same image, or appended.
fn merge_images(current: &Value, images: &[String]) -> Value {
    let mut list: Vec<Value> = current.as_array().cloned().unwrap_or_default();
    for image in images {
        let name = image_name(image);
        match list
            .iter_mut()
            .find(|v| v.as_str().is_some_and(|v| image_name(v) == name))
        {
            Some(slot) => *slot = json!(image),
            None => list.push(json!(image)),
        }
    }
    Value::Array(list)
}

/// `current` Helm parameters with each of `images` set by name, or appended.
fn merge_parameters(current: &Value, images: &[HelmImage]) -> Value {
    let mut list: Vec<Value> = current.as_array().cloned().unwrap_or_default();
    for image in images {
        match list
            .iter_mut()
            .find(|p| p["name"].as_str() == Some(image.key.as_str()))
        {
            Some(slot) => slot["value"] = json!(image.value),
            None => list.push(json!({"name": image.key, "value": image.value})),
        }
    }
    Value::Array(list)
}

/// The changes `source` asks of the Application's source `spec`: the changed fields
/// (for a merge patch) and their names.
fn source_changes(spec: &Value, source: &SourceConfig) -> (Map<String, Value>, Vec<&'static str>) {
    let mut delta = Map::new();
    let mut names = Vec::new();
    if source.update_target_revision
        && spec["targetRevision"].as_str() != Some(source.desired_revision.as_str())
    {
        delta.insert("targetRevision".into(), json!(source.desired_revision));
        names.push("`targetRevision`");
    }
    if let Some(kustomize) = &source.kustomize {
        let current = &spec["kustomize"]["images"];
        let merged = merge_images(current, &kustomize.images);
        if merged != *current {
            delta.insert("kustomize".into(), json!({"images": merged}));
            names.push("`kustomize.images`");
        }
    }
    if let Some(helm) = &source.helm {
        let current = &spec["helm"]["parameters"];
        let merged = merge_parameters(current, &helm.images);
        if merged != *current {
            delta.insert("helm".into(), json!({"parameters": merged}));
            names.push("`helm.parameters`");
        }
    }
    (delta, names)
}

/// One look at one Application: patch, request a sync, or name what is in the way.
async fn look(
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
    match app["metadata"]["annotations"][AUTHORIZED_STAGE].as_str() {
        Some(stage) if stage == wanted => {}
        other => {
            let has = match other {
                Some(stage) => format!("it is authorised for `{stage}`"),
                None => format!("it has no `{AUTHORIZED_STAGE}` annotation"),
            };
            return Err(Stop::Outcome(StepOutcome::failed(format!(
                "refusing to touch Argo CD Application `{shown}`: {has}, not `{wanted}`; hint: \
                 annotate it with `{AUTHORIZED_STAGE}: {wanted}` if this Stage may deploy it"
            ))));
        }
    }
    let multi = app["spec"]["sources"].is_array();
    let specs: Vec<Value> = if multi {
        app["spec"]["sources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    } else {
        vec![app["spec"]["source"].clone()]
    };
    let mut matched = Vec::new();
    for source in &config.sources {
        let index = specs
            .iter()
            .position(|s| same_repo(s["repoURL"].as_str().unwrap_or(""), &source.repo_url))
            .ok_or_else(|| {
                let theirs: Vec<String> = specs
                    .iter()
                    .map(|s| format!("`{}`", s["repoURL"].as_str().unwrap_or("")))
                    .collect();
                StepOutcome::failed(format!(
                    "Application `{shown}` has no source with repoURL `{}` (its sources: {})",
                    source.repo_url,
                    theirs.join(", ")
                ))
            })?;
        matched.push((index, source));
    }
    // 2. targetRevision, kustomize.images, helm.parameters.
    let mut patched = specs.clone();
    let mut single_delta = Map::new();
    let mut fields: Vec<&str> = Vec::new();
    for (index, source) in &matched {
        let (delta, names) = source_changes(&patched[*index], source);
        for (key, value) in &delta {
            patched[*index][key] = if key == "targetRevision" {
                value.clone()
            } else {
                let mut merged = patched[*index][key].clone();
                for (k, v) in value.as_object().into_iter().flatten() {
                    merged[k] = v.clone();
                }
                merged
            };
        }
        single_delta.extend(delta);
        for name in names {
            if !fields.contains(&name) {
                fields.push(name);
            }
        }
    }
    if !fields.is_empty() {
        let spec = if multi {
            json!({"sources": patched})
        } else {
            json!({"source": single_delta})
        };
        let fields = fields.join(", ");
        api.patch_spec(&reference, &spec)
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
    // 3. Done?
    let status = &app["status"];
    let op = &status["operationState"];
    let phase = op["phase"].as_str().unwrap_or("");
    let revision_at = |value: &Value, index: usize| -> String {
        if multi {
            value["revisions"][index].as_str().unwrap_or("").to_owned()
        } else {
            value["revision"].as_str().unwrap_or("").to_owned()
        }
    };
    let desired: Vec<(usize, &str)> = matched
        .iter()
        .map(|(i, s)| (*i, s.desired_revision.as_str()))
        .collect();
    let rev = short(desired[0].1);
    let synced = desired
        .iter()
        .all(|(i, d)| same_commit(&revision_at(&status["sync"], *i), d));
    let applied = desired
        .iter()
        .all(|(i, d)| same_commit(&revision_at(&op["syncResult"], *i), d));
    let op_target = desired
        .iter()
        .all(|(i, d)| same_commit(&revision_at(&op["operation"]["sync"], *i), d));
    if synced && applied && phase == "Succeeded" {
        let health = &status["health"];
        if let Some(state @ ("Degraded" | "Missing")) = health["status"].as_str() {
            ctx.log(&format!(
                "Argo CD synced `{shown}` to `{rev}`, and it is {state}: {} (the Stage's health \
                 check judges it)",
                health["message"]
                    .as_str()
                    .unwrap_or("(Argo CD gave no message)")
            ));
        }
        requested.remove(&shown);
        return Ok(Look::Done);
    }
    let comparison = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| matches!(c["type"].as_str(), Some("ComparisonError" | "SyncError")))
        .map(|c| {
            format!(
                "{}: {}",
                c["type"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>();
    let comparison = if comparison.is_empty() {
        String::new()
    } else {
        format!(
            " (Argo CD cannot compare `{shown}`: {})",
            comparison.join("; ")
        )
    };
    // 4. An operation in progress, ours or someone else's.
    let asked = requested.get(&shown).is_some_and(|r| r == desired[0].1);
    if phase == "Running" {
        let by = initiator(&op["operation"]);
        let message = op["message"].as_str().filter(|m| !m.is_empty());
        if message.is_some_and(|m| m.starts_with(BLOCKED_BY_WINDOW)) {
            // Argo CD's controller holds the operation until the window opens.
            let windows = api.windows(&reference, &app).await?;
            let whose = if asked && op_target {
                String::new()
            } else {
                format!(" (the operation is {by}'s)")
            };
            return Ok(Look::Waiting(format!(
                "a sync window to open: Argo CD blocks syncing `{shown}` to `{rev}`{whose} \
                 ({windows}){comparison}"
            )));
        }
        let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
        if asked && op_target {
            return Ok(Look::Waiting(format!(
                "Argo CD to finish syncing `{shown}` to `{rev}` (operation running since {}{detail}){comparison}",
                op["startedAt"].as_str().unwrap_or("?")
            )));
        }
        return Ok(Look::Waiting(format!(
            "an operation on `{shown}` started by {by} at {} to finish before syncing `{rev}`{detail}{comparison}",
            op["startedAt"].as_str().unwrap_or("?")
        )));
    }
    // An operation requested but not started by Argo CD's controller yet.
    if let Some(pending) = app.get("operation").filter(|o| o.is_object()) {
        let ours = asked
            && desired
                .iter()
                .all(|(i, d)| same_commit(&revision_at(&pending["sync"], *i), d));
        if ours {
            return Ok(Look::Waiting(format!(
                "Argo CD's controller to start the requested sync of `{shown}` to `{rev}`{comparison}"
            )));
        }
        return Ok(Look::Waiting(format!(
            "an operation on `{shown}` requested by {} to finish before syncing `{rev}`{comparison}",
            initiator(pending)
        )));
    }
    let failed_ours = asked && op_target && matches!(phase, "Failed" | "Error");
    let failure = if failed_ours {
        format!(
            "a retried sync of `{shown}` to `{rev}`, after Argo CD's sync {}: {}",
            phase.to_lowercase(),
            op["message"].as_str().unwrap_or("(no message)")
        )
    } else {
        String::new()
    };
    if !asked || failed_ours {
        let request = SyncRequest {
            revisions: desired.iter().map(|(i, d)| (*i, (*d).to_owned())).collect(),
            multi,
            initiator: format!("dray:{}/{}", ctx.project, ctx.stage),
            reason: format!(
                "Dray promotion `{}` of Freight `{}` to Stage `{}` by `{}`",
                ctx.promotion, ctx.freight.alias, ctx.stage, ctx.actor
            ),
        };
        match api.sync(&reference, &app, &request).await? {
            Ok(()) => {
                requested.insert(shown.clone(), desired[0].1.to_owned());
                ctx.log(&format!("asked Argo CD to sync `{shown}` to `{rev}`"));
            }
            Err(SyncRefused::Window(windows)) => {
                return Ok(Look::Waiting(format!(
                    "a sync window to open: Argo CD blocks syncing `{shown}` to `{rev}` ({windows}){comparison}"
                )));
            }
            Err(SyncRefused::Busy { by, message }) => {
                return Ok(Look::Waiting(format!(
                    "an operation already in progress on `{shown}`, started by {by}, to finish \
                     before syncing `{rev}` (Argo CD: {message}){comparison}"
                )));
            }
            Err(SyncRefused::Conflict(message)) => {
                return Ok(Look::Waiting(format!(
                    "Application `{shown}` changed while Dray asked for a sync to `{rev}` \
                     ({message}); Dray looks again{comparison}"
                )));
            }
        }
    }
    if !failure.is_empty() {
        return Ok(Look::Waiting(format!("{failure}{comparison}")));
    }
    if !comparison.is_empty() {
        return Ok(Look::Waiting(format!(
            "Argo CD to sync `{shown}` to `{rev}`{comparison}"
        )));
    }
    if applied && phase == "Succeeded" {
        return Ok(Look::Waiting(format!(
            "Argo CD to report `{shown}` synced at `{rev}`: the sync succeeded, but it compares \
             against `{}`; hint: set `updateTargetRevision: true` or push to the branch it tracks",
            revision_at(&status["sync"], desired[0].0)
        )));
    }
    Ok(Look::Waiting(format!(
        "Argo CD to sync `{shown}` to `{rev}` (the change is written to git)"
    )))
}

fn short(rev: &str) -> &str {
    &rev[..rev.len().min(12)]
}

fn same_repo(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        u.trim_end_matches('/')
            .trim_end_matches(".git")
            .to_ascii_lowercase()
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[test]
    fn commits_and_repos_compare_loosely() {
        assert!(is_commit("4b825dc") && !is_commit("main") && !is_commit("abc"));
        assert!(same_commit(
            "4B825DC642CB6EB9A060E54BF8D69288FBEE4904",
            "4b825dc6"
        ));
        assert!(!same_commit("", "4b825dc6"));
        assert!(same_repo(
            "https://git.example.com/cd.git/",
            "https://git.example.com/cd"
        ));
    }

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
            server: "kubernetes.default.svc".into(),
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

    #[test]
    fn image_overrides_replace_the_same_image_and_are_idempotent() {
        assert_eq!(
            image_name("registry:5000/team/app:1.2"),
            "registry:5000/team/app"
        );
        assert_eq!(image_name("app@sha256:abc"), "app");
        assert_eq!(image_name("nginx=registry/nginx:1"), "nginx");
        assert_eq!(image_name("registry:5000/app"), "registry:5000/app");
        let current = json!(["registry/app:1.0", "other:2"]);
        let merged = merge_images(
            &current,
            &["registry/app:1.1".to_owned(), "new@sha256:ff".to_owned()],
        );
        assert_eq!(
            merged,
            json!(["registry/app:1.1", "other:2", "new@sha256:ff"])
        );
        assert_eq!(
            merge_images(&merged, &["registry/app:1.1".to_owned()]),
            merged
        );
        let images = [HelmImage {
            key: "image.tag".into(),
            value: "1.1".into(),
        }];
        let params = merge_parameters(
            &json!([{"name": "image.tag", "value": "1.0", "forceString": true}]),
            &images,
        );
        assert_eq!(
            params,
            json!([{"name": "image.tag", "value": "1.1", "forceString": true}])
        );
        assert_eq!(
            merge_parameters(&Value::Null, &images),
            json!([{"name": "image.tag", "value": "1.1"}])
        );
    }
}
