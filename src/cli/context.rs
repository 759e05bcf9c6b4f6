//! What every command that talks to the server needs: the client and the project.

use serde_json::Value;

use crate::api::ResourceBody as _;

use super::{ApiClient, CliError, GlobalArgs};

/// The resolved settings of one CLI invocation.
pub struct Context {
    /// The API client.
    pub client: ApiClient,
    /// The project given with `-p` or `DRAY_PROJECT`.
    pub explicit_project: Option<String>,
}

impl Context {
    /// Resolves the global arguments.
    pub fn new(global: &GlobalArgs) -> Result<Self, CliError> {
        let token = global.token.clone().filter(|t| !t.is_empty());
        Ok(Context {
            client: ApiClient::new(&global.server, token)?,
            explicit_project: global.project.clone().filter(|p| !p.is_empty()),
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
                format!("pass -p with one of: {}", many.join(", ")),
            )),
        }
    }
}
