//! `dray promote --stage S (--freight ID | --alias A) [--wait [--no-verify-wait]]`: request a
//! promotion and, with `--wait`, follow its steps live until it ends and then, when the Stage
//! verifies, its verification until that ends (bounded, together, by `--timeout`).
//! `--downstream-from S` instead promotes into every Stage fed by S (`promote_downstream`);
//! `--dry-run` previews instead (`promote_preview`).

use std::time::Duration;

use reqwest::Method;

use super::FreightChoice;
use crate::api::verification_run::verifies;
use crate::api::{
    Promotion, PromotionPhase, Stage, StepPhase, Time, VerificationInfo, VerificationPhase,
};
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
    /// Follow the promotion until it ends and, when the Stage verifies, its verification;
    /// exit 0 only when the promotion Succeeded and the verification was Successful.
    #[arg(long)]
    pub wait: bool,
    /// With `--wait`, stop when the promotion ends, without waiting for the verification.
    #[arg(long, requires = "wait")]
    pub no_verify_wait: bool,
    /// Preview only: run the Stage's steps up to (not including) the first that writes, in
    /// a throwaway work directory on the server, and print what the gates would refuse and
    /// the unified diff of what would be committed to the stage branch. Nothing is written
    /// and no Promotion is made.
    #[arg(long, conflicts_with_all = ["wait", "downstream_from"])]
    pub dry_run: bool,
    /// How long `--wait` waits (e.g. `10m`).
    #[arg(long, default_value = "30m", value_parser = super::durations::wait_timeout)]
    pub timeout: Duration,
}

/// Runs `dray promote`.
pub async fn run(ctx: &Context, args: PromoteArgs) -> Result<(), CliError> {
    let timeout = args.timeout;
    let after = if args.no_verify_wait {
        AfterSuccess::Return
    } else {
        AfterSuccess::AwaitVerification
    };
    let stage = match (args.stage, args.downstream_from) {
        (_, Some(upstream)) => {
            let downstream = super::promote_downstream::Downstream {
                upstream,
                which: args.which,
                override_window: args.override_window,
                wait: args.wait.then_some((timeout, after)),
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
    if args.dry_run {
        return super::promote_preview::run(ctx, &project, &stage, &body).await;
    }
    let path = format!("/api/v1/projects/{project}/stages/{stage}/promote");
    let promotion: Promotion = ctx.client.send(Method::POST, &path, Some(&body)).await?;
    let name = promotion.metadata.name.unwrap_or_default();
    println!("promotion {name} requested");
    if !args.wait {
        return Ok(());
    }
    follow(ctx, &project, &name, timeout, after).await
}

/// What `--wait` does once the promotion Succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSuccess {
    /// Follow the Stage's verification of the Freight, when the Stage verifies.
    AwaitVerification,
    /// Stop there (`--no-verify-wait`).
    Return,
}

/// Prints step progress until the promotion ends, then (see [`AfterSuccess`]) the Stage's
/// verification of the Freight; the exit status follows the promotion's phase and the
/// verification's.
pub async fn follow(
    ctx: &Context,
    project: &str,
    name: &str,
    timeout: Duration,
    after: AfterSuccess,
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
                if after == AfterSuccess::Return {
                    return Ok(());
                }
                let promoted = Promoted {
                    stage: &promotion.spec.stage,
                    freight: &promotion.spec.freight,
                    since: status.started_at.or(promotion.metadata.creation_timestamp),
                };
                return follow_verification(ctx, project, &promoted, deadline, timeout).await;
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

/// A promotion that Succeeded, whose verification `--wait` follows.
struct Promoted<'a> {
    stage: &'a str,
    freight: &'a str,
    /// When the promotion started: a verification of the Freight from before is not its.
    since: Option<Time>,
}

impl Promoted<'_> {
    /// The verification of this promotion's Freight among the Stage's, if it started.
    fn run_in(&self, stage: Stage) -> Option<VerificationInfo> {
        let status = stage.status.unwrap_or_default();
        status
            .verification
            .into_iter()
            .chain(status.verification_history)
            .find(|run| {
                run.freight == self.freight
                    && match (&self.since, &run.start_time) {
                        (Some(since), Some(started)) => started.0 >= since.0,
                        _ => true,
                    }
            })
    }
}

/// Follows the Stage's verification of the promoted Freight, when the Stage verifies,
/// until it ends or `deadline` passes.
async fn follow_verification(
    ctx: &Context,
    project: &str,
    promoted: &Promoted<'_>,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<(), CliError> {
    let (stage, freight) = (promoted.stage, promoted.freight);
    let path = format!("/api/v1/projects/{project}/stages/{stage}");
    let stage_object: Stage = ctx.client.get(&path).await?;
    let applications = stage_object
        .status
        .as_ref()
        .map(|s| s.applications.as_slice())
        .unwrap_or_default();
    if !verifies(&stage_object, applications) {
        return Ok(());
    }
    println!("waiting for the verification of {freight} in stage {stage} (--no-verify-wait skips)");
    let mut last = String::new();
    let mut stage_object = stage_object;
    loop {
        let run = promoted.run_in(stage_object);
        let line = match &run {
            None => "  not started yet".to_owned(),
            Some(run) if run.message.is_empty() => format!("  {}", run.phase),
            Some(run) => format!("  {}: {}", run.phase, run.message),
        };
        if line != last {
            println!("{line}");
            last = line;
        }
        if let Some(run) = &run {
            match run.phase {
                VerificationPhase::Successful => {
                    println!(
                        "verification {} of {freight} in stage {stage} Successful",
                        run.id
                    );
                    return Ok(());
                }
                VerificationPhase::Failed
                | VerificationPhase::Error
                | VerificationPhase::Inconclusive
                | VerificationPhase::Aborted => {
                    return Err(CliError::Local(format!(
                        "the promotion Succeeded, but verification {} of {freight} in stage \
                         {stage} ended {}: {}; see it with `dray get stage {stage} -p {project} -o yaml`",
                        run.id, run.phase, run.message
                    )));
                }
                VerificationPhase::Pending | VerificationPhase::Running => {}
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let still = run.map_or_else(
                || "has not started".to_owned(),
                |run| format!("is still {}", run.phase),
            );
            return Err(CliError::Local(format!(
                "the promotion Succeeded, but the verification of {freight} in stage {stage} \
                 {still} after {}; it goes on without the CLI: follow it with \
                 `dray get stage {stage} -p {project}`",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        stage_object = ctx.client.get(&path).await?;
    }
}
