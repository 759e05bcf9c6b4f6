//! `argocd-update`: asks Argo CD to sync Applications to the revision a promotion wrote,
//! and waits until Argo CD reports that exact revision synced — saying, while it waits,
//! what it sees in the way.
//!
//! Transport: Argo CD's API server (`apiServer`, bearer token from the project's
//! credentials for that URL). The Kubernetes transport (patching `Application` objects
//! through the Kubernetes API) is not built. `apps[]` name Applications by `name` or by a
//! label `selector` (Argo CD's list endpoint).
//!
//! Per Application, on each run:
//! 1. it must carry `dray.dev/authorized-stage: <project>:<stage>` naming this Stage, or the
//!    step fails naming it (Dray touches nothing it was not given);
//! 2. each `sources[]` entry must match one of its sources by `repoURL`; with
//!    `updateTargetRevision` the source's `targetRevision` is patched to `desiredRevision`;
//! 3. done only when `status.sync.revision` and `status.operationState.syncResult.revision`
//!    both equal `desiredRevision` and the operation `Succeeded` (`Degraded` health then
//!    fails the step with Argo CD's message);
//! 4. otherwise it requests a sync to `desiredRevision` once per revision (the request is
//!    saved in the step's state, so a re-run never triggers a second sync) and answers
//!    `Running`, naming the cause it sees: a sync window (which), an operation already
//!    running (whose), a comparison error, a failed sync (Argo CD's message, and the sync is
//!    requested again), a missing Application; by default the promotion reads "waiting for
//!    Argo CD to sync `app` to `rev` (the change is written to git)".
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
use crate::{Step, StepContext, StepOutcome, parse_config};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "argocd-update";

/// The annotation that authorises a Stage to touch an Application.
pub(crate) const AUTHORIZED_STAGE: &str = "dray.dev/authorized-stage";

/// How long to wait between two looks when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long one API request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

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

/// The configuration of `argocd-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// Argo CD's API server, e.g. `https://argocd.example.com`; its token is the project's
    /// credential for this URL.
    api_server: String,
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
impl Step for ArgocdUpdate {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn config_schema(&self) -> schemars::Schema {
        schemars::schema_for!(Config)
    }

    async fn run(&self, ctx: &StepContext, config: Value) -> StepOutcome {
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

async fn run(ctx: &StepContext, config: Value) -> Result<StepOutcome, StepOutcome> {
    let config: Config = parse_config(KIND, config)?;
    let invalid =
        |reason: String| StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
    let poll = duration_or(
        config.poll_interval.as_deref(),
        DEFAULT_POLL_INTERVAL,
        "pollInterval",
    )
    .map_err(invalid)?;
    let base = config.api_server.trim_end_matches('/').to_owned();
    if !base.starts_with("http://") && !base.starts_with("https://") {
        return Err(invalid(format!(
            "`apiServer` `{base}` is not an http(s) URL"
        )));
    }
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
        }
    }
    let api = Api {
        ctx,
        token: ctx.credentials.token(&config.api_server),
        base,
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
                let matched = select(&api, app, selector).await?;
                if matched.is_empty() {
                    causes.push(format!(
                        "an Application matching `{selector}` in Argo CD at `{}`",
                        api.base
                    ));
                }
                apps.extend(matched);
            }
        }
    }
    for app in &apps {
        match look(&api, app, &mut requested).await? {
            Look::Done => done.push(json!({
                "name": app.name,
                "revision": app.sources[0].desired_revision,
            })),
            Look::Waiting(cause) => causes.push(cause),
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

/// One look at one Application: patch, request a sync, or name what is in the way.
async fn look(
    api: &Api<'_>,
    config: &AppConfig,
    requested: &mut BTreeMap<String, String>,
) -> Result<Look, StepOutcome> {
    let ctx = api.ctx;
    let name = &config.name;
    let shown = match &config.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.clone(),
    };
    let Some(mut app) = api
        .get(
            config,
            &format!("/api/v1/applications/{name}?refresh=normal"),
        )
        .await?
    else {
        return Ok(Look::Waiting(format!(
            "Application `{shown}` is missing in Argo CD at `{}`",
            api.base
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
            return Err(StepOutcome::failed(format!(
                "refusing to touch Argo CD Application `{shown}`: {has}, not `{wanted}`; hint: \
                 annotate it with `{AUTHORIZED_STAGE}: {wanted}` if this Stage may deploy it"
            )));
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
    // 2. targetRevision.
    let mut patched = specs.clone();
    let mut changed = false;
    for (index, source) in &matched {
        if source.update_target_revision
            && patched[*index]["targetRevision"].as_str() != Some(source.desired_revision.as_str())
        {
            patched[*index]["targetRevision"] = json!(source.desired_revision);
            changed = true;
        }
    }
    if changed {
        let spec = if multi {
            json!({"sources": patched})
        } else {
            json!({"source": {"targetRevision": patched[0]["targetRevision"]}})
        };
        let patch = json!({"spec": spec}).to_string();
        let body = json!({"name": name, "appNamespace": config.namespace, "patch": patch, "patchType": "merge"});
        api.send(
            config,
            reqwest::Method::PATCH,
            &format!("/api/v1/applications/{name}"),
            Some(&body),
        )
        .await?
        .map_err(|(status, message)| {
            StepOutcome::errored(format!(
                "cannot set `targetRevision` of Application `{shown}`: {status} {message}"
            ))
        })?;
        ctx.log(&format!("set `targetRevision` of `{shown}`"));
        if let Some(fresh) = api
            .get(config, &format!("/api/v1/applications/{name}"))
            .await?
        {
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
        if health["status"] == "Degraded" {
            return Err(StepOutcome::failed(format!(
                "Argo CD synced `{shown}` to `{rev}`, and it is Degraded: {}",
                health["message"]
                    .as_str()
                    .unwrap_or("(Argo CD gave no message)")
            )));
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
        let by = initiator(op);
        let message = op["message"].as_str().filter(|m| !m.is_empty());
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
        match request_sync(api, config, &matched, multi).await? {
            Ok(()) => {
                requested.insert(shown.clone(), desired[0].1.to_owned());
                ctx.log(&format!("asked Argo CD to sync `{shown}` to `{rev}`"));
            }
            Err(SyncRefused::Window) => {
                let windows = api
                    .get(config, &format!("/api/v1/applications/{name}/syncwindows"))
                    .await?
                    .map(|w| describe_windows(&w))
                    .unwrap_or_default();
                return Ok(Look::Waiting(format!(
                    "a sync window to open: Argo CD blocks syncing `{shown}` to `{rev}` ({windows}){comparison}"
                )));
            }
            Err(SyncRefused::Busy(message)) => {
                // Argo CD does not say whose operation it is: look again to name them.
                let by = api
                    .get(config, &format!("/api/v1/applications/{name}"))
                    .await?
                    .map(|fresh| initiator(&fresh["status"]["operationState"]))
                    .unwrap_or_else(|| "someone unknown".to_owned());
                return Ok(Look::Waiting(format!(
                    "an operation already in progress on `{shown}`, started by {by}, to finish \
                     before syncing `{rev}` (Argo CD: {message}){comparison}"
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

/// The Applications `selector` matches, each as an entry with its name.
async fn select(
    api: &Api<'_>,
    app: &AppConfig,
    selector: &str,
) -> Result<Vec<AppConfig>, StepOutcome> {
    let encoded: String = selector
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let list = api
        .get(app, &format!("/api/v1/applications?selector={encoded}"))
        .await?
        .unwrap_or_default();
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .map(|name| AppConfig {
            name: name.to_owned(),
            selector: None,
            ..app.clone()
        })
        .collect())
}

enum SyncRefused {
    Window,
    Busy(String),
}

async fn request_sync(
    api: &Api<'_>,
    config: &AppConfig,
    matched: &[(usize, &SourceConfig)],
    multi: bool,
) -> Result<Result<(), SyncRefused>, StepOutcome> {
    let name = &config.name;
    let mut body = json!({"name": name, "prune": false});
    if let Some(ns) = &config.namespace {
        body["appNamespace"] = json!(ns);
    }
    if multi {
        body["revisions"] = matched
            .iter()
            .map(|(_, s)| json!(s.desired_revision))
            .collect();
        body["sourcePositions"] = matched.iter().map(|(i, _)| json!(*i as i64 + 1)).collect();
    } else {
        body["revision"] = json!(matched[0].1.desired_revision);
    }
    match api
        .send(
            config,
            reqwest::Method::POST,
            &format!("/api/v1/applications/{name}/sync"),
            Some(&body),
        )
        .await?
    {
        Ok(_) => Ok(Ok(())),
        Err((status, message)) if status == 403 && message.contains("sync window") => {
            Ok(Err(SyncRefused::Window))
        }
        Err((status, message))
            if (status == 400 || status == 409) && message.contains("in progress") =>
        {
            Ok(Err(SyncRefused::Busy(message)))
        }
        Err((status, message)) => Err(StepOutcome::errored(format!(
            "Argo CD refused to sync `{name}`: {status} {message}"
        ))),
    }
}

fn describe_windows(response: &Value) -> String {
    let windows: Vec<String> = response["activeWindows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            format!(
                "`{}` window `{}` for {}{}",
                w["kind"].as_str().unwrap_or("?"),
                w["schedule"].as_str().unwrap_or("?"),
                w["duration"].as_str().unwrap_or("?"),
                if w["manualSync"] == true {
                    ", manual sync allowed"
                } else {
                    ""
                }
            )
        })
        .collect();
    if windows.is_empty() {
        "cannot sync: blocked by sync window".to_owned()
    } else {
        format!("active: {}", windows.join(", "))
    }
}

fn initiator(op: &Value) -> String {
    let by = &op["operation"]["initiatedBy"];
    match by["username"].as_str().filter(|u| !u.is_empty()) {
        Some(user) => format!("`{user}`"),
        None if by["automated"] == true => "Argo CD's automated sync".to_owned(),
        None => "someone unknown".to_owned(),
    }
}

/// A full or abbreviated (7+) hex commit id.
fn is_commit(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.chars().all(|c| c.is_ascii_hexdigit())
}

fn same_commit(reported: &str, desired: &str) -> bool {
    !reported.is_empty()
        && is_commit(reported)
        && reported
            .to_ascii_lowercase()
            .starts_with(&desired.to_ascii_lowercase())
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

/// Argo CD's API server, as this step uses it.
struct Api<'a> {
    ctx: &'a StepContext,
    token: Option<String>,
    base: String,
}

impl Api<'_> {
    /// GETs `path`; `None` on 404.
    async fn get(&self, app: &AppConfig, path: &str) -> Result<Option<Value>, StepOutcome> {
        match self.send(app, reqwest::Method::GET, path, None).await? {
            Ok(value) => Ok(Some(value)),
            Err((404, _)) => Ok(None),
            Err((status, message)) => Err(StepOutcome::errored(format!(
                "Argo CD at `{}` answered {status} to `GET {path}`: {message}",
                self.base
            ))),
        }
    }

    /// Sends a request; `Err((status, message))` for an error answer (401 and 403 other
    /// than a sync window become `Errored` with a hint).
    async fn send(
        &self,
        app: &AppConfig,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Result<Value, (u16, String)>, StepOutcome> {
        let mut url = format!("{}{path}", self.base);
        if let Some(ns) = &app.namespace {
            url.push(if path.contains('?') { '&' } else { '?' });
            url.push_str(&format!("appNamespace={ns}"));
        }
        let mut request = self
            .ctx
            .http
            .request(method.clone(), &url)
            .timeout(REQUEST_TIMEOUT);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = tokio::select! {
            response = request.send() => response,
            () = self.ctx.cancel.cancelled() => return Err(StepOutcome::failed("aborted while talking to Argo CD")),
        }
        .map_err(|e| StepOutcome::errored(format!("Argo CD at `{}` did not answer `{method} {path}`: {e}", self.base)))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if (200..300).contains(&status) {
            return Ok(Ok(value));
        }
        let message = value["message"]
            .as_str()
            .or(value["error"].as_str())
            .or(value.as_str())
            .unwrap_or("")
            .to_owned();
        if status == 401 {
            let hint = if self.token.is_some() {
                "the project's token for it was refused"
            } else {
                "the project has no token for it; hint: add a credential with a token for this URL"
            };
            return Err(StepOutcome::errored(format!(
                "Argo CD at `{}` refused `{method} {path}` (401 {message}): {hint}",
                self.base
            )));
        }
        Ok(Err((status, message)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn windows_are_described() {
        let text = describe_windows(
            &json!({"activeWindows": [{"kind": "deny", "schedule": "0 22 * * *", "duration": "8h", "manualSync": false}]}),
        );
        assert_eq!(text, "active: `deny` window `0 22 * * *` for 8h");
    }
}
