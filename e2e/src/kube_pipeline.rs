//! The quickstart pipeline in Kubernetes mode: the Kubernetes API double
//! ([`crate::kube_api`]) with the CRDs applied by the real `kubectl`, `dray controller`
//! replicas competing for the Lease, and `dray serve --kubernetes` for the API and CLI —
//! all on the same registry and config repository as [`Pipeline`]. Users' writes go
//! through `kubectl` ([`KubePipeline::kubectl_apply`]); promotions through the `dray`
//! CLI, as in embedded mode.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::controller::{ControllerOptions, DrayController};
use crate::kube_api::KubeApi;
use crate::pipeline::{Pipeline, Services, text};
use crate::{Dray, DrayOptions, TestWorld, workspace_root};

/// Dray's ServiceAccount, as the chart names it.
pub const DRAY_SERVICE_ACCOUNT: (&str, &str) = ("dray", "dray");

/// The user the tests promote as (bound to the chart's `dray-project-admin`).
pub const RELEASE_MANAGER: &str = "release-manager";
/// Their Kubernetes token.
pub const RELEASE_MANAGER_TOKEN: &str = "release-manager-token-3f9a1c";

/// How the Kubernetes-mode pipeline starts.
#[derive(Clone, Debug, Default)]
pub struct KubeOptions {
    /// How many `dray controller` replicas.
    pub controllers: usize,
    /// The Lease duration (seconds; default 15).
    pub lease_duration: Option<u64>,
    /// Extra environment for the controllers (test hooks).
    pub controller_env: Vec<(String, String)>,
    /// Extra options of `dray serve --kubernetes`.
    pub serve: DrayOptions,
}

/// The quickstart's services, the API double, the controllers and the server.
pub struct KubePipeline {
    /// The embedded-mode fixture's parts: world, registry, git and `dray serve
    /// --kubernetes` as `q.dray` (so its CLI helpers work unchanged).
    pub q: Pipeline,
    /// The Kubernetes API double.
    pub api: KubeApi,
    /// A kubeconfig for a cluster admin (what a platform engineer's `kubectl` uses).
    pub admin: PathBuf,
    /// Dray's kubeconfig (its ServiceAccount's token).
    pub dray_kubeconfig: PathBuf,
    /// The controller replicas, in start order.
    pub controllers: Vec<DrayController>,
}

impl KubePipeline {
    /// Starts everything; the CRDs are applied, nothing else.
    pub async fn start(options: KubeOptions) -> Result<Self> {
        crate::kube_api::tls::install_crypto_provider();
        let api = KubeApi::start().await?;
        tokio::task::block_in_place(|| Self::start_on(api, options))
    }

    fn start_on(api: KubeApi, options: KubeOptions) -> Result<Self> {
        let world = TestWorld::new()?;
        let dir = world.unique_dir("kube")?;
        std::fs::create_dir_all(&dir)?;
        let admin = dir.join("admin.kubeconfig");
        api.write_kubeconfig(&admin, &api.admin_token())?;
        let dray_token = format!("dray-sa-{}", uuid::Uuid::new_v4().simple());
        api.add_service_account_token(&dray_token, DRAY_SERVICE_ACCOUNT.0, DRAY_SERVICE_ACCOUNT.1);
        let dray_kubeconfig = dir.join("dray.kubeconfig");
        api.write_kubeconfig(&dray_kubeconfig, &dray_token)?;
        let pipeline = KubeParts {
            api,
            admin,
            dray_kubeconfig,
        };
        // The install as a user makes it: the plain manifests rendered from the chart
        // (namespace, CRDs, ServiceAccount, RBAC, Services, Deployment, webhook), with
        // the webhook's CA filled in and its Service pointed at this `dray serve`.
        let webhook = WebhookTls::make(&dir)?;
        let deploy = workspace_root().join("deploy/kubernetes");
        for file in ["00-namespace.yaml", "10-crds.yaml"] {
            pipeline.kubectl_ok(&["apply", "-f", &deploy.join(file).display().to_string()])?;
        }
        let dray_yaml = std::fs::read_to_string(deploy.join("20-dray.yaml"))?;
        pipeline.apply_yaml(&webhook.fill_ca_bundle(&dray_yaml)?)?;
        let admission_port = crate::world::free_port()?;
        pipeline.api.set_service_endpoint(
            "dray",
            "dray-webhook",
            crate::world::loopback(admission_port),
        );
        pipeline.grant_release_manager()?;

        let services = Services::start(&world)?;
        let mut controllers = Vec::new();
        for i in 0..options.controllers.max(1) {
            let mut controller_options = ControllerOptions {
                kubeconfig: pipeline.dray_kubeconfig.clone(),
                identity: format!("replica-{i}"),
                lease_duration: options.lease_duration.unwrap_or(15),
                args: Vec::new(),
                env: options.controller_env.clone(),
            };
            controller_options.args.push("--log-format".into());
            controller_options.args.push("text".into());
            controllers.push(DrayController::start(&world, controller_options)?);
        }
        let mut serve = options.serve.clone();
        serve.args.extend([
            "--kubernetes".to_owned(),
            "--kubeconfig".to_owned(),
            pipeline.dray_kubeconfig.display().to_string(),
            "--admission-listen".to_owned(),
            crate::world::loopback(admission_port).to_string(),
            "--admission-tls-dir".to_owned(),
            webhook.dir.display().to_string(),
        ]);
        let mut dray = Dray::start(&world, serve)?;
        dray.set_token(RELEASE_MANAGER_TOKEN);
        let KubeParts {
            api,
            admin,
            dray_kubeconfig,
        } = pipeline;
        Ok(KubePipeline {
            q: Pipeline::from_parts(world, services, dray),
            api,
            admin,
            dray_kubeconfig,
            controllers,
        })
    }

    /// `kubectl --kubeconfig <admin> ARGS`.
    pub fn kubectl(&self, args: &[&str]) -> Result<Output> {
        run_kubectl(&self.api, &self.admin, args)
    }

    /// [`KubePipeline::kubectl`] that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        kubectl_ok(&self.api, &self.admin, args)
    }

    /// `kubectl apply -f` of `yaml`, localised to this world (as [`Pipeline::localise`]).
    pub fn kubectl_apply(&self, yaml: &str) -> Result<String> {
        let file = self
            .q
            .world
            .unique_dir("kubectl-apply")?
            .with_extension("yaml");
        std::fs::write(&file, self.q.localise(yaml))?;
        self.kubectl_ok(&["apply", "-f", &file.display().to_string()])
    }

    /// Applies the quickstart's Project, waits for the controller to make its namespace,
    /// then applies every other file of `examples/quickstart/project` (each through
    /// `edit`), as a user would with `kubectl apply -f examples/quickstart/project/`.
    pub fn apply_quickstart(&self, edit: impl Fn(&str) -> String) -> Result<()> {
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

    /// The replica that leads now, if one says so.
    pub fn leader(&self) -> Option<usize> {
        self.controllers
            .iter()
            .position(|c| c.phase().is_ok_and(|p| p == "leading"))
    }

    /// Waits (at most `timeout`) until some replica leads; its index.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader() {
                return Ok(leader);
            }
            if std::time::Instant::now() >= deadline {
                let logs: Vec<String> = self.controllers.iter().map(DrayController::log).collect();
                bail!(
                    "no controller replica led within {}s:\n{}",
                    timeout.as_secs(),
                    logs.join("\n----\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The double and kubeconfigs, before the services start.
struct KubeParts {
    api: KubeApi,
    admin: PathBuf,
    dray_kubeconfig: PathBuf,
}

impl KubeParts {
    fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        kubectl_ok(&self.api, &self.admin, args)
    }

    /// The release manager: user `release-manager` with the chart's `dray-project-admin`
    /// in every namespace.
    fn grant_release_manager(&self) -> Result<()> {
        self.api.add_token(
            RELEASE_MANAGER_TOKEN,
            RELEASE_MANAGER,
            &["release-managers"],
        );
        self.apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: release-manager}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dray-project-admin}}
subjects:
  - {{kind: User, name: {RELEASE_MANAGER}, apiGroup: rbac.authorization.k8s.io}}
"
        ))
    }

    fn apply_yaml(&self, yaml: &str) -> Result<()> {
        let file = tempfile::Builder::new().suffix(".yaml").tempfile()?;
        std::fs::write(file.path(), yaml)?;
        self.kubectl_ok(&["apply", "-f", &file.path().display().to_string()])?;
        Ok(())
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
        let ca = crate::kube_api::tls::CertAuthority::new("Dray webhook CA")?;
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

    /// The rendered manifests with the webhook's `caBundle` set (the plain manifests
    /// leave it to the installer, `deploy/kubernetes/README.md`).
    fn fill_ca_bundle(&self, yaml: &str) -> Result<String> {
        use base64::Engine;
        let bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let anchor = "    clientConfig:\n";
        anyhow::ensure!(
            yaml.contains(anchor),
            "the rendered webhook configuration has no clientConfig"
        );
        Ok(yaml.replace(anchor, &format!("{anchor}      caBundle: {bundle}\n")))
    }
}

fn run_kubectl(api: &KubeApi, kubeconfig: &std::path::Path, args: &[&str]) -> Result<Output> {
    api.kubectl(kubeconfig)
        .args(args)
        .output()
        .with_context(|| format!("cannot run kubectl {args:?}"))
}

fn kubectl_ok(api: &KubeApi, kubeconfig: &std::path::Path, args: &[&str]) -> Result<String> {
    let output = run_kubectl(api, kubeconfig, args)?;
    if !output.status.success() {
        bail!("kubectl {args:?} failed: {}", text(&output));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
