//! `dray approve (--freight ID | --alias A) --stage S [--reason TEXT]`: make Freight
//! available to a Stage regardless of verification and soak, on the record.

use reqwest::Method;
use serde_json::Value;

use super::FreightChoice;
use crate::cli::{CliError, Context};
use crate::server::gates::ApproveBody;

/// Arguments of `dray approve`.
#[derive(clap::Args, Debug)]
pub struct ApproveArgs {
    /// The Stage the Freight is approved for.
    #[arg(long)]
    pub stage: String,
    /// The Freight, by id or by alias.
    #[command(flatten)]
    pub which: FreightChoice,
    /// Why (kept on the record, shown in the UI and the audit trail).
    #[arg(long, default_value = "")]
    pub reason: String,
}

/// Runs `dray approve`.
pub async fn run(ctx: &Context, args: ApproveArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let body = ApproveBody {
        freight: args.which.freight,
        alias: args.which.alias,
        reason: args.reason,
    };
    let path = format!("/api/v1/projects/{project}/stages/{}/approve", args.stage);
    let freight: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let alias = freight["alias"].as_str().unwrap_or_default();
    let by = freight
        .pointer(&format!("/status/approvedFor/{}/by", args.stage))
        .and_then(Value::as_str)
        .unwrap_or_default();
    println!("freight {alias} approved for {} by {by}", args.stage);
    Ok(())
}
