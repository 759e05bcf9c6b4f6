//! The `dray` command line: clap definitions (doc comments are the help text), the
//! resolved context every command gets, and one function per subcommand under
//! `commands/`. Every command but `serve`, `controller` and `crds` talks to the server's API.

pub mod client;
pub mod commands;
pub mod context;
pub mod env;
pub mod error;
pub mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use client::ApiClient;
pub use context::Context;
pub use error::CliError;
pub use output::OutputFormat;

/// Dray: promote exact versions through your GitOps stages, with gates that say why.
#[derive(Parser, Debug)]
#[command(name = "dray", version = crate::VERSION, propagate_version = true)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// The Dray server's URL.
    #[arg(long, global = true, env = env::DRAY_SERVER, default_value = "http://127.0.0.1:7070")]
    pub server: String,
    /// The project; may be omitted when only one project exists.
    #[arg(short = 'p', long, global = true, env = env::DRAY_PROJECT)]
    pub project: Option<String>,
    /// The API token (see `dray token create`; a new server's first one is in
    /// `<data-dir>/bootstrap-token`).
    #[arg(long, global = true, env = env::DRAY_TOKEN, hide_env_values = true)]
    pub token: Option<String>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server: controllers, HTTP API and webhook receivers, state in SQLite.
    Serve(Box<commands::serve::ServeArgs>),
    /// Run the controllers in a Kubernetes cluster, against the CRDs (one active replica).
    Controller(Box<commands::controller::ControllerArgs>),
    /// Create or update resources from YAML files or directories.
    Apply(commands::apply::ApplyArgs),
    /// List resources, or show one.
    Get(commands::get::GetArgs),
    /// Delete a resource.
    Delete(commands::delete::DeleteArgs),
    /// Promote Freight into a Stage.
    Promote(commands::promote::PromoteArgs),
    /// Approve Freight for a Stage (bypasses verification and soak, on the record).
    Approve(commands::approve::ApproveArgs),
    /// Lift a Stage's hold on auto-promotion.
    Hold(commands::hold::HoldArgs),
    /// Re-run (or `--abort`) the verification of a Stage's current Freight.
    Verify(commands::verify::VerifyArgs),
    /// Abort a promotion.
    Abort(commands::abort::AbortArgs),
    /// Show a Stage's history, read from its branch in git.
    Audit(commands::audit::AuditArgs),
    /// Ask a Warehouse to look for new artifacts now.
    Refresh(commands::refresh::RefreshArgs),
    /// Work with Freight (e.g. assemble hotfix Freight by hand).
    Freight(commands::freight::FreightArgs),
    /// Make API tokens.
    Token(commands::token::TokenArgs),
    /// Write the CustomResourceDefinitions for Kubernetes.
    Crds(commands::crds::CrdsArgs),
    /// Print the CLI's and the server's versions.
    Version,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::app::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            report(&error);
            ExitCode::from(error.exit_code())
        }
    }
}

fn report(error: &CliError) {
    let colour = output::stderr_is_colourful();
    eprintln!("{} {error}", output::paint("error:", "1;31", colour));
    for line in error.details() {
        eprintln!("{line}");
    }
    if let Some(hint) = error.hint() {
        eprintln!("{} {hint}", output::paint("hint:", "1;36", colour));
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let ctx = || Context::new(&cli.global);
    match cli.command {
        Command::Serve(args) => commands::serve::run(*args).await,
        Command::Controller(args) => commands::controller::run(*args).await,
        Command::Apply(args) => commands::apply::run(&ctx()?, args).await,
        Command::Get(args) => commands::get::run(&ctx()?, args).await,
        Command::Delete(args) => commands::delete::run(&ctx()?, args).await,
        Command::Refresh(args) => commands::refresh::run(&ctx()?, args).await,
        Command::Promote(args) => commands::promote::run(&ctx()?, args).await,
        Command::Abort(args) => commands::abort::run(&ctx()?, args).await,
        Command::Approve(args) => commands::approve::run(&ctx()?, args).await,
        Command::Hold(args) => commands::hold::run(&ctx()?, args).await,
        Command::Verify(args) => commands::verify::run(&ctx()?, args).await,
        Command::Audit(args) => commands::audit::run(&ctx()?, args).await,
        Command::Freight(args) => commands::freight::run(&ctx()?, args).await,
        Command::Token(args) => commands::token::run(&ctx()?, args).await,
        Command::Crds(args) => commands::crds::run(args),
        Command::Version => commands::version::run(&ctx()?).await,
    }
}
