//! `dray config set-project|use-context|get-contexts|view`: show and change the saved
//! contexts that `dray login` makes (`cli::saved`). Nothing here talks to the server, and
//! nothing prints a token: `view` shows `<redacted>` in its place.

use crate::cli::CliError;
use crate::cli::context::saved_error;
use crate::cli::saved::{self, SavedConfig};

/// What `dray config view` prints instead of a token.
pub const REDACTED: &str = "<redacted>";

/// Arguments of `dray config`.
#[derive(clap::Args, Debug)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ConfigAction,
}

/// The config subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ConfigAction {
    /// Save the project in the current context (or `--context N`).
    SetProject {
        /// The project.
        project: String,
        /// The context to change instead of the current one.
        #[arg(long, value_name = "NAME")]
        context: Option<String>,
    },
    /// Make a saved context the current one.
    UseContext {
        /// The context's name.
        name: String,
    },
    /// List the saved contexts; `*` marks the current one.
    GetContexts,
    /// Print the saved config, tokens redacted.
    View,
}

/// Runs `dray config`.
pub fn run(args: ConfigArgs) -> Result<(), CliError> {
    let path = saved::path().map_err(saved_error)?;
    let mut config = SavedConfig::load(&path).map_err(saved_error)?;
    match args.action {
        ConfigAction::SetProject { project, context } => {
            let name = match context.or_else(|| config.current_context.clone()) {
                Some(name) => name,
                None => {
                    return Err(CliError::usage(
                        "there is no current context to save the project in",
                        "run `dray login --server URL` first, or pass --context NAME",
                    ));
                }
            };
            config.require(&name, &path).map_err(saved_error)?;
            if let Some(saved) = config.contexts.iter_mut().find(|c| c.name == name) {
                saved.project = Some(project.clone());
            }
            config.save(&path).map_err(saved_error)?;
            println!("context `{name}`: project `{project}`");
        }
        ConfigAction::UseContext { name } => {
            config.require(&name, &path).map_err(saved_error)?;
            config.current_context = Some(name.clone());
            config.save(&path).map_err(saved_error)?;
            println!("switched to context `{name}`");
        }
        ConfigAction::GetContexts => print!("{}", contexts_table(&config)),
        ConfigAction::View => print!("{}", view(&config)?),
    }
    Ok(())
}

/// The contexts as a table: CURRENT, NAME, SERVER, PROJECT.
fn contexts_table(config: &SavedConfig) -> String {
    let rows: Vec<[String; 4]> = config
        .contexts
        .iter()
        .map(|c| {
            let current = config.current_context.as_deref() == Some(c.name.as_str());
            [
                if current { "*" } else { "" }.to_owned(),
                c.name.clone(),
                c.server.clone(),
                c.project.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = ["CURRENT", "NAME", "SERVER", "PROJECT"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}

/// The config as YAML with every token replaced by [`REDACTED`].
fn view(config: &SavedConfig) -> Result<String, CliError> {
    let mut shown = config.clone();
    for context in &mut shown.contexts {
        if context.token.is_some() {
            context.token = Some(REDACTED.to_owned());
        }
    }
    serde_yaml_ng::to_string(&shown)
        .map_err(|e| CliError::Local(format!("cannot show the CLI's config: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::saved::SavedContext;

    fn config() -> SavedConfig {
        SavedConfig {
            current_context: Some("b".into()),
            contexts: vec![
                SavedContext {
                    name: "a".into(),
                    server: "http://a:1".into(),
                    token: None,
                    project: None,
                },
                SavedContext {
                    name: "b".into(),
                    server: "http://b:2".into(),
                    token: Some("s3cret-token".into()),
                    project: Some("demo".into()),
                },
            ],
        }
    }

    #[test]
    fn view_never_shows_a_token() {
        let shown = view(&config()).unwrap();
        assert!(!shown.contains("s3cret-token"), "{shown}");
        assert!(shown.contains("token: <redacted>"), "{shown}");
    }

    #[test]
    fn get_contexts_marks_the_current_one() {
        let table = contexts_table(&config());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "CURRENT   NAME   SERVER       PROJECT");
        assert_eq!(lines[1], "          a      http://a:1");
        assert_eq!(lines[2], "*         b      http://b:2   demo");
    }
}
