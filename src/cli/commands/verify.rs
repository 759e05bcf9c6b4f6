//! `dray verify --stage S [--abort] [--wait]` (also `dray verify stage S`): re-run the
//! verification of a Stage's current Freight (a failed re-run revokes its `verifiedIn`
//! there), or stop the running one; with `--wait`, follow the run until it ends (bounded by
//! `--timeout`).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::api::{Stage, VerificationInfo, VerificationPhase};
use crate::cli::{CliError, Context};

/// Arguments of `dray verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// `stage` and the Stage (`dray verify stage S`), the older form of `--stage S`.
    #[arg(value_name = "stage STAGE", num_args = 0..=2)]
    pub positional: Vec<String>,
    /// The Stage whose current Freight is verified.
    #[arg(long)]
    pub stage: Option<String>,
    /// Stop the running verification instead.
    #[arg(long)]
    pub abort: bool,
    /// Follow the run until it ends; the exit status is 0 only when it is Successful.
    #[arg(long, conflicts_with = "abort")]
    pub wait: bool,
    /// How long `--wait` waits: a duration such as `90s` or `30m` (1s to 24h).
    #[arg(long, default_value = "30m", value_parser = super::durations::wait_timeout)]
    pub timeout: Duration,
}

impl VerifyArgs {
    /// The Stage, from `--stage` or the positional `stage S`.
    fn stage(&self) -> Result<String, CliError> {
        let usage = "name the Stage: `dray verify --stage S [--abort] [--wait]`";
        match (self.positional.as_slice(), &self.stage) {
            ([], Some(stage)) => Ok(stage.clone()),
            ([what, ..], _) if what != "stage" => Err(CliError::usage(
                format!("cannot verify `{what}`"),
                format!("verification runs per Stage: {usage}"),
            )),
            ([_, stage], Some(flag)) if stage != flag => Err(CliError::usage(
                format!("two Stages given: `{stage}` and --stage `{flag}`"),
                usage,
            )),
            ([_, stage], _) => Ok(stage.clone()),
            ([_], Some(stage)) => Ok(stage.clone()),
            _ => Err(CliError::usage("no Stage given", usage)),
        }
    }
}

/// Runs `dray verify`.
pub async fn run(ctx: &Context, args: VerifyArgs) -> Result<(), CliError> {
    let stage = args.stage()?;
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/stages/{stage}/verify");
    let body = json!({"abort": args.abort});
    let run: VerificationInfo = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let id = run.id;
    let freight = super::freight_names::label_of(ctx, &project, &run.freight).await;
    if args.abort {
        println!("stage {stage}: verification {id} of {freight} aborted");
        return Ok(());
    }
    println!("stage {stage}: verifying {freight} (run {id})");
    if !args.wait {
        return Ok(());
    }
    follow(ctx, &project, &stage, &id, args.timeout).await
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
