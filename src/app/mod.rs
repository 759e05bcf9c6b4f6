//! The composition root: the one place that wires the layers together into a running
//! Dray — the store, the runtime's caches, the controllers of every layer, and the HTTP
//! server. Nothing below imports it; the CLI's `serve` and `controller` commands call it.

mod controllers;
pub mod kubernetes;
mod serve;
pub mod tls;

pub use serve::{AdmissionListener, KubernetesServe, ServeOptions, reset_admin, serve};

/// Chooses rustls' cryptography for the process (ring). Both ring and aws-lc-rs are
/// compiled in through the HTTP and Kubernetes clients, and rustls then refuses to pick
/// one by itself: every TLS client and server in the process needs this first.
pub fn install_crypto_provider() {
    // An error means one is installed already, which is what is asked for.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
