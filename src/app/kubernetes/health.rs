//! `dray controller`'s health endpoints: `/healthz` (the process answers), `/readyz` (200
//! once it leads and its caches are listed, or while it stands by — a standby is ready to
//! take over; 503 while it starts), and `/metrics` (the process's counters and histograms `dray serve` exports; the
//! queues and DORA numbers are `dray serve`'s).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Where the controller is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Connecting, or starting the controllers.
    Starting,
    /// Waiting for the lease.
    Standby,
    /// Holding the lease and reconciling.
    Leading,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Standby => "standby",
            Phase::Leading => "leading",
        }
    }
}

/// Serves the endpoints on `listen` until `shutdown`.
pub(super) async fn serve(
    listen: SocketAddr,
    phase: watch::Receiver<Phase>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on --health-listen {listen}: {e}; choose a free address")
    })?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(crate::server::metrics::serve_process))
        .with_state(Arc::new(phase));
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "the health endpoints stopped");
        }
    });
    Ok(())
}

async fn ready(State(phase): State<Arc<watch::Receiver<Phase>>>) -> (StatusCode, String) {
    let now = *phase.borrow();
    let code = match now {
        Phase::Starting => StatusCode::SERVICE_UNAVAILABLE,
        Phase::Standby | Phase::Leading => StatusCode::OK,
    };
    (code, format!("{}\n", now.as_str()))
}
