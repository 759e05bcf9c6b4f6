//! `dray apply -f PATH...`: send YAML files (or, with `-f -`, standard input) to the server,
//! which validates them together and stores all or nothing. Problems in what came from
//! standard input are reported as `<stdin>:LINE`.

use std::io::Read as _;
use std::path::PathBuf;

use reqwest::Method;

use crate::cli::{CliError, Context};
use crate::config::{self, ConfigErrors, SourceFile};
use crate::server::apply::{ApplyFile, ApplyRequest, ApplyResponse};

/// The name standard input goes by in errors.
pub const STDIN_NAME: &str = "<stdin>";

/// Arguments of `dray apply`.
#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// YAML files or directories (read recursively), or `-` for standard input; may be
    /// repeated.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,
}

/// Runs `dray apply`.
pub async fn run(ctx: &Context, args: ApplyArgs) -> Result<(), CliError> {
    let files = read_all(&args.paths, || {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map(|_| text)
            .map_err(|e| e.to_string())
    })?;
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

/// Reads every path in order, `-` through `stdin` (once), and reports every unreadable path.
pub(crate) fn read_all(
    paths: &[PathBuf],
    stdin: impl FnOnce() -> Result<String, String>,
) -> Result<Vec<SourceFile>, CliError> {
    if paths.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        return Err(CliError::usage(
            "`-f -` is given more than once; standard input can be read only once",
            "give `-f -` once, and the other documents as files",
        ));
    }
    let mut stdin = Some(stdin);
    let mut files = Vec::new();
    let mut errors = ConfigErrors::default();
    for chunk in paths.chunk_by(|a, b| (a.as_os_str() == "-") == (b.as_os_str() == "-")) {
        if chunk[0].as_os_str() != "-" {
            match config::read_paths(chunk) {
                Ok(read) => files.extend(read),
                Err(more) => errors.0.extend(more.0),
            }
            continue;
        }
        let Some(read) = stdin.take() else { continue };
        let content = read().map_err(|e| {
            CliError::Local(format!(
                "cannot read the YAML of `-f -` from standard input: {e}"
            ))
        })?;
        files.push(SourceFile {
            path: STDIN_NAME.to_owned(),
            content,
        });
    }
    if errors.0.is_empty() {
        Ok(files)
    } else {
        Err(CliError::Local(errors.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_reads_standard_input_as_stdin_between_the_files() {
        let dir = std::env::temp_dir().join(format!("dray-apply-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.yaml");
        std::fs::write(&file, "kind: Project\n").unwrap();
        let paths = vec![file.clone(), PathBuf::from("-")];
        let files = read_all(&paths, || Ok("kind: Stage\n".into())).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, [file.display().to_string().as_str(), "<stdin>"]);
        assert_eq!(files[1].content, "kind: Stage\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dash_twice_is_refused() {
        let paths = vec![PathBuf::from("-"), PathBuf::from("-")];
        let error = read_all(&paths, || Ok(String::new())).unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }
}
