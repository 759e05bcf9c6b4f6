//! `dray token create --user U --role R [-p PROJECT] [--group G]…`: make an API token.
//!
//! The server makes the token and binds the role to the user: in the project given with
//! `-p/--project` (or `DRAY_PROJECT`), or cluster-wide (every project) without one. Needs
//! `create` on `tokens`, which only cluster-wide admins have. The token goes to stdout
//! alone, so that `export DRAY_TOKEN=$(dray token create …)` works; it is shown only once.

use reqwest::Method;

use crate::cli::{CliError, Context};
use crate::server::tokens::{TokenRequest, TokenResponse};

/// Arguments of `dray token`.
#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// The `dray token` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum TokenCommand {
    /// Make an API token for a user and bind a role to them (in the project given with
    /// -p, or in every project without one). Prints the token once.
    Create(CreateArgs),
}

/// Arguments of `dray token create`.
#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The user the token authenticates as (recorded as the actor of what it does).
    #[arg(long)]
    pub user: String,
    /// The role to bind: `dray-admin`, `dray-promoter`, `dray-viewer`, or (with -p) a Role
    /// of the project.
    #[arg(long)]
    pub role: String,
    /// A group the user belongs to (RoleBindings may name groups); may be repeated.
    #[arg(long = "group")]
    pub groups: Vec<String>,
}

/// Runs `dray token`.
pub async fn run(ctx: &Context, args: TokenArgs) -> Result<(), CliError> {
    let TokenCommand::Create(args) = args.command;
    let request = TokenRequest {
        user: args.user,
        role: args.role,
        project: ctx.explicit_project.clone(),
        groups: args.groups,
    };
    let made: TokenResponse = ctx
        .client
        .send(Method::POST, "/api/v1/tokens", Some(&request))
        .await?;
    let scope = match (&made.project, &made.binding) {
        (Some(project), Some(binding)) => {
            format!("in project `{project}` (RoleBinding `{binding}`)")
        }
        _ => "in every project".to_owned(),
    };
    eprintln!(
        "token for user `{}`, role `{}` {scope}; it is shown only this once:",
        made.user, made.role
    );
    println!("{}", made.token);
    Ok(())
}
