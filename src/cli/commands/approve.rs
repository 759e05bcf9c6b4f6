//! `dray approve (--freight ID | --alias A) --stage S [--reason TEXT]`: make Freight
//! available to a Stage regardless of verification and soak, on the record.

use reqwest::Method;

use super::FreightChoice;
use crate::api::Freight;
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
    let freight: Freight = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let alias = &freight.spec.alias;
    let by = freight
        .status
        .as_ref()
        .and_then(|status| status.approved_for.get(&args.stage))
        .map(|approval| approval.by.as_str())
        .unwrap_or_default();
    println!("freight {alias} approved for {} by {by}", args.stage);
    Ok(())
}
