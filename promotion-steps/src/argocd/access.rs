//! How Dray reaches the Kubernetes API of Argo CD's cluster: [`KubeAccess`], the three
//! ways a project can say it (infer, a kubeconfig, a server URL with the project's token),
//! and how each is described in messages and checked before any request.
//!
//! Building a client from it is `client.rs`'s; what to ask the API is `kubernetes.rs`'s.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How to reach a Kubernetes API server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum KubeAccess {
    /// What `kube::Config::infer()` finds: `$KUBECONFIG` or `~/.kube/config` (its
    /// current context) when there is one, else the pod's service account (whose rotating
    /// token kube re-reads).
    Infer,
    /// A kubeconfig: `path` (else `$KUBECONFIG` / `~/.kube/config`) and `context` (else
    /// its `current-context`). Its user authenticates: a token, a client certificate or an
    /// `exec` credential plugin; its cluster's `certificate-authority(-data)` is trusted.
    Kubeconfig {
        /// The kubeconfig file.
        path: Option<PathBuf>,
        /// The context to use.
        context: Option<String>,
    },
    /// A server URL; the bearer token is the project's `argocd` Credential for it.
    Server {
        /// The Kubernetes API server's URL, e.g. `https://k8s.example.com:6443`.
        url: String,
        /// The CA bundle (PEM, base64-encoded as kubeconfig's
        /// `certificate-authority-data`) that signed the server's certificate; without
        /// it, the system's trust store decides.
        certificate_authority_data: Option<String>,
    },
}

impl KubeAccess {
    /// From the fields of ProjectConfig `spec.argocd.kubernetes`: `server` (with its CA)
    /// when set, else a kubeconfig when `kubeconfig` or `context` is set, else infer.
    pub fn from_fields(
        server: Option<String>,
        certificate_authority_data: Option<String>,
        kubeconfig: Option<PathBuf>,
        context: Option<String>,
    ) -> Self {
        match (server, kubeconfig, context) {
            (Some(url), _, _) => KubeAccess::Server {
                url,
                certificate_authority_data,
            },
            (None, None, None) => KubeAccess::Infer,
            (None, path, context) => KubeAccess::Kubeconfig { path, context },
        }
    }

    /// The URL whose credential holds the bearer token (only `Server`: a kubeconfig or
    /// the service account authenticates by itself).
    pub fn token_url(&self) -> Option<&str> {
        match self {
            KubeAccess::Server { url, .. } => Some(url),
            KubeAccess::Infer | KubeAccess::Kubeconfig { .. } => None,
        }
    }

    /// For messages, before the cluster's URL is known.
    pub fn describe(&self) -> String {
        match self {
            KubeAccess::Server { url, .. } => {
                format!("the Kubernetes API at `{}`", url.trim_end_matches('/'))
            }
            KubeAccess::Kubeconfig { path, context } => format!(
                "the Kubernetes API of {}{}",
                path.as_ref().map_or_else(
                    || "the default kubeconfig".to_owned(),
                    |p| format!("kubeconfig `{}`", p.display())
                ),
                context
                    .as_ref()
                    .map(|c| format!(" (context `{c}`)"))
                    .unwrap_or_default()
            ),
            KubeAccess::Infer => "the Kubernetes API (in-cluster service account, else \
                                  `$KUBECONFIG` or `~/.kube/config`)"
                .to_owned(),
        }
    }

    /// Refuses what cannot work before any request, naming it: a server URL that is not
    /// http(s), a relative kubeconfig path, an empty context.
    pub fn check(&self) -> Result<(), String> {
        match self {
            KubeAccess::Server { url, .. } => {
                if url.starts_with("http://") || url.starts_with("https://") {
                    Ok(())
                } else {
                    Err(format!("`{url}` is not an http(s) URL"))
                }
            }
            KubeAccess::Kubeconfig { path, context } => {
                if let Some(path) = path.as_ref().filter(|p| !p.is_absolute()) {
                    return Err(format!(
                        "kubeconfig `{}` is not an absolute path",
                        path.display()
                    ));
                }
                if context.as_ref().is_some_and(|c| c.trim().is_empty()) {
                    return Err("the kubeconfig `context` is empty".to_owned());
                }
                Ok(())
            }
            KubeAccess::Infer => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_choose_the_way_in() {
        assert_eq!(
            KubeAccess::from_fields(None, None, None, None),
            KubeAccess::Infer
        );
        let server = KubeAccess::from_fields(
            Some("https://k8s:6443".into()),
            Some("Q0E=".into()),
            None,
            None,
        );
        assert_eq!(server.token_url(), Some("https://k8s:6443"));
        let context = KubeAccess::from_fields(None, None, None, Some("prod".into()));
        assert_eq!(
            context,
            KubeAccess::Kubeconfig {
                path: None,
                context: Some("prod".into())
            }
        );
        assert_eq!(context.token_url(), None);
        assert_eq!(
            context.describe(),
            "the Kubernetes API of the default kubeconfig (context `prod`)"
        );
        let relative = KubeAccess::from_fields(None, None, Some("kube/config".into()), None);
        assert_eq!(
            relative.check().unwrap_err(),
            "kubeconfig `kube/config` is not an absolute path"
        );
        let bare = KubeAccess::from_fields(Some("k8s:6443".into()), None, None, None);
        assert_eq!(
            bare.check().unwrap_err(),
            "`k8s:6443` is not an http(s) URL"
        );
    }
}
