//! `fail`: ends the promotion as Failed with a message, typically under an `if:` that
//! detects a state no later step should act on (Kargo's `fail`).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "fail";

/// Configuration of `fail`.
#[derive(Deserialize, JsonSchema, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// What the promotion's failure says (default: that the `fail` step ran).
    #[serde(default)]
    message: Option<String>,
}

/// The `fail` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fail;

#[async_trait]
impl TypedStep for Fail {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, _ctx: &StepContext, config: Config) -> StepOutcome {
        // No step name here: the promotion's message names the step (`step `x` failed: …`).
        let message = match config.message.as_deref().map(str::trim) {
            Some(message) if !message.is_empty() => message.to_owned(),
            _ => "`fail` ended the promotion".to_owned(),
        };
        StepOutcome::failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};
    use serde_json::json;

    #[tokio::test]
    async fn fails_with_the_message_or_says_which_step_failed() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let reason = failed(
            Fail.run(&ctx, json!({"message": "chart name mismatch"}))
                .await,
        );
        assert_eq!(reason, "chart name mismatch");
        for config in [json!({}), json!({"message": "  "})] {
            let reason = failed(Fail.run(&ctx, config).await);
            assert_eq!(reason, "`fail` ended the promotion");
        }
        let reason = failed(Fail.run(&ctx, json!({"mesage": "typo"})).await);
        assert!(reason.contains("mesage"), "{reason}");
    }
}
