//! ProjectConfig `spec.argocd`: how the project reaches Argo CD — exactly one of
//! `apiServer` and `kubernetes`. `kubernetes` is a `server` URL (with optional
//! `certificateAuthorityData`, base64 PEM), or a `kubeconfig` (absolute path) and/or
//! `context`, or nothing (inferred); never `server` with a kubeconfig; a valid namespace.

use base64::Engine as _;

use crate::api::{ArgocdKubernetes, ProjectConfig};

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
                 `kubernetes: {}` (in-cluster service account or kubeconfig), \
                 `kubernetes: {kubeconfig: /path, context: name}` or \
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
        issues.extend(kubernetes_issues(kubernetes, &at.key("kubernetes")));
    }
    issues
}

fn kubernetes_issues(kubernetes: &ArgocdKubernetes, at: &FieldPath) -> Vec<Issue> {
    let mut issues = Vec::new();
    if let Some(server) = &kubernetes.server {
        issues.extend(url_issue(
            server,
            at.key("server"),
            "the Kubernetes API server",
        ));
        if kubernetes.kubeconfig.is_some() || kubernetes.context.is_some() {
            issues.push(
                Issue::new(
                    at.key("server"),
                    "`server` and `kubeconfig`/`context` exclude each other",
                )
                .hint(
                    "keep `server` to authenticate with the project's `argocd` Credential for \
                     it, or `kubeconfig`/`context` to use that kubeconfig's cluster and user",
                ),
            );
        }
    }
    if let Some(data) = &kubernetes.certificate_authority_data {
        let at = at.key("certificateAuthorityData");
        if kubernetes.server.is_none() {
            issues.push(
                Issue::new(at.clone(), "`certificateAuthorityData` needs `server`").hint(
                    "a kubeconfig names its own CA (`certificate-authority-data` of its \
                     cluster); set `server` too, or drop `certificateAuthorityData`",
                ),
            );
        }
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        if !pem.is_some_and(|pem| pem.contains("-----BEGIN CERTIFICATE-----")) {
            issues.push(
                Issue::new(
                    at,
                    "`certificateAuthorityData` is not a base64-encoded PEM certificate",
                )
                .hint("write the CA as kubeconfig does, e.g. the output of `base64 -w0 ca.crt`"),
            );
        }
    }
    if let Some(path) = &kubernetes.kubeconfig
        && !std::path::Path::new(path).is_absolute()
    {
        issues.push(
            Issue::new(
                at.key("kubeconfig"),
                format!("kubeconfig `{path}` is not an absolute path"),
            )
            .hint("write the full path of the file on the machine Dray runs on, e.g. `/etc/dray/kubeconfig`"),
        );
    }
    if kubernetes
        .context
        .as_ref()
        .is_some_and(|c| c.trim().is_empty())
    {
        issues.push(Issue::new(at.key("context"), "`context` is empty").hint(
            "name a context of the kubeconfig, or leave `context` out for its `current-context`",
        ));
    }
    if let Some(namespace) = &kubernetes.namespace {
        issues.extend(names::check(
            namespace,
            MAX_LABEL,
            "Argo CD namespace",
            at.key("namespace"),
        ));
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
    use crate::api::{ArgocdConfig, ProjectConfigSpec};

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
            server: Some("https://127.0.0.1:6443".into()),
            ..Default::default()
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
                server: Some("k8s.example.com".into()),
                namespace: Some("Argo_CD".into()),
                ..Default::default()
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

    #[test]
    fn a_kubeconfig_or_nothing_is_a_way_in_and_server_excludes_it() {
        let kubernetes = |k: ArgocdKubernetes| {
            messages(&check(&config(ArgocdConfig {
                api_server: None,
                kubernetes: Some(k),
            })))
        };
        assert!(kubernetes(ArgocdKubernetes::default()).is_empty());
        assert!(
            kubernetes(ArgocdKubernetes {
                kubeconfig: Some("/etc/dray/kubeconfig".into()),
                context: Some("prod".into()),
                ..Default::default()
            })
            .is_empty()
        );
        let ca = base64::engine::general_purpose::STANDARD
            .encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        assert!(
            kubernetes(ArgocdKubernetes {
                server: Some("https://k8s:6443".into()),
                certificate_authority_data: Some(ca),
                ..Default::default()
            })
            .is_empty()
        );
        assert_eq!(
            kubernetes(ArgocdKubernetes {
                server: Some("https://k8s:6443".into()),
                context: Some("prod".into()),
                ..Default::default()
            }),
            [
                "spec.argocd.kubernetes.server: `server` and `kubeconfig`/`context` exclude each other"
            ]
        );
        assert_eq!(
            kubernetes(ArgocdKubernetes {
                kubeconfig: Some("kube/config".into()),
                certificate_authority_data: Some("bm9wZQ==".into()),
                ..Default::default()
            }),
            [
                "spec.argocd.kubernetes.certificateAuthorityData: `certificateAuthorityData` needs `server`",
                "spec.argocd.kubernetes.certificateAuthorityData: `certificateAuthorityData` is not a base64-encoded PEM certificate",
                "spec.argocd.kubernetes.kubeconfig: kubeconfig `kube/config` is not an absolute path",
            ]
        );
    }
}
