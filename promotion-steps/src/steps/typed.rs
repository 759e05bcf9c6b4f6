//! [`TypedStep`]: the one shape every built-in step keeps (a `KIND`, a typed `Config`
//! parsed before any side effect), with the [`Step`] plumbing written once.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Step, StepContext, StepOutcome, Writes, parse_config};

/// A built-in step with a typed configuration. Every `TypedStep` is a [`Step`]: its
/// configuration is parsed with [`parse_config`] (a bad one is `Failed`, never retried,
/// and nothing has been touched) and its JSON schema is that of [`TypedStep::Config`].
#[async_trait]
pub(crate) trait TypedStep: Send + Sync {
    /// The name used in `uses:`.
    const KIND: &'static str;

    /// What the step may change outside the work directory (see [`Step::writes`]).
    const WRITES: Writes;

    /// The step's configuration.
    type Config: DeserializeOwned + JsonSchema + Send;

    /// Runs the step with its parsed configuration.
    async fn run_config(&self, ctx: &StepContext, config: Self::Config) -> StepOutcome;

    /// See [`Step::default_timeout`]; `config` is the parsed configuration.
    fn default_timeout(&self, _config: &Self::Config) -> Duration {
        crate::DEFAULT_STEP_TIMEOUT
    }

    /// See [`Step::writes_with`]; `config` is the parsed configuration.
    fn writes_with(&self, _config: &Self::Config) -> Writes {
        Self::WRITES
    }

    /// See [`Step::check_config`].
    fn check(&self, _config: &Value) -> Vec<crate::ConfigProblem> {
        Vec::new()
    }
}

#[async_trait]
impl<T: TypedStep> Step for T {
    fn kind(&self) -> &'static str {
        T::KIND
    }

    fn writes(&self) -> Writes {
        T::WRITES
    }

    /// A configuration that does not parse writes what the kind may: the run fails on it.
    fn writes_with(&self, config: &Value) -> Writes {
        match serde_json::from_value::<T::Config>(config.clone()) {
            Ok(config) => TypedStep::writes_with(self, &config),
            Err(_) => T::WRITES,
        }
    }

    fn config_schema(&self) -> schemars::Schema {
        schemars::schema_for!(T::Config)
    }

    async fn run(&self, ctx: &StepContext, config: Value) -> StepOutcome {
        match parse_config(T::KIND, config) {
            Ok(config) => self.run_config(ctx, config).await,
            Err(outcome) => outcome,
        }
    }

    fn check_config(&self, config: &Value) -> Vec<crate::ConfigProblem> {
        TypedStep::check(self, config)
    }

    /// A configuration that does not parse gets the default: the run fails on it anyway.
    fn default_timeout(&self, config: &Value) -> Duration {
        match serde_json::from_value::<T::Config>(config.clone()) {
            Ok(config) => TypedStep::default_timeout(self, &config),
            Err(_) => crate::DEFAULT_STEP_TIMEOUT,
        }
    }
}
