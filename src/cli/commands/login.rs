//! `dray login --server URL [--token-stdin | --token T] [--name N] [-p P]`: checks the
//! token against the server (`GET /api/v1/version`, which every authenticated caller may
//! read) and only then saves server, token and project as a context and makes it the
//! current one (see `cli::saved`). The token is never printed.

use std::io::Read as _;

use serde_json::Value;

use crate::cli::context::saved_error;
use crate::cli::saved::{self, SavedConfig, SavedContext};
use crate::cli::server_url::{self, ServerUrl};
use crate::cli::{ApiClient, CliError, env};

/// Arguments of `dray login`.
#[derive(clap::Args, Debug)]
pub struct LoginArgs {
    /// The Dray server's URL, with `http://` or `https://`.
    #[arg(long, value_name = "URL", value_parser = server_url::parse)]
    pub server: ServerUrl,
    /// Read the token from standard input (e.g. `< /tmp/dray/bootstrap-token`).
    #[arg(long, conflicts_with = "token")]
    pub token_stdin: bool,
    /// The token (visible to other users in the process list: prefer --token-stdin);
    /// without either, `DRAY_TOKEN`.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// The context's name (default: the server's host and port).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The project to save with the context.
    #[arg(short = 'p', long, value_name = "PROJECT")]
    pub project: Option<String>,
}

/// Runs `dray login`.
pub async fn run(args: LoginArgs) -> Result<(), CliError> {
    let token = if args.token_stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            CliError::Local(format!("cannot read the token from standard input: {e}"))
        })?;
        Some(text.trim().to_owned()).filter(|t| !t.is_empty())
    } else {
        args.token
            .filter(|t| !t.trim().is_empty())
            .or_else(|| env::non_empty(env::DRAY_TOKEN))
    };
    if args.token_stdin && token.is_none() {
        return Err(CliError::usage(
            "--token-stdin read no token: standard input was empty",
            "pipe the token in, e.g. `dray login --server URL --token-stdin < token-file`",
        ));
    }
    let client = ApiClient::new(args.server.as_str(), token.clone())?;
    match client.get::<Value>("/api/v1/version").await {
        Ok(_) => {}
        Err(CliError::Api { status: 401, body }) => {
            return Err(CliError::usage(
                format!(
                    "the server at `{}` refused the token: {}; nothing was saved",
                    args.server, body.error.message
                ),
                "make a token with `dray token create` (a new server's first one is in `<data-dir>/bootstrap-token`)",
            ));
        }
        Err(other) => return Err(other),
    }
    let name = args
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| default_name(&args.server));
    let path = saved::path().map_err(saved_error)?;
    let mut config = SavedConfig::load(&path).map_err(saved_error)?;
    let project = args.project.filter(|p| !p.trim().is_empty()).or_else(|| {
        config
            .context(&name)
            .filter(|old| old.server == args.server.as_str())
            .and_then(|old| old.project.clone())
    });
    config.upsert(SavedContext {
        name: name.clone(),
        server: args.server.to_string(),
        token,
        project,
    });
    config.current_context = Some(name.clone());
    config.save(&path).map_err(saved_error)?;
    println!(
        "logged in to {}; saved as context `{name}` (now current) in {}",
        args.server,
        path.display()
    );
    Ok(())
}

/// A context name from the URL: its host and port (`127.0.0.1:7070`).
fn default_name(server: &ServerUrl) -> String {
    let url = server.as_str();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_is_host_and_port() {
        let url: ServerUrl = "https://dray.example.com:8443/base".parse().unwrap();
        assert_eq!(default_name(&url), "dray.example.com:8443");
        let url: ServerUrl = "http://127.0.0.1:7070".parse().unwrap();
        assert_eq!(default_name(&url), "127.0.0.1:7070");
    }
}
