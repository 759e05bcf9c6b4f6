//! `dray freight diff FROM TO [-o table|json|yaml]`: what differs from one Freight to
//! another — each image, chart and config commit, the config commits in between with their
//! subjects, and the rendered manifests' unified diff when both were promoted into one
//! Stage (read from its branch).

use crate::cli::client::path_segment;
use crate::cli::output::{self, OutputFormat};
use crate::cli::{CliError, Context};
use crate::promotion::freight_diff::{ArtifactChange, FreightDiff, Manifests, Side};

/// Arguments of `dray freight diff`.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The older Freight (id, unique id prefix or alias).
    pub from: String,
    /// The newer Freight.
    pub to: String,
    /// The output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Runs `dray freight diff`.
pub async fn run(ctx: &Context, args: DiffArgs) -> Result<(), CliError> {
    let project = ctx.project().await?;
    let path = format!(
        "/api/v1/projects/{project}/freight/{}/diff?to={}",
        path_segment(&args.from),
        path_segment(&args.to)
    );
    let diff: FreightDiff = ctx.client.get(&path).await?;
    match args.output {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&diff)
                .map_err(|e| CliError::Local(format!("cannot render JSON: {e}")))?
        ),
        OutputFormat::Yaml => print!("{}", output::yaml_of(std::slice::from_ref(&diff))?),
        _ => print!("{}", render(&diff)),
    }
    Ok(())
}

fn label(side: &Side) -> String {
    let short: String = side.name.chars().take(7).collect();
    if side.alias.is_empty() {
        short
    } else {
        format!("{} ({short})", side.alias)
    }
}

fn short_commit(id: &Option<String>) -> String {
    id.as_deref()
        .map_or("-".into(), |id| id.chars().take(7).collect())
}

fn artifacts(title: &str, changes: &[ArtifactChange], out: &mut String) {
    if changes.is_empty() {
        return;
    }
    out.push_str(&format!("{title}\n"));
    for c in changes {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        let mark = if c.changed() { "" } else { "  (unchanged)" };
        out.push_str(&format!(
            "  {}  {} -> {}{mark}\n",
            c.artifact,
            side(&c.from),
            side(&c.to)
        ));
    }
}

/// The diff as the terminal shows it.
fn render(diff: &FreightDiff) -> String {
    let mut out = format!("from {} to {}\n\n", label(&diff.from), label(&diff.to));
    artifacts("IMAGES", &diff.images, &mut out);
    artifacts("CHARTS", &diff.charts, &mut out);
    for c in &diff.commits {
        out.push_str(&format!(
            "COMMITS {}  {} -> {}\n",
            c.repo_url,
            short_commit(&c.from),
            short_commit(&c.to)
        ));
        if let Some(error) = &c.error {
            out.push_str(&format!("  cannot list them: {error}\n"));
        }
        for line in &c.log {
            let id: String = line.id.chars().take(7).collect();
            out.push_str(&format!("  {id}  {}  ({})\n", line.subject, line.author));
        }
        if !c.complete && c.error.is_none() {
            out.push_str("  … (more, or not a descendant of the older commit)\n");
        }
    }
    match &diff.manifests {
        Manifests::Compared {
            stage,
            from_commit,
            to_commit,
            files,
            truncated,
        } => {
            out.push_str(&format!(
                "\nMANIFESTS in the branch of Stage `{stage}` ({} -> {}): {} file(s) changed\n",
                short_commit(&Some(from_commit.clone())),
                short_commit(&Some(to_commit.clone())),
                files.len()
            ));
            for f in files {
                out.push_str(&f.patch);
                if !f.patch.ends_with('\n') {
                    out.push('\n');
                }
            }
            if *truncated {
                out.push_str("… the diff is longer; this is its beginning\n");
            }
        }
        Manifests::NotCompared { reason } => {
            out.push_str(&format!("\nMANIFESTS not compared: {reason}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promotion::freight_diff::{CommitChange, CommitLine, ManifestFile};

    #[test]
    fn the_terminal_shows_each_part() {
        let side = |name: &str, alias: &str| Side {
            name: name.into(),
            alias: alias.into(),
            origin: "app".into(),
        };
        let diff = FreightDiff {
            from: side("aaaaaaaaaa", "frosty-otter"),
            to: side("bbbbbbbbbb", "snowy-lemur"),
            images: vec![ArtifactChange {
                artifact: "reg/app".into(),
                from: Some("1.0.0@sha256:1".into()),
                to: Some("1.1.0@sha256:2".into()),
            }],
            charts: vec![],
            commits: vec![CommitChange {
                repo_url: "http://git/config.git".into(),
                from: Some("c1c1c1c1c1".into()),
                to: Some("c2c2c2c2c2".into()),
                log: vec![CommitLine {
                    id: "c2c2c2c2c2".into(),
                    subject: "raise replicas".into(),
                    author: "Ann <ann@x>".into(),
                }],
                complete: true,
                error: None,
            }],
            manifests: Manifests::Compared {
                stage: "dev".into(),
                from_commit: "d1d1d1d1d1".into(),
                to_commit: "d2d2d2d2d2".into(),
                files: vec![ManifestFile {
                    path: "app.yaml".into(),
                    change: "modified".into(),
                    patch: "diff --git a/app.yaml b/app.yaml\n-image: 1.0.0\n+image: 1.1.0\n"
                        .into(),
                }],
                truncated: false,
            },
        };
        let text = render(&diff);
        for want in [
            "from frosty-otter (aaaaaaa) to snowy-lemur (bbbbbbb)",
            "reg/app  1.0.0@sha256:1 -> 1.1.0@sha256:2",
            "COMMITS http://git/config.git  c1c1c1c -> c2c2c2c",
            "c2c2c2c  raise replicas  (Ann <ann@x>)",
            "Stage `dev` (d1d1d1d -> d2d2d2d): 1 file(s) changed",
            "+image: 1.1.0",
        ] {
            assert!(text.contains(want), "{want} not in:\n{text}");
        }
    }
}
