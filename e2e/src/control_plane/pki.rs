//! The control plane's certificates and keys, made fresh for each cluster and written as
//! the files the programs read: the cluster CA (it signs the API server's serving
//! certificate and every client certificate, and is the `--client-ca-file`), the admin's
//! and the controller-manager's client certificates, and the ServiceAccount token signing
//! key pair. Knows nothing about processes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::tls::{CertAuthority, ServingCert};

/// The admin's user name (in `system:masters`, which RBAC lets do anything).
pub const ADMIN_USER: &str = "dray-e2e-admin";

/// The files the control plane's programs are given.
#[derive(Debug)]
pub(super) struct Pki {
    /// The cluster CA, PEM (also what kubeconfigs trust).
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The admin's client certificate (PEM, inline in its kubeconfig).
    pub admin: ServingCert,
    /// The controller-manager's client certificate (`system:kube-controller-manager`).
    pub controller_manager: ServingCert,
    /// The ServiceAccount token signing key (PKCS#8) and its public key.
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

impl Pki {
    /// Makes every certificate and key and writes them under `dir`.
    pub(super) fn make(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let ca = CertAuthority::new("dray-e2e-cluster-ca")?;
        // What in-cluster clients would use besides the loopback address the tests use.
        let serving = ca.issue(&[
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ])?;
        let admin = ca.issue_client(ADMIN_USER, Some("system:masters"))?;
        let controller_manager = ca.issue_client("system:kube-controller-manager", None)?;
        let sa = rcgen::KeyPair::generate().context("Failed to generate the ServiceAccount key")?;

        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("Failed to write `{}`", path.display()))?;
            Ok(path)
        };
        Ok(Pki {
            ca_file: write("ca.crt", ca.ca_pem())?,
            serving_cert: write("apiserver.crt", &serving.cert_pem)?,
            serving_key: write("apiserver.key", &serving.key_pem)?,
            sa_key: write("sa.key", &sa.serialize_pem())?,
            sa_pub: write("sa.pub", &sa.public_key_pem())?,
            ca_pem: ca.ca_pem().to_owned(),
            admin,
            controller_manager,
        })
    }
}
