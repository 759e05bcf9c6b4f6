//! Real Helm charts and a real classic chart repository for tests.
//!
//! [`build_chart`] packs a chart archive as `helm package` does (a gzipped tar holding
//! `<name>/Chart.yaml`, `<name>/values.yaml` and `<name>/templates/…`, made with the `tar`
//! command) whose one template renders a ConfigMap naming the chart's version and a
//! marker only that build carries. [`ChartRepo`] serves archives and the `index.yaml` a
//! classic repository has (`apiVersion: v1`, `entries: {name: [{version, urls, digest,
//! created}]}`, archive URLs relative to the repository, as `helm repo index` writes
//! them) under a path prefix, over HTTP on loopback, optionally behind HTTP Basic (a
//! request without or with wrong credentials gets `401` with `WWW-Authenticate: Basic`).
//! Pushing charts to an OCI registry is [`crate::oci::push_chart`]. Test tooling only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::credentials::Credentials;
use crate::double_server::{Server, bind};
use crate::world::TestWorld;

/// The path prefix the repository is served under (archive URLs are relative to it).
pub const PREFIX: &str = "helm";

/// A chart archive (`.tgz`) for chart `name` at `version`, whose ConfigMap carries
/// `marker`; built in a fresh directory of `world`.
pub fn build_chart(world: &TestWorld, name: &str, version: &str, marker: &str) -> Result<Vec<u8>> {
    let dir = world.unique_dir("chart")?;
    let chart = dir.join(name);
    std::fs::create_dir_all(chart.join("templates"))?;
    std::fs::write(
        chart.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: {version}\nappVersion: \"{version}\"\n"),
    )?;
    std::fs::write(chart.join("values.yaml"), "greeting: hello\n")?;
    std::fs::write(
        chart.join("templates/configmap.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n\
             data:\n  chartVersion: {{{{ .Chart.Version | quote }}}}\n  marker: {marker:?}\n\
             \x20 greeting: {{{{ .Values.greeting | quote }}}}\n"
        ),
    )?;
    let archive = dir.join(format!("{name}-{version}.tgz"));
    let output = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(&dir)
        .arg(name)
        .output()
        .context("cannot run `tar`")?;
    if !output.status.success() {
        bail!("tar failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(std::fs::read(&archive)?)
}

#[derive(Default)]
struct Inner {
    /// `(name, version)` → archive.
    charts: BTreeMap<(String, String), Vec<u8>>,
    auth: Option<Credentials>,
    /// Requests answered 401.
    refused: usize,
}

type Shared = Arc<Mutex<Inner>>;

/// A classic Helm chart repository on loopback; stopped on drop.
pub struct ChartRepo {
    addr: SocketAddr,
    inner: Shared,
    _server: Server,
    _world: TestWorld,
}

impl ChartRepo {
    /// Starts an empty repository; with `auth`, every request needs those credentials.
    pub fn start(world: &TestWorld, auth: Option<Credentials>) -> Result<Self> {
        let inner: Shared = Arc::new(Mutex::new(Inner {
            auth,
            ..Inner::default()
        }));
        let app = Router::new()
            .route(&format!("/{PREFIX}/index.yaml"), get(index))
            .route(&format!("/{PREFIX}/charts/{{file}}"), get(archive))
            .with_state(inner.clone());
        let (listener, addr) = bind("chart repository")?;
        let server = Server::spawn("chart repository", listener, addr, app)?;
        Ok(Self {
            addr,
            inner,
            _server: server,
            _world: world.clone(),
        })
    }

    /// The repository URL, `http://127.0.0.1:PORT/helm`.
    pub fn url(&self) -> String {
        format!("http://{}/{PREFIX}", self.addr)
    }

    /// Publishes `archive` as chart `name` at `version` (the index lists it at once).
    pub fn publish(&self, name: &str, version: &str, archive: Vec<u8>) {
        lock(&self.inner)
            .charts
            .insert((name.to_owned(), version.to_owned()), archive);
    }

    /// Builds and publishes chart `name` at `version` with `marker`; returns the archive.
    pub fn publish_built(
        &self,
        world: &TestWorld,
        name: &str,
        version: &str,
        marker: &str,
    ) -> Result<Vec<u8>> {
        let archive = build_chart(world, name, version, marker)?;
        self.publish(name, version, archive.clone());
        Ok(archive)
    }

    /// How many requests were refused with 401.
    pub fn refused(&self) -> usize {
        lock(&self.inner).refused
    }
}

fn lock(inner: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `401` unless the request carries the repository's credentials (when it has any).
fn check_auth(inner: &Shared, headers: &HeaderMap) -> Option<Response> {
    let mut inner = lock(inner);
    let auth = inner.auth.clone()?;
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth.matches_header(given) {
        return None;
    }
    inner.refused += 1;
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Basic realm=\"charts\"")],
            "401 Unauthorized\n",
        )
            .into_response(),
    )
}

async fn index(State(inner): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(refused) = check_auth(&inner, &headers) {
        return refused;
    }
    let inner = lock(&inner);
    let mut entries: BTreeMap<&str, Vec<serde_json::Value>> = BTreeMap::new();
    for ((name, version), archive) in &inner.charts {
        entries.entry(name).or_default().push(serde_json::json!({
            "apiVersion": "v2",
            "name": name,
            "version": version,
            "created": "2026-01-02T03:04:05.000000006Z",
            "digest": &crate::oci::sha256(archive)[7..],
            "urls": [format!("charts/{name}-{version}.tgz")],
        }));
    }
    let index = serde_json::json!({
        "apiVersion": "v1",
        "entries": entries,
        "generated": "2026-01-02T03:04:05Z",
    });
    match serde_yaml_ng::to_string(&index) {
        Ok(yaml) => (StatusCode::OK, [("content-type", "text/yaml")], yaml).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

async fn archive(
    State(inner): State<Shared>,
    UrlPath(file): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = check_auth(&inner, &headers) {
        return refused;
    }
    let inner = lock(&inner);
    let found = inner
        .charts
        .iter()
        .find(|((name, version), _)| file == format!("{name}-{version}.tgz"));
    match found {
        Some((_, archive)) => (
            StatusCode::OK,
            [("content-type", "application/gzip")],
            archive.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "404 page not found\n").into_response(),
    }
}
