//! `dray serve`: run the embedded server.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use tracing_subscriber::EnvFilter;

use crate::cli::{CliError, env};
use crate::server::{AuthMode, ServeOptions, serve};

/// Arguments of `dray serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where the database and caches live.
    #[arg(long, default_value = ".dray")]
    pub data_dir: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// YAML files or directories applied at start-up; may be repeated.
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// The `helm` binary used by `helm-template` steps.
    #[arg(long, env = "DRAY_HELM", default_value = "helm")]
    pub helm: std::path::PathBuf,
    /// The `kubectl` binary used by `kustomize-build` steps (`kubectl kustomize`).
    #[arg(long, env = "DRAY_KUBECTL", default_value = "kubectl")]
    pub kubectl: std::path::PathBuf,
    /// A standalone `kustomize` binary to use instead of `kubectl kustomize`.
    #[arg(long, env = "DRAY_KUSTOMIZE")]
    pub kustomize: Option<std::path::PathBuf>,
    /// The log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How API requests are authenticated: `token` (bearer API tokens; a new data
    /// directory gets a bootstrap admin token in `<data-dir>/bootstrap-token`) or `none`
    /// (everyone is `anonymous` with admin rights: local experiments only).
    #[arg(long, value_enum, default_value_t = Auth::Token)]
    pub auth: Auth,
}

/// How `dray serve` authenticates API requests. (OIDC is not built yet.)
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
    let filter = EnvFilter::try_from_env(env::DRAY_LOG)
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let installed = match args.log_format {
        LogFormat::Text => subscriber.try_init(),
        LogFormat::Json => subscriber.json().try_init(),
    };
    if let Err(error) = installed {
        return Err(CliError::Local(format!("cannot set up logging: {error}")));
    }
    let tools = dray_steps::ToolPaths {
        helm: args.helm,
        kubectl: args.kubectl,
        kustomize: args.kustomize,
        ..Default::default()
    };
    let options = ServeOptions {
        data_dir: args.data_dir,
        listen: args.listen,
        config: args.config,
        tools,
        auth: match args.auth {
            Auth::Token => AuthMode::Token,
            Auth::None => AuthMode::None,
        },
    };
    serve(options)
        .await
        .map_err(|e| CliError::Local(format!("{e:#}")))
}
