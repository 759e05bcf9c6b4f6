//! A Stage's health, from the Argo CD Applications its last promotion registered: Healthy
//! only when every one reports the desired revision synced and Healthy; Progressing while
//! any is not there yet (or Progressing / Suspended); Unhealthy when any is Degraded or
//! Missing, with Argo CD's message. Argo CD is read through the transport the promotion
//! used (API server or Kubernetes API), with the project's credential for that URL.

use dray_steps::CredentialProvider;
use dray_steps::argocd::{self, AppHealth, ApplicationRef, ArgocdTarget};
use jiff::Timestamp;

use crate::api::{ApplicationHealth, HealthState, RegisteredApplication, StageHealth, Time};

/// Argo CD's namespace when a Kubernetes-transport Application names none.
const ARGOCD_NAMESPACE: &str = "argocd";

/// Reads every registered Application and judges the Stage's health. `previous` keeps
/// `since` when the verdict did not change.
pub async fn check(
    http: &reqwest::Client,
    credentials: &dyn CredentialProvider,
    applications: &[RegisteredApplication],
    previous: Option<&StageHealth>,
    now: Timestamp,
) -> StageHealth {
    let mut judged = Vec::with_capacity(applications.len());
    for app in applications {
        judged.push(check_one(http, credentials, app).await);
    }
    let status = verdict(&judged);
    let message = judged
        .iter()
        .filter(|a| a.status == status && status != HealthState::Healthy)
        .map(|a| format!("{}: {}", a.name, a.message))
        .collect::<Vec<_>>()
        .join("; ");
    let message = if status == HealthState::Healthy {
        format!(
            "{} Application(s) synced to the desired revision and Healthy",
            judged.len()
        )
    } else {
        message
    };
    let since = match previous {
        Some(previous) if previous.status == status => previous.since.clone(),
        _ => Some(Time(now)),
    };
    StageHealth {
        status,
        message,
        since,
        checked_at: Some(Time(now)),
        applications: judged,
    }
}

/// The Stage's verdict: the worst of its Applications'.
fn verdict(apps: &[ApplicationHealth]) -> HealthState {
    let has = |state| apps.iter().any(|a| a.status == state);
    if apps.is_empty() {
        HealthState::Unknown
    } else if has(HealthState::Unhealthy) {
        HealthState::Unhealthy
    } else if has(HealthState::Unknown) {
        HealthState::Unknown
    } else if has(HealthState::Progressing) {
        HealthState::Progressing
    } else {
        HealthState::Healthy
    }
}

fn target(app: &RegisteredApplication) -> Option<ArgocdTarget> {
    match (&app.api_server, &app.kubernetes) {
        (Some(url), _) => Some(ArgocdTarget::ApiServer { url: url.clone() }),
        (None, Some(server)) => Some(ArgocdTarget::Kubernetes {
            server: server.clone(),
            namespace: app
                .namespace
                .clone()
                .unwrap_or_else(|| ARGOCD_NAMESPACE.to_owned()),
        }),
        (None, None) => None,
    }
}

async fn check_one(
    http: &reqwest::Client,
    credentials: &dyn CredentialProvider,
    app: &RegisteredApplication,
) -> ApplicationHealth {
    let shown = match &app.namespace {
        Some(ns) => format!("{ns}/{}", app.name),
        None => app.name.clone(),
    };
    let unknown = |message: String| ApplicationHealth {
        name: shown.clone(),
        status: HealthState::Unknown,
        message,
        ..Default::default()
    };
    let Some(target) = target(app) else {
        return unknown("the promotion did not say how to reach Argo CD".to_owned());
    };
    let url = match &target {
        ArgocdTarget::ApiServer { url } => url.clone(),
        ArgocdTarget::Kubernetes { server, .. } => server.clone(),
    };
    let reference = ApplicationRef {
        name: app.name.clone(),
        namespace: app.namespace.clone(),
    };
    match argocd::read_application(http, credentials.token(&url), &target, &reference).await {
        Err(error) => unknown(format!("cannot read it: {error}")),
        Ok(None) => ApplicationHealth {
            name: shown.clone(),
            status: HealthState::Unhealthy,
            argocd_health: "Missing".to_owned(),
            message: format!("Application `{shown}` does not exist in Argo CD at `{url}`"),
            ..Default::default()
        },
        Ok(Some(object)) => {
            let (health, argocd_health, synced_revision, message) =
                argocd::judge(&object, &app.desired_revisions);
            ApplicationHealth {
                name: shown,
                status: match health {
                    AppHealth::Healthy => HealthState::Healthy,
                    AppHealth::Progressing => HealthState::Progressing,
                    AppHealth::Unhealthy => HealthState::Unhealthy,
                },
                argocd_health,
                synced_revision,
                message,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(status: HealthState) -> ApplicationHealth {
        ApplicationHealth {
            status,
            ..Default::default()
        }
    }

    #[test]
    fn the_worst_application_decides() {
        use HealthState::*;
        assert_eq!(verdict(&[]), Unknown);
        assert_eq!(verdict(&[app(Healthy), app(Healthy)]), Healthy);
        assert_eq!(verdict(&[app(Healthy), app(Progressing)]), Progressing);
        assert_eq!(verdict(&[app(Unknown), app(Progressing)]), Unknown);
        assert_eq!(verdict(&[app(Progressing), app(Unhealthy)]), Unhealthy);
    }
}
