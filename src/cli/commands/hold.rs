//! `dray hold lift --stage S`: let auto-promotion act on a Stage again after a rollback.

use reqwest::Method;
use serde_json::Value;

use crate::cli::{CliError, Context};

/// Arguments of `dray hold`.
#[derive(clap::Args, Debug)]
pub struct HoldArgs {
    /// What to do with the hold: `lift`.
    pub action: String,
    /// The Stage.
    #[arg(long)]
    pub stage: String,
}

/// Runs `dray hold`.
pub async fn run(ctx: &Context, args: HoldArgs) -> Result<(), CliError> {
    if args.action != "lift" {
        return Err(CliError::usage(
            format!("unknown hold action `{}`", args.action),
            "holds are set by promoting older Freight; lift one with `dray hold lift --stage S`",
        ));
    }
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/stages/{}/hold/lift", args.stage);
    let _: Value = ctx.client.send(Method::POST, &path, None::<&()>).await?;
    println!("stage {}: hold lifted; auto-promotion resumes", args.stage);
    Ok(())
}
