//! `set-freight-alias`: gives a Freight of the promotion's project a new alias (Kargo's
//! `set-freight-alias`). The step only checks its configuration and reports an
//! [`Effect::SetFreightAlias`]; the engine renames the Freight when the step succeeds, and
//! fails the step there when the Freight does not exist, the alias is taken by other
//! Freight of the project, or it is not an RFC 1123 label.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::typed::TypedStep;
use crate::{Effect, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "set-freight-alias";

/// Configuration of `set-freight-alias`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The Freight's name (its id, e.g. `${{ ctx.targetFreight.name }}`), not its alias.
    freight_name: String,
    /// The alias to give it: an RFC 1123 label not used by other Freight of the project.
    new_alias: String,
}

/// The `set-freight-alias` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SetFreightAlias;

#[async_trait]
impl TypedStep for SetFreightAlias {
    const KIND: &'static str = KIND;
    // It renames a Dray resource, through the engine: nothing outside Dray.
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, _ctx: &StepContext, config: Config) -> StepOutcome {
        let freight = config.freight_name.trim();
        let alias = config.new_alias.trim();
        if freight.is_empty() {
            return StepOutcome::failed(
                "`freightName` is empty: name the Freight to rename, e.g. `${{ ctx.targetFreight.name }}`",
            );
        }
        if alias.is_empty() {
            return StepOutcome::failed(format!(
                "`newAlias` is empty: give the alias Freight `{freight}` should have"
            ));
        }
        StepOutcome::wrote(
            Map::new(),
            vec![Effect::SetFreightAlias {
                freight: freight.to_owned(),
                alias: alias.to_owned(),
            }],
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[tokio::test]
    async fn reports_the_rename_as_an_effect() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let outcome = SetFreightAlias
            .run(&ctx, json!({"freightName": "f1", "newAlias": " rc-1 "}))
            .await;
        assert_eq!(
            outcome.effects(),
            [Effect::SetFreightAlias {
                freight: "f1".into(),
                alias: "rc-1".into(),
            }]
        );
    }

    #[tokio::test]
    async fn refuses_empty_names_and_unknown_fields() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let reason = failed(
            SetFreightAlias
                .run(&ctx, json!({"freightName": "", "newAlias": "a"}))
                .await,
        );
        assert!(reason.contains("`freightName` is empty"), "{reason}");
        let reason = failed(
            SetFreightAlias
                .run(&ctx, json!({"freightName": "f1", "newAlias": " "}))
                .await,
        );
        assert!(
            reason.contains("`newAlias` is empty") && reason.contains("`f1`"),
            "{reason}"
        );
        let reason = failed(
            SetFreightAlias
                .run(&ctx, json!({"freight": "f1", "newAlias": "a"}))
                .await,
        );
        assert!(reason.contains("freight"), "{reason}");
    }
}
