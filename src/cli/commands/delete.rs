//! `dray delete KIND NAME`.

use reqwest::Method;
use serde_json::Value;

use crate::api::Kind;
use crate::cli::{CliError, Context};

use super::get::parse_kind;

/// Arguments of `dray delete`.
#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The kind, e.g. `stage` or `warehouses`.
    pub kind: String,
    /// The name.
    pub name: String,
}

/// Runs `dray delete`.
pub async fn run(ctx: &Context, args: DeleteArgs) -> Result<(), CliError> {
    let kind = parse_kind(&args.kind)?;
    let path = if kind == Kind::Project {
        format!("/api/v1/projects/{}", args.name)
    } else {
        let project = ctx.project().await?;
        format!("/api/v1/projects/{project}/{}/{}", kind.plural(), args.name)
    };
    let _: Value = ctx.client.send(Method::DELETE, &path, None::<&()>).await?;
    println!(
        "{} {} deleted",
        kind.as_str().to_ascii_lowercase(),
        args.name
    );
    Ok(())
}
