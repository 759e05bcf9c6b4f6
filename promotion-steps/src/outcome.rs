//! What a step answers, and the typed-config helper every step starts with.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::Effect;

/// The result of one run of a step.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// Done; `outputs` become `outputs.<alias>.*` for later steps.
    Succeeded {
        /// The step's outputs.
        outputs: Map<String, Value>,
        /// State to keep for a re-run (e.g. a pull request number).
        state: Option<Value>,
        /// What the step changed outside the work directory (pushed a branch, registered
        /// an Application), in the order it did it; empty for steps that write nothing.
        effects: Vec<Effect>,
    },
    /// Not done yet: run again after `retry_after`. `waiting_for` says what for, in words
    /// a release manager understands ("sync window `freeze` is closed").
    Running {
        /// When to run again.
        retry_after: Duration,
        /// What the step waits for.
        waiting_for: String,
        /// State to keep for the next run.
        state: Option<Value>,
    },
    /// The change was refused (bad config, a gate said no, a reviewer closed the PR).
    /// Never retried.
    Failed {
        /// Why, naming what refused.
        reason: String,
    },
    /// Something broke (a service unreachable, a tool missing). May be retried.
    Errored {
        /// What broke.
        reason: String,
    },
    /// Nothing to do (e.g. nothing changed to commit).
    Skipped {
        /// Why nothing was done.
        reason: String,
    },
}

impl StepOutcome {
    /// Succeeded with these outputs and no saved state.
    pub fn succeeded(outputs: Map<String, Value>) -> Self {
        StepOutcome::Succeeded {
            outputs,
            state: None,
            effects: Vec::new(),
        }
    }

    /// Succeeded with these outputs, having made these `effects`.
    pub fn wrote(outputs: Map<String, Value>, effects: Vec<Effect>) -> Self {
        StepOutcome::Succeeded {
            outputs,
            state: None,
            effects,
        }
    }

    /// What a succeeded run changed outside the work directory (nothing for any other
    /// outcome).
    pub fn effects(&self) -> &[Effect] {
        match self {
            StepOutcome::Succeeded { effects, .. } => effects,
            _ => &[],
        }
    }

    /// Succeeded with no outputs.
    pub fn done() -> Self {
        StepOutcome::succeeded(Map::new())
    }

    /// Failed with a reason.
    pub fn failed(reason: impl Into<String>) -> Self {
        StepOutcome::Failed {
            reason: reason.into(),
        }
    }

    /// Errored with a reason.
    pub fn errored(reason: impl Into<String>) -> Self {
        StepOutcome::Errored {
            reason: reason.into(),
        }
    }

    /// Skipped with a reason.
    pub fn skipped(reason: impl Into<String>) -> Self {
        StepOutcome::Skipped {
            reason: reason.into(),
        }
    }
}

/// Parses a step's configuration into its typed `Config`, or explains which field is wrong
/// as a [`StepOutcome::Failed`] (a bad config is never retried).
pub fn parse_config<C: DeserializeOwned>(kind: &str, config: Value) -> Result<C, StepOutcome> {
    serde_path_to_error::deserialize(config).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        StepOutcome::failed(format!("invalid `{kind}` config{at}: {}", e.into_inner()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Config {
        path: String,
        depth: Option<u32>,
    }

    #[test]
    fn a_bad_config_fails_naming_the_field() {
        let outcome =
            parse_config::<Config>("demo", serde_json::json!({"path": "a", "depth": "x"}));
        let StepOutcome::Failed { reason } = outcome.unwrap_err() else {
            panic!("not Failed")
        };
        assert!(
            reason.starts_with("invalid `demo` config at `depth`"),
            "{reason}"
        );
        let outcome = parse_config::<Config>("demo", serde_json::json!({}));
        let StepOutcome::Failed { reason } = outcome.unwrap_err() else {
            panic!("not Failed")
        };
        assert!(reason.contains("missing field `path`"), "{reason}");
    }
}
