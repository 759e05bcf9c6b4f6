//! Dray's end-to-end harness: real services in a temporary world, one per test.
//!
//! Test tooling only, never shipped. Start with [`TestWorld::new`], then start what the
//! test needs; each service keeps the world alive and stops its processes on drop:
//!
//! - [`Registry`]: a real `docker-registry` (distribution 2.8), optional htpasswd auth
//!   and push notifications; [`oci`] pushes images and image indexes to it.
//! - [`GitServer`]: `git http-backend` over HTTP with optional basic auth;
//!   [`GitRepo`] is a test-side working copy driven by the git CLI.
//! - [`Dray`]: `dray serve` from `$DRAY_BIN` (or `target/debug/dray`), and its CLI.
//! - [`control_plane::ControlPlane`]: a real Kubernetes control plane (etcd,
//!   kube-apiserver, kube-controller-manager of the release pinned in
//!   `e2e/tools/versions.env`, built by `e2e/tools/build.sh`); [`kube_pipeline`] installs
//!   Dray on it and runs the quickstart in Kubernetes mode. [`tools`] finds the pinned
//!   `helm`, `kustomize`, `cosign` and `kubectl`.
//! - [`prometheus::Prometheus`]: a Prometheus HTTP API double (instant queries, scripted).
//! - [`github`], [`gitlab`], [`gitea`], [`bitbucket`]: pull-request API doubles of the
//!   forges over real bare repositories (merges are real commits, made by the git CLI);
//!   the GitHub double also serves the Git database and compare API `github-push` uses.
//! - [`chart_repo::ChartRepo`]: a classic Helm chart repository (`index.yaml` and
//!   archives, optional basic auth); [`chart_repo::build_chart`] packs real charts and
//!   [`oci::push_chart`] pushes them to the registry as OCI artifacts.
//!
//! Every secret the harness makes is remembered by [`secrets`]; each `dray serve` log,
//! CLI output, API response and page the harness sees is checked for them, and a test
//! fails when one leaks (see [`secrets`] and [`Dray`]).
//!
//! Process control and git calls are blocking; `oci` is async (Tokio). The git server
//! runs on its own thread, so blocking git calls from an async test cannot starve it.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use dray_e2e::{GitRepo, GitServer, Registry, TestWorld, oci};
//!
//! let world = TestWorld::new()?;
//! let registry = Registry::start(&world, Default::default())?;
//! let digest = oci::push_image(&registry, "demo/app", "1.0.0").await?;
//! let git = GitServer::start(&world, Default::default())?;
//! let url = git.create_repo("config")?;
//! let repo = GitRepo::clone_from_url(&world, &url)?;
//! repo.write("app.yaml", &format!("image: {}@{digest}\n", registry.image("demo/app", "1.0.0")))?;
//! repo.commit("Add app")?;
//! repo.push("main")?;
//! # Ok(()) }
//! ```

pub mod argocd;
pub mod bench_baseline;
pub mod bench_numbers;
pub mod bitbucket;
pub mod browser;
pub mod chart_repo;
pub mod control_plane;
pub mod controller;
mod credentials;
pub mod deploy;
mod double_server;
mod dray;
mod forge_git;
mod git_repo;
mod git_server;
pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod kube_pipeline;
pub mod oci;
pub mod oidc_provider;
pub mod pipeline;
mod process;
pub mod prometheus;
mod registry;
pub mod secrets;
pub mod stage_branch;
pub mod tls;
pub mod tools;
pub mod webhooks;
mod world;

pub use credentials::Credentials;
pub use dray::{
    BOOTSTRAP_TOKEN_FILE, DRAY_BIN_ENV, DRAY_SERVER_ENV, DRAY_TOKEN_ENV, Dray, DrayOptions,
};
pub use git_repo::{Commit, GitRepo, TEST_AUTHOR, git, ls_remote};
pub use git_server::{GitRequest, GitServer, GitServerOptions};
pub use registry::{Notifications, REGISTRY_BIN, Registry, RegistryOptions};
pub use world::{
    HTTP_TIMEOUT, KEEP_ENV, TestWorld, free_port, http_client, loopback, wait_until, workspace_root,
};
