//! The Argo CD double's HTTPS door: a CA generated per double (rcgen), a server
//! certificate it signs for `127.0.0.1` and `localhost`, and a TLS listener on its own
//! loopback port that terminates TLS and passes the bytes to the double's plain-HTTP
//! listener, as an ingress in front of an API server does. Clients verify it for real:
//! a kubeconfig with the CA's `certificate-authority-data` succeeds, another CA fails the
//! handshake. Test tooling only, never shipped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::oneshot;

use crate::tls::CertAuthority;

/// A CA that signed nothing the double serves: a kubeconfig trusting it must fail.
pub fn unrelated_ca_pem() -> Result<String> {
    Ok(CertAuthority::new("Some other CA")?.ca_pem().to_owned())
}

/// A TLS front on 127.0.0.1 before `backend`; stopped on drop.
#[derive(Debug)]
pub(crate) struct TlsFront {
    addr: SocketAddr,
    ca_pem: String,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsFront {
    /// Generates the CA and the server certificate, binds a free port and serves.
    pub(crate) fn start(backend: SocketAddr) -> Result<Self> {
        let issuer = CertAuthority::new("Dray test CA (Argo CD double)")?;
        let cert = issuer.issue(&[])?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert], cert.key)
            .context("the TLS front's certificate does not fit its key")?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("Failed to bind the Argo CD double's TLS front to 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("argocd-tls-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => return eprintln!("Argo CD TLS front on {addr}: {err}"),
                    };
                    tokio::select! {
                        () = serve(listener, acceptor, backend) => {}
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })?;
        Ok(Self {
            addr,
            ca_pem: issuer.ca_pem().to_owned(),
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA that signed the front's certificate, PEM.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts TLS connections and pipes each to `backend`; a failed handshake (a client
/// that does not trust the CA hangs up) ends that connection only.
async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    backend: SocketAddr,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
        });
    }
}
