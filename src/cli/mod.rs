//! The `dray` command line: clap definitions (doc comments are the help text), the
//! resolved context every client command gets, and one function per subcommand under
//! `commands/`. The server-side and local commands (`serve`, `controller`, `crds`,
//! `completion`, `man`, `config`) take no client options; the others take them under
//! "Client options" (see `args`).

pub mod args;
pub mod client;
pub mod commands;
pub mod context;
pub mod env;
pub mod error;
pub mod output;
pub mod saved;
pub mod server_url;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use args::{Client, ClientArgs, ConnectArgs};
pub use client::ApiClient;
pub use context::Context;
pub use error::CliError;
pub use output::OutputFormat;

/// Dray: promote exact versions through your GitOps stages, with gates that say why.
#[derive(Parser, Debug)]
#[command(name = "dray", version = crate::VERSION, propagate_version = true)]
pub struct Cli {
    /// Client options given before the command (unlisted; see `args`).
    #[command(flatten)]
    pub leading: args::LeadingClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server: controllers, HTTP API and webhook receivers, state in SQLite.
    Serve(Box<commands::serve::ServeArgs>),
    /// Run the controllers in a Kubernetes cluster, against the CRDs (one active replica).
    Controller(Box<commands::controller::ControllerArgs>),
    /// Create or update resources from YAML files or directories (`-f -`: standard input).
    Apply(Client<commands::apply::ApplyArgs>),
    /// List resources, or show one.
    Get(Client<commands::get::GetArgs>),
    /// Delete a resource.
    Delete(Client<commands::delete::DeleteArgs>),
    /// Promote Freight into a Stage, or into every Stage fed by one (`--downstream-from`).
    Promote(Client<commands::promote::PromoteArgs>),
    /// Approve Freight for a Stage (bypasses verification and soak, on the record).
    Approve(Client<commands::approve::ApproveArgs>),
    /// Sign Freight off for a Stage whose `spec.signoff` asks for sign-offs.
    Signoff(Client<commands::signoff::SignoffArgs>),
    /// Place or lift a Stage's hold on auto-promotion.
    Hold(Client<commands::hold::HoldArgs>),
    /// Stop the line: refuse promotions into a Stage (or the whole project) until lifted.
    Freeze(Client<commands::freeze::FreezeArgs>),
    /// Lift a freeze (`dray freeze`) on a Stage or the project.
    Unfreeze(Client<commands::freeze::UnfreezeArgs>),
    /// Re-run (or `--abort`) the verification of a Stage's current Freight.
    Verify(Client<commands::verify::VerifyArgs>),
    /// Abort a promotion.
    Abort(Client<commands::abort::AbortArgs>),
    /// Show a Stage's history, read from its branch in git.
    Audit(Client<commands::audit::AuditArgs>),
    /// Ask a Warehouse to look for new artifacts now.
    Refresh(Client<commands::refresh::RefreshArgs>),
    /// Work with Freight (e.g. assemble hotfix Freight by hand).
    Freight(Client<commands::freight::FreightArgs>),
    /// Make API tokens.
    Token(Client<commands::token::TokenArgs>),
    /// Check a token against a server and save both as a context (the current one).
    Login(commands::login::LoginArgs),
    /// Show and change the saved contexts (`dray login` makes them).
    Config(commands::config::ConfigArgs),
    /// Print the CLI's and the server's versions.
    Version(commands::version::VersionArgs),
    /// Write the CustomResourceDefinitions for Kubernetes.
    Crds(commands::crds::CrdsArgs),
    /// Print another tool's documents in Dray's own form (`dray convert kargo -f DIR`).
    Convert(commands::convert::ConvertArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completion(commands::completion::CompletionArgs),
    /// Write man pages, one per command, into a directory.
    Man(commands::completion::ManArgs),
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = refuse_leading_options(&cli) {
        report(&error);
        return ExitCode::from(error.exit_code());
    }
    if env::non_empty(env::DRAY_PARSE_ONLY).is_some() {
        // The docs' commands are checked against this definition (e2e/tests/docs_commands.rs).
        return ExitCode::SUCCESS;
    }
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

/// Client options before a command that takes none (`dray -p demo serve`) are refused.
fn refuse_leading_options(cli: &Cli) -> Result<(), CliError> {
    let name = match &cli.command {
        Command::Serve(_) => "serve",
        Command::Controller(_) => "controller",
        Command::Login(_) => "login",
        Command::Config(_) => "config",
        Command::Crds(_) => "crds",
        Command::Convert(_) => "convert",
        Command::Completion(_) => "completion",
        Command::Man(_) => "man",
        Command::Version(_) if cli.leading.project.is_some() => "version",
        _ => return Ok(()),
    };
    if cli.leading.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(
        format!("`dray {name}` takes no client options (--server, --token, --context, -p)"),
        format!("run `dray {name}` without them; they are for the commands that talk to a server"),
    ))
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let leading = cli.leading;
    let ctx = |client: ClientArgs| Context::new(&leading.clone().under(client));
    match cli.command {
        Command::Serve(args) => commands::serve::run(*args).await,
        Command::Controller(args) => commands::controller::run(*args).await,
        Command::Apply(c) => commands::apply::run(&ctx(c.client)?, c.args).await,
        Command::Get(c) => commands::get::run(&ctx(c.client)?, c.args).await,
        Command::Delete(c) => commands::delete::run(&ctx(c.client)?, c.args).await,
        Command::Refresh(c) => commands::refresh::run(&ctx(c.client)?, c.args).await,
        Command::Promote(c) => commands::promote::run(&ctx(c.client)?, c.args).await,
        Command::Abort(c) => commands::abort::run(&ctx(c.client)?, c.args).await,
        Command::Approve(c) => commands::approve::run(&ctx(c.client)?, c.args).await,
        Command::Signoff(c) => commands::signoff::run(&ctx(c.client)?, c.args).await,
        Command::Hold(c) => commands::hold::run(&ctx(c.client)?, c.args).await,
        Command::Freeze(c) => commands::freeze::freeze(&ctx(c.client)?, c.args).await,
        Command::Unfreeze(c) => commands::freeze::unfreeze(&ctx(c.client)?, c.args).await,
        Command::Verify(c) => commands::verify::run(&ctx(c.client)?, c.args).await,
        Command::Audit(c) => commands::audit::run(&ctx(c.client)?, c.args).await,
        Command::Freight(c) => commands::freight::run(&ctx(c.client)?, c.args).await,
        Command::Token(c) => commands::token::run(&ctx(c.client)?, c.args).await,
        Command::Login(args) => commands::login::run(args).await,
        Command::Config(args) => commands::config::run(args),
        Command::Version(mut args) => {
            args.connect = leading.under_connect(args.connect);
            commands::version::run(args).await
        }
        Command::Crds(args) => commands::crds::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Completion(args) => commands::completion::completion(args),
        Command::Man(args) => commands::completion::man(args),
    }
}
