//! A real Kubernetes control plane for the tests: etcd, `kube-apiserver` and
//! `kube-controller-manager` of the release pinned in `e2e/tools/versions.env`, built from
//! their Go modules by `e2e/tools/build.sh` (cached by version), started on loopback in a
//! test's own directory and stopped on drop.
//!
//! The API server runs as controller-runtime's envtest starts it, plus what Dray needs:
//! RBAC authorization, client certificates from the cluster CA (the admin is in
//! `system:masters`), a static token file for the test's users, ServiceAccount tokens
//! through TokenRequest (`kubectl create token`), and an audit log of every request (who,
//! which verb, which object) for the tests that count requests. The controller-manager runs
//! the namespace, garbage-collector, ClusterRole-aggregation and ServiceAccount controllers.
//! No kubelet, scheduler or kube-proxy: no Pods run, Services have no endpoints, so an
//! admission webhook is reached through `clientConfig.url`.
//!
//! ```no_run
//! # fn example() -> anyhow::Result<()> {
//! use dray_e2e::control_plane::{ControlPlane, ControlPlaneOptions};
//! let world = dray_e2e::TestWorld::new()?;
//! let cluster = ControlPlane::start(&world, ControlPlaneOptions::default().user("ann", &["devs"]))?;
//! let out = cluster.kubectl(&cluster.admin_kubeconfig()).args(["get", "namespaces"]).output()?;
//! assert!(out.status.success());
//! # Ok(()) }
//! ```

mod audit;
mod pki;
mod proxy;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::process::{Service, tail};
use crate::world::{TestWorld, free_port, loopback};

pub use crate::tools::{KUBECTL_TIMEOUT, kubernetes_bin};
pub use audit::AuditRecord;
pub use pki::ADMIN_USER;
pub use proxy::ApiProxy;

/// How long the control plane may take to start (the API server's first start bootstraps
/// its RBAC roles and priority levels; on 2 busy cores that takes seconds).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How many log lines an error message quotes.
const TAIL_LINES: usize = 30;

/// A user of the static token file.
#[derive(Clone, Debug)]
pub struct TokenUser {
    /// The user name the API server authenticates.
    pub name: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// Their bearer token.
    pub token: String,
}

/// What a control plane starts with.
#[derive(Clone, Debug, Default)]
pub struct ControlPlaneOptions {
    users: Vec<TokenUser>,
    without_controller_manager: bool,
}

impl ControlPlaneOptions {
    /// Adds a user of the static token file (its token is made at random).
    pub fn user(mut self, name: &str, groups: &[&str]) -> Self {
        self.users.push(TokenUser {
            name: name.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            token: format!("{name}-{}", uuid::Uuid::new_v4().simple()),
        });
        self
    }

    /// Starts no controller-manager (nothing the test does needs one).
    pub fn without_controller_manager(mut self) -> Self {
        self.without_controller_manager = true;
        self
    }
}

/// A running control plane; every process is killed on drop.
#[derive(Debug)]
pub struct ControlPlane {
    world: TestWorld,
    dir: PathBuf,
    pki: pki::Pki,
    users: Vec<TokenUser>,
    etcd_port: u16,
    port: u16,
    etcd: Service,
    apiserver: Option<Service>,
    controller_manager: Option<Service>,
}

impl ControlPlane {
    /// Starts etcd, the API server and (unless told not to) the controller-manager, and
    /// waits until the API server is ready and its bootstrap roles exist.
    pub fn start(world: &TestWorld, options: ControlPlaneOptions) -> Result<Self> {
        let bin = kubernetes_bin()?;
        let dir = world.unique_dir("control-plane")?;
        let pki = pki::Pki::make(&dir.join("pki"))?;
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_log = dir.join("etcd.log");
        let mut etcd_cmd = Command::new(bin.join("etcd"));
        etcd_cmd
            .arg("--name=default")
            .arg(format!("--data-dir={}", dir.join("etcd").display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
            ))
            .arg(format!(
                "--initial-cluster=default=http://127.0.0.1:{peer_port}"
            ))
            // As envtest runs it: a test's cluster need not survive a power cut.
            .arg("--unsafe-no-fsync=true")
            .arg("--log-level=warn")
            .current_dir(&dir);
        let mut etcd = Service::spawn("etcd", &mut etcd_cmd, &etcd_log)?;
        etcd.wait_http(
            loopback(etcd_port),
            "/health",
            |status| status == 200,
            START_TIMEOUT,
        )?;

        let tokens = dir.join("tokens.csv");
        let mut lines = String::new();
        for (i, user) in options.users.iter().enumerate() {
            lines.push_str(&format!(
                "{},{},uid-{i},\"{}\"\n",
                user.token,
                user.name,
                user.groups.join(",")
            ));
        }
        std::fs::write(&tokens, lines)?;
        std::fs::write(dir.join("audit-policy.yaml"), audit::POLICY)?;

        let mut cluster = ControlPlane {
            world: world.clone(),
            dir,
            pki,
            users: options.users,
            etcd_port,
            port: free_port()?,
            etcd,
            apiserver: None,
            controller_manager: None,
        };
        cluster.start_apiserver()?;
        if !options.without_controller_manager {
            cluster.start_controller_manager()?;
        }
        Ok(cluster)
    }

    fn start_apiserver(&mut self) -> Result<()> {
        let bin = kubernetes_bin()?;
        let dir = &self.dir;
        let port = self.port;
        let mut cmd = Command::new(bin.join("kube-apiserver"));
        cmd.arg(format!(
            "--etcd-servers=http://127.0.0.1:{}",
            self.etcd_port
        ))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        // No endpoints for the `kubernetes` Service: the reconciler refuses loopback
        // addresses, and nothing in the tests runs inside the cluster.
        .arg("--endpoint-reconciler-type=none")
        .arg(format!("--secure-port={port}"))
        .arg(format!(
            "--tls-cert-file={}",
            self.pki.serving_cert.display()
        ))
        .arg(format!(
            "--tls-private-key-file={}",
            self.pki.serving_key.display()
        ))
        .arg(format!("--client-ca-file={}", self.pki.ca_file.display()))
        .arg(format!(
            "--token-auth-file={}",
            dir.join("tokens.csv").display()
        ))
        .arg("--authorization-mode=RBAC")
        .arg("--service-cluster-ip-range=10.0.0.0/24")
        .arg("--allow-privileged=true")
        .arg(format!("--service-account-issuer=https://127.0.0.1:{port}"))
        .arg(format!(
            "--service-account-key-file={}",
            self.pki.sa_pub.display()
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            self.pki.sa_key.display()
        ))
        // TokenRequest makes ServiceAccount tokens; no token controller needs to run
        // before a Pod could (and no Pod runs).
        .arg("--disable-admission-plugins=ServiceAccount")
        .arg(format!(
            "--audit-policy-file={}",
            dir.join("audit-policy.yaml").display()
        ))
        .arg(format!("--audit-log-path={}", self.audit_log().display()))
        .arg("--audit-log-format=json")
        .arg("--audit-log-mode=blocking")
        .arg(format!(
            "--cert-dir={}",
            dir.join("apiserver-certs").display()
        ))
        .current_dir(dir);
        let log = dir.join("kube-apiserver.log");
        let service = Service::spawn("kube-apiserver", &mut cmd, &log)?;
        self.apiserver = Some(service);
        self.wait_ready()
    }

    /// Waits until `/readyz` answers 200 to the admin and the bootstrap ClusterRoles
    /// (`cluster-admin`, `admin`, `view`) exist: what every test's first write needs.
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let admin = self.admin_kubeconfig();
        let mut last = String::from("no answer yet");
        loop {
            if let Some(service) = self.apiserver.as_mut()
                && let Some(status) = service.exit_status()
            {
                bail!(
                    "kube-apiserver exited ({status}) while starting; log tail:\n{}",
                    tail(&service.log(), TAIL_LINES)
                );
            }
            if std::net::TcpStream::connect(self.addr()).is_ok() {
                let out = self
                    .kubectl(&admin)
                    .args(["get", "--raw", "/readyz"])
                    .output()?;
                if out.status.success() {
                    let roles = self
                        .kubectl(&admin)
                        .args(["get", "clusterrole", "cluster-admin", "admin", "view"])
                        .args(["-o", "name"])
                        .output()?;
                    if roles.status.success() {
                        return Ok(());
                    }
                    last = String::from_utf8_lossy(&roles.stderr).into_owned();
                } else {
                    last = String::from_utf8_lossy(&out.stderr).into_owned();
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "kube-apiserver was not ready after {START_TIMEOUT:?} (last: {last}); log tail:\n{}",
                    tail(&self.apiserver_log(), TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn start_controller_manager(&mut self) -> Result<()> {
        let bin = kubernetes_bin()?;
        let kubeconfig = self.dir.join("controller-manager.kubeconfig");
        std::fs::write(
            &kubeconfig,
            self.kubeconfig_with_user(&client_cert_user(&self.pki.controller_manager)),
        )?;
        let mut cmd = Command::new(bin.join("kube-controller-manager"));
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(
                "--controllers=namespace-controller,garbage-collector-controller,\
                 clusterrole-aggregation-controller,serviceaccount-token-controller,\
                 serviceaccount-controller",
            )
            .arg(format!(
                "--service-account-private-key-file={}",
                self.pki.sa_key.display()
            ))
            .arg(format!("--root-ca-file={}", self.pki.ca_file.display()))
            .arg("--leader-elect=false")
            // Each controller acts as its own ServiceAccount with its bootstrap role, as in
            // a real cluster (the aggregation controller may patch ClusterRoles).
            .arg("--use-service-account-credentials=true")
            .arg("--authentication-skip-lookup=true")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port()?))
            .arg(format!(
                "--cert-dir={}",
                self.dir.join("cm-certs").display()
            ))
            .current_dir(&self.dir);
        let log = self.dir.join("kube-controller-manager.log");
        let service = Service::spawn("kube-controller-manager", &mut cmd, &log)?;
        self.controller_manager = Some(service);
        // Its ServiceAccount controller makes `default/default` once its informers have
        // synced: the sign that it works from the API server's watches.
        let deadline = Instant::now() + START_TIMEOUT;
        let admin = self.admin_kubeconfig();
        loop {
            if let Some(service) = self.controller_manager.as_mut()
                && let Some(status) = service.exit_status()
            {
                bail!(
                    "kube-controller-manager exited ({status}); log tail:\n{}",
                    tail(&service.log(), TAIL_LINES)
                );
            }
            let out = self
                .kubectl(&admin)
                .args([
                    "get",
                    "serviceaccount",
                    "default",
                    "-n",
                    "default",
                    "-o",
                    "name",
                ])
                .output()?;
            if out.status.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "kube-controller-manager made no ServiceAccount `default/default` within {START_TIMEOUT:?}; log tail:\n{}",
                    tail(&self.controller_manager_log(), TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops the API server (SIGTERM, then SIGKILL), leaving etcd and everything else.
    pub fn stop_apiserver(&mut self) -> Result<()> {
        if let Some(mut service) = self.apiserver.take() {
            service.terminate(Duration::from_secs(20))?;
        }
        Ok(())
    }

    /// Starts the API server again on the same port and data, and waits until it is ready.
    pub fn restart_apiserver(&mut self) -> Result<()> {
        self.stop_apiserver()?;
        self.start_apiserver()
    }

    /// The API server's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        loopback(self.port)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr())
    }

    /// The cluster CA, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The bearer token of a user given in [`ControlPlaneOptions::user`].
    pub fn token(&self, user: &str) -> Result<&str> {
        self.users
            .iter()
            .find(|u| u.name == user)
            .map(|u| u.token.as_str())
            .with_context(|| {
                format!("no user `{user}` in this control plane's token file; add it with ControlPlaneOptions::user")
            })
    }

    /// A kubeconfig YAML for the API server at `server` with `user` (a kubeconfig `user:`
    /// body, e.g. `token: …`), the CA inline, context namespace `default`.
    fn kubeconfig_for(&self, server: &str, user: &str) -> String {
        let ca = BASE64.encode(&self.pki.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: e2e-user\n  user:\n{user}contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e-user\n    namespace: default\ncurrent-context: e2e\n"
        )
    }

    fn kubeconfig_with_user(&self, user: &str) -> String {
        self.kubeconfig_for(&self.url(), user)
    }

    /// The kubeconfig YAML for a bearer `token`.
    pub fn kubeconfig(&self, token: &str) -> String {
        self.kubeconfig_with_user(&format!("    token: {token}\n"))
    }

    /// The kubeconfig YAML for a bearer `token` through `proxy` instead of straight to the
    /// API server (the serving certificate names 127.0.0.1, so it verifies the same).
    pub fn kubeconfig_through(&self, proxy: &ApiProxy, token: &str) -> String {
        self.kubeconfig_for(
            &format!("https://{}", proxy.addr()),
            &format!("    token: {token}\n"),
        )
    }

    /// Writes [`ControlPlane::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path, token: &str) -> Result<()> {
        std::fs::write(path, self.kubeconfig(token))
            .with_context(|| format!("Failed to write the kubeconfig `{}`", path.display()))
    }

    /// A kubeconfig file for the cluster admin (a client certificate in `system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        let path = self.dir.join("admin.kubeconfig");
        if !path.exists() {
            let _ = std::fs::write(
                &path,
                self.kubeconfig_with_user(&client_cert_user(&self.pki.admin)),
            );
        }
        path
    }

    /// A proxy in front of the API server (see [`ApiProxy`]).
    pub fn proxy(&self) -> Result<ApiProxy> {
        ApiProxy::start(self.addr())
    }

    /// `kubectl --kubeconfig PATH` of the pinned release, with this cluster's own discovery
    /// cache and a `--request-timeout`, so a hung request fails the test instead of
    /// stalling it (a later `--request-timeout` overrides it).
    pub fn kubectl(&self, kubeconfig: &Path) -> Command {
        crate::tools::kubectl(kubeconfig, &self.dir.join("kube-cache"), &self.world.home())
    }

    /// `kubectl` as the admin that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let out = self
            .kubectl(&self.admin_kubeconfig())
            .args(args)
            .output()
            .with_context(|| format!("cannot run kubectl {args:?}"))?;
        if !out.status.success() {
            bail!(
                "kubectl {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl apply -f` of `yaml` as the admin.
    pub fn apply(&self, yaml: &str) -> Result<String> {
        let file = self.world.unique_dir("apply")?.join("objects.yaml");
        std::fs::write(&file, yaml)?;
        self.kubectl_ok(&["apply", "-f", &file.display().to_string()])
    }

    /// A token of ServiceAccount `namespace/name` through TokenRequest (the account must
    /// exist), valid for a day.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> Result<String> {
        let token =
            self.kubectl_ok(&["create", "token", name, "-n", namespace, "--duration=24h"])?;
        Ok(token.trim().to_owned())
    }

    /// A `kube::Client` for `token`, built the way `kube` reads a kubeconfig (CA verified).
    pub async fn client(&self, token: &str) -> Result<kube::Client> {
        client_from_yaml(&self.kubeconfig(token)).await
    }

    /// A `kube::Client` for the admin.
    pub async fn admin_client(&self) -> Result<kube::Client> {
        client_from_yaml(&self.kubeconfig_with_user(&client_cert_user(&self.pki.admin))).await
    }

    /// Every request the API server has audited so far, oldest first.
    pub fn requests(&self) -> Result<Vec<AuditRecord>> {
        audit::read(&self.audit_log())
    }

    fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// The API server's log.
    pub fn apiserver_log(&self) -> String {
        crate::process::read_lossy(&self.dir.join("kube-apiserver.log"))
    }

    /// The controller-manager's log.
    pub fn controller_manager_log(&self) -> String {
        crate::process::read_lossy(&self.dir.join("kube-controller-manager.log"))
    }

    /// Compacts etcd's history up to its newest revision: every watch or list from an older
    /// `resourceVersion` is answered 410 Gone from now on. Returns that revision.
    pub fn compact_etcd(&self) -> Result<u64> {
        let out = Command::new(kubernetes_bin()?.join("etcd-compact"))
            .arg(format!("http://127.0.0.1:{}", self.etcd_port))
            .output()
            .context("cannot run etcd-compact")?;
        if !out.status.success() {
            bail!(
                "etcd-compact failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .context("etcd-compact printed no revision")
    }

    /// Whether etcd still runs (a test that restarts the API server keeps it).
    pub fn etcd_running(&mut self) -> bool {
        self.etcd.is_running()
    }
}

/// A kubeconfig `user:` body with a client certificate and key inline.
fn client_cert_user(cert: &crate::tls::ServingCert) -> String {
    format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        BASE64.encode(&cert.cert_pem),
        BASE64.encode(&cert.key_pem)
    )
}

async fn client_from_yaml(yaml: &str) -> Result<kube::Client> {
    crate::tls::install_crypto_provider();
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(yaml).context("Failed to read a test kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("Failed to build a kube Config from a test kubeconfig")?;
    kube::Client::try_from(config).context("Failed to build a kube Client")
}
