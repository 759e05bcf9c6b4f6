//! `yaml-parse`: extracts values from a YAML file (one document) into the step's outputs
//! (Kargo's `yaml-parse`); the shared run is in `parsed_outputs.rs`.

use async_trait::async_trait;
use serde_json::Value;

use super::parsed_outputs::{self, Config};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "yaml-parse";

/// The `yaml-parse` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct YamlParse;

#[async_trait]
impl TypedStep for YamlParse {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match parsed_outputs::run(ctx, KIND, &config, parse) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

/// YAML as plain data; map keys that are not strings (`1: x`) are written as strings.
fn parse(text: &str) -> Result<Value, String> {
    serde_yaml_ng::from_str::<Value>(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn extracts_by_expression_including_the_promotion_context() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(
            w.join("apps.yaml"),
            "# per stage\napps:\n  staging: {replicas: 2}\n  prod: {replicas: 5}\nname: shop\n",
        )
        .unwrap();
        std::fs::write(w.join("broken.yaml"), "a: [1,\n").unwrap();
        let ctx = context(w);
        let out = outputs(
            YamlParse
                .run(
                    &ctx,
                    json!({"path": "apps.yaml", "outputs": [
                        {"name": "staging", "fromExpression": "apps['staging'].replicas"},
                        {"name": "name", "fromExpression": "name + '-web'"}]}),
                )
                .await,
        );
        assert_eq!(out["staging"], json!(2));
        assert_eq!(out["name"], json!("shop-web"));
        let reason = failed(
            YamlParse
                .run(&ctx, json!({"path": "broken.yaml", "outputs": [{"name": "a", "fromExpression": "a"}]}))
                .await,
        );
        assert!(
            reason.starts_with("`broken.yaml` is not valid: "),
            "{reason}"
        );
    }
}
