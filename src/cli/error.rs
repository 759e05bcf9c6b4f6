//! The CLI's errors and the exit codes they map to: 1 when the server refused or the input
//! is invalid, 2 for usage errors (as clap does), 3 when something unexpected broke.

use crate::server::ErrorBody;

/// Why a CLI command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line is incomplete or contradictory.
    #[error("{message}")]
    Usage {
        /// What is wrong.
        message: String,
        /// What to do next.
        hint: Option<String>,
    },
    /// The server could not be reached.
    #[error("cannot reach the Dray server at `{server}`: {cause}")]
    Unreachable {
        /// The server URL.
        server: String,
        /// Why.
        cause: String,
    },
    /// The server answered with an error.
    #[error("{}", .body.error.message)]
    Api {
        /// The HTTP status.
        status: u16,
        /// The server's error body.
        body: ErrorBody,
    },
    /// Reading input or writing output failed.
    #[error("{0}")]
    Local(String),
}

impl CliError {
    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Api { status, .. } if *status >= 500 => 3,
            CliError::Api { .. } | CliError::Local(_) => 1,
            CliError::Usage { .. } => 2,
            CliError::Unreachable { .. } => 3,
        }
    }

    /// What to do next, if anything can be said.
    pub fn hint(&self) -> Option<String> {
        match self {
            CliError::Usage { hint, .. } => hint.clone(),
            CliError::Unreachable { .. } => Some(
                "start the server with `dray serve`, or point the CLI at it with --server, DRAY_SERVER or a saved context (`dray login`)"
                    .into(),
            ),
            CliError::Api { body, .. } => body.error.hint.clone(),
            CliError::Local(_) => None,
        }
    }

    /// Detail lines (e.g. every validation error) to print under the message.
    pub fn details(&self) -> Vec<String> {
        let CliError::Api { body, .. } = self else {
            return Vec::new();
        };
        let Some(details) = &body.error.details else {
            return Vec::new();
        };
        if let Ok(reasons) = serde_json::from_value::<Vec<String>>(details.clone()) {
            return reasons.iter().map(|r| format!("  - {r}")).collect();
        }
        let errors: Vec<crate::config::ConfigError> =
            serde_json::from_value(details.clone()).unwrap_or_default();
        errors.iter().map(ToString::to_string).collect()
    }
}
