//! HTTPS for the admission webhook's listener: [`serve_tls`] serves an axum `Router` over
//! TLS from a certificate and key read from a directory — `tls.crt` and `tls.key`, as a
//! mounted `kubernetes.io/tls` Secret lays them out — and picks up new files when
//! cert-manager (or anyone) rotates them, without a restart.
//!
//! [`ReloadingCert`] is the rustls certificate resolver: at a handshake, at most every
//! [`CHECK_EVERY`], it reads both files again; when their bytes changed and they make a
//! usable pair (the key matches the certificate) it serves the new pair from then on,
//! otherwise it keeps the last good one and says why in the log. Files that are missing or
//! unusable at start are an error: the listener does not start without a certificate.
//!
//! The crypto provider is the process's ([`super::install_crypto_provider`], ring). This
//! module owns TLS and the accept loop; what is served is the router's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

/// The certificate chain's file name in the directory (PEM, leaf first).
pub const CERT_FILE: &str = "tls.crt";

/// The private key's file name in the directory (PEM: PKCS#8, PKCS#1 or SEC1).
pub const KEY_FILE: &str = "tls.key";

/// How often, at most, the files are read again.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connections still open may finish once shutdown is asked for.
const GRACE: Duration = Duration::from_secs(5);

/// Why a certificate and key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error(
        "cannot read `{path}`: {cause}; hint: mount the webhook's `kubernetes.io/tls` Secret there (it holds `tls.crt` and `tls.key`)"
    )]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
    /// A file is not the PEM it should be.
    #[error(
        "`{path}` holds no usable PEM {what}: {cause}; hint: it should be what cert-manager writes into a `kubernetes.io/tls` Secret"
    )]
    Pem {
        /// The file.
        path: String,
        /// `certificate` or `private key`.
        what: &'static str,
        /// Why.
        cause: String,
    },
    /// The key cannot be used, or does not belong to the certificate.
    #[error(
        "the key in `{path}` cannot serve the certificate beside it: {cause}; hint: replace both files together"
    )]
    Key {
        /// The key file.
        path: String,
        /// Why.
        #[source]
        cause: rustls::Error,
    },
}

/// The process's crypto provider (installed first when none is).
fn provider() -> Arc<CryptoProvider> {
    super::install_crypto_provider();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The pair being served, and the bytes it was made from.
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

struct State {
    current: Loaded,
    checked: Instant,
}

/// A certificate resolver that follows `tls.crt`/`tls.key` in a directory.
pub struct ReloadingCert {
    dir: PathBuf,
    check_every: Duration,
    provider: Arc<CryptoProvider>,
    state: Mutex<State>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the pair in `dir`; files are read again at most every `check_every`.
    pub fn load(dir: &Path, check_every: Duration) -> Result<Self, TlsError> {
        let provider = provider();
        let (cert_pem, key_pem) = read_pair(dir)?;
        let key = certified_key(dir, &cert_pem, &key_pem, &provider)?;
        Ok(ReloadingCert {
            dir: dir.to_owned(),
            check_every,
            provider,
            state: Mutex::new(State {
                current: Loaded {
                    cert_pem,
                    key_pem,
                    key,
                },
                checked: Instant::now(),
            }),
        })
    }

    /// The pair to serve now, read again first when the last look is old enough.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= self.check_every {
            state.checked = Instant::now();
            if let Some(loaded) = self.reload(&state.current) {
                tracing::info!(dir = %self.dir.display(), "serving the new TLS certificate");
                state.current = loaded;
            }
        }
        state.current.key.clone()
    }

    /// The pair on disk when it differs from `current` and is usable.
    fn reload(&self, current: &Loaded) -> Option<Loaded> {
        let read = read_pair(&self.dir).and_then(|(cert_pem, key_pem)| {
            if cert_pem == current.cert_pem && key_pem == current.key_pem {
                return Ok(None);
            }
            let key = certified_key(&self.dir, &cert_pem, &key_pem, &self.provider)?;
            Ok(Some(Loaded {
                cert_pem,
                key_pem,
                key,
            }))
        });
        read.unwrap_or_else(|error| {
            tracing::warn!(%error, "keeping the TLS certificate served so far");
            None
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read_pair(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|cause| TlsError::Read {
            path: path.display().to_string(),
            cause,
        })
    };
    Ok((read(CERT_FILE)?, read(KEY_FILE)?))
}

fn certified_key(
    dir: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_path = dir.join(CERT_FILE).display().to_string();
    let key_path = dir.join(KEY_FILE).display().to_string();
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_path.clone(),
            what: "certificate",
            cause: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert_path,
            what: "certificate",
            cause: "no `CERTIFICATE` block".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key_path.clone(),
        what: "private key",
        cause: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(|cause| TlsError::Key {
            path: key_path,
            cause,
        })
}

/// Serves `router` over HTTPS (HTTP/1.1 and HTTP/2) on `listener` with the pair in
/// `tls_dir`, following its rotation, until `shutdown` is cancelled; connections still open
/// then get a few seconds to finish. An error when the pair cannot be loaded at start.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls_dir: PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    serve_tls_checking(listener, router, tls_dir, shutdown, CHECK_EVERY).await
}

/// [`serve_tls`], reading the files again at most every `check_every`.
async fn serve_tls_checking(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls_dir: PathBuf,
    shutdown: CancellationToken,
    check_every: Duration,
) -> anyhow::Result<()> {
    let resolver = ReloadingCert::load(&tls_dir, check_every)?;
    let mut config = rustls::ServerConfig::builder_with_provider(resolver.provider.clone())
        .with_safe_default_protocol_versions()
        .context("the TLS provider offers no safe protocol version")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "TLS connections still open {}s after shutdown; closing them",
            GRACE.as_secs()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
