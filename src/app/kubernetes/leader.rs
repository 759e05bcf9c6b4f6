//! One active controller: leader election on a `coordination.k8s.io/v1` Lease through
//! `kube-lease-manager` (kube-runtime has none). The holder renews the Lease well before
//! it expires; a standby takes it once it has not been renewed for its duration. Losing
//! it while leading is final for the process (it exits, as controller-runtime's managers
//! do), so two replicas never reconcile at once for longer than the renew margin.

use std::time::Duration;

use anyhow::Context;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The Lease and how it is held.
#[derive(Clone, Debug)]
pub struct LeaseOptions {
    /// The Lease's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// This replica's name in `spec.holderIdentity`.
    pub identity: String,
    /// How long a holder's claim lasts after its last renewal.
    pub duration: Duration,
}

/// A held or awaited Lease.
pub(super) struct Leadership {
    state: watch::Receiver<bool>,
    task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Leadership {
    /// Starts competing for the Lease.
    pub(super) async fn compete(
        client: kube::Client,
        options: &LeaseOptions,
    ) -> anyhow::Result<Self> {
        let seconds = options.duration.as_secs().max(2);
        // Renew with a third of the duration to spare: two missed renewals still hold.
        let grace = (seconds / 3).max(1);
        let manager = LeaseManagerBuilder::new(client, &options.name)
            .with_namespace(&options.namespace)
            .with_identity(&options.identity)
            .with_duration(seconds)
            .with_grace(grace)
            .build()
            .await
            .with_context(|| {
                format!(
                    "cannot use the Lease {}/{}; Dray's ServiceAccount needs get, create and patch on leases.coordination.k8s.io there",
                    options.namespace, options.name
                )
            })?;
        let (state, task) = manager.watch().await;
        Ok(Leadership { state, task })
    }

    /// Waits until this replica holds the Lease.
    pub(super) async fn acquired(&mut self) -> anyhow::Result<()> {
        self.state
            .wait_for(|leading| *leading)
            .await
            .map(|_| ())
            .map_err(|_| anyhow::anyhow!("the lease manager stopped"))
    }

    /// Resolves when the Lease is lost.
    pub(super) async fn lost(&mut self) {
        let _ = self.state.wait_for(|leading| !*leading).await;
    }

    /// Gives the Lease up (on shutdown), so a standby takes over at once.
    pub(super) async fn release(self) {
        drop(self.state);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(manager))) => {
                if let Err(error) = manager.release().await {
                    tracing::warn!(%error, "cannot release the lease; a standby takes over once it expires");
                }
            }
            _ => tracing::warn!(
                "the lease manager did not stop; a standby takes over once the lease expires"
            ),
        }
    }
}
