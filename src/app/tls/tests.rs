//! The TLS listener with real certificates (rcgen, one CA, two leaf certificates) fetched
//! by a real client (reqwest, trusting only that CA): the first pair is served, a rotated
//! pair is served from the next handshake on, a broken rotation keeps the last good pair,
//! and shutdown ends the server.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio_util::sync::CancellationToken;

use super::*;

const HOST: &str = "dray-webhook.dray.svc";

struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
}

fn issue(ca: &CertifiedIssuer<'_, KeyPair>) -> Leaf {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![HOST.to_owned()])
        .unwrap()
        .signed_by(&key, ca)
        .unwrap();
    Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().to_vec(),
    }
}

/// Writes `leaf` into `dir` as a Secret mount would (each file replaced whole).
fn write(dir: &Path, cert: &str, key: &str) {
    for (name, content) in [(CERT_FILE, cert), (KEY_FILE, key)] {
        let staged = dir.join(format!(".{name}.new"));
        std::fs::write(&staged, content).unwrap();
        std::fs::rename(&staged, dir.join(name)).unwrap();
    }
}

/// The DER of the certificate `addr` serves to a client trusting `ca_pem` only, and the
/// body it answers — over a new connection each time.
async fn fetch(addr: SocketAddr, ca_pem: &str) -> (Vec<u8>, String) {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .resolve(HOST, addr)
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let response = client
        .get(format!("https://{HOST}:{}/hello", addr.port()))
        .send()
        .await
        .unwrap();
    let served = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .expect("the TLS connection's peer certificate")
        .to_vec();
    (served, response.text().await.unwrap())
}

#[tokio::test]
async fn serves_the_pair_in_the_directory_and_the_rotated_one_from_the_next_handshake() {
    crate::app::install_crypto_provider();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let (first, second) = (issue(&ca), issue(&ca));
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &first.cert_pem, &first.key_pem);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/hello", get(|| async { "hello over TLS" }));
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve_tls_checking(
        listener,
        router,
        dir.path().to_owned(),
        shutdown.clone(),
        Duration::ZERO,
    ));

    let (served, body) = fetch(addr, &ca.pem()).await;
    assert_eq!(body, "hello over TLS");
    assert_eq!(served, first.der, "the first certificate");

    write(dir.path(), &second.cert_pem, &second.key_pem);
    let (served, _) = fetch(addr, &ca.pem()).await;
    assert_eq!(served, second.der, "the rotated certificate");

    // A half-written rotation (a key that is not the certificate's) is not served.
    write(dir.path(), &first.cert_pem, &second.key_pem);
    let (served, _) = fetch(addr, &ca.pem()).await;
    assert_eq!(served, second.der, "the last good pair");

    shutdown.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("the server to stop within 15 s of shutdown");
    ended.unwrap().unwrap();
}

#[tokio::test]
async fn a_directory_without_a_pair_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = serve_tls(
        listener,
        Router::new(),
        dir.path().to_owned(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("tls.crt"), "{error}");
    assert!(error.contains("kubernetes.io/tls"), "{error}");

    std::fs::write(dir.path().join(CERT_FILE), "not pem").unwrap();
    std::fs::write(dir.path().join(KEY_FILE), "not pem").unwrap();
    let error = ReloadingCert::load(dir.path(), CHECK_EVERY)
        .unwrap_err()
        .to_string();
    assert!(error.contains("holds no usable PEM certificate"), "{error}");
}
