//! `dray signoff <alias|id> --stage S [--reason TEXT]`: sign Freight off for a Stage whose
//! `spec.signoff` asks for sign-offs; prints how many count now.

use reqwest::Method;

use crate::api::Freight;
use crate::cli::{CliError, Context};
use crate::server::signoffs::SignoffBody;

/// Arguments of `dray signoff`.
#[derive(clap::Args, Debug)]
pub struct SignoffArgs {
    /// The Freight: its alias, id or a unique id prefix (7+ characters).
    pub freight: String,
    /// The Stage the Freight is signed off for.
    #[arg(long)]
    pub stage: String,
    /// Why (kept on the record and in the promotion commit's `Dray-Signed-Off-By` trailer).
    #[arg(long, default_value = "")]
    pub reason: String,
}

/// Runs `dray signoff`.
pub async fn run(ctx: &Context, args: SignoffArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let body = SignoffBody {
        freight: Some(args.freight),
        alias: None,
        reason: args.reason,
    };
    let path = format!("/api/v1/projects/{project}/stages/{}/signoffs", args.stage);
    let freight: Freight = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let signed: Vec<&str> = crate::pipeline::signoff::signoffs(&freight, &args.stage)
        .iter()
        .map(|s| s.user.as_str())
        .collect();
    println!(
        "freight {} signed off for {} (signed off by {})",
        freight.spec.alias,
        args.stage,
        signed.join(", ")
    );
    Ok(())
}
