//! `dray hold set --stage S [--reason R]` and `dray hold lift --stage S`: place a hold on a
//! Stage so auto-promotion leaves it alone, and lift it again (auto-promotion resumes).

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::{CliError, Context};

/// Arguments of `dray hold`.
#[derive(clap::Args, Debug)]
pub struct HoldArgs {
    /// What to do with the hold.
    #[command(subcommand)]
    pub action: HoldAction,
}

/// The hold subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum HoldAction {
    /// Place a hold: auto-promotion stops acting on the Stage until it is lifted (or the
    /// newest available Freight is promoted into it by hand).
    Set(SetArgs),
    /// Lift the Stage's hold: auto-promotion acts on it again.
    Lift(LiftArgs),
}

/// Arguments of `dray hold set`.
#[derive(clap::Args, Debug)]
pub struct SetArgs {
    /// The Stage.
    #[arg(long)]
    pub stage: String,
    /// Why, in words (recorded on the Stage and shown in the UI).
    #[arg(long)]
    pub reason: Option<String>,
}

/// Arguments of `dray hold lift`.
#[derive(clap::Args, Debug)]
pub struct LiftArgs {
    /// The Stage.
    #[arg(long)]
    pub stage: String,
}

/// Runs `dray hold`.
pub async fn run(ctx: &Context, args: HoldArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    match args.action {
        HoldAction::Set(set) => {
            let path = format!("/api/v1/projects/{project}/stages/{}/hold/set", set.stage);
            let body = json!({"reason": set.reason});
            let answer: Value = ctx.client.send(Method::POST, &path, Some(&body)).await?;
            let reason = answer
                .pointer("/hold/reason")
                .and_then(Value::as_str)
                .unwrap_or_default();
            println!(
                "stage {}: hold placed ({reason}); auto-promotion stops until `dray hold lift --stage {}`",
                set.stage, set.stage
            );
        }
        HoldAction::Lift(lift) => {
            let path = format!("/api/v1/projects/{project}/stages/{}/hold/lift", lift.stage);
            let answer: Value = ctx.client.send(Method::POST, &path, None::<&()>).await?;
            match answer.get("message").and_then(Value::as_str) {
                Some(message) => println!("stage {}: {message}", lift.stage),
                None => println!("stage {}: hold lifted; auto-promotion resumes", lift.stage),
            }
        }
    }
    Ok(())
}
