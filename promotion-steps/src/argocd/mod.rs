//! Argo CD as Dray reaches it: one [`Transport`] over two ways in, so that `argocd-update`
//! keeps one algorithm and the Stage health check reads Applications the same way.
//!
//! - [`ArgocdTarget::ApiServer`]: Argo CD's API server (`/api/v1/applications/…`), whose
//!   sync endpoint starts operations and refuses them itself (`api_server.rs`); the bearer
//!   token is the project's credential for the server's URL;
//! - [`ArgocdTarget::Kubernetes`]: the `argoproj.io/v1alpha1` Application objects through
//!   the Kubernetes API with `kube::Client`; a sync is an `operation` written with a JSON
//!   merge patch, which Argo CD's application controller then runs (`kubernetes.rs`).
//!   How the cluster is reached is a [`KubeAccess`] (`access.rs`): inferred (in-cluster
//!   service account, else `$KUBECONFIG` / `~/.kube/config`), a kubeconfig and context,
//!   or a server URL with the project's token; clients are built and shared by
//!   `client.rs`.
//!
//! Errors name the server and the cause; [`judge`] (in `health.rs`) turns an Application
//! into a health verdict.

mod access;
mod api_server;
mod client;
mod health;
mod kubernetes;
mod tree;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use access::KubeAccess;
pub use client::install_crypto_provider;
pub use health::{AppHealth, is_applied, is_syncing_to, judge};
pub(crate) use health::{is_commit, same_commit};
pub use tree::{FailingPod, OOM_RESTARTS, PodFailure, fail_fast_reason, failing_pods};

/// The annotation that makes Argo CD's controller refresh an Application (`hard` also
/// drops its manifest cache); the controller removes it once done.
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// The message Argo CD's controller leaves in `status.operationState.message` while a sync
/// window holds a requested operation (`controller/sync.go`, the phase stays `Running`).
pub const BLOCKED_BY_WINDOW: &str = "Sync operation blocked by sync window";

/// How Dray reaches Argo CD.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ArgocdTarget {
    /// Argo CD's API server, e.g. `https://argocd.example.com`.
    ApiServer {
        /// The server's URL.
        url: String,
    },
    /// The Kubernetes API server of the cluster Argo CD runs in.
    Kubernetes {
        /// How to reach it and authenticate.
        access: KubeAccess,
        /// Argo CD's namespace (its Applications and AppProjects; default `argocd`).
        namespace: String,
    },
}

impl ArgocdTarget {
    /// The URL whose credential holds the bearer token, where the project's credential
    /// authenticates (not with a kubeconfig or a service account).
    pub fn token_url(&self) -> Option<&str> {
        match self {
            ArgocdTarget::ApiServer { url } => Some(url),
            ArgocdTarget::Kubernetes { access, .. } => access.token_url(),
        }
    }

    /// For messages: "Argo CD at `…`" or "the Kubernetes API at `…`" (or of a kubeconfig).
    pub fn describe(&self) -> String {
        match self {
            ArgocdTarget::ApiServer { url } => format!("Argo CD at `{}`", trim(url)),
            ArgocdTarget::Kubernetes { access, .. } => access.describe(),
        }
    }

    /// Refuses what cannot work (a URL that is not http(s), a relative kubeconfig path),
    /// naming it.
    pub fn check(&self) -> Result<(), String> {
        match self {
            ArgocdTarget::ApiServer { url } => {
                if url.starts_with("http://") || url.starts_with("https://") {
                    Ok(())
                } else {
                    Err(format!("`{url}` is not an http(s) URL"))
                }
            }
            ArgocdTarget::Kubernetes { access, .. } => access.check(),
        }
    }
}

fn trim(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// An Application by name, in Argo CD's namespace unless `namespace` says otherwise.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ApplicationRef {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (Argo CD's `appNamespace`), when not Argo CD's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ApplicationRef {
    /// `namespace/name`, or `name` in Argo CD's own namespace.
    pub fn shown(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Reads one Application (`None` when it does not exist); `token` is the project's
/// credential for [`ArgocdTarget::token_url`]. A Kubernetes client is reused across
/// calls with the same access. Errors are readable strings naming the server and cause.
pub async fn read_application(
    http: &reqwest::Client,
    token: Option<String>,
    target: &ArgocdTarget,
    app: &ApplicationRef,
) -> Result<Option<Value>, String> {
    connected(http, token, target)
        .await?
        .get(app, false)
        .await
        .map_err(|e| e.to_string())
}

/// Reads one Application's resource tree (`None` when the transport has none — the
/// Kubernetes API — or the Application does not exist); see [`read_application`].
pub async fn read_resource_tree(
    http: &reqwest::Client,
    token: Option<String>,
    target: &ArgocdTarget,
    app: &ApplicationRef,
) -> Result<Option<Value>, String> {
    connected(http, token, target)
        .await?
        .resource_tree(app)
        .await
        .map_err(|e| e.to_string())
}

/// A transport to `target` for one read, errors as readable strings.
async fn connected(
    http: &reqwest::Client,
    token: Option<String>,
    target: &ArgocdTarget,
) -> Result<Transport, String> {
    target
        .check()
        .map_err(|e| format!("cannot reach Argo CD: {e}"))?;
    Transport::connect(http.clone(), token, target.clone(), None)
        .await
        .map_err(|e| e.to_string())
}

/// Why a call to Argo CD did not give an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgocdError {
    /// The promotion was aborted while waiting for an answer.
    #[error("aborted while talking to Argo CD")]
    Aborted,
    /// Refused, or an unexpected answer; the text names server and cause.
    #[error("{0}")]
    Failed(String),
    /// No answer, or one that says "later" (429, 5xx): Argo CD or the way to it
    /// is down for now. A step waiting for Argo CD asks again; the text names server and
    /// cause.
    #[error("{0}")]
    Unavailable(String),
}

/// Why Argo CD did not start a sync.
#[derive(Debug)]
pub(crate) enum SyncRefused {
    /// A sync window blocks it; the windows, described.
    Window(String),
    /// Another operation is in progress: who started it, and Argo CD's words.
    Busy { by: String, message: String },
    /// The Application changed while the operation was written (HTTP 409): look again.
    Conflict(String),
}

/// A sync to ask for.
pub(crate) struct SyncRequest {
    /// `(source index, revision)` for each source to move.
    pub revisions: Vec<(usize, String)>,
    /// Whether the Application has `spec.sources` (multi-source).
    pub multi: bool,
    /// `initiatedBy.username` where the transport chooses it (Kubernetes).
    pub initiator: String,
    /// A line for `operation.info` (`Reason`).
    pub reason: String,
}

/// An answer that is not 2xx: status and Argo CD's (or Kubernetes') message.
pub(crate) struct Refusal {
    pub status: u16,
    pub message: String,
}

/// Argo CD through one of its two doors.
pub(crate) enum Transport {
    ApiServer(api_server::ApiServer),
    Kubernetes(kubernetes::Kubernetes),
}

/// What the API-server transport sends with: the client, the token, cancellation.
pub(crate) struct Http {
    client: reqwest::Client,
    token: Option<String>,
    cancel: Option<CancellationToken>,
    /// The server's URL without a trailing `/`.
    base: String,
    /// "Argo CD at `…`" / "the Kubernetes API at `…`".
    who: String,
}

/// How long one request may take.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Http {
    /// Sends a request; `Err(Refusal)` inside for a non-2xx answer other than 401, which
    /// becomes [`ArgocdError::Failed`] with a hint. No answer, an unreadable one, or a
    /// transient status is [`ArgocdError::Unavailable`].
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<Result<Value, Refusal>, ArgocdError> {
        let url = format!("{}{path}", self.base);
        let mut request = self
            .client
            .request(method.clone(), &url)
            .timeout(REQUEST_TIMEOUT);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some((content_type, body)) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        let sent = request.send();
        let response = match &self.cancel {
            Some(cancel) => tokio::select! {
                response = sent => response,
                () = cancel.cancelled() => return Err(ArgocdError::Aborted),
            },
            None => sent.await,
        }
        .map_err(|e| {
            ArgocdError::Unavailable(format!(
                "{} did not answer `{method} {path}`: {}",
                self.who,
                e.without_url()
            ))
        })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| {
            ArgocdError::Unavailable(format!(
                "{} broke off its answer ({status}) to `{method} {path}`: {}",
                self.who,
                e.without_url()
            ))
        })?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if (200..300).contains(&status) {
            return Ok(Ok(value));
        }
        let message = value["message"]
            .as_str()
            .or(value["error"].as_str())
            .or(value.as_str())
            .unwrap_or("")
            .to_owned();
        if crate::is_transient_status(status) {
            // A proxy's error page says no more than its status: only Argo CD's own words.
            let said = value["message"].as_str().or(value["error"].as_str());
            return Err(ArgocdError::Unavailable(format!(
                "{} answered {status} to `{method} {path}`{}",
                self.who,
                said.map(|m| format!(": {m}")).unwrap_or_default()
            )));
        }
        if status == 401 {
            let hint = if self.token.is_some() {
                "the project's token for it was refused; hint: renew the `argocd` Credential \
                 whose `repoURL` is this URL"
            } else {
                "the project has no token for it; hint: add a credential with a token for this \
                 URL (a Credential of type `argocd` whose `repoURL` is the server)"
            };
            return Err(ArgocdError::Failed(format!(
                "{} refused `{method} {path}` (401 {message}): {hint}",
                self.who
            )));
        }
        Ok(Err(Refusal { status, message }))
    }

    /// GETs `path`; `None` on 404.
    async fn get(&self, path: &str) -> Result<Option<Value>, ArgocdError> {
        match self.send(reqwest::Method::GET, path, None).await? {
            Ok(value) => Ok(Some(value)),
            Err(Refusal { status: 404, .. }) => Ok(None),
            Err(Refusal { status, message }) => Err(ArgocdError::Failed(format!(
                "{} answered {status} to `GET {path}`: {message}",
                self.who
            ))),
        }
    }
}

impl Transport {
    /// A transport to `target`, authenticating with `token` (the project's credential for
    /// [`ArgocdTarget::token_url`]), giving up when `cancel` fires. For Kubernetes this
    /// builds (or reuses) a `kube::Client`, which fails when the kubeconfig cannot be read.
    pub(crate) async fn connect(
        client: reqwest::Client,
        token: Option<String>,
        target: ArgocdTarget,
        cancel: Option<CancellationToken>,
    ) -> Result<Self, ArgocdError> {
        match target {
            ArgocdTarget::ApiServer { ref url } => {
                let http = Http {
                    client,
                    token,
                    cancel,
                    base: trim(url).to_owned(),
                    who: target.describe(),
                };
                Ok(Transport::ApiServer(api_server::ApiServer { http }))
            }
            ArgocdTarget::Kubernetes { access, namespace } => {
                let token = access.token_url().and(token);
                let connected = client::connect(&access, token.as_deref()).await?;
                let auth = match access {
                    KubeAccess::Server { .. } => kubernetes::Auth::Credential {
                        has_token: token.is_some(),
                    },
                    KubeAccess::Infer | KubeAccess::Kubeconfig { .. } => {
                        kubernetes::Auth::Kubeconfig
                    }
                };
                Ok(Transport::Kubernetes(kubernetes::Kubernetes {
                    client: connected.client,
                    who: format!("the Kubernetes API at `{}`", connected.cluster_url),
                    cluster_url: connected.cluster_url,
                    namespace,
                    auth,
                    cancel,
                }))
            }
        }
    }

    /// "Argo CD at `…`" / "the Kubernetes API at `…`".
    pub(crate) fn who(&self) -> &str {
        match self {
            Transport::ApiServer(t) => &t.http.who,
            Transport::Kubernetes(t) => &t.who,
        }
    }

    /// The Kubernetes API server's URL as the client resolved it (Kubernetes only).
    pub(crate) fn cluster_url(&self) -> Option<&str> {
        match self {
            Transport::ApiServer(_) => None,
            Transport::Kubernetes(t) => Some(&t.cluster_url),
        }
    }

    /// The namespace an Application lives in when its ref names none (Kubernetes only).
    pub(crate) fn default_namespace(&self) -> Option<&str> {
        match self {
            Transport::ApiServer(_) => None,
            Transport::Kubernetes(t) => Some(&t.namespace),
        }
    }

    /// Reads an Application (`refresh`: ask Argo CD to look at git again first, where the
    /// transport can do that on a read); `None` when it does not exist.
    pub(crate) async fn get(
        &self,
        app: &ApplicationRef,
        refresh: bool,
    ) -> Result<Option<Value>, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.get(app, refresh).await,
            Transport::Kubernetes(t) => t.get(app).await,
        }
    }

    /// The Application's resource tree (`GET …/resource-tree`), with its pods' states;
    /// `None` when it does not exist, or over the Kubernetes API, which has no tree.
    pub(crate) async fn resource_tree(
        &self,
        app: &ApplicationRef,
    ) -> Result<Option<Value>, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.resource_tree(app).await,
            Transport::Kubernetes(_) => Ok(None),
        }
    }

    /// Why `app` (as read) will not become healthy, from its resource tree: a pod of its
    /// newest ReplicaSet fails (see [`fail_fast_reason`]). `None` when it is Healthy, no
    /// pod fails, or the tree cannot be read (the caller waits on, as before). The caller
    /// asks only once what runs is ours ([`is_applied`], [`is_syncing_to`]).
    pub(crate) async fn fail_fast(
        &self,
        reference: &ApplicationRef,
        app: &Value,
    ) -> Option<String> {
        if app["status"]["health"]["status"] == "Healthy" {
            return None;
        }
        match self.resource_tree(reference).await {
            Ok(Some(tree)) => fail_fast_reason(&reference.shown(), &tree),
            Ok(None) => None,
            Err(error) => {
                tracing::debug!(app = %reference.shown(), %error, "cannot read the resource tree");
                None
            }
        }
    }

    /// The Applications `selector` matches (in `namespace`, or Argo CD's).
    pub(crate) async fn list(
        &self,
        selector: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.list(selector, namespace).await,
            Transport::Kubernetes(t) => t.list(selector, namespace).await,
        }
    }

    /// Merges `spec` (`{"source": …}` or `{"sources": […]}`) into the Application.
    pub(crate) async fn patch_spec(
        &self,
        app: &ApplicationRef,
        spec: &Value,
    ) -> Result<Result<(), Refusal>, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.patch_spec(app, spec).await,
            Transport::Kubernetes(t) => t.patch_spec(app, spec).await,
        }
    }

    /// Asks for a sync of `current` (as last read).
    pub(crate) async fn sync(
        &self,
        app: &ApplicationRef,
        current: &Value,
        request: &SyncRequest,
    ) -> Result<Result<(), SyncRefused>, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.sync(app, request).await,
            Transport::Kubernetes(t) => t.sync(app, current, request).await,
        }
    }

    /// The sync windows that apply to `current`, described for a message.
    pub(crate) async fn windows(
        &self,
        app: &ApplicationRef,
        current: &Value,
    ) -> Result<String, ArgocdError> {
        match self {
            Transport::ApiServer(t) => t.windows(app).await,
            Transport::Kubernetes(t) => t.windows(current).await,
        }
    }
}

/// Who started an operation, from an `operation` (or `operationState.operation`).
pub(crate) fn initiator(operation: &Value) -> String {
    let by = &operation["initiatedBy"];
    match by["username"].as_str().filter(|u| !u.is_empty()) {
        Some(user) => format!("`{user}`"),
        None if by["automated"] == true => "Argo CD's automated sync".to_owned(),
        None => "someone unknown".to_owned(),
    }
}

/// One sync window, as a message names it.
pub(crate) fn describe_window(w: &Value) -> String {
    format!(
        "`{}` window `{}` for {}{}{}",
        w["kind"].as_str().unwrap_or("?"),
        w["schedule"].as_str().unwrap_or("?"),
        w["duration"].as_str().unwrap_or("?"),
        if w["manualSync"] == true {
            ", manual sync allowed"
        } else {
            ""
        },
        w["description"]
            .as_str()
            .filter(|d| !d.is_empty())
            .map(|d| format!(" ({d})"))
            .unwrap_or_default(),
    )
}

/// Percent-encodes a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
