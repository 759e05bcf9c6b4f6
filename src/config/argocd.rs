//! ProjectConfig `spec.argocd`: how the project reaches Argo CD — exactly one of
//! `apiServer` and `kubernetes`, each an http(s) URL, with a valid namespace.

use crate::api::ProjectConfig;

use super::error::Issue;
use super::names::{self, MAX_LABEL};
use super::path::FieldPath;

/// Every problem with `spec.argocd` of `config`.
pub(crate) fn check(config: &ProjectConfig) -> Vec<Issue> {
    let Some(argocd) = &config.spec.argocd else {
        return Vec::new();
    };
    let at = FieldPath::of(&["spec", "argocd"]);
    let mut issues = Vec::new();
    match (&argocd.api_server, &argocd.kubernetes) {
        (Some(_), Some(_)) | (None, None) => issues.push(
            Issue::new(
                at.clone(),
                "`spec.argocd` must set exactly one of `apiServer` and `kubernetes`",
            )
            .hint(
                "write `apiServer: https://argocd.example.com` to use Argo CD's API server, or \
                 `kubernetes: {server: https://k8s.example.com:6443, namespace: argocd}` to patch \
                 Applications through the Kubernetes API",
            ),
        ),
        _ => {}
    }
    if let Some(url) = &argocd.api_server {
        issues.extend(url_issue(url, at.key("apiServer"), "Argo CD's API server"));
    }
    if let Some(kubernetes) = &argocd.kubernetes {
        let at = at.key("kubernetes");
        issues.extend(url_issue(
            &kubernetes.server,
            at.key("server"),
            "the Kubernetes API server",
        ));
        if let Some(namespace) = &kubernetes.namespace {
            issues.extend(names::check(
                namespace,
                MAX_LABEL,
                "Argo CD namespace",
                at.key("namespace"),
            ));
        }
    }
    issues
}

fn url_issue(url: &str, at: FieldPath, what: &str) -> Option<Issue> {
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    let host = url.split_once("://").map(|(_, rest)| rest).unwrap_or("");
    (!scheme_ok || host.trim_matches('/').is_empty()).then(|| {
        Issue::new(at, format!("`{url}` is not an http(s) URL of {what}")).hint(
            "write the full URL, e.g. `https://argocd.example.com`; the token is the project's \
             Credential of type `argocd` whose `repoURL` is this URL",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ArgocdConfig, ArgocdKubernetes, ProjectConfigSpec};

    fn config(argocd: ArgocdConfig) -> ProjectConfig {
        ProjectConfig::new(
            "demo",
            ProjectConfigSpec {
                argocd: Some(argocd),
                ..Default::default()
            },
        )
    }

    fn messages(issues: &[Issue]) -> Vec<String> {
        issues
            .iter()
            .map(|i| format!("{}: {}", i.path, i.message))
            .collect()
    }

    #[test]
    fn exactly_one_transport_with_a_url() {
        let kubernetes = ArgocdKubernetes {
            server: "https://127.0.0.1:6443".into(),
            namespace: None,
        };
        assert!(
            check(&config(ArgocdConfig {
                api_server: Some("https://argocd.example.com".into()),
                kubernetes: None,
            }))
            .is_empty()
        );
        assert!(
            check(&config(ArgocdConfig {
                api_server: None,
                kubernetes: Some(kubernetes.clone()),
            }))
            .is_empty()
        );
        assert_eq!(kubernetes.namespace(), "argocd");
        let both = check(&config(ArgocdConfig {
            api_server: Some("https://argocd.example.com".into()),
            kubernetes: Some(kubernetes),
        }));
        assert_eq!(
            messages(&both),
            ["spec.argocd: `spec.argocd` must set exactly one of `apiServer` and `kubernetes`"]
        );
        let neither = check(&config(ArgocdConfig::default()));
        assert_eq!(neither.len(), 1);
        let bad = check(&config(ArgocdConfig {
            api_server: None,
            kubernetes: Some(ArgocdKubernetes {
                server: "k8s.example.com".into(),
                namespace: Some("Argo_CD".into()),
            }),
        }));
        let bad = messages(&bad);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!(
            bad[0],
            "spec.argocd.kubernetes.server: `k8s.example.com` is not an http(s) URL of the Kubernetes API server"
        );
        assert!(
            bad[1].starts_with("spec.argocd.kubernetes.namespace:"),
            "{bad:?}"
        );
    }
}
