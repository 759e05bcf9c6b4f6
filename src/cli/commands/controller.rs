//! `dray controller`: Dray's controllers in a Kubernetes cluster, against the CRDs, with
//! one active replica (a Lease). See `docs/kubernetes.md`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::app::kubernetes::controller::LeaseOptions;
use crate::app::kubernetes::{ControllerOptions, run_controller};
use crate::cli::CliError;
use crate::store::kubernetes::NamespaceSelection;

use super::serve::{LogFormat, ToolArgs, init_logging};

/// Arguments of `dray controller`.
#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    /// Dray's external URL (where `dray serve --kubernetes` is reached), for the links in
    /// notifications and commit statuses (default `http://localhost:7070`).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// How long one fetch into a git mirror may take (discovery's and git-clone's); past
    /// it git is stopped and the mirror unlocked, so a stalled server holds nothing.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = super::durations::git_fetch_timeout)]
    pub git_fetch_timeout: std::time::Duration,
    /// The kubeconfig to use; without it, the pod's ServiceAccount (in a cluster), then
    /// `$KUBECONFIG` or `~/.kube/config`.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Read Dray's resources only in namespaces matching this label selector (default:
    /// the Project namespaces, labelled `dray.dev/project`).
    #[arg(long, value_name = "SELECTOR", conflicts_with = "all_namespaces")]
    pub namespace_selector: Option<String>,
    /// Read Dray's resources in every namespace.
    #[arg(long)]
    pub all_namespaces: bool,
    /// Git mirrors, work directories and the local database (an emptyDir in a pod).
    #[arg(long, default_value = "/var/lib/dray")]
    pub data_dir: PathBuf,
    /// The Lease's namespace (default: `$POD_NAMESPACE`, else `default`).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, default_value = "dray-controller")]
    pub lease_name: String,
    /// This replica's identity in the Lease (default: `$POD_NAME`, else the host name
    /// and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// How long the Lease holds after its last renewal, in seconds; a standby takes over
    /// within about this long after the leader dies.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    pub lease_duration: u64,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub health_listen: SocketAddr,
    /// The tools promotion steps run.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// The log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Runs `dray controller`.
pub async fn run(args: ControllerArgs) -> Result<(), CliError> {
    init_logging(args.log_format)?;
    let namespaces = match (args.all_namespaces, args.namespace_selector) {
        (true, _) => NamespaceSelection::All,
        (false, Some(selector)) if selector.trim().is_empty() => {
            return Err(CliError::Usage {
                message: "--namespace-selector is empty".into(),
                hint: Some(
                    "give a label selector such as `team=payments`, or --all-namespaces".into(),
                ),
            });
        }
        (false, Some(selector)) => NamespaceSelection::Labelled(selector),
        (false, None) => NamespaceSelection::default(),
    };
    let identity = args.identity.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "dray".into());
        format!("{host}-{}", std::process::id())
    });
    let options = ControllerOptions {
        kubeconfig: args.kubeconfig,
        namespaces,
        data_dir: args.data_dir,
        lease: LeaseOptions {
            namespace: args.lease_namespace.unwrap_or_else(|| "default".into()),
            name: args.lease_name,
            identity,
            duration: Duration::from_secs(args.lease_duration),
        },
        health_listen: args.health_listen,
        tools: args.tools.paths(),
        public_url: args
            .public_url
            .unwrap_or_else(|| "http://localhost:7070".into()),
        git_fetch_timeout: args.git_fetch_timeout,
    };
    run_controller(options)
        .await
        .map_err(|e| CliError::Local(format!("{e:#}")))
}
