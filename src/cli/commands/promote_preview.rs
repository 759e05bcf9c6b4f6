//! `dray promote --stage S (--freight ID | --alias A) --dry-run`: asks the server for a
//! preview (`POST …/stages/{stage}/preview`) and prints what the gates would refuse, which
//! steps ran and where the preview stopped, then the unified diff of what would be committed
//! to the stage branch (coloured on a terminal only, never with `NO_COLOR`). Nothing is
//! written and no Promotion is made; it exits 0 once the server answered with a preview.

use std::io::IsTerminal;

use reqwest::Method;
use serde::Deserialize;

use crate::cli::output::paint;
use crate::cli::{CliError, Context};
use crate::server::promotions::PromoteBody;

/// The preview as the API answers it (the fields this command prints).
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PreviewAnswer {
    /// The Freight's alias.
    pub alias: String,
    /// The Freight's id.
    pub freight: String,
    /// Why the gates would refuse now.
    pub refusals: Vec<String>,
    /// The whole unified diff.
    pub diff: String,
    /// One entry per changed file.
    pub files: Vec<PreviewFile>,
    /// The first step that writes, not run.
    pub stopped_before: Option<String>,
    /// The steps that ran.
    pub steps: Vec<PreviewStepAnswer>,
    /// The first step that failed.
    pub failed: Option<String>,
}

/// One changed file.
#[derive(Deserialize, Debug, Default)]
#[serde(default)]
pub struct PreviewFile {
    /// Its path in the repository.
    pub path: String,
    /// `added`, `modified`, `deleted`, `typeChanged`.
    pub status: String,
    /// The checkout it is in.
    pub checkout: String,
}

/// One step that ran.
#[derive(Deserialize, Debug, Default)]
#[serde(default)]
pub struct PreviewStepAnswer {
    /// Its alias.
    pub alias: String,
    /// Its status.
    pub status: String,
}

/// Runs `dray promote --dry-run`.
pub async fn run(
    ctx: &Context,
    project: &str,
    stage: &str,
    body: &PromoteBody,
) -> Result<(), CliError> {
    let path = format!("/api/v1/projects/{project}/stages/{stage}/preview");
    let answer: PreviewAnswer = ctx.client.send(Method::POST, &path, Some(body)).await?;
    let colour =
        std::env::var_os(crate::cli::env::NO_COLOR).is_none() && std::io::stdout().is_terminal();
    print!("{}", render(&answer, stage, colour));
    Ok(())
}

/// What `--dry-run` prints.
pub fn render(answer: &PreviewAnswer, stage: &str, colour: bool) -> String {
    let mut out = format!(
        "preview of `{}` ({}) into `{stage}`: nothing was written\n",
        answer.alias,
        crate::cli::output::short_id(&answer.freight)
    );
    if answer.refusals.is_empty() {
        out.push_str("gates: open\n");
    } else {
        out.push_str("gates: promoting now would be refused:\n");
        for reason in &answer.refusals {
            out.push_str(&format!("  - {reason}\n"));
        }
    }
    let ran: Vec<String> = answer
        .steps
        .iter()
        .map(|s| format!("{} ({})", s.alias, s.status))
        .collect();
    out.push_str(&format!(
        "steps run: {}\n",
        if ran.is_empty() {
            "none".to_owned()
        } else {
            ran.join(", ")
        }
    ));
    match &answer.stopped_before {
        Some(step) => out.push_str(&format!(
            "stopped before `{step}`, the first step that writes\n"
        )),
        None => out.push_str("no step writes\n"),
    }
    if let Some(failed) = &answer.failed {
        out.push_str(&format!(
            "{failed}\nthe diff is what the steps before it left\n"
        ));
    }
    if answer.files.is_empty() {
        out.push_str("no changes: the stage branch already holds what these steps render\n");
        return out;
    }
    out.push_str(&format!("{} file(s) would change:\n", answer.files.len()));
    for file in &answer.files {
        out.push_str(&format!(
            "  {} {}/{}\n",
            file.status, file.checkout, file.path
        ));
    }
    for line in answer.diff.lines() {
        let style =
            if line.starts_with("diff --git") || line.starts_with("+++") || line.starts_with("---")
            {
                "1"
            } else if line.starts_with('+') {
                "32"
            } else if line.starts_with('-') {
                "31"
            } else if line.starts_with("@@") {
                "36"
            } else {
                ""
            };
        match style {
            "" => out.push_str(line),
            style => out.push_str(&paint(line, style, colour)),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> PreviewAnswer {
        serde_json::from_value(serde_json::json!({
            "alias": "frosty-otter", "freight": "0123456789abcdef0123",
            "refusals": ["not verified in `staging`"],
            "diff": "diff --git a/app.yaml b/app.yaml\n--- a/app.yaml\n+++ b/app.yaml\n@@ -1 +1 @@\n-image: app:1.0.0\n+image: app:1.1.0\n",
            "files": [{"path": "app.yaml", "status": "modified", "checkout": "out", "diff": "…"}],
            "stoppedBefore": "push",
            "steps": [{"alias": "clone", "uses": "git-clone", "status": "Succeeded"}],
        }))
        .unwrap()
    }

    #[test]
    fn the_dry_run_prints_refusals_steps_and_the_diff_coloured_only_when_asked() {
        let plain = render(&answer(), "prod", false);
        assert!(
            plain.starts_with(
                "preview of `frosty-otter` (0123456789ab) into `prod`: nothing was written\n"
            ),
            "{plain}"
        );
        assert!(plain.contains("  - not verified in `staging`\n"), "{plain}");
        assert!(plain.contains("steps run: clone (Succeeded)\n"), "{plain}");
        assert!(
            plain.contains("stopped before `push`, the first step that writes\n"),
            "{plain}"
        );
        assert!(plain.contains("  modified out/app.yaml\n"), "{plain}");
        assert!(plain.contains("\n+image: app:1.1.0\n"), "{plain}");
        assert!(!plain.contains('\x1b'), "{plain}");
        let coloured = render(&answer(), "prod", true);
        assert!(
            coloured.contains("\x1b[32m+image: app:1.1.0\x1b[0m"),
            "{coloured}"
        );
        assert!(
            coloured.contains("\x1b[31m-image: app:1.0.0\x1b[0m"),
            "{coloured}"
        );
    }
}
