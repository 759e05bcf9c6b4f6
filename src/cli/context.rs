//! What every command that talks to the server needs: the client and the project, resolved
//! from the flags, then the environment (`DRAY_SERVER`, `DRAY_TOKEN`, `DRAY_PROJECT`; an
//! empty value counts as unset), then the saved context (`dray login`), then the default
//! (`http://127.0.0.1:7070`, the only project). A saved token is sent only to the server it
//! was saved for.

use std::path::Path;

use serde_json::Value;

use crate::api::ResourceBody as _;

use super::args::{ClientArgs, ConnectArgs};
use super::saved::{self, SavedConfig, SavedConfigError};
use super::server_url::ServerUrl;
use super::{ApiClient, CliError, env};

/// The server URL used when nothing names one.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7070";

/// The resolved settings of one CLI invocation.
pub struct Context {
    /// The API client.
    pub client: ApiClient,
    /// The project given with `-p`, `DRAY_PROJECT` or the saved context.
    pub explicit_project: Option<String>,
}

/// Server, token and project after precedence, before a client is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The server.
    pub server: ServerUrl,
    /// The token, if any.
    pub token: Option<String>,
    /// The project, if named.
    pub project: Option<String>,
}

impl Context {
    /// Resolves the client options against the environment and the saved contexts.
    pub fn new(args: &ClientArgs) -> Result<Self, CliError> {
        let resolved = resolve_from_environment(&args.connect, args.project.as_deref())?;
        Self::from_resolved(resolved)
    }

    /// The context for commands that need no project (e.g. `dray version`).
    pub fn connect(args: &ConnectArgs) -> Result<Self, CliError> {
        let resolved = resolve_from_environment(args, None)?;
        Self::from_resolved(resolved)
    }

    fn from_resolved(resolved: Resolved) -> Result<Self, CliError> {
        Ok(Context {
            client: ApiClient::new(resolved.server.as_str(), resolved.token)?,
            explicit_project: resolved.project,
        })
    }

    /// The project to work in: the one given, or the only one that exists.
    pub async fn project(&self) -> Result<String, CliError> {
        if let Some(project) = &self.explicit_project {
            return Ok(project.clone());
        }
        let projects: Vec<Value> = self.client.get("/api/v1/projects").await?;
        let names: Vec<&str> = projects.iter().filter_map(|p| p.name()).collect();
        match names.as_slice() {
            [only] => Ok((*only).to_owned()),
            [] => Err(CliError::usage(
                "there are no projects yet",
                "create one with `dray apply -f <project.yaml>`",
            )),
            many => Err(CliError::usage(
                format!(
                    "{} projects exist, so the project must be named",
                    many.len()
                ),
                format!(
                    "pass -p with one of: {} (or save one with `dray config set-project`)",
                    many.join(", ")
                ),
            )),
        }
    }
}

/// Reads the saved contexts (none when no place for them is known) and resolves.
fn resolve_from_environment(
    connect: &ConnectArgs,
    project: Option<&str>,
) -> Result<Resolved, CliError> {
    let (saved, path) = match saved::path() {
        Ok(path) => (SavedConfig::load(&path).map_err(saved_error)?, path),
        Err(SavedConfigError::NoPlace) => (SavedConfig::default(), Default::default()),
        Err(other) => return Err(saved_error(other)),
    };
    resolve(connect, project, env::non_empty, &saved, &path)
}

/// A saved-config error as the CLI reports it.
pub fn saved_error(error: SavedConfigError) -> CliError {
    CliError::Local(error.to_string())
}

/// Applies the precedence flag > environment > saved context > default. `var` reads an
/// environment variable (empty values already dropped).
pub fn resolve(
    connect: &ConnectArgs,
    project: Option<&str>,
    var: impl Fn(&str) -> Option<String>,
    saved: &SavedConfig,
    path: &Path,
) -> Result<Resolved, CliError> {
    let context = match &connect.context {
        Some(name) => Some(saved.require(name, path).map_err(saved_error)?),
        None => saved.current(),
    };
    let context_server = match context {
        Some(c) => Some(c.server.parse::<ServerUrl>().map_err(|e| {
            CliError::usage(
                format!(
                    "the saved context `{}` in `{}` has a bad server: {e}",
                    c.name,
                    path.display()
                ),
                format!("run `dray login --server URL --name {}` again", c.name),
            )
        })?),
        None => None,
    };
    let server = match (&connect.server, var(env::DRAY_SERVER)) {
        (Some(flag), _) => flag.clone(),
        (None, Some(value)) => value.parse::<ServerUrl>().map_err(|e| {
            CliError::usage(
                format!("{}: {e}", env::DRAY_SERVER),
                "fix DRAY_SERVER or unset it (--server overrides it)",
            )
        })?,
        (None, None) => match &context_server {
            Some(url) => url.clone(),
            None => DEFAULT_SERVER
                .parse()
                .map_err(|e| CliError::Local(format!("the default server URL: {e}")))?,
        },
    };
    let saved_token = context
        .filter(|_| context_server.as_ref() == Some(&server))
        .and_then(|c| c.token.clone());
    let token = non_empty(connect.token.as_deref())
        .or_else(|| var(env::DRAY_TOKEN))
        .or(saved_token);
    let project = non_empty(project)
        .or_else(|| var(env::DRAY_PROJECT))
        .or_else(|| context.and_then(|c| c.project.clone()));
    Ok(Resolved {
        server,
        token,
        project,
    })
}

fn non_empty(value: Option<&str>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::saved::SavedContext;

    fn saved() -> SavedConfig {
        SavedConfig {
            current_context: Some("ctx".into()),
            contexts: vec![
                SavedContext {
                    name: "ctx".into(),
                    server: "http://saved:1".into(),
                    token: Some("saved-token".into()),
                    project: Some("saved-project".into()),
                },
                SavedContext {
                    name: "other".into(),
                    server: "http://other:2".into(),
                    token: Some("other-token".into()),
                    project: None,
                },
            ],
        }
    }

    fn env(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let pairs = pairs.to_vec();
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn flags(server: Option<&str>, token: Option<&str>) -> ConnectArgs {
        ConnectArgs {
            server: server.map(|s| s.parse().unwrap()),
            token: token.map(str::to_owned),
            context: None,
        }
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_context() {
        let path = Path::new("/c.yaml");
        let all_env = env(&[
            ("DRAY_SERVER", "http://env:3"),
            ("DRAY_TOKEN", "env-token"),
            ("DRAY_PROJECT", "env-project"),
        ]);
        let by_flag = resolve(
            &flags(Some("http://flag:4"), Some("flag-token")),
            Some("flag-project"),
            &all_env,
            &saved(),
            path,
        )
        .unwrap();
        assert_eq!(by_flag.server.as_str(), "http://flag:4");
        assert_eq!(by_flag.token.as_deref(), Some("flag-token"));
        assert_eq!(by_flag.project.as_deref(), Some("flag-project"));

        let by_env = resolve(&flags(None, None), None, &all_env, &saved(), path).unwrap();
        assert_eq!(by_env.server.as_str(), "http://env:3");
        assert_eq!(by_env.token.as_deref(), Some("env-token"));
        assert_eq!(by_env.project.as_deref(), Some("env-project"));

        let by_context = resolve(&flags(None, None), None, env(&[]), &saved(), path).unwrap();
        assert_eq!(by_context.server.as_str(), "http://saved:1");
        assert_eq!(by_context.token.as_deref(), Some("saved-token"));
        assert_eq!(by_context.project.as_deref(), Some("saved-project"));

        let by_default = resolve(
            &flags(None, None),
            None,
            env(&[]),
            &SavedConfig::default(),
            path,
        )
        .unwrap();
        assert_eq!(by_default.server.as_str(), DEFAULT_SERVER);
        assert_eq!(by_default.token, None);
        assert_eq!(by_default.project, None);
    }

    #[test]
    fn a_saved_token_goes_only_to_its_own_server() {
        let path = Path::new("/c.yaml");
        let elsewhere = resolve(
            &flags(Some("http://elsewhere:5"), None),
            None,
            env(&[]),
            &saved(),
            path,
        )
        .unwrap();
        assert_eq!(elsewhere.token, None);
        let same = resolve(
            &flags(Some("http://saved:1/"), None),
            None,
            env(&[]),
            &saved(),
            path,
        )
        .unwrap();
        assert_eq!(same.token.as_deref(), Some("saved-token"));
    }

    #[test]
    fn context_flag_picks_another_saved_context_and_an_unknown_one_is_refused() {
        let path = Path::new("/c.yaml");
        let mut args = flags(None, None);
        args.context = Some("other".into());
        let other = resolve(&args, None, env(&[]), &saved(), path).unwrap();
        assert_eq!(other.server.as_str(), "http://other:2");
        assert_eq!(other.token.as_deref(), Some("other-token"));
        args.context = Some("nope".into());
        let Err(error) = resolve(&args, None, env(&[]), &saved(), path) else {
            panic!("an unknown context was accepted");
        };
        assert!(error.to_string().contains("no context `nope`"), "{error}");
        assert!(error.to_string().contains("ctx, other"), "{error}");
    }

    #[test]
    fn a_bad_dray_server_is_a_usage_error_naming_the_variable() {
        let Err(error) = resolve(
            &flags(None, None),
            None,
            env(&[("DRAY_SERVER", "127.0.0.1:45413")]),
            &SavedConfig::default(),
            Path::new("/c.yaml"),
        ) else {
            panic!("a URL without a scheme was accepted");
        };
        assert_eq!(error.exit_code(), 2);
        assert!(
            error
                .to_string()
                .contains("DRAY_SERVER: `127.0.0.1:45413` has no scheme; did you mean `http://127.0.0.1:45413`?"),
            "{error}"
        );
    }

    #[test]
    fn empty_flag_values_count_as_not_given() {
        let resolved = resolve(
            &flags(None, Some("")),
            Some(""),
            env(&[]),
            &saved(),
            Path::new("/c.yaml"),
        )
        .unwrap();
        assert_eq!(resolved.token.as_deref(), Some("saved-token"));
        assert_eq!(resolved.project.as_deref(), Some("saved-project"));
    }
}
