//! `dray abort promotion NAME`.

use reqwest::Method;
use serde_json::Value;

use crate::cli::{CliError, Context};

/// Arguments of `dray abort`.
#[derive(clap::Args, Debug)]
pub struct AbortArgs {
    /// What to abort: `promotion`.
    pub kind: String,
    /// The promotion's name.
    pub name: String,
}

/// Runs `dray abort`.
pub async fn run(ctx: &Context, args: AbortArgs) -> Result<(), CliError> {
    if !args.kind.to_ascii_lowercase().starts_with("promotion") {
        return Err(CliError::usage(
            format!("cannot abort `{}`", args.kind),
            "only promotions are aborted: `dray abort promotion NAME`",
        ));
    }
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/promotions/{}/abort", args.name);
    let answer: Value = ctx.client.send(Method::POST, &path, None::<&()>).await?;
    println!(
        "promotion {}: {}",
        args.name,
        answer["message"].as_str().unwrap_or_default()
    );
    Ok(())
}
