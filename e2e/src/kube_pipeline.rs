//! The quickstart pipeline in Kubernetes mode, on a real control plane
//! ([`crate::control_plane`]): Dray installed from the plain manifests rendered from the chart
//! (`deploy/kubernetes/`, applied with the pinned `kubectl`), `dray controller` replicas
//! competing for the Lease as the chart's ServiceAccount (a TokenRequest token), and
//! `dray serve --kubernetes` for the API, the CLI and the admission webhook, which the API
//! server calls over HTTPS — all on the same registry and config repository as
//! [`Pipeline`]. Users' writes go through `kubectl` ([`KubePipeline::kubectl_apply`]);
//! promotions through the `dray` CLI, as in embedded mode.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::control_plane::{ApiProxy, AuditRecord, ControlPlane, ControlPlaneOptions};
use crate::controller::{ControllerOptions, DrayController};
use crate::pipeline::{Pipeline, Services, text};
use crate::tls::CertAuthority;
use crate::{Dray, DrayOptions, TestWorld, workspace_root};

/// Dray's ServiceAccount, as the chart names it.
pub const DRAY_SERVICE_ACCOUNT: (&str, &str) = ("dray", "dray");

/// The user Dray's ServiceAccount authenticates as.
pub const DRAY_USER: &str = "system:serviceaccount:dray:dray";

/// The user the tests promote as (bound to the chart's `dray-project-admin`).
pub const RELEASE_MANAGER: &str = "release-manager";

/// A user the API server knows who has no binding until a test gives one.
pub const DEVELOPER: &str = "ann";

/// How the Kubernetes-mode pipeline starts.
#[derive(Clone, Debug, Default)]
pub struct KubeOptions {
    /// How many `dray controller` replicas.
    pub controllers: usize,
    /// The Lease duration (seconds; default 15).
    pub lease_duration: Option<u64>,
    /// Extra environment for the controllers (test hooks).
    pub controller_env: Vec<(String, String)>,
    /// Each controller reaches the API server through its own [`ApiProxy`], which a test
    /// can cut to partition that replica.
    pub proxied_controllers: bool,
    /// Extra options of `dray serve --kubernetes`.
    pub serve: DrayOptions,
}

/// The quickstart's services, the control plane, the controllers and the server.
pub struct KubePipeline {
    /// The embedded-mode fixture's parts: world, registry, git and `dray serve
    /// --kubernetes` as `q.dray` (so its CLI helpers work unchanged).
    pub q: Pipeline,
    /// The control plane.
    pub cluster: ControlPlane,
    /// A kubeconfig for a cluster admin (what a platform engineer's `kubectl` uses).
    pub admin: PathBuf,
    /// Dray's kubeconfig (its ServiceAccount's token).
    pub dray_kubeconfig: PathBuf,
    /// The controller replicas, in start order.
    pub controllers: Vec<DrayController>,
    /// Each controller's proxy, with [`KubeOptions::proxied_controllers`].
    pub proxies: Vec<ApiProxy>,
}

impl KubePipeline {
    /// Starts everything; Dray is installed, no project exists.
    pub async fn start(options: KubeOptions) -> Result<Self> {
        crate::tls::install_crypto_provider();
        tokio::task::block_in_place(|| Self::start_blocking(options))
    }

    fn start_blocking(options: KubeOptions) -> Result<Self> {
        let world = TestWorld::new()?;
        let cluster = ControlPlane::start(
            &world,
            ControlPlaneOptions::default()
                .user(RELEASE_MANAGER, &["release-managers"])
                .user(DEVELOPER, &["developers"]),
        )?;
        for user in [RELEASE_MANAGER, DEVELOPER] {
            let what = format!("{user}'s Kubernetes token");
            crate::secrets::remember(&what, cluster.token(user)?);
        }
        let dir = world.unique_dir("kube")?;
        let admin = cluster.admin_kubeconfig();

        // The install as a user makes it: the plain manifests rendered from the chart
        // (namespace, CRDs, ServiceAccount, RBAC, Services, Deployment, webhook), with the
        // webhook's CA filled in and its address set to this `dray serve` (no Pod runs,
        // so no Service has endpoints to dial).
        let admission_port = crate::world::free_port()?;
        let webhook = WebhookTls::make(&dir)?;
        let deploy = workspace_root().join("deploy/kubernetes");
        for file in ["00-namespace.yaml", "10-crds.yaml"] {
            cluster.kubectl_ok(&["apply", "-f", &deploy.join(file).display().to_string()])?;
        }
        cluster.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ])?;
        let dray_yaml = std::fs::read_to_string(deploy.join("20-dray.yaml"))?;
        cluster.apply(&webhook.configure(&dray_yaml, admission_port)?)?;
        cluster.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: release-manager}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dray-project-admin}}
subjects:
  - {{kind: User, name: {RELEASE_MANAGER}, apiGroup: rbac.authorization.k8s.io}}
"
        ))?;
        let dray_token =
            cluster.service_account_token(DRAY_SERVICE_ACCOUNT.0, DRAY_SERVICE_ACCOUNT.1)?;
        crate::secrets::remember("Dray's ServiceAccount token", &dray_token);
        let dray_kubeconfig = dir.join("dray.kubeconfig");
        cluster.write_kubeconfig(&dray_kubeconfig, &dray_token)?;

        let services = Services::start(&world)?;
        let mut controllers = Vec::new();
        let mut proxies = Vec::new();
        for i in 0..options.controllers.max(1) {
            let kubeconfig = if options.proxied_controllers {
                let proxy = cluster.proxy()?;
                let path = dir.join(format!("replica-{i}.kubeconfig"));
                std::fs::write(&path, cluster.kubeconfig_through(&proxy, &dray_token))?;
                proxies.push(proxy);
                path
            } else {
                dray_kubeconfig.clone()
            };
            let controller_options = ControllerOptions {
                kubeconfig,
                identity: format!("replica-{i}"),
                lease_duration: options.lease_duration.unwrap_or(15),
                args: vec!["--log-format".into(), "text".into()],
                env: options.controller_env.clone(),
            };
            controllers.push(DrayController::start(&world, controller_options)?);
        }
        let mut serve = options.serve.clone();
        serve.args.extend([
            "--kubernetes".to_owned(),
            "--kubeconfig".to_owned(),
            dray_kubeconfig.display().to_string(),
            "--admission-listen".to_owned(),
            crate::world::loopback(admission_port).to_string(),
            "--admission-tls-dir".to_owned(),
            webhook.dir.display().to_string(),
        ]);
        let mut dray = Dray::start(&world, serve)?;
        dray.set_token(cluster.token(RELEASE_MANAGER)?);
        Ok(KubePipeline {
            q: Pipeline::from_parts(world, services, dray),
            cluster,
            admin,
            dray_kubeconfig,
            controllers,
            proxies,
        })
    }

    /// `kubectl --kubeconfig <admin> ARGS`.
    pub fn kubectl(&self, args: &[&str]) -> Result<Output> {
        self.cluster
            .kubectl(&self.admin)
            .args(args)
            .output()
            .with_context(|| format!("cannot run kubectl {args:?}"))
    }

    /// [`KubePipeline::kubectl`] that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let output = self.kubectl(args)?;
        if !output.status.success() {
            bail!("kubectl {args:?} failed: {}", text(&output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json`, or `None` when there is no such object.
    pub fn object(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>> {
        let output = self.kubectl(&["get", kind, name, "-n", namespace, "-o", "json"])?;
        if output.status.success() {
            return Ok(Some(serde_json::from_slice(&output.stdout)?));
        }
        let said = text(&output);
        if said.contains("NotFound") || said.contains("not found") {
            return Ok(None);
        }
        bail!("kubectl get {kind} {name} -n {namespace} failed: {said}")
    }

    /// `kubectl apply -f` of `yaml`, localised to this world (as [`Pipeline::localise`]).
    pub fn kubectl_apply(&self, yaml: &str) -> Result<String> {
        self.cluster.apply(&self.q.localise(yaml))
    }

    /// Applies the quickstart's Project, waits for the controller to make its namespace,
    /// then applies every other file of `examples/quickstart/project` (each through
    /// `edit`), as a user would with `kubectl apply -f examples/quickstart/project/`.
    pub fn apply_quickstart(&self, edit: impl Fn(&str) -> String) -> Result<()> {
        // The `ci` receiver's token, applied with kubectl as a Credential: no answer, page or
        // log of Dray's may show it (kubectl keeps it in an annotation, too).
        crate::secrets::remember("the quickstart's webhook token", "quickstart-ci-token");
        self.kubectl_apply(&Pipeline::quickstart_file("project.yaml")?)?;
        self.q
            .wait_until("the controller to make namespace `demo`", || {
                let output = self.kubectl(&["get", "namespace", "demo", "-o", "json"])?;
                Ok(output.status.success().then_some(()))
            })?;
        let dir = workspace_root().join("examples/quickstart/project");
        let mut names: Vec<_> = std::fs::read_dir(&dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        names.sort();
        let mut yaml = Vec::new();
        for path in names {
            if path.file_name().is_some_and(|n| n == "project.yaml") {
                continue;
            }
            yaml.push(edit(&std::fs::read_to_string(&path)?));
        }
        self.kubectl_apply(&yaml.join("\n---\n"))?;
        Ok(())
    }

    /// Every request Dray's ServiceAccount made, from the API server's audit log.
    pub fn dray_requests(&self) -> Result<Vec<AuditRecord>> {
        Ok(self
            .cluster
            .requests()?
            .into_iter()
            .filter(|r| r.user == DRAY_USER)
            .collect())
    }

    /// The replica that leads now, if one says so.
    pub fn leader(&self) -> Option<usize> {
        self.controllers
            .iter()
            .position(|c| c.phase().is_ok_and(|p| p == "leading"))
    }

    /// Waits (at most `timeout`) until some replica leads; its index.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        crate::wait_until(
            "a controller replica to lead",
            timeout,
            || Ok(self.leader()),
        )
        .map_err(|e| {
            let logs: Vec<String> = self.controllers.iter().map(DrayController::log).collect();
            e.context(logs.join("\n----\n"))
        })
    }
}

/// The admission webhook's serving certificate, as a `kubernetes.io/tls` Secret mounts it
/// (`tls.crt`, `tls.key`), and its CA for the webhook configuration's `caBundle`.
struct WebhookTls {
    dir: PathBuf,
    ca_pem: String,
}

impl WebhookTls {
    fn make(parent: &std::path::Path) -> Result<Self> {
        let ca = CertAuthority::new("Dray webhook CA")?;
        let cert = ca.issue(&[
            "dray-webhook.dray.svc",
            "dray-webhook.dray.svc.cluster.local",
        ])?;
        let dir = parent.join("admission-tls");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
        std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
        Ok(WebhookTls {
            dir,
            ca_pem: ca.ca_pem().to_owned(),
        })
    }

    /// The rendered manifests with the webhook's `caBundle` set (the plain manifests leave
    /// it to the installer, `deploy/kubernetes/README.md`) and its `service` replaced by the
    /// `url` of the `dray serve` on `port` (the API server dials a Service's ClusterIP,
    /// which nothing serves here; the chart's `service` form is checked by rendering).
    fn configure(&self, yaml: &str, port: u16) -> Result<String> {
        let service = "    clientConfig:
      service:
        name: dray-webhook
        namespace: dray
        path: /admission/validate
        port: 443
";
        anyhow::ensure!(
            yaml.contains(service),
            "the rendered webhook configuration has no clientConfig.service for dray-webhook"
        );
        let bundle = BASE64.encode(&self.ca_pem);
        Ok(yaml.replace(
            service,
            &format!(
                "    clientConfig:\n      url: https://127.0.0.1:{port}/admission/validate\n      caBundle: {bundle}\n"
            ),
        ))
    }
}
