//! A faithful in-memory Kubernetes API server for the e2e suite (no real kube-apiserver
//! can run here), proved against the real `kubectl` 1.32 and the `kube` crate's Client,
//! runtime watcher and kube-lease-manager (`e2e/tests/kube_api.rs`).
//!
//! HTTPS on 127.0.0.1 with a CA made at start; bearer tokens; discovery (aggregated v2 and
//! plain); OpenAPI v3; built-in kinds stored generically and CRDs (structural schema
//! validation and pruning, status subresource, printer columns as Tables); get, list,
//! create, update, patch (merge, JSON, strategic, server-side apply), delete with
//! finalizers, dryRun; watches with bookmarks, compaction (410) and broken streams; the
//! RBAC authorizer, TokenReview, SubjectAccessReview; validating admission webhooks.
//!
//! Start one with [`KubeApi::start`]; modules, one job each: [`store`] (objects, revisions,
//! fan-out), [`resources`] (served kinds), [`routes`] (auth, paths, RBAC), [`verbs`],
//! [`objects`] (metadata rules), [`watch`], [`schema`], [`patch`], [`selector`],
//! [`discovery`], [`openapi`], [`table`], [`rbac`], [`reviews`], [`admission`], [`tls`],
//! [`status`] (error shapes). Test tooling only, never shipped.
//!
//! Behaviour worth knowing when testing against it (each as the real server does it):
//! a status subresource drops `.status` on create and ignores it on main-resource writes;
//! CRD `default`s are applied (also inside list items, so `kubectl apply` of a Stage says
//! "configured" the second time while writing nothing); unknown fields are pruned (a
//! `Warning` header, or 400 under `fieldValidation=Strict`, kubectl's `--validate=strict`);
//! validating webhooks are called in parallel, a denial without a code is a 400; RBAC
//! knows `system:masters` and the stored RBAC objects only (no bootstrap roles besides
//! discovery and SelfSubjectAccessReview for every authenticated user).
//!
//! A webhook served by a test or by `dray serve --kubernetes`: make a CA with
//! [`tls::CertAuthority::new`], [`tls::CertAuthority::issue`] a certificate for
//! `NAME.NAMESPACE.svc` (PEM in [`tls::ServingCert`]), put the CA's PEM, base64, in the
//! configuration's `caBundle`, and point `clientConfig.service` at the server with
//! [`KubeApi::set_service_endpoint`].
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use dray_e2e::kube_api::KubeApi;
//! let api = KubeApi::start().await?;
//! let dir = tempfile::tempdir()?;
//! let kubeconfig = dir.path().join("kubeconfig");
//! api.write_kubeconfig(&kubeconfig, &api.admin_token())?;
//! let status = api.kubectl(&kubeconfig).args(["get", "namespaces"]).status()?;
//! assert!(status.success());
//! let client = api.client(&api.admin_token()).await?;
//! # let _ = client; Ok(()) }
//! ```

mod admission;
mod discovery;
mod gc;
mod managed;
mod objects;
mod openapi;
mod paging;
mod patch;
mod protobuf;
mod rbac;
mod resources;
mod reviews;
mod routes;
mod schema;
mod selector;
mod state;
mod status;
mod store;
mod table;
pub use crate::tls;
mod verbs;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine;
use serde_json::{Value, json};

pub use rbac::UserInfo;
pub use state::RequestRecord;

use state::Shared;
use store::ObjKey;

/// What a fresh cluster has: the `default`, `kube-system` and `kube-public` namespaces,
/// and the bootstrap ClusterRoles `cluster-admin` (bound to `system:masters`) and
/// `system:auth-delegator` (create TokenReviews and SubjectAccessReviews).
fn seed(inner: &mut state::Inner) -> Result<()> {
    let rbac = "rbac.authorization.k8s.io";
    let objects = [
        ("", "namespaces", json!({"metadata": {"name": "default"}})),
        (
            "",
            "namespaces",
            json!({"metadata": {"name": "kube-system"}}),
        ),
        (
            "",
            "namespaces",
            json!({"metadata": {"name": "kube-public"}}),
        ),
        (
            rbac,
            "clusterroles",
            json!({
                "metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
            }),
        ),
        (
            rbac,
            "clusterroles",
            json!({
                "metadata": {"name": "system:auth-delegator", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "rules": [
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
                ],
            }),
        ),
        (
            rbac,
            "clusterrolebindings",
            json!({
                "metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": rbac, "kind": "Group", "name": "system:masters"}],
            }),
        ),
    ];
    for (group, plural, mut object) in objects {
        let ty = inner
            .types
            .iter()
            .find(|ty| ty.group == group && ty.plural == plural)
            .cloned()
            .context("the seeded kinds are built-ins")?;
        object["apiVersion"] = json!(ty.api_version());
        object["kind"] = json!(ty.kind);
        objects::prepare_create(&ty, &mut object);
        let key = ObjKey {
            group: group.into(),
            plural: plural.into(),
            namespace: String::new(),
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
        };
        inner.store.put(key, object);
    }
    Ok(())
}

/// How long one kubectl request may take ([`KubeApi::kubectl`] passes `--request-timeout`).
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// The real kubectl on the machine image.
pub const KUBECTL: &str = "kubectl";

/// How the double is started.
#[derive(Debug, Clone)]
pub struct KubeApiOptions {
    /// How often open watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
}

impl Default for KubeApiOptions {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(1),
        }
    }
}

/// A running API-server double; stopped on drop.
#[derive(Debug)]
pub struct KubeApi {
    shared: Arc<Shared>,
    server: tls::TlsServer,
    ca_pem: String,
    admin_token: String,
    dir: tempfile::TempDir,
}

impl KubeApi {
    /// Starts on `https://127.0.0.1:<free port>` with default options.
    pub async fn start() -> Result<KubeApi> {
        Self::start_with(KubeApiOptions::default()).await
    }

    /// Starts with `options`.
    pub async fn start_with(options: KubeApiOptions) -> Result<KubeApi> {
        tls::install_crypto_provider();
        let ca = tls::CertAuthority::new("dray-kube-api-double-ca")?;
        let cert = ca.issue(&["kubernetes", "kubernetes.default", "kubernetes.default.svc"])?;
        let shared = Arc::new(Shared::new());
        let admin_token = format!("admin-{}", uuid::Uuid::new_v4().simple());
        {
            let mut inner = shared.lock();
            inner.tokens.insert(
                admin_token.clone(),
                UserInfo {
                    username: "kubernetes-admin".into(),
                    uid: uuid::Uuid::new_v4().to_string(),
                    groups: vec!["system:masters".into(), "system:authenticated".into()],
                },
            );
            seed(&mut inner)?;
        }
        let ticker = watch::bookmark_ticker(shared.clone(), options.bookmark_interval);
        let server = tls::TlsServer::spawn(
            "kube-api-double",
            routes::router(shared.clone()),
            cert,
            Some(Box::pin(ticker)),
        )?;
        if let Ok(mut address) = shared.server_address.lock() {
            *address = server.addr().to_string();
        }
        Ok(KubeApi {
            shared,
            server,
            ca_pem: ca.ca_pem().to_owned(),
            admin_token,
            dir: tempfile::tempdir().context("Failed to make the kube API double's directory")?,
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The CA that signed the serving certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// Registers a bearer token for `user` in `groups` (plus `system:authenticated`).
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        self.shared.lock().tokens.insert(
            token.to_owned(),
            UserInfo {
                username: user.to_owned(),
                uid: uuid::Uuid::new_v4().to_string(),
                groups,
            },
        );
    }

    /// Registers a ServiceAccount token: `system:serviceaccount:NS:NAME` in
    /// `system:serviceaccounts`, `system:serviceaccounts:NS`, `system:authenticated`.
    pub fn add_service_account_token(&self, token: &str, namespace: &str, name: &str) {
        let groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_owned(),
        ];
        self.shared.lock().tokens.insert(
            token.to_owned(),
            UserInfo {
                username: format!("system:serviceaccount:{namespace}:{name}"),
                uid: uuid::Uuid::new_v4().to_string(),
                groups,
            },
        );
    }

    /// A token in `system:masters` (allowed everything).
    pub fn admin_token(&self) -> String {
        self.admin_token.clone()
    }

    /// The kubeconfig YAML for `token` (CA data inline, context namespace `default`).
    pub fn kubeconfig(&self, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dray-double\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: dray-user\n  user:\n    token: {token}\ncontexts:\n- name: dray-double\n  context:\n    cluster: dray-double\n    user: dray-user\n    namespace: default\ncurrent-context: dray-double\n",
            self.url()
        )
    }

    /// Writes [`KubeApi::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path, token: &str) -> Result<()> {
        std::fs::write(path, self.kubeconfig(token))
            .with_context(|| format!("Failed to write the kubeconfig `{}`", path.display()))
    }

    /// `kubectl --kubeconfig PATH` with a discovery cache of this double's own and
    /// `--request-timeout` [`KUBECTL_TIMEOUT`] (a later `--request-timeout` overrides it).
    pub fn kubectl(&self, kubeconfig: &Path) -> std::process::Command {
        let mut command = std::process::Command::new(KUBECTL);
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache_dir())
            // Every request kubectl makes ends: a hung double fails the test, never stalls it.
            .arg(format!("--request-timeout={}s", KUBECTL_TIMEOUT.as_secs()))
            .env_remove("KUBECONFIG");
        command
    }

    fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("kube-cache")
    }

    /// A `kube::Client` for `token`, built the way `kube` reads a kubeconfig (CA verified).
    pub async fn client(&self, token: &str) -> Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig(token))
            .context("Failed to read the double's kubeconfig")?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .context("Failed to build a kube Config from the double's kubeconfig")?;
        kube::Client::try_from(config).context("Failed to build a kube Client")
    }

    /// Forgets the history up to now: watches and exact lists from older revisions get 410.
    pub fn compact(&self) {
        self.shared.lock().store.compact();
    }

    /// Closes every open watch stream (clients must resume from their last revision).
    pub fn break_watches(&self) {
        self.shared.lock().store.break_watches();
    }

    /// Where `clientConfig.service` `namespace/name` of a webhook is served.
    pub fn set_service_endpoint(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.shared
            .lock()
            .services
            .insert((namespace.to_owned(), name.to_owned()), addr);
    }

    /// Every admission call made: `{"webhook": NAME, "review": AdmissionReview request}`.
    pub fn admission_calls(&self) -> Vec<Value> {
        self.shared.lock().admission_calls.clone()
    }

    /// Every request served: (verb, path, user).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// The stored object at an API path (e.g. `/apis/dray.dev/v1alpha1/namespaces/demo/stages/dev`).
    pub fn get(&self, path: &str) -> Option<Value> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _, rest @ ..] => ("", rest),
            ["apis", group, _, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, plural, name) = match rest {
            ["namespaces", namespace, plural, name] => (*namespace, *plural, *name),
            [plural, name] => ("", *plural, *name),
            _ => return None,
        };
        let key = ObjKey {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        self.shared.lock().store.get(&key).cloned()
    }

    /// The current revision (the newest `resourceVersion`).
    pub fn revision(&self) -> u64 {
        self.shared.lock().store.revision()
    }
}
