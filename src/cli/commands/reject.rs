//! `dray freight reject NAME [--stage S] --reason R` and `dray freight unreject NAME
//! [--stage S]`: take Freight out of circulation (for one Stage, or everywhere) so promote
//! refuses it and auto-promotion passes it over, and put it back.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::{CliError, Context};

/// Arguments of `dray freight reject`.
#[derive(clap::Args, Debug)]
pub struct RejectArgs {
    /// The Freight: its alias, id or a unique id prefix (7+ characters).
    pub freight: String,
    /// Only for this Stage (everywhere when not given).
    #[arg(long)]
    pub stage: Option<String>,
    /// Why, in words (kept on the Freight and shown in every refusal).
    #[arg(long)]
    pub reason: String,
}

/// Arguments of `dray freight unreject`.
#[derive(clap::Args, Debug)]
pub struct UnrejectArgs {
    /// The Freight: its alias, id or a unique id prefix (7+ characters).
    pub freight: String,
    /// Only the rejection for this Stage (every rejection when not given).
    #[arg(long)]
    pub stage: Option<String>,
}

/// Runs `dray freight reject`.
pub async fn reject(ctx: &Context, args: RejectArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/freight/{}/reject", args.freight);
    let body = json!({"stage": args.stage, "reason": args.reason});
    let answer: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let alias = answer
        .get("alias")
        .and_then(Value::as_str)
        .unwrap_or(args.freight.as_str());
    let rejection = match &args.stage {
        Some(stage) => answer.pointer(&format!("/status/rejectedFor/{stage}")),
        None => answer.pointer("/status/rejected"),
    };
    let by = rejection
        .and_then(|r| r.get("by"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let reason = rejection
        .and_then(|r| r.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let place = args
        .stage
        .as_ref()
        .map_or_else(|| "everywhere".to_owned(), |s| format!("for Stage {s}"));
    let stage_flag = args
        .stage
        .as_ref()
        .map(|s| format!(" --stage {s}"))
        .unwrap_or_default();
    println!(
        "freight {alias}: rejected by {by}: {reason} ({place}); lift it with `dray freight unreject {alias}{stage_flag}`"
    );
    Ok(())
}

/// Runs `dray freight unreject`.
pub async fn unreject(ctx: &Context, args: UnrejectArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let path = format!(
        "/api/v1/projects/{project}/freight/{}/unreject",
        args.freight
    );
    let body = json!({"stage": args.stage});
    let answer: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let message = answer
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("rejection lifted");
    println!("{message}");
    Ok(())
}
