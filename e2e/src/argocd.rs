//! An Argo CD double: the API-server endpoints and the Kubernetes API paths that
//! `argocd-update` and stage health use, with Argo CD's paths, field names, status codes
//! and error shapes, over one set of Applications, backed by real git.
//!
//! Served on 127.0.0.1 (own thread and runtime, as every double), bearer-token auth on
//! both doors; [`ArgoCd::start_tls`] also serves it over HTTPS with a CA generated for the
//! double (`argocd/tls.rs`), so that a client's CA configuration is verified for real.
//! Argo CD's API server:
//!
//! - `GET /api/v1/applications/{name}` (`?refresh=normal|hard`, `?appNamespace=`): the
//!   Application (`metadata`, `spec.source(s)`, `status.sync`, `status.health`,
//!   `status.operationState`, `status.conditions`); each GET is one reconciliation (see
//!   below);
//! - `POST /api/v1/applications/{name}/sync` (`ApplicationSyncRequest`: `revision`, …):
//!   starts a sync operation; a sha is taken as is, a branch or tag is resolved against the
//!   real repository. Refused as Argo CD refuses: 403 `cannot sync: blocked by sync
//!   window` (gRPC PermissionDenied, code 7), 400 `another operation is already in
//!   progress` (gRPC FailedPrecondition, code 9 — grpc-gateway maps it to 400, not 409),
//!   404 `applications.argoproj.io "x" not found` (code 5); errors are `runtimeError`
//!   (`{error, code, message, details}`);
//! - `GET /api/v1/applications/{name}/syncwindows`: `{activeWindows, assignedWindows,
//!   canSync}` with `kind`, `schedule`, `duration`, `manualSync`;
//! - `GET /api/v1/applications/{name}/resource-tree`: the `ApplicationTree` — the
//!   Deployment, one ReplicaSet per completed sync (`Revision` `Rev:N`) and the newest
//!   one's pod, with `info` as Argo CD's controller fills it (`Status Reason`, `Restart
//!   Count`); [`ArgoCd::fail_pods_after_sync`] makes that pod crash-loop, fail to pull its
//!   image or be OOM-killed;
//! - `PUT /api/v1/applications/{name}` (a whole Application) and `PATCH
//!   /api/v1/applications/{name}` (`ApplicationPatchRequest`: `patch` as a string, `patchType`
//!   `merge`), to change `spec.source(s)`.
//!
//! The Kubernetes API (`argoproj.io/v1alpha1`):
//!
//! - `GET /apis/argoproj.io/v1alpha1/namespaces/{ns}/applications/{name}` (one
//!   reconciliation too) and `GET …/namespaces/{ns}/applications?labelSelector=` (an
//!   `ApplicationList`);
//! - `PATCH …/applications/{name}` with `Content-Type: application/merge-patch+json` only
//!   (else 415): `metadata.annotations`, `spec`, `operation`; `status` is a subresource and
//!   ignored; a `metadata.resourceVersion` other than the current one answers 409 Conflict;
//! - `GET …/namespaces/{ns}/appprojects/{name}`: an AppProject whose `spec.syncWindows`
//!   hold the scripted windows (each with `applications: [<app>]`);
//! - errors are `Status` objects (`{kind: Status, apiVersion: v1, metadata: {}, status:
//!   Failure, message, reason, code}`): 401 `Unauthorized`, 404 `NotFound`, 409 `Conflict`
//!   ("Operation cannot be fulfilled on applications.argoproj.io \"x\": the object has been
//!   modified; …"), 415 `UnsupportedMediaType`; `resourceVersion` is a string, as
//!   `kube::Client` (`Api<DynamicObject>`, `Patch::Merge`) and kubectl send and expect it.
//!
//! The simulated application controller runs on every GET of either door: it removes the
//! `argocd.argoproj.io/refresh` annotation, starts an `operation` that was set (through
//! Kubernetes) when none is running — `operationState` `Running`, initiated by the
//! operation's `initiatedBy` —, advances a running operation by one poll (held `Running`
//! with "Sync operation blocked by sync window" while a deny window without manual sync is
//! active, as Argo CD's controller does), completes it (`Succeeded`, or `Failed`/`Error`),
//! clearing `operation`, and recomputes `status.sync` by resolving `targetRevision` against
//! the real repository (`git ls-remote`).
//!
//! Scriptable failure modes, for both doors ([`ArgoCd::deny_sync_window`],
//! [`ArgoCd::start_foreign_operation`], [`ArgoCd::degrade_after_sync`],
//! [`ArgoCd::set_comparison_error`], [`ArgoCd::set_sync_polls`], [`ArgoCd::fail_next_sync`],
//! a concurrent writer before a guarded patch: [`ArgoCd::modify_before_next_patch`], and a
//! proxy in front answering `503`: [`ArgoCd::answer_unavailable`]).
//! Not modelled: ApplicationSets, resource trees beyond that one Deployment, hooks, multi-source `revisions[]` in
//! `syncResult` (single source only), Argo CD's own automated sync, Kubernetes RBAC (any
//! valid token may do anything), watches.
//! Test tooling only, never shipped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use crate::double_server::{Server, bind};

mod tls;

use crate::git_repo::ls_remote;
use crate::world::TestWorld;
pub use tls::unrelated_ca_pem;

/// The annotation naming the Dray stage allowed to touch an Application.
pub const AUTHORIZED_STAGE_ANNOTATION: &str = "dray.dev/authorized-stage";

/// The annotation that asks Argo CD's controller for a refresh; it removes it when done.
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// What Argo CD's controller writes into `operationState.message` while a sync window holds
/// an operation (the phase stays `Running`).
pub const BLOCKED_BY_WINDOW: &str = "Sync operation blocked by sync window";

/// The Kubernetes API prefix of Argo CD's resources.
const K8S: &str = "/apis/argoproj.io/v1alpha1";

/// One Application to serve.
#[derive(Clone, Debug)]
pub struct AppSpec {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (default `argocd`).
    pub namespace: String,
    /// `spec.project`.
    pub project: String,
    /// `spec.source.repoURL`.
    pub repo_url: String,
    /// `spec.source.path`.
    pub path: String,
    /// `spec.source.targetRevision`.
    pub target_revision: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

impl AppSpec {
    /// An Application `name` in `argocd`, project `default`, following `target_revision` of
    /// `repo_url` at path `.`, authorised for Dray's `project:stage` when `authorized` is set.
    pub fn new(
        name: &str,
        repo_url: &str,
        target_revision: &str,
        authorized: Option<&str>,
    ) -> Self {
        let mut annotations = BTreeMap::new();
        if let Some(stage) = authorized {
            annotations.insert(AUTHORIZED_STAGE_ANNOTATION.to_owned(), stage.to_owned());
        }
        Self {
            name: name.to_owned(),
            namespace: "argocd".to_owned(),
            project: "default".to_owned(),
            repo_url: repo_url.to_owned(),
            path: ".".to_owned(),
            target_revision: target_revision.to_owned(),
            annotations,
            labels: BTreeMap::new(),
        }
    }
}

/// A sync window as `GET …/syncwindows` reports it.
#[derive(Clone, Debug)]
pub struct SyncWindow {
    /// `deny` (or `allow`).
    pub kind: String,
    /// Cron schedule, e.g. `0 22 * * *`.
    pub schedule: String,
    /// e.g. `8h`.
    pub duration: String,
    /// Whether manual syncs are allowed in it.
    pub manual_sync: bool,
}

impl SyncWindow {
    /// Whether the window, while active, blocks an operation (`manual`: started by a
    /// person, not by Argo CD's automated sync), as `SyncWindows.CanSync` decides.
    fn blocks(&self, manual: bool) -> bool {
        self.kind == "deny" && !(manual && self.manual_sync)
    }
}

/// What the double will do to one Application.
#[derive(Clone, Debug, Default)]
struct Script {
    window: Option<SyncWindow>,
    degraded: Option<String>,
    comparison_error: Option<String>,
    sync_polls: u32,
    fail_next: Option<String>,
    /// Someone else writes the Application just before the next guarded merge patch.
    modified_before_patch: bool,
    /// After the next sync, the new ReplicaSet's pod is stuck: `(Status Reason, restarts,
    /// health message)`.
    failing_pods: Option<(String, u32, String)>,
}

#[derive(Debug)]
struct App {
    app: Value,
    script: Script,
    /// Polls left before the running operation completes.
    polls_left: u32,
    /// The operation's outcome when it completes: `None` succeeds.
    failure: Option<String>,
    /// Its resource tree (`ApplicationTree`): a Deployment, one ReplicaSet per synced
    /// revision, and the pod of the newest.
    tree: Value,
}

#[derive(Debug)]
struct Inner {
    world: TestWorld,
    token: String,
    user: String,
    apps: Mutex<BTreeMap<String, App>>,
    /// Real fetch URLs (with credentials) by Application repoURL.
    fetch_urls: Mutex<BTreeMap<String, String>>,
    requests: Mutex<Vec<String>>,
    /// The merge patches received through the Kubernetes API, with the Application's name.
    patches: Mutex<Vec<(String, Value)>>,
    /// How many of the next requests a proxy in front of Argo CD answers `503`.
    unavailable: Mutex<u32>,
}

/// A running Argo CD API-server double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct ArgoCd {
    addr: SocketAddr,
    inner: Arc<Inner>,
    /// The HTTPS door, when started with [`ArgoCd::start_tls`]; dropped before the server.
    tls: Option<tls::TlsFront>,
    _server: Server,
}

impl ArgoCd {
    /// Starts the double; requests must carry `Authorization: Bearer <token>`, and the
    /// operations they start are initiated by `user`.
    pub fn start(world: &TestWorld, token: &str, user: &str) -> Result<Self> {
        let (listener, addr) = bind("Argo CD double")?;
        crate::secrets::remember("the Argo CD double's token", token);
        let inner = Arc::new(Inner {
            world: world.clone(),
            token: token.to_owned(),
            user: user.to_owned(),
            apps: Mutex::default(),
            fetch_urls: Mutex::default(),
            requests: Mutex::default(),
            patches: Mutex::default(),
            unavailable: Mutex::default(),
        });
        let app = Router::new()
            .route("/api/v1/applications", get(list_apps))
            .route(
                "/api/v1/applications/{name}",
                get(get_app).put(put_app).patch(patch_app),
            )
            .route("/api/v1/applications/{name}/sync", post(sync_app))
            .route("/api/v1/applications/{name}/syncwindows", get(sync_windows))
            .route(
                "/api/v1/applications/{name}/resource-tree",
                get(resource_tree),
            )
            .route(
                "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications",
                get(k8s_list),
            )
            .route(
                "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications/{name}",
                get(k8s_get).patch(k8s_patch),
            )
            .route(
                "/apis/argoproj.io/v1alpha1/namespaces/{ns}/appprojects/{name}",
                get(k8s_project),
            )
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&inner),
                behind_a_proxy,
            ))
            .with_state(Arc::clone(&inner));
        let server = Server::spawn("Argo CD double", listener, addr, app)?;
        Ok(Self {
            addr,
            inner,
            tls: None,
            _server: server,
        })
    }

    /// As [`ArgoCd::start`], and also over HTTPS ([`ArgoCd::https_url`]) with a certificate
    /// for `127.0.0.1` signed by a CA generated for this double ([`ArgoCd::ca_pem`]).
    pub fn start_tls(world: &TestWorld, token: &str, user: &str) -> Result<Self> {
        let mut double = Self::start(world, token, user)?;
        double.tls = Some(tls::TlsFront::start(double.addr)?);
        Ok(double)
    }

    /// `https://127.0.0.1:PORT` (only after [`ArgoCd::start_tls`]).
    pub fn https_url(&self) -> Option<String> {
        self.tls.as_ref().map(tls::TlsFront::url)
    }

    /// The PEM of the CA that signed the HTTPS door's certificate (after
    /// [`ArgoCd::start_tls`]).
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(tls::TlsFront::ca_pem)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The Kubernetes API server's URL (the same listener: `/apis/argoproj.io/…`).
    pub fn kubernetes_url(&self) -> String {
        self.base_url()
    }

    /// The bearer token it accepts.
    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// Resolve `repo_url` by fetching `fetch_url` instead (e.g. with credentials embedded).
    pub fn set_fetch_url(&self, repo_url: &str, fetch_url: &str) {
        lock(&self.inner.fetch_urls).insert(repo_url.to_owned(), fetch_url.to_owned());
    }

    /// Adds an Application: OutOfSync, Missing, never synced.
    pub fn add_app(&self, spec: &AppSpec) {
        let app = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": spec.name,
                "namespace": spec.namespace,
                "annotations": spec.annotations,
                "labels": spec.labels,
                "creationTimestamp": now(),
                "generation": 1,
                "resourceVersion": "1",
            },
            "spec": {
                "project": spec.project,
                "destination": {"server": "https://kubernetes.default.svc", "namespace": spec.name},
                "source": {
                    "repoURL": spec.repo_url,
                    "path": spec.path,
                    "targetRevision": spec.target_revision,
                },
            },
            "status": {
                "sync": {"status": "OutOfSync", "revision": ""},
                "health": {"status": "Missing"},
                "history": [],
            },
        });
        lock(&self.inner.apps).insert(
            spec.name.clone(),
            App {
                app,
                script: Script::default(),
                polls_left: 0,
                failure: None,
                tree: json!({"nodes": []}),
            },
        );
    }

    /// Removes an Application (GET answers 404).
    pub fn remove_app(&self, name: &str) {
        lock(&self.inner.apps).remove(name);
    }

    /// The Application as served (without a reconciliation).
    pub fn app(&self, name: &str) -> Option<Value> {
        lock(&self.inner.apps).get(name).map(|a| a.app.clone())
    }

    /// The requests served so far (`METHOD path`), oldest first.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.inner.requests).clone()
    }

    /// How many syncs were requested for `name` and accepted: `POST …/sync` answered 200,
    /// or a Kubernetes merge patch that set an `operation`.
    pub fn syncs_started(&self, name: &str) -> usize {
        let api = format!("POST /api/v1/applications/{name}/sync 200");
        let k8s = format!("/applications/{name} (operation) 200");
        self.requests()
            .iter()
            .filter(|r| **r == api || (r.starts_with("PATCH /apis/") && r.ends_with(&k8s)))
            .count()
    }

    /// The merge patches `name` received through the Kubernetes API, oldest first.
    pub fn patches(&self, name: &str) -> Vec<Value> {
        lock(&self.inner.patches)
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// An active window that refuses syncs (manual ones too), or `None` to open it again.
    pub fn deny_sync_window(&self, name: &str, window: Option<SyncWindow>) {
        self.script(name, |s| s.window = window);
    }

    /// Starts an operation by `username` that runs for `polls` GETs, then succeeds on
    /// the current target.
    pub fn start_foreign_operation(&self, name: &str, username: &str, polls: u32) {
        let mut apps = lock(&self.inner.apps);
        let app = apps
            .get_mut(name)
            .expect("no such Application in the double");
        let revision = app.app["status"]["sync"]["revision"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        app.app["operation"] = json!({
            "sync": {"revision": revision},
            "initiatedBy": {"username": username},
        });
        app.app["status"]["operationState"] = json!({
            "phase": "Running",
            "message": "waiting for healthy state of apps/Deployment/app",
            "startedAt": now(),
            "operation": app.app["operation"].clone(),
        });
        app.polls_left = polls;
        app.failure = None;
    }

    /// After the next sync completes, health is `Degraded` with `message`.
    pub fn degrade_after_sync(&self, name: &str, message: &str) {
        self.script(name, |s| s.degraded = Some(message.to_owned()));
    }

    /// After the next sync completes, the new ReplicaSet's pod is stuck as Argo CD's
    /// resource tree shows it: its `Status Reason` `reason` (`CrashLoopBackOff`,
    /// `ImagePullBackOff`, `ErrImagePull`, `OOMKilled`), `Restart Count` `restarts` and
    /// health `Degraded` with `message`; the Application stays `Progressing`, as Argo CD
    /// reports a Deployment until its progress deadline passes.
    pub fn fail_pods_after_sync(&self, name: &str, reason: &str, restarts: u32, message: &str) {
        self.script(name, |s| {
            s.failing_pods = Some((reason.to_owned(), restarts, message.to_owned()))
        });
    }

    /// A `ComparisonError` condition (`None` clears it); syncs then end in `Error`.
    pub fn set_comparison_error(&self, name: &str, message: Option<&str>) {
        self.script(name, |s| s.comparison_error = message.map(str::to_owned));
    }

    /// How many GETs a sync stays `Running` before it completes (default 0: the first GET
    /// after the sync sees it done).
    pub fn set_sync_polls(&self, name: &str, polls: u32) {
        self.script(name, |s| s.sync_polls = polls);
    }

    /// The next sync ends `Failed` with `message` (as Argo CD reports a failed apply).
    pub fn fail_next_sync(&self, name: &str, message: &str) {
        self.script(name, |s| s.fail_next = Some(message.to_owned()));
    }

    /// Someone else changes the Application (its `resourceVersion` moves on) just before
    /// the next Kubernetes merge patch that carries a `metadata.resourceVersion`: that patch
    /// answers 409 Conflict, as the API server's optimistic concurrency does.
    pub fn modify_before_next_patch(&self, name: &str) {
        self.script(name, |s| s.modified_before_patch = true);
    }

    /// The next `requests` requests (any path, either door) are answered `503 Service
    /// Unavailable` by the proxy in front of Argo CD, as while Argo CD's server restarts.
    pub fn answer_unavailable(&self, requests: u32) {
        *lock(&self.inner.unavailable) = requests;
    }

    fn script(&self, name: &str, change: impl FnOnce(&mut Script)) {
        let mut apps = lock(&self.inner.apps);
        let app = apps
            .get_mut(name)
            .expect("no such Application in the double");
        change(&mut app.script);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

/// A gRPC-gateway error: `runtimeError`.
fn error(status: StatusCode, code: i32, message: &str) -> Response {
    (
        status,
        Json(json!({"error": message, "code": code, "message": message, "details": []})),
    )
        .into_response()
}

fn not_found(name: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        5,
        &format!("applications.argoproj.io \"{name}\" not found"),
    )
}

/// The proxy in front of Argo CD: answers `503` while [`ArgoCd::answer_unavailable`] says
/// so (the request is recorded with that status), else passes the request on.
async fn behind_a_proxy(
    State(inner): State<Arc<Inner>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let refuse = {
        let mut left = lock(&inner.unavailable);
        let refuse = *left > 0;
        *left = left.saturating_sub(1);
        refuse
    };
    if refuse {
        inner.record(format!("{} {} 503", request.method(), request.uri().path()));
        return (StatusCode::SERVICE_UNAVAILABLE, "upstream connect error").into_response();
    }
    next.run(request).await
}

impl Inner {
    /// The error answer for a request without the right bearer token.
    fn denied(&self, headers: &HeaderMap) -> Option<Response> {
        let expected = format!("Bearer {}", self.token);
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(got) if got == expected => None,
            Some(_) => Some(error(
                StatusCode::UNAUTHORIZED,
                16,
                "invalid session: token signature is invalid",
            )),
            None => Some(error(
                StatusCode::UNAUTHORIZED,
                16,
                "no session information",
            )),
        }
    }

    fn record(&self, line: String) {
        lock(&self.requests).push(line);
    }

    /// Resolves `revision` of `repo_url`: a full sha as is, else a branch, a tag or `HEAD`.
    async fn resolve(self: &Arc<Self>, repo_url: &str, revision: &str) -> Result<String, String> {
        if revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(revision.to_owned());
        }
        let url = lock(&self.fetch_urls)
            .get(repo_url)
            .cloned()
            .unwrap_or_else(|| repo_url.to_owned());
        let world = self.world.clone();
        let refs = tokio::task::spawn_blocking(move || ls_remote(&world, &url))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("rpc error: code = Unknown desc = failed to list refs: {e}"))?;
        let wanted = if revision.is_empty() {
            "HEAD"
        } else {
            revision
        };
        let candidates = [
            wanted.to_owned(),
            format!("refs/heads/{wanted}"),
            format!("refs/tags/{wanted}^{{}}"),
            format!("refs/tags/{wanted}"),
        ];
        candidates
            .iter()
            .find_map(|c| {
                refs.iter()
                    .find(|(_, name)| name == c)
                    .map(|(sha, _)| sha.clone())
            })
            .ok_or_else(|| format!("unable to resolve '{revision}' to a commit SHA"))
    }

    /// One reconciliation, as Argo CD's controller does it: drop the refresh annotation,
    /// start a requested operation, advance a running one, then compare with the target.
    async fn reconcile(self: &Arc<Self>, name: &str) -> Option<Value> {
        let (repo_url, target, pending) = {
            let apps = lock(&self.apps);
            let app = &apps.get(name)?.app;
            let source = &app["spec"]["source"];
            (
                source["repoURL"].as_str().unwrap_or("").to_owned(),
                source["targetRevision"].as_str().unwrap_or("").to_owned(),
                pending_operation(app)
                    .map(|op| op["sync"]["revision"].as_str().unwrap_or("").to_owned()),
            )
        };
        let resolved = self.resolve(&repo_url, &target).await;
        let pending = match pending {
            Some(revision) if revision.is_empty() => Some(resolved.clone()),
            Some(revision) => Some(self.resolve(&repo_url, &revision).await),
            None => None,
        };
        let mut apps = lock(&self.apps);
        let entry = apps.get_mut(name)?;
        if let Some(annotations) = entry
            .app
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove(REFRESH_ANNOTATION);
        }
        if let (Some(revision), Some(operation)) = (pending, pending_operation(&entry.app).cloned())
        {
            match revision {
                Ok(sha) => {
                    let mut operation = operation;
                    operation["sync"]["revision"] = json!(sha);
                    begin(entry, operation);
                }
                Err(message) => {
                    entry.app["status"]["operationState"] = json!({
                        "phase": "Error",
                        "message": message,
                        "startedAt": now(),
                        "finishedAt": now(),
                        "operation": operation,
                    });
                    if let Some(map) = entry.app.as_object_mut() {
                        map.remove("operation");
                    }
                }
            }
        }
        advance(entry);
        let source = entry.app["spec"]["source"].clone();
        let destination = entry.app["spec"]["destination"].clone();
        let status = &mut entry.app["status"];
        let conditions: Vec<Value> = match (&entry.script.comparison_error, &resolved) {
            (Some(message), _) => vec![
                json!({"type": "ComparisonError", "message": message, "lastTransitionTime": now()}),
            ],
            (None, Err(message)) => vec![
                json!({"type": "ComparisonError", "message": message, "lastTransitionTime": now()}),
            ],
            (None, Ok(_)) => vec![],
        };
        match (&resolved, conditions.is_empty()) {
            (Ok(sha), true) => {
                let synced = status["operationState"]["syncResult"]["revision"].as_str()
                    == Some(sha.as_str());
                status["sync"] = json!({
                    "status": if synced { "Synced" } else { "OutOfSync" },
                    "revision": sha,
                    "comparedTo": {"source": source, "destination": destination},
                });
            }
            _ => {
                status["sync"]["status"] = json!("Unknown");
            }
        }
        if conditions.is_empty() {
            if let Some(map) = status.as_object_mut() {
                map.remove("conditions");
            }
        } else {
            status["conditions"] = Value::Array(conditions);
        }
        status["reconciledAt"] = json!(now());
        bump_resource_version(&mut entry.app);
        Some(entry.app.clone())
    }
}

/// An `operation` set on the Application that the controller has not started yet (none is
/// `Running`).
fn pending_operation(app: &Value) -> Option<&Value> {
    app.get("operation")
        .filter(|op| op.is_object())
        .filter(|_| app["status"]["operationState"]["phase"] != "Running")
}

/// Starts `operation` (its `sync.revision` resolved): `Running`, for the scripted number of
/// polls, ending as scripted.
fn begin(entry: &mut App, operation: Value) {
    entry.app["operation"] = operation.clone();
    entry.app["status"]["operationState"] = json!({
        "phase": "Running",
        "message": "",
        "startedAt": now(),
        "operation": operation,
    });
    entry.polls_left = entry.script.sync_polls;
    entry.failure = match (
        &entry.script.comparison_error,
        entry.script.fail_next.take(),
    ) {
        (Some(message), _) => Some(format!("ComparisonError: {message}")),
        (None, failure) => failure,
    };
}

fn bump_resource_version(app: &mut Value) {
    let version = app["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    app["metadata"]["resourceVersion"] = json!((version + 1).to_string());
}

/// Moves a running operation on by one poll; completes it when no polls are left.
fn advance(entry: &mut App) {
    let state = &entry.app["status"]["operationState"];
    if state["phase"] != "Running" {
        return;
    }
    let manual = state["operation"]["initiatedBy"]["automated"] != true;
    if entry
        .script
        .window
        .as_ref()
        .is_some_and(|w| w.blocks(manual))
    {
        entry.app["status"]["operationState"]["message"] = json!(BLOCKED_BY_WINDOW);
        return;
    }
    if state["message"] == BLOCKED_BY_WINDOW {
        entry.app["status"]["operationState"]["message"] = json!("");
    }
    if entry.polls_left > 0 {
        entry.polls_left -= 1;
        return;
    }
    let revision = entry.app["status"]["operationState"]["operation"]["sync"]["revision"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let failure = entry.failure.take();
    let app = &mut entry.app;
    let source = app["spec"]["source"].clone();
    let op = &mut app["status"]["operationState"];
    op["finishedAt"] = json!(now());
    match failure {
        Some(message) => {
            op["phase"] = json!(if message.starts_with("ComparisonError:") {
                "Error"
            } else {
                "Failed"
            });
            op["message"] = json!(message);
        }
        None => {
            op["phase"] = json!("Succeeded");
            op["message"] = json!("successfully synced (all tasks run)");
            op["syncResult"] = json!({
                "revision": revision,
                "source": source.clone(),
                "resources": [],
            });
            let failing = entry.script.failing_pods.take();
            app["status"]["health"] = match (entry.script.degraded.take(), &failing) {
                (Some(message), _) => json!({"status": "Degraded", "message": message}),
                (None, Some(_)) => json!({"status": "Progressing",
                    "message": "Waiting for rollout to finish: 1 old replicas are pending termination..."}),
                (None, None) => json!({"status": "Healthy"}),
            };
            let name = app["metadata"]["name"].as_str().unwrap_or("").to_owned();
            let namespace = app["spec"]["destination"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned();
            grow_tree(&mut entry.tree, &name, &namespace, failing);
            let history = app["status"]["history"].as_array().map_or(0, Vec::len);
            if let Some(items) = app["status"]["history"].as_array_mut() {
                items.push(json!({
                    "id": history,
                    "revision": revision,
                    "deployedAt": now(),
                    "source": source,
                }));
            }
        }
    }
    if let Some(map) = app.as_object_mut() {
        map.remove("operation");
    }
}

async fn get_app(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let refresh = query
        .get("refresh")
        .map(|r| format!("?refresh={r}"))
        .unwrap_or_default();
    let response = match inner.reconcile(&name).await {
        Some(app) => (StatusCode::OK, Json(app)).into_response(),
        None => not_found(&name),
    };
    inner.record(format!(
        "GET /api/v1/applications/{name}{refresh} {}",
        response.status().as_u16()
    ));
    response
}

/// `GET /api/v1/applications/{name}/resource-tree` (`?appNamespace=`): the
/// `ApplicationTree` (`nodes[]` of `ResourceNode`: `group`, `version`, `kind`, `namespace`,
/// `name`, `uid`, `parentRefs[]`, `info[]`, `health`, `createdAt`), as Argo CD's
/// controller builds it (`controller/cache/info.go`: a Pod's `Status Reason`, `Node`,
/// `Containers` and `Restart Count`; a ReplicaSet's `Revision` `Rev:N`).
async fn resource_tree(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let tree = lock(&inner.apps).get(&name).map(|entry| entry.tree.clone());
    let response = match tree {
        Some(tree) => (StatusCode::OK, Json(tree)).into_response(),
        None => not_found(&name),
    };
    inner.record(format!(
        "GET /api/v1/applications/{name}/resource-tree {}",
        response.status().as_u16()
    ));
    response
}

/// The tree after a sync: a new ReplicaSet (the next revision) of the Deployment `name`
/// in `namespace`, and its pod — `Running` and Healthy, or stuck as `failing` says. The
/// older ReplicaSets stay, scaled to zero, without pods.
fn grow_tree(
    tree: &mut Value,
    name: &str,
    namespace: &str,
    failing: Option<(String, u32, String)>,
) {
    let deployment_uid = format!("uid-deployment-{name}");
    let deployment = json!({"group": "apps", "version": "v1", "kind": "Deployment",
        "namespace": namespace, "name": name, "uid": deployment_uid,
        "info": [], "health": {"status": "Progressing"}, "createdAt": now()});
    let mut nodes: Vec<Value> = tree["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n["kind"] == "ReplicaSet")
        .collect();
    let revision = nodes.len() + 1;
    let rs_name = format!("{name}-{revision:08x}");
    let rs_uid = format!("uid-rs-{rs_name}");
    nodes.push(
        json!({"group": "apps", "version": "v1", "kind": "ReplicaSet",
        "namespace": namespace, "name": rs_name, "uid": rs_uid,
        "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": namespace,
            "name": name, "uid": deployment_uid}],
        "info": [{"name": "Revision", "value": format!("Rev:{revision}")}],
        "health": {"status": if failing.is_some() { "Progressing" } else { "Healthy" }},
        "createdAt": now()}),
    );
    let (reason, restarts, health) = match &failing {
        Some((reason, restarts, message)) => (
            reason.clone(),
            *restarts,
            json!({"status": "Degraded", "message": message}),
        ),
        None => ("Running".to_owned(), 0, json!({"status": "Healthy"})),
    };
    let mut info = vec![
        json!({"name": "Status Reason", "value": reason}),
        json!({"name": "Node", "value": "node-1"}),
        json!({"name": "Containers", "value": if failing.is_some() { "0/1" } else { "1/1" }}),
    ];
    if restarts > 0 {
        info.push(json!({"name": "Restart Count", "value": restarts.to_string()}));
    }
    let pod_name = format!("{rs_name}-x7k2p");
    nodes.push(
        json!({"version": "v1", "kind": "Pod", "namespace": namespace,
        "name": pod_name, "uid": format!("uid-pod-{pod_name}"),
        "parentRefs": [{"group": "apps", "kind": "ReplicaSet", "namespace": namespace,
            "name": rs_name, "uid": rs_uid}],
        "info": info, "health": health, "images": [], "createdAt": now()}),
    );
    nodes.insert(0, deployment);
    *tree = json!({"nodes": nodes, "orphanedNodes": [], "hosts": []});
}

/// `GET /api/v1/applications?selector=…`: an `ApplicationList` (equality, `!=` and
/// existence requirements).
async fn list_apps(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let selector = query.get("selector").cloned().unwrap_or_default();
    let names: Vec<String> = lock(&inner.apps)
        .iter()
        .filter(|(_, entry)| matches_selector(&entry.app["metadata"]["labels"], &selector))
        .map(|(name, _)| name.clone())
        .collect();
    let mut items = Vec::new();
    for name in names {
        if let Some(app) = inner.reconcile(&name).await {
            items.push(app);
        }
    }
    inner.record(format!("GET /api/v1/applications?selector={selector} 200"));
    Json(json!({"metadata": {"resourceVersion": "1"}, "items": items})).into_response()
}

fn matches_selector(labels: &Value, selector: &str) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .all(|requirement| {
            if let Some((key, value)) = requirement.split_once("!=") {
                labels[key.trim()].as_str() != Some(value.trim())
            } else if let Some((key, value)) = requirement
                .split_once("==")
                .or_else(|| requirement.split_once('='))
            {
                labels[key.trim()].as_str() == Some(value.trim())
            } else {
                labels.get(requirement).is_some()
            }
        })
}

async fn sync_app(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let response = start_sync(&inner, &name, &request).await;
    inner.record(format!(
        "POST /api/v1/applications/{name}/sync {}",
        response.status().as_u16()
    ));
    response
}

async fn start_sync(inner: &Arc<Inner>, name: &str, request: &Value) -> Response {
    let (repo_url, target) = {
        let apps = lock(&inner.apps);
        let Some(entry) = apps.get(name) else {
            return not_found(name);
        };
        if entry.script.window.as_ref().is_some_and(|w| w.blocks(true)) {
            return error(
                StatusCode::FORBIDDEN,
                7,
                "cannot sync: blocked by sync window",
            );
        }
        if entry.app.get("operation").is_some() {
            return error(
                StatusCode::BAD_REQUEST,
                9,
                "another operation is already in progress",
            );
        }
        let source = &entry.app["spec"]["source"];
        (
            source["repoURL"].as_str().unwrap_or("").to_owned(),
            source["targetRevision"].as_str().unwrap_or("").to_owned(),
        )
    };
    let wanted = request["revision"]
        .as_str()
        .filter(|r| !r.is_empty())
        .unwrap_or(&target)
        .to_owned();
    let resolved = inner.resolve(&repo_url, &wanted).await;
    let mut apps = lock(&inner.apps);
    let Some(entry) = apps.get_mut(name) else {
        return not_found(name);
    };
    if entry.app.get("operation").is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            9,
            "another operation is already in progress",
        );
    }
    let revision = match resolved {
        Ok(sha) => sha,
        Err(message) => return error(StatusCode::BAD_REQUEST, 3, &message),
    };
    let operation = json!({
        "sync": {"revision": revision},
        "initiatedBy": {"username": inner.user},
    });
    begin(entry, operation);
    (StatusCode::OK, Json(entry.app.clone())).into_response()
}

async fn sync_windows(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let apps = lock(&inner.apps);
    let Some(entry) = apps.get(&name) else {
        return not_found(&name);
    };
    let windows: Vec<Value> = entry
        .script
        .window
        .iter()
        .map(|w| json!({"kind": w.kind, "schedule": w.schedule, "duration": w.duration, "manualSync": w.manual_sync}))
        .collect();
    let can_sync = entry.script.window.as_ref().is_none_or(|w| !w.blocks(true));
    Json(json!({"activeWindows": windows, "assignedWindows": windows, "canSync": can_sync}))
        .into_response()
}

async fn put_app(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(app): Json<Value>,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let response = update(&inner, &name, |current| {
        current["spec"] = app["spec"].clone();
        if let Some(annotations) = app["metadata"].get("annotations") {
            current["metadata"]["annotations"] = annotations.clone();
        }
        Ok(())
    });
    inner.record(format!(
        "PUT /api/v1/applications/{name} {}",
        response.status().as_u16()
    ));
    response
}

async fn patch_app(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    if let Some(denied) = inner.denied(&headers) {
        return denied;
    }
    let response = update(&inner, &name, |current| {
        let kind = request["patchType"].as_str().unwrap_or("merge");
        if kind != "merge" {
            return Err(format!(
                "this double only applies `merge` patches, not `{kind}`"
            ));
        }
        let patch: Value = serde_json::from_str(request["patch"].as_str().unwrap_or(""))
            .map_err(|e| format!("error unmarshaling patch: {e}"))?;
        merge_patch(current, &patch);
        Ok(())
    });
    inner.record(format!(
        "PATCH /api/v1/applications/{name} {}",
        response.status().as_u16()
    ));
    response
}

fn update(
    inner: &Inner,
    name: &str,
    change: impl FnOnce(&mut Value) -> Result<(), String>,
) -> Response {
    let mut apps = lock(&inner.apps);
    let Some(entry) = apps.get_mut(name) else {
        return not_found(name);
    };
    if let Err(message) = change(&mut entry.app) {
        return error(StatusCode::BAD_REQUEST, 3, &message);
    }
    let generation = entry.app["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
    entry.app["metadata"]["generation"] = json!(generation);
    bump_resource_version(&mut entry.app);
    (StatusCode::OK, Json(entry.app.clone())).into_response()
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            fields.remove(key);
        } else {
            merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// A Kubernetes `Status` error.
fn k8s_status(status: StatusCode, reason: &str, message: &str) -> Response {
    (
        status,
        Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": status.as_u16(),
        })),
    )
        .into_response()
}

fn k8s_not_found(kind: &str, name: &str) -> Response {
    k8s_status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{kind}.argoproj.io \"{name}\" not found"),
    )
}

impl Inner {
    /// The Kubernetes API's answer to a request without the right bearer token.
    fn k8s_denied(&self, headers: &HeaderMap) -> Option<Response> {
        let expected = format!("Bearer {}", self.token);
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(got) if got == expected => None,
            _ => Some(k8s_status(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "Unauthorized",
            )),
        }
    }

    /// Whether Application `name` exists in namespace `ns`.
    fn lives_in(&self, name: &str, ns: &str) -> bool {
        lock(&self.apps)
            .get(name)
            .is_some_and(|e| e.app["metadata"]["namespace"] == ns)
    }
}

async fn k8s_get(
    State(inner): State<Arc<Inner>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let response = match inner.k8s_denied(&headers) {
        Some(denied) => denied,
        None if !inner.lives_in(&name, &ns) => k8s_not_found("applications", &name),
        None => match inner.reconcile(&name).await {
            Some(app) => (StatusCode::OK, Json(app)).into_response(),
            None => k8s_not_found("applications", &name),
        },
    };
    inner.record(format!(
        "GET {K8S}/namespaces/{ns}/applications/{name} {}",
        response.status().as_u16()
    ));
    response
}

/// `GET …/namespaces/{ns}/applications?labelSelector=…`: an `ApplicationList`.
async fn k8s_list(
    State(inner): State<Arc<Inner>>,
    Path(ns): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.k8s_denied(&headers) {
        return denied;
    }
    let selector = query.get("labelSelector").cloned().unwrap_or_default();
    let names: Vec<String> = lock(&inner.apps)
        .iter()
        .filter(|(_, entry)| entry.app["metadata"]["namespace"] == ns.as_str())
        .filter(|(_, entry)| matches_selector(&entry.app["metadata"]["labels"], &selector))
        .map(|(name, _)| name.clone())
        .collect();
    let mut items = Vec::new();
    for name in names {
        if let Some(app) = inner.reconcile(&name).await {
            items.push(app);
        }
    }
    inner.record(format!(
        "GET {K8S}/namespaces/{ns}/applications?labelSelector={selector} 200"
    ));
    Json(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationList",
        "metadata": {"resourceVersion": "1"},
        "items": items,
    }))
    .into_response()
}

/// `PATCH …/applications/{name}`: a JSON merge patch of metadata, spec and `operation`.
async fn k8s_patch(
    State(inner): State<Arc<Inner>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut line = format!("PATCH {K8S}/namespaces/{ns}/applications/{name}");
    let response = k8s_apply_patch(&inner, &ns, &name, &headers, &body, &mut line);
    inner.record(format!("{line} {}", response.status().as_u16()));
    response
}

fn k8s_apply_patch(
    inner: &Inner,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &[u8],
    line: &mut String,
) -> Response {
    if let Some(denied) = inner.k8s_denied(headers) {
        return denied;
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some("application/merge-patch+json") {
        return k8s_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml (this double: merge-patch only; got `{content_type}`)"
            ),
        );
    }
    let mut patch: Value = match serde_json::from_slice(body) {
        Ok(patch) => patch,
        Err(e) => {
            return k8s_status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("error decoding patch: {e}"),
            );
        }
    };
    let mut apps = lock(&inner.apps);
    let Some(entry) = apps
        .get_mut(name)
        .filter(|e| e.app["metadata"]["namespace"] == ns)
    else {
        return k8s_not_found("applications", name);
    };
    if patch["metadata"].get("resourceVersion").is_some() && entry.script.modified_before_patch {
        entry.script.modified_before_patch = false;
        bump_resource_version(&mut entry.app);
    }
    let current = entry.app["metadata"]["resourceVersion"].clone();
    if let Some(wanted) = patch["metadata"].get("resourceVersion")
        && *wanted != current
    {
        return k8s_status(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on applications.argoproj.io \"{name}\": the \
                 object has been modified; please apply your changes to the latest version and \
                 try again"
            ),
        );
    }
    lock(&inner.patches).push((name.to_owned(), patch.clone()));
    if let Some(map) = patch.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
    }
    if patch["operation"].is_object() {
        line.push_str(" (operation)");
    }
    let spec_changed = patch.get("spec").is_some();
    merge_patch(&mut entry.app, &patch);
    if spec_changed {
        let generation = entry.app["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        entry.app["metadata"]["generation"] = json!(generation);
    }
    bump_resource_version(&mut entry.app);
    (StatusCode::OK, Json(entry.app.clone())).into_response()
}

/// `GET …/namespaces/argocd/appprojects/{name}`: `default`, or a project some Application
/// names, with the scripted windows of its Applications in `spec.syncWindows`.
async fn k8s_project(
    State(inner): State<Arc<Inner>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = inner.k8s_denied(&headers) {
        return denied;
    }
    let apps = lock(&inner.apps);
    let members: Vec<&App> = apps
        .values()
        .filter(|e| e.app["spec"]["project"] == name.as_str())
        .collect();
    let response = if ns != "argocd" || (name != "default" && members.is_empty()) {
        k8s_not_found("appprojects", &name)
    } else {
        let windows: Vec<Value> = members
            .iter()
            .filter_map(|e| e.script.window.as_ref().map(|w| (e, w)))
            .map(|(e, w)| {
                json!({
                    "kind": w.kind,
                    "schedule": w.schedule,
                    "duration": w.duration,
                    "manualSync": w.manual_sync,
                    "applications": [e.app["metadata"]["name"]],
                })
            })
            .collect();
        Json(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "syncWindows": windows,
            },
        }))
        .into_response()
    };
    drop(apps);
    inner.record(format!(
        "GET {K8S}/namespaces/{ns}/appprojects/{name} {}",
        response.status().as_u16()
    ));
    response
}
