//! `dray freeze [--stage S] --reason R [--until TIME]` and `dray unfreeze [--stage S]`:
//! stop the line — promotions into the Stage (or every Stage of the project) are refused
//! and auto-promotion stops until it is lifted or `--until` passes — and start it again.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::{CliError, Context};

use super::durations;

/// Arguments of `dray freeze`.
#[derive(clap::Args, Debug)]
pub struct FreezeArgs {
    /// Only this Stage (the whole project when not given).
    #[arg(long)]
    pub stage: Option<String>,
    /// Why, in words (shown in every refusal and as a banner in the UI).
    #[arg(long)]
    pub reason: String,
    /// When it lifts by itself: an RFC 3339 time (`2026-12-24T18:00:00Z`) or a duration
    /// from now (`2h`, `1w`). Until lifted by hand when not given.
    #[arg(long, value_parser = durations::freeze_until)]
    pub until: Option<String>,
}

/// Arguments of `dray unfreeze`.
#[derive(clap::Args, Debug)]
pub struct UnfreezeArgs {
    /// Only this Stage's freeze (the project's when not given).
    #[arg(long)]
    pub stage: Option<String>,
}

/// Runs `dray freeze`.
pub async fn freeze(ctx: &Context, args: FreezeArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/freeze");
    let body = json!({"stage": args.stage, "reason": args.reason, "until": args.until});
    let answer: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let text = |pointer: &str| {
        answer
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (place, flag) = match &args.stage {
        Some(stage) => (format!("stage {stage}"), format!(" --stage {stage}")),
        None => (format!("project {project}"), String::new()),
    };
    let until = match text("/freeze/until") {
        until if until.is_empty() => String::new(),
        until => format!(" until {until}"),
    };
    println!(
        "{place}: frozen by {}: {}{until}; promotions are refused until `dray unfreeze{flag}`",
        text("/freeze/by"),
        text("/freeze/reason")
    );
    Ok(())
}

/// Runs `dray unfreeze`.
pub async fn unfreeze(ctx: &Context, args: UnfreezeArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/unfreeze");
    let body = json!({"stage": args.stage});
    let answer: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let message = answer
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("freeze lifted");
    println!("{message}");
    Ok(())
}
