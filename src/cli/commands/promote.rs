//! `dray promote --stage S (--freight ID | --alias A) [--wait]`: request a promotion and,
//! with `--wait`, follow its steps live until it ends (bounded by `--timeout`).
//! `--downstream-from S` instead promotes into every Stage fed by S (`promote_downstream`).

use std::time::Duration;

use reqwest::Method;

use super::FreightChoice;
use crate::api::{Promotion, PromotionPhase, StepPhase};
use crate::cli::{CliError, Context};
use crate::server::promotions::PromoteBody;

/// Arguments of `dray promote`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("freight", |a| a.required_unless_present_any(["alias", "downstream_from"])))]
pub struct PromoteArgs {
    /// The Stage to promote into.
    #[arg(long, required_unless_present = "downstream_from")]
    pub stage: Option<String>,
    /// Promote into every Stage fed by this one (whose `requestedFreight` names it as an
    /// upstream source) the Freight it holds, or the one given with --freight/--alias.
    #[arg(long, value_name = "STAGE", conflicts_with = "stage")]
    pub downstream_from: Option<String>,
    /// The Freight, by id or by alias.
    #[command(flatten)]
    pub which: FreightChoice,
    /// Promote through a closed promotion window, giving the reason (needs the `override`
    /// permission; recorded in the promotion and in a `Dray-Window-Override` trailer).
    #[arg(long, value_name = "REASON")]
    pub override_window: Option<String>,
    /// Follow the promotion until it ends; exit 0 only when it Succeeded.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits (e.g. `10m`).
    #[arg(long, default_value = "30m")]
    pub timeout: String,
}

/// Runs `dray promote`.
pub async fn run(ctx: &Context, args: PromoteArgs) -> Result<(), CliError> {
    let timeout = crate::api::parse_duration(&args.timeout)
        .map_err(|e| CliError::usage(format!("--timeout: {e}"), "e.g. --timeout 10m"))?;
    let stage = match (args.stage, args.downstream_from) {
        (_, Some(upstream)) => {
            let downstream = super::promote_downstream::Downstream {
                upstream,
                which: args.which,
                override_window: args.override_window,
                wait: args.wait.then_some(timeout),
            };
            return super::promote_downstream::run(ctx, downstream).await;
        }
        (Some(stage), None) => stage,
        (None, None) => {
            return Err(CliError::usage(
                "no Stage to promote into",
                "pass --stage S, or --downstream-from S",
            ));
        }
    };
    let project = ctx.project().await?;
    let body = PromoteBody {
        freight: args.which.freight,
        alias: args.which.alias,
        override_window: args.override_window,
    };
    let path = format!("/api/v1/projects/{project}/stages/{stage}/promote");
    let promotion: Promotion = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let name = promotion.metadata.name.unwrap_or_default();
    println!("promotion {name} requested");
    if !args.wait {
        return Ok(());
    }
    follow(ctx, &project, &name, timeout).await
}

/// Prints step progress until the promotion ends; the exit status follows its phase.
pub async fn follow(
    ctx: &Context,
    project: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), CliError> {
    let path = format!("/api/v1/projects/{project}/promotions/{name}");
    let deadline = tokio::time::Instant::now() + timeout;
    let mut printed: Vec<String> = Vec::new();
    let mut logged: Vec<Option<String>> = Vec::new();
    loop {
        let promotion: Promotion = ctx.client.get(&path).await?;
        let status = promotion.status.unwrap_or_default();
        for (i, step) in status.step_execution_metadata.iter().enumerate() {
            if step.status == StepPhase::Pending {
                continue;
            }
            let line = format!(
                "  {} {}{}",
                step.status,
                step.alias,
                Some(step.message.as_str())
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
            if printed.get(i) != Some(&line) {
                println!("{line}");
                if i < printed.len() {
                    printed[i] = line;
                } else {
                    printed.resize(i, String::new());
                    printed.push(line);
                }
            }
            // The step's log lines not printed yet: those after the last one printed (the
            // status keeps only the newest 100, so count from that line, not from the start).
            let log: Vec<&str> = step.log.iter().map(String::as_str).collect();
            if logged.len() <= i {
                logged.resize(i + 1, None);
            }
            let from = logged[i]
                .as_deref()
                .and_then(|last| log.iter().rposition(|l| *l == last))
                .map_or(0, |at| at + 1);
            for entry in &log[from..] {
                println!("    | {entry}");
            }
            if let Some(last) = log.last() {
                logged[i] = Some((*last).to_owned());
            }
        }
        let (phase, message) = (status.phase, status.message);
        match phase {
            PromotionPhase::Succeeded => {
                println!("promotion {name} Succeeded");
                return Ok(());
            }
            PromotionPhase::Failed | PromotionPhase::Errored | PromotionPhase::Aborted => {
                return Err(CliError::Local(format!(
                    "promotion {name} {phase}: {message}"
                )));
            }
            PromotionPhase::Pending | PromotionPhase::Running => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::Local(format!(
                "promotion {name} is still {phase} after {}: {message}; it goes on without the CLI",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
