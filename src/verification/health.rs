//! A Stage's health, from the Argo CD Applications its last promotion registered: Healthy
//! only when every one reports the desired revision synced and Healthy; Progressing while
//! any is not there yet (or Progressing / Suspended); Unhealthy when any is Degraded or
//! Missing, with Argo CD's message — or at once, once it is synced, when its resource tree
//! shows pods of the new ReplicaSet in CrashLoopBackOff, ImagePullBackOff / ErrImagePull or
//! OOM-killed again and again (`dray_steps::argocd::fail_fast_reason`; API server only). Argo CD is read through the transport the promotion
//! used (API server or Kubernetes API): for the Kubernetes API, the way in the project's
//! ProjectConfig `spec.argocd.kubernetes` gives (a kubeconfig, the service account, or the
//! server URL with its CA), else the recorded server URL; the bearer token, where one is
//! needed, is the project's credential for that URL. Kubernetes clients are shared
//! between checks (`dray_steps::argocd` keeps them), not built per look.

use dray_steps::CredentialProvider;
use dray_steps::argocd::{self, AppHealth, ApplicationRef, ArgocdTarget, KubeAccess};
use jiff::Timestamp;

use crate::api::{
    ApplicationHealth, HealthState, Kind, ObjectKey, ProjectConfig, RegisteredApplication,
    StageHealth, Time,
};
use crate::store::{Store, StoreError};

/// Argo CD's namespace when a Kubernetes-transport Application names none.
const ARGOCD_NAMESPACE: &str = "argocd";

/// How `project` reaches Argo CD now: its ProjectConfig's `spec.argocd` (`None` when it
/// has none, or no longer parses).
pub async fn project_argocd(
    store: &dyn Store,
    project: &str,
) -> Result<Option<ArgocdTarget>, StoreError> {
    let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let Some(stored) = store.get(&key).await? else {
        return Ok(None);
    };
    Ok(stored
        .to_typed::<ProjectConfig>()
        .ok()
        .and_then(|config| config.spec.argocd.as_ref().and_then(|a| a.target())))
}

/// Reads every registered Application and judges the Stage's health; `project` is how the
/// project reaches Argo CD now ([`project_argocd`]). `previous` keeps `since` when the
/// verdict did not change.
pub async fn check(
    http: &reqwest::Client,
    credentials: &dyn CredentialProvider,
    project: Option<&ArgocdTarget>,
    applications: &[RegisteredApplication],
    previous: Option<&StageHealth>,
    now: Timestamp,
) -> StageHealth {
    let mut judged = Vec::with_capacity(applications.len());
    for app in applications {
        judged.push(check_one(http, credentials, project, app).await);
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

/// How to reach `app`: the API server it was reached through, or the Kubernetes API —
/// the project's way in when it names one for that cluster (a kubeconfig or the service
/// account; or the same server URL, with its CA), else the recorded server URL.
fn target(app: &RegisteredApplication, project: Option<&ArgocdTarget>) -> Option<ArgocdTarget> {
    let trim = |url: &str| url.trim_end_matches('/').to_owned();
    match (&app.api_server, &app.kubernetes) {
        (Some(url), _) => Some(ArgocdTarget::ApiServer { url: url.clone() }),
        (None, Some(server)) => {
            let (access, namespace) = match project {
                Some(ArgocdTarget::Kubernetes { access, namespace })
                    if access
                        .token_url()
                        .is_none_or(|url| trim(url) == trim(server)) =>
                {
                    (access.clone(), namespace.clone())
                }
                _ => (
                    KubeAccess::Server {
                        url: server.clone(),
                        certificate_authority_data: None,
                    },
                    ARGOCD_NAMESPACE.to_owned(),
                ),
            };
            Some(ArgocdTarget::Kubernetes {
                access,
                namespace: app.namespace.clone().unwrap_or(namespace),
            })
        }
        (None, None) => None,
    }
}

async fn check_one(
    http: &reqwest::Client,
    credentials: &dyn CredentialProvider,
    project: Option<&ArgocdTarget>,
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
    let Some(target) = target(app, project) else {
        return unknown("the promotion did not say how to reach Argo CD".to_owned());
    };
    let url = app
        .api_server
        .clone()
        .or_else(|| app.kubernetes.clone())
        .unwrap_or_default();
    let reference = ApplicationRef {
        name: app.name.clone(),
        namespace: app.namespace.clone(),
    };
    let token = target.token_url().and_then(|url| credentials.token(url));
    match argocd::read_application(http, token, &target, &reference).await {
        Err(error) => unknown(format!("cannot read it: {error}")),
        Ok(None) => ApplicationHealth {
            name: shown.clone(),
            status: HealthState::Unhealthy,
            argocd_health: "Missing".to_owned(),
            message: format!("Application `{shown}` does not exist in Argo CD at `{url}`"),
            ..Default::default()
        },
        Ok(Some(object)) => {
            let (mut health, argocd_health, synced_revision, mut message) =
                argocd::judge(&object, &app.desired_revisions);
            // Fail fast: pods of the new ReplicaSet that will not come up make it Unhealthy
            // now, not at the Deployment's progress deadline.
            if health == AppHealth::Progressing
                && argocd::is_applied(&object, &app.desired_revisions)
            {
                let token = target.token_url().and_then(|url| credentials.token(url));
                if let Ok(Some(tree)) =
                    argocd::read_resource_tree(http, token, &target, &reference).await
                    && let Some(reason) = argocd::fail_fast_reason(&shown, &tree)
                {
                    health = AppHealth::Unhealthy;
                    message = reason;
                }
            }
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
    fn the_projects_way_in_is_used_for_its_cluster() {
        let registered = RegisteredApplication {
            name: "shop".into(),
            kubernetes: Some("https://k8s:6443".into()),
            ..Default::default()
        };
        let kubeconfig = ArgocdTarget::Kubernetes {
            access: KubeAccess::Kubeconfig {
                path: Some("/etc/dray/kubeconfig".into()),
                context: None,
            },
            namespace: "gitops".into(),
        };
        assert_eq!(
            target(&registered, Some(&kubeconfig)),
            Some(kubeconfig.clone())
        );
        let with_ca = ArgocdTarget::Kubernetes {
            access: KubeAccess::Server {
                url: "https://k8s:6443/".into(),
                certificate_authority_data: Some("Q0E=".into()),
            },
            namespace: "argocd".into(),
        };
        assert_eq!(target(&registered, Some(&with_ca)), Some(with_ca));
        let elsewhere = ArgocdTarget::Kubernetes {
            access: KubeAccess::Server {
                url: "https://other:6443".into(),
                certificate_authority_data: None,
            },
            namespace: "argocd".into(),
        };
        let recorded = ArgocdTarget::Kubernetes {
            access: KubeAccess::Server {
                url: "https://k8s:6443".into(),
                certificate_authority_data: None,
            },
            namespace: "argocd".into(),
        };
        assert_eq!(
            target(&registered, Some(&elsewhere)),
            Some(recorded.clone())
        );
        assert_eq!(target(&registered, None), Some(recorded));
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
