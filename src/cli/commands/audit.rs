//! `dray audit --stage S [-o table|json]` (also `dray audit S`): the Stage's history as its
//! branch in git tells it, with every commit Dray did not make flagged.

use crate::cli::output::{self, OutputFormat};
use crate::cli::{CliError, Context};
use crate::promotion::audit::AuditEntry;

/// Arguments of `dray audit`.
#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// The Stage (the older form of `--stage`).
    #[arg(value_name = "STAGE", required_unless_present = "stage_flag")]
    pub stage: Option<String>,
    /// The Stage whose history is read.
    #[arg(long = "stage", id = "stage_flag", conflicts_with = "stage")]
    pub stage_flag: Option<String>,
    /// The output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// How many commits to read.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

fn short(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// What let the promotion through beyond the usual gates: an approval (who, and why), the
/// sign-offs and a window override, as their trailers say; `-` when none.
fn notes(entry: &AuditEntry) -> String {
    let mut notes = Vec::new();
    if let Some(by) = &entry.approved_by {
        notes.push(format!("approved by {by}"));
    }
    if !entry.signed_off_by.is_empty() {
        notes.push(format!("signed off by {}", entry.signed_off_by.join(", ")));
    }
    if let Some(why) = &entry.window_override {
        notes.push(format!("window overridden: {why}"));
    }
    if notes.is_empty() {
        "-".into()
    } else {
        notes.join("; ")
    }
}

/// Runs `dray audit`.
pub async fn run(ctx: &Context, args: AuditArgs) -> Result<(), CliError> {
    let stage = args
        .stage_flag
        .or(args.stage)
        .ok_or_else(|| CliError::usage("no Stage given", "name it: `dray audit --stage S`"))?;
    let project = ctx.project().await?;
    let path = format!(
        "/api/v1/projects/{project}/stages/{stage}/audit?limit={}",
        args.limit
    );
    let entries: Vec<AuditEntry> = ctx.client.get(&path).await?;
    match args.output {
        OutputFormat::Json => print!("{}", output::json(&entries)?),
        OutputFormat::Yaml => print!("{}", output::yaml_of(&entries)?),
        OutputFormat::Table => {
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|e| {
                    let freight = e.freight.clone().unwrap_or_else(|| "-".into());
                    vec![
                        short(&e.time, 19),
                        short(&e.commit, 10),
                        if e.by_dray {
                            freight
                        } else {
                            "NOT MADE BY DRAY".into()
                        },
                        if e.images.is_empty() {
                            "-".into()
                        } else {
                            e.images.join(", ")
                        },
                        if e.config_commits.is_empty() {
                            "-".into()
                        } else {
                            e.config_commits.join(", ")
                        },
                        e.actor.clone().unwrap_or_else(|| e.author.clone()),
                        e.promotion.clone().unwrap_or_else(|| e.subject.clone()),
                        notes(e),
                    ]
                })
                .collect();
            let header = [
                "TIME",
                "COMMIT",
                "FREIGHT",
                "IMAGES",
                "CONFIG",
                "ACTOR",
                "PROMOTION",
                "NOTES",
            ];
            print!("{}", output::table(&header, &rows));
        }
    }
    Ok(())
}
