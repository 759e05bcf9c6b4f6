//! `dray controller`: the reconcilers of `dray serve`, run against a cluster. It waits for
//! the Lease, connects the Kubernetes store (watches listed), keeps the Project namespaces,
//! and runs every controller until SIGTERM (then releases the Lease) or until the Lease is
//! lost: then the process exits at once, from wherever it is (starting or running), so no
//! step, push or status write follows; the pod restarts as a standby. In a container its
//! exit ends every child (git, kubectl, helm) too. A promotion cut short either way resumes
//! on the next leader from the step state in its status.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::discovery::git::MirrorCache;
use crate::discovery::image::{ImageDiscoverer, ImageDiscovererOptions};
use crate::secrets::SecretKey;
use crate::store::kubernetes::{KubeStore, KubeStoreOptions, NamespaceSelection, Reads};
use crate::store::{SqliteStore, Store};

use super::health::{self, Phase};
use super::leader::Leadership;
pub use super::leader::LeaseOptions;

/// How long the first listing of the cluster may take.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the controllers get to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The exit status of a replica that lost the Lease.
pub const LEASE_LOST_EXIT: i32 = 3;

/// How `dray controller` runs.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// The kubeconfig; the environment's (in-cluster first) when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// Which namespaces are read.
    pub namespaces: NamespaceSelection,
    /// Git mirrors, work directories and the local database.
    pub data_dir: PathBuf,
    /// The Lease.
    pub lease: LeaseOptions,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub health_listen: SocketAddr,
    /// Where `git`, `kubectl`, `kustomize` and `helm` are.
    pub tools: dray_steps::ToolPaths,
    /// Dray's external URL, for links in notifications and commit statuses.
    pub public_url: String,
    /// The overall deadline of one fetch into a git mirror (`--git-fetch-timeout`).
    pub git_fetch_timeout: std::time::Duration,
}

/// Runs until SIGTERM/SIGINT (`Ok`); exits the process with [`LEASE_LOST_EXIT`] when the
/// Lease is lost.
pub async fn run_controller(options: ControllerOptions) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let (phase, phase_rx) = watch::channel(Phase::Starting);
    health::serve(options.health_listen, phase_rx, shutdown.clone()).await?;
    let client = super::kube_client(options.kubeconfig.as_deref()).await?;
    let mut leadership = Leadership::compete(client.clone(), &options.lease).await?;
    phase.send_replace(Phase::Standby);
    tracing::info!(lease = %format!("{}/{}", options.lease.namespace, options.lease.name),
        identity = %options.lease.identity, "standing by for the lease");
    tokio::select! {
        acquired = leadership.acquired() => acquired?,
        () = super::super::serve::shutdown_signal() => {
            shutdown.cancel();
            leadership.release().await;
            return Ok(());
        }
    }
    phase.send_replace(Phase::Starting);
    tracing::info!(identity = %options.lease.identity, "holding the lease: starting the controllers");
    // From now on a lost lease ends the process wherever it is: waiting for the controllers
    // to wind down would let them write after another replica may lead.
    let lost = leadership.lost();
    tokio::spawn(async move {
        let why = lost.await;
        tracing::error!("{why}; exiting now so that only one controller writes");
        std::process::exit(LEASE_LOST_EXIT);
    });

    let secret_key = Arc::new(SecretKey::load(&options.data_dir)?);
    let local = Arc::new(SqliteStore::open(&options.data_dir.join("local"))?);
    let store = Arc::new(
        KubeStore::connect(
            client,
            KubeStoreOptions {
                namespaces: options.namespaces.clone(),
                secret_key: secret_key.clone(),
                local,
                sync_timeout: SYNC_TIMEOUT,
                reads: Reads::Watched,
            },
        )
        .await
        .context("cannot read Dray's resources from the cluster")?,
    );
    let images = ImageDiscoverer::new(ImageDiscovererOptions::default())
        .context("cannot set up the registry client")?;
    let mirrors =
        Arc::new(MirrorCache::new(&options.data_dir).with_fetch_timeout(options.git_fetch_timeout));
    let (controllers, cache) = super::super::controllers::start(
        super::super::controllers::Parts {
            store: store.clone() as Arc<dyn Store>,
            secret_key,
            images,
            mirrors,
            tools: options.tools.clone(),
            work_root: options.data_dir.join("work"),
            public_url: options.public_url.clone(),
        },
        shutdown.clone(),
    )
    .await?;
    let namespaces = tokio::spawn(super::projects::run(store, cache, shutdown.clone()));
    phase.send_replace(Phase::Leading);
    tracing::info!("leading: every controller runs");

    super::super::serve::shutdown_signal().await;
    shutdown.cancel();
    if tokio::time::timeout(STOP_TIMEOUT, async {
        let _ = controllers.await;
        let _ = namespaces.await;
    })
    .await
    .is_err()
    {
        tracing::warn!(
            "the controllers did not stop within {}s",
            STOP_TIMEOUT.as_secs()
        );
    }
    leadership.release().await;
    tracing::info!("stopped; the lease is released");
    Ok(())
}
