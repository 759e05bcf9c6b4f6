//! The cluster Dray talks to: a kubeconfig file when one is given (its context, CA, client
//! certificates, exec credential plugins, as kubectl reads it), otherwise kube's inference
//! (the pod's ServiceAccount in a cluster — its projected token is re-read as it rotates —
//! then `$KUBECONFIG` and `~/.kube/config`).

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for `kubeconfig`, or for the environment when `None`.
pub async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).with_context(|| {
                format!(
                    "cannot read the kubeconfig `{}`; give a readable kubeconfig file (as `kubectl --kubeconfig` takes)",
                    path.display()
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("the kubeconfig `{}` cannot be used", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no cluster found: not in a pod with a ServiceAccount, and no $KUBECONFIG or ~/.kube/config; pass --kubeconfig FILE",
        )?,
    };
    let server = config.cluster_url.to_string();
    kube::Client::try_from(config)
        .with_context(|| format!("cannot make a client for the Kubernetes API at {server}"))
}
