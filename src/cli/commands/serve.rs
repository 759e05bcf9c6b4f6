//! `dray serve`: run the embedded server, and turn its `--oidc-*` flags into
//! [`OidcOptions`] (OIDC login for the web UI); or, with `--reset-admin`, write a new admin
//! token to the data directory and exit (the recovery when no admin token is left).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use tracing_subscriber::EnvFilter;

use crate::app::{AdmissionListener, KubernetesServe, ServeOptions, reset_admin, serve};
use crate::cli::{CliError, env};
use crate::server::AuthMode;
use crate::server::auth::oidc::OidcOptions;
use crate::store::kubernetes::NamespaceSelection;

/// Arguments of `dray serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where the database and caches live.
    #[arg(long, default_value = ".dray")]
    pub data_dir: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Serve `GET /metrics` (Prometheus, no token) on this address instead of on --listen,
    /// which then answers 404 for it: e.g. `127.0.0.1:9090`, reachable by the scraper only.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Dray's external URL, for the links in notifications and commit statuses (default
    /// `http://<listen>`).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// How long one fetch into a git mirror may take (discovery's and git-clone's); past
    /// it git is stopped and the mirror unlocked, so a stalled server holds nothing.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = super::durations::git_fetch_timeout)]
    pub git_fetch_timeout: std::time::Duration,
    /// YAML files or directories applied at start-up; may be repeated.
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// The tools promotion steps run.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// The log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Serve a Kubernetes cluster's Dray resources (the CRDs) instead of the embedded
    /// store's; the controllers run in `dray controller`.
    #[arg(long)]
    pub kubernetes: bool,
    /// With --kubernetes: the kubeconfig; without it, the pod's ServiceAccount, then
    /// `$KUBECONFIG` or `~/.kube/config`.
    #[arg(long, value_name = "FILE", requires = "kubernetes")]
    pub kubeconfig: Option<PathBuf>,
    /// With --kubernetes: read only namespaces matching this label selector (default:
    /// the Project namespaces, labelled `dray.dev/project`).
    #[arg(long, value_name = "SELECTOR", requires = "kubernetes")]
    pub namespace_selector: Option<String>,
    /// With --kubernetes: Dray's own ServiceAccount, as the API server names it; the
    /// admission webhook lets only it create Promotions and write status.
    #[arg(
        long,
        value_name = "USER",
        requires = "kubernetes",
        default_value = "system:serviceaccount:dray:dray"
    )]
    pub service_account: String,
    /// With --kubernetes: serve the validating admission webhook (`POST
    /// /admission/validate`) over HTTPS on this address.
    #[arg(long, value_name = "ADDR", requires_all = ["kubernetes", "admission_tls_dir"])]
    pub admission_listen: Option<SocketAddr>,
    /// The webhook's certificate: a directory with `tls.crt` and `tls.key` (a mounted
    /// `kubernetes.io/tls` Secret), picked up again when they are rotated.
    #[arg(long, value_name = "DIR", requires = "admission_listen")]
    pub admission_tls_dir: Option<PathBuf>,
    /// How API requests are authenticated: `token` (bearer API tokens; a new data
    /// directory gets a bootstrap admin token in `<data-dir>/bootstrap-token`) or `none`
    /// (everyone is `anonymous` with admin rights: local experiments only).
    #[arg(long, value_enum, default_value_t = Auth::Token)]
    pub auth: Auth,
    /// Recovery when no token gives `dray-admin` any more: write a new admin token
    /// (user `admin`, `dray-admin` in every project) to `<data-dir>/bootstrap-token`
    /// (mode 0600), revoke nothing, and exit; then start `dray serve` as before.
    #[arg(long, conflicts_with = "kubernetes")]
    pub reset_admin: bool,
    /// OIDC login for the web UI: the OpenID provider's issuer URL, exactly as its ID
    /// tokens' `iss` claim has it. Discovery reads `<issuer>/.well-known/openid-configuration`.
    #[arg(long, value_name = "URL")]
    pub oidc_issuer: Option<String>,
    /// The client id registered at the provider (required with --oidc-issuer).
    #[arg(long, value_name = "ID")]
    pub oidc_client_id: Option<String>,
    /// A file holding the client secret (confidential clients). Without it Dray is a
    /// public client and relies on PKCE. Never pass a secret on the command line.
    #[arg(long, value_name = "PATH")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// Where the provider sends the browser back: Dray's external URL + `/auth/callback`
    /// (register it at the provider). Required with --oidc-issuer unless --listen is a
    /// loopback address, where it defaults to `http://<listen>/auth/callback`.
    #[arg(long, value_name = "URL")]
    pub oidc_redirect_url: Option<String>,
    /// The ID-token claim naming the user (falls back to `sub` when absent).
    #[arg(long, value_name = "CLAIM", default_value = "email")]
    pub oidc_username_claim: String,
    /// Put before every OIDC username, so that provider-side names cannot be taken for API
    /// token users (`-`: nothing). By default a name from `email` is kept as it is and any
    /// other (another claim, or `sub`) becomes `oidc:<name>`; RoleBindings name it so.
    #[arg(long, value_name = "PREFIX")]
    pub oidc_username_prefix: Option<String>,
    /// The ID-token claim listing the user's groups (for RoleBindings with `kind: Group`).
    #[arg(long, value_name = "CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// The scopes to ask for, space- or comma-separated (`openid` is always asked for).
    #[arg(
        long,
        value_name = "SCOPES",
        default_value = "openid profile email groups"
    )]
    pub oidc_scopes: String,
}

/// Where the tools promotion steps run are (`dray serve` and `dray controller`).
#[derive(clap::Args, Debug, Clone)]
pub struct ToolArgs {
    /// The `helm` binary used by `helm-template` steps.
    #[arg(long, env = "DRAY_HELM", default_value = "helm")]
    pub helm: std::path::PathBuf,
    /// The `kubectl` binary used by `kustomize-build` steps (`kubectl kustomize`).
    #[arg(long, env = "DRAY_KUBECTL", default_value = "kubectl")]
    pub kubectl: std::path::PathBuf,
    /// A standalone `kustomize` binary to use instead of `kubectl kustomize`.
    #[arg(long, env = "DRAY_KUSTOMIZE")]
    pub kustomize: Option<std::path::PathBuf>,
}

impl ToolArgs {
    /// The steps' tool paths.
    pub fn paths(self) -> dray_steps::ToolPaths {
        dray_steps::ToolPaths {
            helm: self.helm,
            kubectl: self.kubectl,
            kustomize: self.kustomize,
            ..Default::default()
        }
    }
}

/// How `dray serve` authenticates API requests (OIDC, for the web UI, comes on top of
/// `token` with the `--oidc-*` flags).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Bearer API tokens made with `dray token create`.
    Token,
    /// No authentication at all.
    None,
}

/// How `dray serve` writes its log.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Runs `dray serve`.
pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    init_logging(args.log_format)?;
    if args.reset_admin {
        return reset_admin(&args.data_dir)
            .await
            .map_err(|e| CliError::Local(format!("{e:#}")));
    }
    let oidc = oidc_options(&args)?;
    let tools = args.tools.clone().paths();
    let options = ServeOptions {
        data_dir: args.data_dir,
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        public_url: args.public_url.clone(),
        git_fetch_timeout: args.git_fetch_timeout,
        config: args.config,
        tools,
        auth: match args.auth {
            Auth::Token => AuthMode::Token,
            Auth::None => AuthMode::None,
        },
        oidc,
        kubernetes: args.kubernetes.then(|| KubernetesServe {
            kubeconfig: args.kubeconfig.clone(),
            namespaces: match &args.namespace_selector {
                Some(selector) => NamespaceSelection::Labelled(selector.clone()),
                None => NamespaceSelection::default(),
            },
            service_account: args.service_account.clone(),
            admission: args
                .admission_listen
                .zip(args.admission_tls_dir.clone())
                .map(|(listen, tls_dir)| AdmissionListener { listen, tls_dir }),
        }),
    };
    serve(options)
        .await
        .map_err(|e| CliError::Local(format!("{e:#}")))
}

/// Logs to stderr in `format`, filtered by `DRAY_LOG`.
pub fn init_logging(format: LogFormat) -> Result<(), CliError> {
    let filter = EnvFilter::try_from_env(env::DRAY_LOG)
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => subscriber.try_init(),
        LogFormat::Json => subscriber.json().try_init(),
    };
    installed.map_err(|error| CliError::Local(format!("cannot set up logging: {error}")))
}

fn usage(message: impl Into<String>, hint: &str) -> CliError {
    CliError::Usage {
        message: message.into(),
        hint: Some(hint.to_owned()),
    }
}

/// The OIDC settings the flags ask for; none without `--oidc-issuer`.
fn oidc_options(args: &ServeArgs) -> Result<Option<OidcOptions>, CliError> {
    let Some(issuer) = args.oidc_issuer.clone() else {
        let stray = args.oidc_client_id.is_some()
            || args.oidc_client_secret_file.is_some()
            || args.oidc_redirect_url.is_some()
            || args.oidc_username_prefix.is_some();
        if stray {
            return Err(usage(
                "--oidc-client-id, --oidc-client-secret-file, --oidc-redirect-url and --oidc-username-prefix need --oidc-issuer",
                "add --oidc-issuer <the provider's issuer URL>, or drop the --oidc-* flags",
            ));
        }
        return Ok(None);
    };
    if args.auth == Auth::None {
        return Err(usage(
            "--oidc-issuer cannot be used with --auth none (nobody logs in when nothing is authenticated)",
            "drop --auth none to use OIDC login",
        ));
    }
    let client_id = args
        .oidc_client_id
        .clone()
        .filter(|id| !id.trim().is_empty())
        .ok_or_else(|| {
            usage(
                "--oidc-issuer needs --oidc-client-id",
                "give the client id registered for Dray at the provider",
            )
        })?;
    let client_secret = match &args.oidc_client_secret_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                usage(
                    format!(
                        "cannot read --oidc-client-secret-file `{}`: {e}",
                        path.display()
                    ),
                    "give a readable file holding only the client secret",
                )
            })?;
            let secret = text.trim();
            if secret.is_empty() {
                return Err(usage(
                    format!("--oidc-client-secret-file `{}` is empty", path.display()),
                    "put the client secret in it, or drop the flag for a public (PKCE-only) client",
                ));
            }
            Some(secret.to_owned())
        }
    };
    let redirect_url = match &args.oidc_redirect_url {
        Some(url) => url.clone(),
        None if args.listen.ip().is_loopback() && args.listen.port() != 0 => {
            format!("http://{}/auth/callback", args.listen)
        }
        None => {
            return Err(usage(
                format!(
                    "--oidc-issuer needs --oidc-redirect-url when --listen ({}) is not a loopback address with a fixed port",
                    args.listen
                ),
                "give Dray's external URL followed by /auth/callback, e.g. --oidc-redirect-url https://dray.example.com/auth/callback (a proxy's Host header is not trusted for it)",
            ));
        }
    };
    let scopes: Vec<String> = args
        .oidc_scopes
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    Ok(Some(OidcOptions {
        issuer,
        client_id,
        client_secret,
        redirect_url,
        username_claim: args.oidc_username_claim.clone(),
        groups_claim: args.oidc_groups_claim.clone(),
        username_prefix: args
            .oidc_username_prefix
            .as_deref()
            .map(|prefix| if prefix == "-" { "" } else { prefix }.to_owned()),
        scopes,
    }))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        Cli::try_parse_from(std::iter::once("dray").chain(args.iter().copied()))
            .unwrap()
            .serve
    }

    #[test]
    fn no_issuer_means_no_oidc_but_stray_flags_are_refused() {
        assert!(oidc_options(&parse(&[])).unwrap().is_none());
        let error = oidc_options(&parse(&["--oidc-client-id", "dray"])).unwrap_err();
        assert!(error.to_string().contains("need --oidc-issuer"), "{error}");
    }

    #[test]
    fn defaults_and_a_redirect_derived_only_on_loopback() {
        let options = oidc_options(&parse(&[
            "--oidc-issuer",
            "http://127.0.0.1:9400",
            "--oidc-client-id",
            "dray",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(options.redirect_url, "http://127.0.0.1:7070/auth/callback");
        assert_eq!(options.username_claim, "email");
        assert_eq!(options.groups_claim, "groups");
        assert_eq!(options.scopes, ["openid", "profile", "email", "groups"]);
        assert!(options.client_secret.is_none());
        assert_eq!(options.username_prefix, None);
        let base = [
            "--oidc-issuer",
            "http://127.0.0.1:9400",
            "--oidc-client-id",
            "dray",
        ];
        let prefix = |given: &str| {
            let mut args = base.to_vec();
            args.extend(["--oidc-username-prefix", given]);
            oidc_options(&parse(&args))
                .unwrap()
                .unwrap()
                .username_prefix
        };
        assert_eq!(prefix("-").as_deref(), Some(""));
        assert_eq!(prefix("corp/").as_deref(), Some("corp/"));

        let error = oidc_options(&parse(&[
            "--listen",
            "0.0.0.0:7070",
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "dray",
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("--oidc-redirect-url"), "{error}");
        let error =
            oidc_options(&parse(&["--oidc-issuer", "https://idp.example.com"])).unwrap_err();
        assert!(error.to_string().contains("--oidc-client-id"), "{error}");
        let error = oidc_options(&parse(&[
            "--auth",
            "none",
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "dray",
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("--auth none"), "{error}");
    }

    #[test]
    fn the_secret_comes_from_its_file_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3cret\n").unwrap();
        let args = parse(&[
            "--listen",
            "10.0.0.1:80",
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "dray",
            "--oidc-client-secret-file",
            path.to_str().unwrap(),
            "--oidc-redirect-url",
            "https://dray.example.com/auth/callback",
            "--oidc-scopes",
            "openid,email",
        ]);
        let options = oidc_options(&args).unwrap().unwrap();
        assert_eq!(options.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(options.scopes, ["openid", "email"]);
        std::fs::write(&path, "  \n").unwrap();
        assert!(
            oidc_options(&args)
                .unwrap_err()
                .to_string()
                .contains("is empty")
        );
    }
}
