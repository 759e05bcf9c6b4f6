//! `compose-output`: publishes its own configuration as the step's outputs, so that later
//! steps (or a PromotionTask's caller) read one combined value, e.g. a pull-request URL
//! built from `vars` and an earlier step's output (Kargo's `compose-output`). Expressions
//! in the values are evaluated by the engine before the step runs, as for every step.

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "compose-output";

/// Configuration of `compose-output`: each key is an output's name, each value its value
/// (any JSON, usually an expression).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(transparent)]
pub(crate) struct Config(BTreeMap<String, Value>);

/// The `compose-output` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ComposeOutput;

#[async_trait]
impl TypedStep for ComposeOutput {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, _ctx: &StepContext, config: Config) -> StepOutcome {
        if config.0.is_empty() {
            return StepOutcome::failed(format!(
                "invalid `{KIND}` config: name at least one output, e.g. `url: ${{{{ vars.repoURL \
                 }}}}/pull/${{{{ outputs['open-pr'].prNumber }}}}`"
            ));
        }
        StepOutcome::succeeded(config.0.into_iter().collect::<Map<String, Value>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn the_config_becomes_the_outputs() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let out = outputs(
            ComposeOutput
                .run(
                    &ctx,
                    json!({"url": "https://git.example.com/pull/7", "n": 7, "m": {"a": [1]}}),
                )
                .await,
        );
        assert_eq!(
            Value::Object(out),
            json!({"url": "https://git.example.com/pull/7", "n": 7, "m": {"a": [1]}})
        );
        let reason = failed(ComposeOutput.run(&ctx, json!({})).await);
        assert!(reason.contains("name at least one output"), "{reason}");
        let reason = failed(ComposeOutput.run(&ctx, json!(["not", "a", "map"])).await);
        assert!(reason.contains("compose-output"), "{reason}");
    }
}
