//! `dray token create|list|revoke`: API tokens.
//!
//! - `create --user U --role R [-p PROJECT | --all-projects] [--group G]… [--description
//!   TEXT] [--expires-in 30d]`: the server makes the token and binds the role to the user,
//!   in the project as every command resolves it (`-p/--project`, `DRAY_PROJECT`, or the
//!   only project there is), or in every project with `--all-projects` (never by default).
//!   Needs `create` on `tokens`, which only cluster-wide admins have. The token goes to
//!   stdout alone, so that `export DRAY_TOKEN=$(dray token create …)` works; it is shown
//!   only once. Its id (for `list` and `revoke`) goes to stderr.
//! - `list [-o table|json|yaml]`: every token (with `list` on `tokens`) or the caller's own:
//!   ids, users, the ROLE their user holds and its SCOPE (a project, or `*` for every
//!   project), creators, descriptions, expiry and last use; never a token or its hash.
//! - `bindings [-o table|json|yaml]`: the cluster-wide bindings (who holds which built-in
//!   role in every project); with `list` on `tokens`.
//! - `revoke ID`: the token stops working at once (web UI sessions made with it too). The
//!   caller's own tokens always; others' with `delete` on `tokens`. The last token giving
//!   `dray-admin` in every project is not revoked (see `dray serve --reset-admin`).

use reqwest::Method;

use crate::cli::output::{self, OutputFormat};
use crate::cli::{CliError, Context};
use crate::server::tokens::{
    ClusterBindingList, Grant, RevokeResponse, TokenList, TokenRequest, TokenResponse,
};

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
    /// Make an API token for a user and bind a role to them (in the project, as -p or the
    /// only project names it, or in every project with --all-projects). Prints the token
    /// once.
    Create(CreateArgs),
    /// List API tokens (all of them with `list` on `tokens`, otherwise your own) with the
    /// role their user holds and where; never shows a token or its hash.
    List(ListArgs),
    /// List the cluster-wide bindings: who holds which built-in role in every project.
    Bindings(ListArgs),
    /// Revoke an API token by id (see `dray token list`); it stops working at once.
    Revoke(RevokeArgs),
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
    /// Bind the role in every project (a cluster-wide binding; built-in roles only)
    /// instead of in one project.
    #[arg(long)]
    pub all_projects: bool,
    /// A group the user belongs to (RoleBindings may name groups); may be repeated.
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// What the token is for, shown by `dray token list` (one line, at most 200 characters).
    #[arg(long)]
    pub description: Option<String>,
    /// How long the token works: a duration such as `30d`, `12h`, `1h30m` or `2w`.
    /// Forever when not given.
    #[arg(long, value_parser = super::durations::token_lifetime)]
    pub expires_in: Option<String>,
}

/// Arguments of `dray token list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// The output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Arguments of `dray token revoke`.
#[derive(clap::Args, Debug)]
pub struct RevokeArgs {
    /// The token's id, as `dray token list` shows it.
    pub id: String,
}

/// Runs `dray token`.
pub async fn run(ctx: &Context, args: TokenArgs) -> Result<(), CliError> {
    match args.command {
        TokenCommand::Create(args) => create(ctx, args).await,
        TokenCommand::List(args) => list(ctx, args).await,
        TokenCommand::Bindings(args) => bindings(ctx, args).await,
        TokenCommand::Revoke(args) => revoke(ctx, args).await,
    }
}

/// Where `create` binds: `None` for every project, which must be asked for.
async fn binding_project(ctx: &Context, all_projects: bool) -> Result<Option<String>, CliError> {
    match (all_projects, &ctx.explicit_project) {
        (true, Some(project)) => Err(CliError::usage(
            format!("--all-projects and the project `{project}` contradict each other"),
            "pass -p PROJECT to bind in one project, or --all-projects (and no -p or DRAY_PROJECT) to bind in every project",
        )),
        (true, None) => Ok(None),
        (false, _) => match ctx.project().await {
            Ok(project) => Ok(Some(project)),
            Err(CliError::Usage { message, .. }) => Err(CliError::usage(
                format!("the token's role needs a place to hold: {message}"),
                "pass -p PROJECT to bind in one project, or --all-projects to bind in every project",
            )),
            Err(other) => Err(other),
        },
    }
}

async fn create(ctx: &Context, args: CreateArgs) -> Result<(), CliError> {
    let project = binding_project(ctx, args.all_projects).await?;
    let request = TokenRequest {
        user: args.user,
        role: args.role,
        project,
        groups: args.groups,
        description: args.description,
        expires_in: args.expires_in,
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
    let expiry = match &made.expires_at {
        Some(at) => format!(", expires {at}"),
        None => String::new(),
    };
    eprintln!(
        "token `{}` for user `{}`, role `{}` {scope}{expiry}; it is shown only this once:",
        made.id, made.user, made.role
    );
    println!("{}", made.token);
    Ok(())
}

async fn list(ctx: &Context, args: ListArgs) -> Result<(), CliError> {
    let list: TokenList = ctx.client.get("/api/v1/tokens").await?;
    let text = match args.output {
        OutputFormat::Json => output::json(&list.items)?,
        OutputFormat::Yaml => output::yaml_of(&list.items)?,
        OutputFormat::Table if list.items.is_empty() => {
            eprintln!("no API tokens to show");
            return Ok(());
        }
        OutputFormat::Table => {
            let rows: Vec<Vec<String>> = list
                .items
                .iter()
                .map(|listed| {
                    let t = &listed.info;
                    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                    let (role, scope) = grant_columns(&listed.grants);
                    vec![
                        t.id.clone(),
                        t.user.clone(),
                        role,
                        scope,
                        dash(&t.created_by),
                        output::age(Some(&t.created_at)),
                        dash(&t.expires_at),
                        dash(&t.last_used_at),
                        dash(&t.description),
                    ]
                })
                .collect();
            output::table(
                &[
                    "ID",
                    "USER",
                    "ROLE",
                    "SCOPE",
                    "CREATED BY",
                    "AGE",
                    "EXPIRES",
                    "LAST USED",
                    "DESCRIPTION",
                ],
                &rows,
            )
        }
    };
    print!("{text}");
    Ok(())
}

/// The ROLE and SCOPE cells of a token: its user's roles, and where each holds (`*` for
/// every project), in the same order; `-` when the user holds none.
fn grant_columns(grants: &[Grant]) -> (String, String) {
    if grants.is_empty() {
        return ("-".into(), "-".into());
    }
    let roles: Vec<&str> = grants.iter().map(|g| g.role.as_str()).collect();
    let scopes: Vec<&str> = grants
        .iter()
        .map(|g| g.project.as_deref().unwrap_or(ALL_PROJECTS))
        .collect();
    (roles.join(","), scopes.join(","))
}

/// The SCOPE of a cluster-wide binding.
const ALL_PROJECTS: &str = "*";

async fn bindings(ctx: &Context, args: ListArgs) -> Result<(), CliError> {
    let list: ClusterBindingList = ctx.client.get("/api/v1/clusterrolebindings").await?;
    let text = match args.output {
        OutputFormat::Json => output::json(&list.items)?,
        OutputFormat::Yaml => output::yaml_of(&list.items)?,
        OutputFormat::Table if list.items.is_empty() => {
            eprintln!("no cluster-wide bindings");
            return Ok(());
        }
        OutputFormat::Table => {
            let rows: Vec<Vec<String>> = list
                .items
                .iter()
                .map(|b| {
                    vec![
                        format!("{:?}", b.kind),
                        b.name.clone(),
                        b.role.clone(),
                        ALL_PROJECTS.to_owned(),
                    ]
                })
                .collect();
            output::table(&["KIND", "SUBJECT", "ROLE", "SCOPE"], &rows)
        }
    };
    print!("{text}");
    Ok(())
}

async fn revoke(ctx: &Context, args: RevokeArgs) -> Result<(), CliError> {
    let path = format!(
        "/api/v1/tokens/{}",
        crate::cli::client::path_segment(&args.id)
    );
    let answer: RevokeResponse = ctx.client.send(Method::DELETE, &path, None::<&()>).await?;
    println!(
        "token `{}` of user `{}` revoked",
        answer.revoked.id, answer.revoked.user
    );
    if let Some(warning) = answer.warning {
        eprintln!("warning: {warning}");
    }
    Ok(())
}
