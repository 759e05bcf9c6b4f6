//! `dray verify stage S [--abort] [--wait]`: re-run the verification of a Stage's current
//! Freight (a failed re-run revokes its `verifiedIn` there), or stop the running one; with
//! `--wait`, follow the run until it ends (bounded by `--timeout`).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::api::{Stage, VerificationInfo, VerificationPhase};
use crate::cli::{CliError, Context};

/// Arguments of `dray verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// What to verify: `stage`.
    pub what: String,
    /// The Stage.
    pub stage: String,
    /// Stop the running verification instead.
    #[arg(long)]
    pub abort: bool,
    /// Follow the run until it ends; the exit status is 0 only when it is Successful.
    #[arg(long, conflicts_with = "abort")]
    pub wait: bool,
    /// How long `--wait` waits (e.g. `30m`).
    #[arg(long, default_value = "30m")]
    pub timeout: String,
}

/// Runs `dray verify`.
pub async fn run(ctx: &Context, args: VerifyArgs) -> Result<(), CliError> {
    if args.what != "stage" {
        return Err(CliError::usage(
            format!("cannot verify `{}`", args.what),
            "verification runs per Stage: `dray verify stage S [--abort]`",
        ));
    }
    let timeout = crate::api::parse_duration(&args.timeout)
        .map_err(|e| CliError::usage(format!("--timeout: {e}"), "e.g. --timeout 30m"))?;
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/stages/{}/verify", args.stage);
    let body = json!({"abort": args.abort});
    let run: VerificationInfo = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let (id, freight) = (run.id, run.freight);
    if args.abort {
        println!(
            "stage {}: verification {id} of {freight} aborted",
            args.stage
        );
        return Ok(());
    }
    println!("stage {}: verifying {freight} (run {id})", args.stage);
    if !args.wait {
        return Ok(());
    }
    follow(ctx, &project, &args.stage, &id, timeout).await
}

/// Prints the run's progress until it ends.
async fn follow(
    ctx: &Context,
    project: &str,
    stage: &str,
    id: &str,
    timeout: Duration,
) -> Result<(), CliError> {
    let path = format!("/api/v1/projects/{project}/stages/{stage}");
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let stage_object: Stage = ctx.client.get(&path).await?;
        let status = stage_object.status.unwrap_or_default();
        let run = status
            .verification
            .into_iter()
            .chain(status.verification_history)
            .find(|r| r.id == id);
        let (phase, message) = run
            .as_ref()
            .map(|r| (r.phase, r.message.as_str()))
            .unwrap_or_default();
        let line = format!("  {phase}: {message}");
        if line != last {
            println!("{line}");
            last = line;
        }
        match phase {
            VerificationPhase::Successful => return Ok(()),
            VerificationPhase::Failed
            | VerificationPhase::Error
            | VerificationPhase::Inconclusive
            | VerificationPhase::Aborted => {
                return Err(CliError::Local(format!(
                    "verification {id} in stage {stage} ended {phase}: {message}"
                )));
            }
            VerificationPhase::Pending | VerificationPhase::Running if run.is_none() => {
                return Err(CliError::Local(format!(
                    "verification {id} is no longer on stage {stage} (a newer one replaced it)"
                )));
            }
            VerificationPhase::Pending | VerificationPhase::Running => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::Local(format!(
                "verification {id} in stage {stage} is still {phase} after {}: {message}; it goes on without the CLI",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
