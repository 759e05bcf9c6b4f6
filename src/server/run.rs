//! Running the server: open the store, apply `--config` files, listen, and shut down
//! gracefully on SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::config;
use crate::secrets::SecretKey;
use crate::store::SqliteStore;

use super::apply::{ApplyFile, ApplyRequest, apply};
use super::{AppState, router};

/// How `dray serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where the database lives.
    pub data_dir: PathBuf,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// YAML files or directories applied at start-up.
    pub config: Vec<PathBuf>,
}

/// Runs the server until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let store = SqliteStore::open(&options.data_dir)?;
    tracing::info!(path = %store.path().display(), "store opened");
    let secret_key = SecretKey::load(&options.data_dir)?;
    let state = AppState {
        store: Arc::new(store),
        secret_key: Arc::new(secret_key),
    };

    if !options.config.is_empty() {
        let files = config::read_paths(&options.config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let request = ApplyRequest {
            files: files
                .into_iter()
                .map(|f| ApplyFile {
                    path: f.path,
                    content: f.content,
                })
                .collect(),
            default_project: None,
        };
        let response = apply(state.store.as_ref(), &state.secret_key, request)
            .await
            .map_err(|e| anyhow::anyhow!("the --config files were not applied: {e}"))?;
        tracing::info!(resources = response.results.len(), "applied --config");
    }

    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(url = %format!("http://{address}"), "dray is serving");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("the HTTP server failed")?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops the server");
                let _ = interrupt.await;
                return;
            }
        };
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT received, shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
    }
}
