//! `dray refresh warehouse NAME [--wait]`: ask a Warehouse to look for new artifacts now.

use reqwest::Method;
use serde_json::Value;

use crate::api::{ResourceBody as _, WarehouseStatus};
use crate::cli::{CliError, Context};

/// Arguments of `dray refresh`.
#[derive(clap::Args, Debug)]
pub struct RefreshArgs {
    /// What to refresh: `warehouse`.
    pub kind: String,
    /// The Warehouse's name.
    pub name: String,
    /// Wait until discovery finished and show what it found (at most `--timeout`).
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits: a duration such as `90s` or `1m`, or a number of seconds;
    /// at most 2m (120s).
    #[arg(long, default_value = "60s", value_parser = super::durations::refresh_timeout)]
    pub timeout: std::time::Duration,
}

/// Runs `dray refresh`.
pub async fn run(ctx: &Context, args: RefreshArgs) -> Result<(), CliError> {
    if !matches!(
        args.kind.to_ascii_lowercase().as_str(),
        "warehouse" | "warehouses" | "wh"
    ) {
        return Err(CliError::usage(
            format!("cannot refresh `{}`", args.kind),
            "only Warehouses are refreshed: `dray refresh warehouse NAME`",
        ));
    }
    let project = ctx.project().await?;
    let path = format!(
        "/api/v1/projects/{project}/warehouses/{}/refresh?wait={}&timeoutSeconds={}",
        args.name,
        args.wait,
        args.timeout.as_secs()
    );
    let answer: Value = ctx.client.send(Method::POST, &path, None::<&()>).await?;
    if !args.wait {
        println!("warehouse {project}/{} refresh requested", args.name);
        return Ok(());
    }
    let status: WarehouseStatus = answer["warehouse"].status().unwrap_or_default();
    let mut failed = Vec::new();
    for sub in &status.subscriptions {
        let repo = &sub.repo_url;
        if sub.ready {
            let newest = sub
                .images
                .first()
                .map(|image| image.tag.as_str())
                .or_else(|| sub.commits.first().map(|commit| commit.id.as_str()))
                .unwrap_or("nothing");
            println!("{repo}: newest {newest}");
        } else {
            let message = Some(sub.message.as_str())
                .filter(|m| !m.is_empty())
                .unwrap_or("failed");
            println!("{repo}: {message}");
            failed.push(repo.to_owned());
        }
    }
    for warning in &status.warnings {
        println!("warning: {warning}");
    }
    if let Some(id) = &status.last_freight_id {
        let label = super::freight_names::label_of(ctx, &project, id).await;
        println!("newest freight: {label}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Local(format!(
            "discovery failed for {}",
            failed.join(", ")
        )))
    }
}
