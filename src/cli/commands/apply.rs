//! `dray apply -f PATH...`: send YAML files to the server, which validates them together
//! and stores all or nothing.

use reqwest::Method;

use crate::cli::{CliError, Context};
use crate::config;
use crate::server::apply::{ApplyFile, ApplyRequest, ApplyResponse};

/// Arguments of `dray apply`.
#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// YAML files or directories (read recursively); may be repeated.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub paths: Vec<std::path::PathBuf>,
}

/// Runs `dray apply`.
pub async fn run(ctx: &Context, args: ApplyArgs) -> Result<(), CliError> {
    let files =
        config::read_paths(&args.paths).map_err(|errors| CliError::Local(errors.to_string()))?;
    let request = ApplyRequest {
        files: files
            .into_iter()
            .map(|f| ApplyFile {
                path: f.path,
                content: f.content,
            })
            .collect(),
        default_project: ctx.explicit_project.clone(),
    };
    let response: ApplyResponse = ctx
        .client
        .send(Method::POST, "/api/v1/apply", Some(&request))
        .await?;
    for result in response.results {
        let name = match &result.namespace {
            Some(ns) => format!("{ns}/{}", result.name),
            None => result.name.clone(),
        };
        println!(
            "{} {name} {}",
            result.kind.to_ascii_lowercase(),
            result.action
        );
    }
    Ok(())
}
