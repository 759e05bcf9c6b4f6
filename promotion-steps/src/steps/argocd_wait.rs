//! `argocd-wait`: waits until Argo CD Applications reach the states asked for — healthy,
//! synced, no operation running (the default), or suspended / degraded — whoever started
//! their sync (Kargo's `argocd-wait`). It changes nothing and needs no
//! `dray.dev/authorized-stage` annotation: reading is all it does.
//!
//! `waitFor` combines as Kargo's: the health values (`health`, `suspended`, `degraded`)
//! are alternatives (any one satisfies), `sync` and `operation` must hold as well. With
//! `health` asked for, an Application that turns `Degraded` while the step watches it
//! (from a health other than `Degraded` or `Unknown`, as saved in the step's state) fails
//! the step at once instead of waiting out the timeout. Argo CD is reached as
//! `argocd-update` reaches it (the step's `apiServer`, else the project's `spec.argocd`).
//! It never waits forever: the engine fails it at the step's `retry.timeout` (default 10m)
//! with what it last saw.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::argocd_update::{Stop, target, unavailable};
use super::http::duration_or;
use super::typed::TypedStep;
use crate::argocd::{ApplicationRef, Transport};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "argocd-wait";

/// How long to wait between two looks when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// A state to wait for.
#[derive(Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WaitFor {
    /// Health `Healthy`.
    Health,
    /// Sync status `Synced`.
    Sync,
    /// No operation (a sync) in progress.
    Operation,
    /// Health `Suspended`.
    Suspended,
    /// Health `Degraded`.
    Degraded,
}

impl WaitFor {
    /// The health status this value accepts, for the health values.
    fn health(self) -> Option<&'static str> {
        match self {
            WaitFor::Health => Some("Healthy"),
            WaitFor::Suspended => Some("Suspended"),
            WaitFor::Degraded => Some("Degraded"),
            WaitFor::Sync | WaitFor::Operation => None,
        }
    }
}

/// Applications to wait for.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AppConfig {
    /// `metadata.name` (or `selector`).
    #[serde(default)]
    name: String,
    /// A label selector (`team=shop,env=prod`) instead of `name`: every Application it
    /// matches (at least one must).
    #[serde(default)]
    selector: Option<String>,
    /// `metadata.namespace` (Argo CD's `appNamespace`), when not Argo CD's own.
    #[serde(default)]
    namespace: Option<String>,
    /// What to wait for (default `[health, sync, operation]`).
    #[serde(default)]
    wait_for: Vec<WaitFor>,
}

/// Configuration of `argocd-wait`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// Argo CD's API server, overriding the project's ProjectConfig `spec.argocd`.
    #[serde(default)]
    api_server: Option<String>,
    /// The Applications, at least one.
    #[schemars(length(min = 1))]
    apps: Vec<AppConfig>,
    /// How long to wait between two looks (default `5s`).
    #[serde(default)]
    poll_interval: Option<String>,
}

/// The `argocd-wait` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ArgocdWait;

#[async_trait]
impl TypedStep for ArgocdWait {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, &config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

async fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let invalid =
        |reason: String| StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
    let poll = duration_or(
        config.poll_interval.as_deref(),
        DEFAULT_POLL_INTERVAL,
        "pollInterval",
    )
    .map_err(invalid)?;
    if config.apps.is_empty() {
        return Err(invalid("`apps` is empty".to_owned()));
    }
    if config
        .apps
        .iter()
        .any(|a| a.name.is_empty() == a.selector.is_none())
    {
        return Err(invalid(
            "each of `apps` needs exactly one of `name` and `selector`".to_owned(),
        ));
    }
    let target = target(ctx, config.api_server.as_ref()).map_err(invalid)?;
    let token = target
        .token_url()
        .and_then(|url| ctx.credentials.token(url));
    let waiting = |causes: Vec<String>, seen: &BTreeMap<String, String>| StepOutcome::Running {
        retry_after: poll,
        waiting_for: causes.join("; "),
        state: Some(json!({ "health": seen })),
    };
    let mut seen: BTreeMap<String, String> = ctx
        .saved_state
        .as_ref()
        .and_then(|s| s.get("health"))
        .and_then(|h| serde_json::from_value(h.clone()).ok())
        .unwrap_or_default();
    let api =
        match Transport::connect(ctx.http.clone(), token, target, Some(ctx.cancel.clone())).await {
            Ok(api) => api,
            Err(error) => {
                return match Stop::from(error) {
                    Stop::Outcome(outcome) => Err(outcome),
                    Stop::Unavailable(message) => Ok(waiting(vec![unavailable(&message)], &seen)),
                };
            }
        };
    let mut causes = Vec::new();
    let mut done = Vec::new();
    for app in &config.apps {
        let wanted = if app.wait_for.is_empty() {
            vec![WaitFor::Health, WaitFor::Sync, WaitFor::Operation]
        } else {
            app.wait_for.clone()
        };
        let found = match read(&api, app).await {
            Ok(found) => found,
            Err(Stop::Outcome(outcome)) => return Err(outcome),
            Err(Stop::Unavailable(message)) => {
                causes.push(unavailable(&message));
                continue;
            }
        };
        if found.is_empty() {
            causes.push(match &app.selector {
                Some(selector) => format!("an Application matching `{selector}` in {}", api.who()),
                None => format!(
                    "Application `{}` to exist in {}",
                    app.reference().shown(),
                    api.who()
                ),
            });
        }
        for (reference, application) in found {
            let shown = reference.shown();
            let verdict = judge(&application, &wanted);
            let health = verdict.health.clone();
            // Fail fast: pods that will not come up fail the wait now, not at the
            // Deployment's progress deadline.
            if wanted.contains(&WaitFor::Health)
                && crate::argocd::is_applied(&application, &[])
                && let Some(reason) = api.fail_fast(&reference, &application).await
            {
                return Err(StepOutcome::failed(reason));
            }
            let before = seen.insert(shown.clone(), health.clone());
            if wanted.contains(&WaitFor::Health)
                && health == "Degraded"
                && before
                    .as_deref()
                    .is_some_and(|b| b != "Degraded" && b != "Unknown")
            {
                let message = application["status"]["health"]["message"]
                    .as_str()
                    .unwrap_or("");
                return Err(StepOutcome::failed(format!(
                    "Application `{shown}` turned Degraded (it was {}) while Dray waited for it to be \
                     healthy{}",
                    before.unwrap_or_default(),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    }
                )));
            }
            match verdict.missing {
                None => done.push(json!({"name": shown, "health": health, "sync": verdict.sync})),
                Some(missing) => causes.push(format!("Application `{shown}` to be {missing}")),
            }
        }
    }
    if !causes.is_empty() {
        return Ok(waiting(causes, &seen));
    }
    ctx.log(&format!(
        "Argo CD reports {} Application(s) as asked",
        done.len()
    ));
    let mut outputs = Map::new();
    outputs.insert("apps".into(), Value::Array(done));
    Ok(StepOutcome::succeeded(outputs))
}

impl AppConfig {
    fn reference(&self) -> ApplicationRef {
        ApplicationRef {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// The Applications `app` names, each with how it is shown (`ns/name`).
async fn read(api: &Transport, app: &AppConfig) -> Result<Vec<(ApplicationRef, Value)>, Stop> {
    match &app.selector {
        None => {
            let reference = app.reference();
            Ok(api
                .get(&reference, false)
                .await?
                .map(|found| vec![(reference, found)])
                .unwrap_or_default())
        }
        Some(selector) => Ok(api
            .list(selector, app.namespace.as_deref())
            .await?
            .into_iter()
            .map(|found| {
                let reference = ApplicationRef {
                    name: found["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    namespace: app.namespace.clone(),
                };
                (reference, found)
            })
            .collect()),
    }
}

/// What one Application shows, and what it still lacks of `wanted`.
struct Verdict {
    health: String,
    sync: String,
    /// `None` when every wanted state holds; else what is missing, in words.
    missing: Option<String>,
}

fn judge(app: &Value, wanted: &[WaitFor]) -> Verdict {
    let status = &app["status"];
    let health = status["health"]["status"]
        .as_str()
        .unwrap_or("Unknown")
        .to_owned();
    let sync = status["sync"]["status"]
        .as_str()
        .unwrap_or("Unknown")
        .to_owned();
    let running = !app["operation"].is_null()
        || status["operationState"]["phase"]
            .as_str()
            .is_some_and(|p| p == "Running" || p == "Terminating");
    let mut missing = Vec::new();
    let healths: Vec<&str> = wanted.iter().filter_map(|w| w.health()).collect();
    if !healths.is_empty() && !healths.contains(&health.as_str()) {
        missing.push(format!("{} (health is {health})", healths.join(" or ")));
    }
    if wanted.contains(&WaitFor::Sync) && sync != "Synced" {
        missing.push(format!("Synced (sync is {sync})"));
    }
    if wanted.contains(&WaitFor::Operation) && running {
        let phase = status["operationState"]["phase"]
            .as_str()
            .unwrap_or("requested");
        missing.push(format!(
            "idle (an operation is {})",
            phase.to_ascii_lowercase()
        ));
    }
    Verdict {
        health,
        sync,
        missing: (!missing.is_empty()).then(|| missing.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(health: &str, sync: &str, phase: Option<&str>) -> Value {
        let mut app = json!({"metadata": {"name": "shop"}, "status": {
            "health": {"status": health}, "sync": {"status": sync}}});
        if let Some(phase) = phase {
            app["status"]["operationState"] = json!({"phase": phase});
        }
        app
    }

    const DEFAULT: [WaitFor; 3] = [WaitFor::Health, WaitFor::Sync, WaitFor::Operation];

    #[test]
    fn the_default_wants_healthy_synced_and_idle() {
        assert!(
            judge(&app("Healthy", "Synced", Some("Succeeded")), &DEFAULT)
                .missing
                .is_none()
        );
        let missing = judge(&app("Progressing", "OutOfSync", Some("Running")), &DEFAULT)
            .missing
            .unwrap();
        assert_eq!(
            missing,
            "Healthy (health is Progressing), Synced (sync is OutOfSync), idle (an operation is running)"
        );
        let mut requested = app("Healthy", "Synced", None);
        requested["operation"] = json!({"sync": {"revision": "abc"}});
        assert!(
            judge(&requested, &DEFAULT)
                .missing
                .unwrap()
                .contains("idle (an operation is requested)")
        );
    }

    #[test]
    fn health_values_are_alternatives_and_the_rest_must_hold_too() {
        let wanted = [WaitFor::Suspended, WaitFor::Degraded];
        assert!(
            judge(&app("Suspended", "OutOfSync", None), &wanted)
                .missing
                .is_none()
        );
        assert!(
            judge(&app("Degraded", "OutOfSync", None), &wanted)
                .missing
                .is_none()
        );
        assert_eq!(
            judge(&app("Healthy", "Synced", None), &wanted)
                .missing
                .unwrap(),
            "Suspended or Degraded (health is Healthy)"
        );
        let operation_only = [WaitFor::Operation];
        assert!(
            judge(
                &app("Degraded", "OutOfSync", Some("Failed")),
                &operation_only
            )
            .missing
            .is_none()
        );
        assert!(
            judge(&app("Healthy", "Synced", Some("Running")), &operation_only)
                .missing
                .is_some()
        );
    }
}
