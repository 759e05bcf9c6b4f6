//! `json-update`: sets values of existing keys in a JSON file by key path, replacing only
//! the bytes of each value so every other byte stays as written (Kargo's `json-update`).
//! Finding the bytes is `json_text.rs`; key paths are `key_path.rs`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::files::{read_text, resolve};
use super::json_text::value_span;
use super::key_path::{self, Update};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "json-update";

/// Configuration of `json-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The JSON file to edit, relative to the work directory.
    path: String,
    /// The values to set, in order.
    #[schemars(length(min = 1))]
    updates: Vec<Update>,
}

/// The `json-update` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct JsonUpdate;

#[async_trait]
impl TypedStep for JsonUpdate {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, &config) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    if config.updates.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `updates`: list at least one key to set"
        )));
    }
    let file = resolve(ctx, &config.path, true)?;
    let mut text = read_text(&file, &config.path)?;
    let mut expected: Value = serde_json::from_str(&text)
        .map_err(|e| StepOutcome::failed(format!("`{}` is not valid JSON: {e}", config.path)))?;
    for update in &config.updates {
        let parts = key_path::parse(KIND, &update.key)?;
        let cannot = |why: String| {
            StepOutcome::failed(format!(
                "cannot set `{}` in `{}`: {why}",
                update.key, config.path
            ))
        };
        let span = value_span(&text, &parts).map_err(cannot)?;
        let written = serde_json::to_string(&update.value)
            .map_err(|e| cannot(format!("the value cannot be written as JSON: {e}")))?;
        text.replace_range(span, &written);
        let pointer = parts
            .iter()
            .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
            .collect::<String>();
        if let Some(slot) = expected.pointer_mut(&pointer) {
            *slot = update.value.clone();
        }
    }
    // The edit is checked, not trusted: the text must now hold exactly the expected data.
    let edited: Value = serde_json::from_str(&text).map_err(|e| {
        StepOutcome::errored(format!(
            "editing `{}` broke its JSON ({e}); nothing was written",
            config.path
        ))
    })?;
    if edited != expected {
        return Err(StepOutcome::errored(format!(
            "editing `{}` changed more than the keys it sets; nothing was written",
            config.path
        )));
    }
    key_path::write_edit(
        ctx,
        &file,
        &config.path,
        &text,
        config.updates.iter().map(|u| (u.key.as_str(), &u.value)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    const SETTINGS: &str = "{\n    \"image\": {\"tag\": \"1.0.0\",   \"pull\": \"IfNotPresent\"},\n    \"example.com/version\": \"v1\",\n    \"containers\": [ { \"name\": \"app\", \"image\": \"app:1.0\" } ],\n    \"replicas\": 2\n}\n";

    #[tokio::test]
    async fn sets_values_and_keeps_every_other_byte() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(w.join("settings.json"), SETTINGS).unwrap();
        let ctx = context(w);
        let out = outputs(
            JsonUpdate
                .run(
                    &ctx,
                    json!({"path": "settings.json", "updates": [
                        {"key": "image.tag", "value": "1.2.0"},
                        {"key": "example\\.com/version", "value": "v2"},
                        {"key": "containers.0.image", "value": "app:1.2"},
                        {"key": "replicas", "value": 3}]}),
                )
                .await,
        );
        let expected = SETTINGS
            .replace("\"1.0.0\"", "\"1.2.0\"")
            .replace("\"v1\"", "\"v2\"")
            .replace("app:1.0", "app:1.2")
            .replace("\"replicas\": 2", "\"replicas\": 3");
        assert_eq!(
            std::fs::read_to_string(w.join("settings.json")).unwrap(),
            expected
        );
        assert_eq!(
            out["commitMessage"],
            json!(
                "update settings.json: image.tag = 1.2.0, example\\.com/version = v2, containers.0.image = app:1.2, replicas = 3"
            )
        );
    }

    #[tokio::test]
    async fn missing_keys_and_broken_files_fail_and_write_nothing() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(w.join("settings.json"), SETTINGS).unwrap();
        std::fs::write(w.join("broken.json"), "{\"a\": ").unwrap();
        let ctx = context(w);
        let set = |path: &str, key: &str| json!({"path": path, "updates": [{"key": "replicas", "value": 9}, {"key": key, "value": "x"}]});
        let reason = failed(
            JsonUpdate
                .run(&ctx, set("settings.json", "image.tga"))
                .await,
        );
        assert!(
            reason.contains("cannot set `image.tga` in `settings.json`: `image` has no key `tga`"),
            "{reason}"
        );
        assert_eq!(
            std::fs::read_to_string(w.join("settings.json")).unwrap(),
            SETTINGS
        );
        let reason = failed(JsonUpdate.run(&ctx, set("broken.json", "a")).await);
        assert!(reason.contains("is not valid JSON"), "{reason}");
    }
}
