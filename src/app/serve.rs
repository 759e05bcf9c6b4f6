//! `dray serve`: open the store, make the bootstrap API token of a new data directory,
//! start the controllers, apply `--config` files, listen, and shut down gracefully on
//! SIGINT or SIGTERM; or (`--reset-admin`) write a new admin token and exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config;
use crate::discovery::git::MirrorCache;
use crate::discovery::image::{ImageDiscoverer, ImageDiscovererOptions};
use crate::secrets::SecretKey;
use crate::server::apply::{ApplyFile, ApplyRequest, apply};
use crate::server::auth::kubernetes::KubeAuth;
use crate::server::auth::{Auth, AuthMode};
use crate::server::{AppState, DiscoveryServices, router, tokens};
use crate::store::kubernetes::{KubeStore, KubeStoreOptions, Reads};
use crate::store::{SqliteStore, Store, TokenStore};

/// How long requests in flight may take to finish once the server is asked to stop.
const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How `dray serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where the database lives.
    pub data_dir: PathBuf,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Where `GET /metrics` is served instead of on `listen`, when it is.
    pub metrics_listen: Option<SocketAddr>,
    /// Dray's external URL for links in notifications (default `http://<listen>`).
    pub public_url: Option<String>,
    /// The overall deadline of one fetch into a git mirror (`--git-fetch-timeout`).
    pub git_fetch_timeout: std::time::Duration,
    /// YAML files or directories applied at start-up.
    pub config: Vec<PathBuf>,
    /// Where `git`, `kubectl`, `kustomize` and `helm` are.
    pub tools: dray_steps::ToolPaths,
    /// How API requests are authenticated.
    pub auth: AuthMode,
    /// OIDC login for the web UI, when configured.
    pub oidc: Option<crate::server::auth::oidc::OidcOptions>,
    /// Serve a cluster's resources instead of the embedded store's (`--kubernetes`).
    pub kubernetes: Option<KubernetesServe>,
}

/// `dray serve --kubernetes`: the API, UI and webhook receivers on the cluster's
/// resources; the controllers run in `dray controller`. API tokens, sessions and webhook
/// deliveries stay in the data directory's SQLite.
#[derive(Debug, Clone)]
pub struct KubernetesServe {
    /// The kubeconfig; the environment's (in-cluster first) when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// Which namespaces are read.
    pub namespaces: crate::store::kubernetes::NamespaceSelection,
    /// Dray's own ServiceAccount's username (`system:serviceaccount:NS:NAME`): the one
    /// writer the admission webhook lets create Promotions and write status.
    pub service_account: String,
    /// Where the validating admission webhook listens, over HTTPS, when it does.
    pub admission: Option<AdmissionListener>,
}

/// The admission webhook's HTTPS listener.
#[derive(Debug, Clone)]
pub struct AdmissionListener {
    /// The address.
    pub listen: SocketAddr,
    /// A directory with `tls.crt` and `tls.key` (a mounted `kubernetes.io/tls` Secret),
    /// read again when they change.
    pub tls_dir: PathBuf,
}

/// How long `dray serve --kubernetes` waits for the first listing of the cluster.
const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// `dray serve --reset-admin`: the way back when no token gives `dray-admin` any more.
/// Makes a new token for `admin` with `dray-admin` in every project, writes it to
/// `<data-dir>/bootstrap-token` (mode 0600), revokes nothing, logs that it did (the id and
/// the file, never the token) and returns without serving.
pub async fn reset_admin(data_dir: &std::path::Path) -> anyhow::Result<()> {
    let local = SqliteStore::open(data_dir)?;
    let (id, path) = tokens::reset_admin(&local, data_dir).await?;
    tracing::info!(
        token = %id,
        file = %path.display(),
        "wrote a new admin token (user `admin`, role `dray-admin` in every project) for --reset-admin; no token was revoked"
    );
    eprintln!(
        "A new admin token (id `{id}`, user `admin`, role `dray-admin` in every project) is in {} (mode 0600); no other token was revoked.\n\
         Start `dray serve` again without --reset-admin and use it: export DRAY_TOKEN=$(cat {})",
        path.display(),
        path.display()
    );
    Ok(())
}

/// Runs the server until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let local = Arc::new(SqliteStore::open(&options.data_dir)?);
    tracing::info!(path = %local.path().display(), "store opened");
    let token_store: Arc<dyn TokenStore> = local.clone();
    let session_store: Arc<dyn crate::store::SessionStore> = local.clone();
    let secret_key = Arc::new(SecretKey::load(&options.data_dir)?);
    let kube = match &options.kubernetes {
        None => None,
        Some(kubernetes) => {
            Some(super::kubernetes::kube_client(kubernetes.kubeconfig.as_deref()).await?)
        }
    };
    // In a cluster, users are who the API server says they are, and may what its RBAC
    // allows (TokenReview, SubjectAccessReview); `--auth none` stays none.
    let auth_mode = match (&kube, options.auth.clone()) {
        (Some(client), AuthMode::Token) => {
            AuthMode::Kubernetes(Arc::new(KubeAuth::new(client.clone())))
        }
        (_, mode) => mode,
    };
    match &auth_mode {
        AuthMode::Token => {
            if let Some((token, path)) =
                tokens::bootstrap(token_store.as_ref(), &options.data_dir).await?
            {
                announce_bootstrap(&token, &path);
            }
        }
        AuthMode::None => warn_no_auth(),
        // Kubernetes mode authenticates by TokenReview: no bootstrap token.
        AuthMode::Kubernetes(_) => {}
    }
    let oidc = match options.oidc.clone() {
        Some(oidc_options) => Some(Arc::new(start_oidc(oidc_options).await?)),
        None => None,
    };
    let store: Arc<dyn Store> = match (&options.kubernetes, &kube) {
        (Some(kubernetes), Some(client)) => {
            let store = KubeStore::connect(
                client.clone(),
                KubeStoreOptions {
                    namespaces: kubernetes.namespaces.clone(),
                    secret_key: secret_key.clone(),
                    local,
                    sync_timeout: SYNC_TIMEOUT,
                    reads: Reads::Api,
                },
            )
            .await
            .context("cannot read Dray's resources from the cluster")?;
            tracing::info!(
                "serving the cluster's resources; the controllers run in `dray controller`"
            );
            Arc::new(store)
        }
        _ => local,
    };
    let images = ImageDiscoverer::new(ImageDiscovererOptions::default())
        .context("cannot set up the registry client")?;
    let mirrors =
        Arc::new(MirrorCache::new(&options.data_dir).with_fetch_timeout(options.git_fetch_timeout));
    let services = Arc::new(DiscoveryServices {
        images: images.clone(),
        mirrors: mirrors.clone(),
    });
    let shutdown = CancellationToken::new();
    // Previews run the Stage's steps in this process, with the controllers' mirrors.
    let previews = crate::promotion::Engine::new(crate::promotion::EngineParts {
        store: store.clone(),
        steps: dray_steps::builtin_steps(),
        work_root: options.data_dir.join("work"),
        repos: Arc::new(crate::promotion::SharedMirrors(mirrors.clone())),
        secret_key: secret_key.clone(),
        tools: options.tools.clone(),
    })?;
    let state = AppState {
        store: store.clone(),
        secret_key: secret_key.clone(),
        discovery: Some(services),
        auth: Arc::new(Auth {
            mode: auth_mode,
            tokens: token_store,
            bootstrap_file: Some(options.data_dir.join(tokens::BOOTSTRAP_TOKEN_FILE)),
        }),
        sessions: Arc::new(crate::server::auth::sessions::Sessions::new(session_store)),
        oidc,
        shutdown: shutdown.clone(),
        previews: Some(Arc::new(previews)),
    };
    let controllers = match options.kubernetes {
        None => Some(
            super::controllers::start(
                super::controllers::Parts {
                    store: store.clone(),
                    secret_key: secret_key.clone(),
                    images,
                    mirrors,
                    tools: options.tools.clone(),
                    work_root: options.data_dir.join("work"),
                    public_url: options
                        .public_url
                        .clone()
                        .unwrap_or_else(|| format!("http://{}", options.listen)),
                },
                shutdown.clone(),
            )
            .await?
            .0,
        ),
        Some(_) => None,
    };

    if !options.config.is_empty() {
        let files = config::read_paths(&options.config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let request = ApplyRequest {
            files: files
                .into_iter()
                .map(|f| ApplyFile {
                    path: f.path,
                    content: f.content,
                })
                .collect(),
            default_project: None,
        };
        let response = apply(state.store.as_ref(), &state.secret_key, request, None)
            .await
            .map_err(|e| anyhow::anyhow!("the --config files were not applied: {e}"))?;
        tracing::info!(resources = response.results.len(), "applied --config");
    }

    if let Some(admission) = options
        .kubernetes
        .as_ref()
        .and_then(|k| k.admission.clone().map(|a| (a, k.service_account.clone())))
    {
        start_admission(admission, state.store.clone(), shutdown.clone()).await?;
    }

    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(url = %format!("http://{address}"), "dray is serving");
    let stopping = shutdown.clone();
    let app = router(state.clone(), crate::ui::router());
    let app = match options.metrics_listen {
        None => app,
        Some(metrics_listen) => {
            start_metrics(metrics_listen, state, shutdown.clone()).await?;
            crate::server::without_metrics(app)
        }
    };
    let served = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown_signal().await;
        stopping.cancel();
    });
    // Graceful, but bounded: requests in flight get a few seconds to finish.
    let served = tokio::select! {
        served = served => served,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(GRACE).await;
        } => {
            tracing::warn!("requests still open {}s after the signal; closing them", GRACE.as_secs());
            Ok(())
        }
    };
    shutdown.cancel();
    if let Some(controllers) = controllers
        && tokio::time::timeout(std::time::Duration::from_secs(10), controllers)
            .await
            .is_err()
    {
        tracing::warn!("the controllers did not stop within 10s");
    }
    served.context("the HTTP server failed")?;
    tracing::info!("stopped");
    Ok(())
}

/// Serves `GET /metrics` on its own address (`--metrics-listen`) until `shutdown`.
async fn start_metrics(
    listen: SocketAddr,
    state: AppState,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!("cannot listen on --metrics-listen {listen}; choose a free address")
        })?;
    let address = listener.local_addr()?;
    tracing::info!(url = %format!("http://{address}/metrics"), "metrics are served on their own address");
    let app = crate::server::metrics::own_router(state);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "the metrics listener stopped");
        }
    });
    Ok(())
}

/// Serves the validating admission webhook over HTTPS until `shutdown`.
async fn start_admission(
    (admission, service_account): (AdmissionListener, String),
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(admission.listen)
        .await
        .with_context(|| format!("cannot listen on --admission-listen {}", admission.listen))?;
    tracing::info!(url = %format!("https://{}{}", admission.listen, crate::server::admission::VALIDATE_PATH),
        %service_account, "the admission webhook is serving");
    let router = crate::server::admission::admission_router(store, service_account);
    let tls_dir = admission.tls_dir;
    tokio::spawn(async move {
        if let Err(error) = super::tls::serve_tls(listener, router, tls_dir, shutdown).await {
            tracing::error!(error = %format!("{error:#}"), "the admission webhook stopped");
        }
    });
    Ok(())
}

/// Sets up OIDC login and runs discovery once (at most `PROVIDER_TIMEOUT`): a provider
/// that cannot be reached does not stop the server; the login page says why, and the next
/// login tries again.
async fn start_oidc(
    options: crate::server::auth::oidc::OidcOptions,
) -> anyhow::Result<crate::server::auth::oidc::Oidc> {
    let oidc = crate::server::auth::oidc::Oidc::new(options)?;
    let issuer = oidc.options().issuer.clone();
    match oidc.discover().await {
        Ok(()) => {
            tracing::info!(%issuer, redirect_url = %oidc.options().redirect_url, "OIDC login enabled")
        }
        Err(error) => {
            tracing::warn!(%issuer, %error, "OIDC discovery failed; the login page will say so and retry on the next login")
        }
    }
    Ok(oidc)
}

/// Shows the bootstrap token once, on stderr and never through tracing (whose output may
/// be shipped elsewhere).
fn announce_bootstrap(token: &str, path: &std::path::Path) {
    let path = path.display();
    eprintln!(
        "\n\
         ======================================================================\n\
         A new data directory: Dray made the first API token, for user `admin`\n\
         (role `dray-admin` in every project). It is shown only this once:\n\
         \n    {token}\n\n\
         It is also in `{path}` (mode 0600), for scripts:\n\
         \n    export DRAY_TOKEN=\"$(cat {path})\"\n\n\
         Make tokens for others with `dray token create --user NAME --role dray-viewer`.\n\
         ======================================================================\n"
    );
}

/// `--auth none` is for local experiments only; say so loudly.
fn warn_no_auth() {
    eprintln!(
        "\n\
         ======================================================================\n\
         WARNING: --auth none: the API does NOT authenticate anyone. Every request\n\
         acts as `anonymous` with admin rights. Never expose this server.\n\
         ======================================================================\n"
    );
    tracing::warn!("authentication is off (--auth none): every request has admin rights");
}

pub(super) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops the server");
                let _ = interrupt.await;
                return;
            }
        };
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT received, shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
    }
}
