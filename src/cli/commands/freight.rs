//! `dray freight create` (and `dray freight diff`, in [`super::freight_diff`]): the hotfix path — Freight assembled by hand from exact versions,
//! `dray freight reject` / `unreject` are [`super::reject`]'s.
//!
//! `dray freight create`: the hotfix path — Freight assembled by hand from exact versions,
//! each checked against its registry or repository before anything is stored; or, with
//! `--newest`, the newest artifacts the Warehouse discovered (how a `Manual` Warehouse's
//! Freight is made).

use reqwest::Method;

use crate::api::{Freight, FreightCommit, FreightImage};
use crate::cli::{CliError, Context};
use crate::server::warehouses::AssembleRequest;

/// Arguments of `dray freight`.
#[derive(clap::Args, Debug)]
pub struct FreightArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: FreightCommand,
}

/// Freight subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum FreightCommand {
    /// Assemble Freight from chosen versions (checked in the registry and the repository).
    Create(CreateArgs),
    /// Show what differs between two Freight: artifacts, commits, rendered manifests.
    Diff(super::freight_diff::DiffArgs),
    /// Reject Freight: unavailable to a Stage (`--stage`) or everywhere, until unrejected.
    Reject(super::reject::RejectArgs),
    /// Lift a rejection (for `--stage`, or every one).
    Unreject(super::reject::UnrejectArgs),
}

/// Arguments of `dray freight create`.
#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The Warehouse to record the Freight under.
    #[arg(long)]
    pub warehouse: String,
    /// An image pinned by digest: `REPO:TAG@sha256:…` (repeatable).
    #[arg(long = "image")]
    pub images: Vec<String>,
    /// A config commit: `REPO@SHA` (repeatable).
    #[arg(long = "commit")]
    pub commits: Vec<String>,
    /// An alias instead of a generated one.
    #[arg(long)]
    pub alias: Option<String>,
    /// Take the newest discovered artifact of every subscription (e.g. for a Warehouse
    /// with `freightCreationPolicy: Manual`) instead of --image and --commit.
    #[arg(long, conflicts_with_all = ["images", "commits"])]
    pub newest: bool,
}

/// Parses `REPO:TAG@DIGEST` (the registry may carry a port: `host:5000/app:1.0@sha256:…`).
pub fn parse_image(text: &str) -> Result<FreightImage, CliError> {
    let hint = "write the image as REPO:TAG@sha256:DIGEST, e.g. `registry.example.com/app:1.4.2@sha256:9f…`";
    let (name, digest) = text
        .rsplit_once('@')
        .ok_or_else(|| CliError::usage(format!("`{text}` has no digest"), hint))?;
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo_url, tag) = match name[last_slash..].rfind(':') {
        Some(colon) => (&name[..last_slash + colon], &name[last_slash + colon + 1..]),
        None => (name, ""),
    };
    if repo_url.is_empty() || !digest.starts_with("sha256:") {
        return Err(CliError::usage(
            format!("`{text}` is not REPO:TAG@sha256:DIGEST"),
            hint,
        ));
    }
    Ok(FreightImage {
        repo_url: repo_url.into(),
        tag: tag.into(),
        digest: digest.into(),
        ..Default::default()
    })
}

/// Parses `REPO@SHA`.
pub fn parse_commit(text: &str) -> Result<FreightCommit, CliError> {
    let hint = "write the commit as REPO@SHA, e.g. `https://git.example.com/config.git@9f2c…` (the full 40-character id)";
    let (repo_url, id) = text
        .rsplit_once('@')
        .ok_or_else(|| CliError::usage(format!("`{text}` has no commit id"), hint))?;
    if repo_url.is_empty() || id.len() < 40 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(CliError::usage(
            format!("`{text}` does not end in a full commit id"),
            hint,
        ));
    }
    Ok(FreightCommit {
        repo_url: repo_url.into(),
        id: id.to_ascii_lowercase(),
        ..Default::default()
    })
}

/// Runs `dray freight`.
pub async fn run(ctx: &Context, args: FreightArgs) -> Result<(), CliError> {
    let args = match args.command {
        FreightCommand::Create(args) => args,
        FreightCommand::Diff(args) => return super::freight_diff::run(ctx, args).await,
        FreightCommand::Reject(args) => return super::reject::reject(ctx, args).await,
        FreightCommand::Unreject(args) => return super::reject::unreject(ctx, args).await,
    };
    let request_alias = args.alias.clone();
    let request = AssembleRequest {
        warehouse: args.warehouse,
        images: args
            .images
            .iter()
            .map(|i| parse_image(i))
            .collect::<Result<_, _>>()?,
        commits: args
            .commits
            .iter()
            .map(|c| parse_commit(c))
            .collect::<Result<_, _>>()?,
        alias: args.alias,
        newest: args.newest,
    };
    let project = ctx.project().await?;
    let path = format!("/api/v1/projects/{project}/freight/assemble");
    let freight: Freight = ctx.client.send(Method::POST, &path, Some(&request)).await?;
    let alias = &freight.spec.alias;
    let id = freight.metadata.name.as_deref().unwrap_or_default();
    match &request_alias {
        Some(wanted) if wanted != alias => {
            println!(
                "freight {alias} ({id}) already holds exactly these artifacts; not created again"
            )
        }
        _ => println!("freight {alias} ({id}) created"),
    }
    for warning in &freight.spec.warnings {
        println!("warning: {warning}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse_with_registry_ports() {
        let image = parse_image("127.0.0.1:5000/demo/app:1.2.0@sha256:abc").unwrap();
        assert_eq!(image.repo_url, "127.0.0.1:5000/demo/app");
        assert_eq!(image.tag, "1.2.0");
        assert_eq!(image.digest, "sha256:abc");
        assert!(parse_image("127.0.0.1:5000/demo/app:1.2.0").is_err());
        let untagged = parse_image("reg/app@sha256:abc").unwrap();
        assert_eq!(
            (untagged.repo_url.as_str(), untagged.tag.as_str()),
            ("reg/app", "")
        );
    }

    #[test]
    fn commits_need_a_full_id() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let commit = parse_commit(&format!("http://127.0.0.1:8080/config.git@{sha}")).unwrap();
        assert_eq!(commit.repo_url, "http://127.0.0.1:8080/config.git");
        assert_eq!(commit.id, sha);
        assert!(parse_commit("http://x/config.git@abc123").is_err());
    }
}
