//! `json-parse`: extracts values from a JSON file into the step's outputs (Kargo's
//! `json-parse`); the shared run is in `parsed_outputs.rs`.

use async_trait::async_trait;

use super::parsed_outputs::{self, Config};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "json-parse";

/// The `json-parse` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct JsonParse;

#[async_trait]
impl TypedStep for JsonParse {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let parse = |text: &str| serde_json::from_str(text).map_err(|e| e.to_string());
        match parsed_outputs::run(ctx, KIND, &config, parse) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn extracts_nested_values_and_names_what_is_wrong() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(
            w.join("values.json"),
            r#"{"image": {"tag": "1.4.2"}, "replicas": 3, "list": [1, 2]}"#,
        )
        .unwrap();
        std::fs::write(w.join("broken.json"), "{\"image\": ").unwrap();
        std::fs::write(w.join("scalar.json"), "42").unwrap();
        let ctx = context(w);
        let out = outputs(
            JsonParse
                .run(
                    &ctx,
                    json!({"path": "values.json", "outputs": [
                        {"name": "tag", "fromExpression": "image.tag"},
                        {"name": "twice", "fromExpression": "replicas * 2"},
                        {"name": "second", "fromExpression": "list[1]"}]}),
                )
                .await,
        );
        assert_eq!(out["tag"], json!("1.4.2"));
        assert_eq!(out["twice"], json!(6));
        assert_eq!(out["second"], json!(2));
        let one = |path: &str, expr: &str| json!({"path": path, "outputs": [{"name": "x", "fromExpression": expr}]});
        let reason = failed(JsonParse.run(&ctx, one("broken.json", "image")).await);
        assert!(
            reason.starts_with("`broken.json` is not valid: "),
            "{reason}"
        );
        let reason = failed(JsonParse.run(&ctx, one("scalar.json", "x")).await);
        assert!(reason.contains("holds a number at the top"), "{reason}");
        let reason = failed(JsonParse.run(&ctx, one("values.json", "image.nope")).await);
        assert!(
            reason.starts_with("output `x` (`image.nope`) of `values.json`: "),
            "{reason}"
        );
        let reason = failed(JsonParse.run(&ctx, one("missing.json", "x")).await);
        assert!(reason.contains("does not exist"), "{reason}");
        let reason = failed(
            JsonParse
                .run(&ctx, json!({"path": "values.json", "outputs": []}))
                .await,
        );
        assert!(reason.contains("name at least one value"), "{reason}");
    }
}
