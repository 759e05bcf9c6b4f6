//! TLS for the test control plane, the doubles and test webhooks: a certificate authority
//! made at start (rcgen), serving certificates for `127.0.0.1`/`localhost` and client
//! certificates signed by it, and an axum app served over HTTPS on its own thread and
//! runtime (stopped on drop).
//!
//! It owns certificates and the HTTPS loop; it knows nothing about Kubernetes.

use std::net::SocketAddr;
use std::sync::{Arc, Once};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::oneshot;

/// Installs rustls' aws-lc-rs provider once per process (the one `kube`'s `rustls-tls` uses).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    });
}

/// A certificate authority made in memory; issues serving certificates.
pub struct CertAuthority {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAuthority").finish_non_exhaustive()
    }
}

/// A serving certificate (leaf only) and its key, DER for [`TlsServer`] and PEM for a
/// process that reads files (e.g. `dray serve --kubernetes`'s webhook certificate).
#[derive(Debug)]
pub struct ServingCert {
    pub cert: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl CertAuthority {
    /// Makes a new CA whose common name is `name`.
    pub fn new(name: &str) -> Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().context("Failed to generate the CA key")?;
        let cert = params
            .self_signed(&key)
            .context("Failed to self-sign the CA")?;
        Ok(Self {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Issues a serving certificate for `127.0.0.1`, `localhost` and `extra_dns` names.
    pub fn issue(&self, extra_dns: &[&str]) -> Result<ServingCert> {
        let mut names = vec!["localhost".to_owned()];
        names.extend(extra_dns.iter().map(|name| (*name).to_owned()));
        let mut params = CertificateParams::new(names)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let key = KeyPair::generate().context("Failed to generate a serving key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .context("Failed to sign a serving certificate")?;
        Ok(ServingCert {
            cert: cert.der().clone(),
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a client certificate: the Kubernetes API server reads the user from its
    /// common name and the group from its organization (rcgen writes one of each).
    pub fn issue_client(&self, user: &str, group: Option<&str>) -> Result<ServingCert> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = group {
            params
                .distinguished_name
                .push(DnType::OrganizationName, group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().context("Failed to generate a client key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("Failed to sign a client certificate for `{user}`"))?;
        Ok(ServingCert {
            cert: cert.der().clone(),
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// An axum app served over HTTPS (HTTP/1.1) on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct TlsServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsServer {
    /// Binds `127.0.0.1:0` and serves `app` with `cert` on its own thread and runtime.
    /// `background` runs beside the server on the same runtime (e.g. a bookmark ticker).
    pub fn spawn(
        name: &str,
        app: Router,
        cert: ServingCert,
        background: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    ) -> Result<Self> {
        install_crypto_provider();
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert], cert.key)
            .with_context(|| format!("Failed to build the {name}'s TLS configuration"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .with_context(|| format!("Failed to bind the {name} to 127.0.0.1:0"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("{name}-{}", addr.port()))
            .enable_all()
            .build()
            .with_context(|| format!("Failed to build the {name}'s runtime"))?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    if let Some(background) = background {
                        tokio::spawn(background);
                    }
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => return eprintln!("{label} on {addr}: {err}"),
                    };
                    tokio::select! {
                        () = accept_loop(listener, acceptor, app) => {}
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .with_context(|| format!("Failed to spawn the {name}'s thread"))?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let service = TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .http1_only()
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await;
        });
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
