//! `yaml-merge`: merges YAML files in order into one (typically Helm values: a base, then
//! overlays), as Kargo's `yaml-merge`: maps merge key by key, any other value (lists
//! included) is replaced by the later file's, and a `null` removes the key. The output is
//! written fresh (comments of the inputs are not kept).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use serde_yaml_ng::Value;

use super::files::{read_text, resolve, write_if_changed};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "yaml-merge";

/// Configuration of `yaml-merge`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The files to merge, first the base, then each overlay, relative to the work directory.
    #[schemars(length(min = 1))]
    in_paths: Vec<String>,
    /// The merged file to write, relative to the work directory.
    out_path: String,
    /// Fail when an input file does not exist (default false: missing inputs are skipped,
    /// and the log says which).
    #[serde(default)]
    strict: bool,
}

/// The `yaml-merge` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct YamlMerge;

#[async_trait]
impl TypedStep for YamlMerge {
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
    if config.in_paths.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `inPaths`: list at least one file to merge"
        )));
    }
    let mut merged = Value::Null;
    let mut used = Vec::new();
    for path in &config.in_paths {
        let file = resolve(ctx, path, true)?;
        if !file.exists() && !config.strict {
            ctx.log(&format!(
                "`{path}` does not exist; skipped (set `strict: true` to fail instead)"
            ));
            continue;
        }
        let text = read_text(&file, path)?;
        let overlay: Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| StepOutcome::failed(format!("`{path}` is not valid YAML: {e}")))?;
        merge(&mut merged, overlay);
        used.push(path.as_str());
    }
    let text = match &merged {
        Value::Null => String::new(),
        value => serde_yaml_ng::to_string(value)
            .map_err(|e| StepOutcome::errored(format!("cannot write the merged YAML: {e}")))?,
    };
    let out = resolve(ctx, &config.out_path, true)?;
    if write_if_changed(&out, &text)? {
        ctx.log(&format!(
            "merged {} into `{}`",
            used.join(", "),
            config.out_path
        ));
    } else {
        ctx.log(&format!("`{}` already held the merge", config.out_path));
    }
    let mut outputs = Map::new();
    outputs.insert(
        "commitMessage".to_owned(),
        Json::from(format!(
            "merge {} into {}",
            used.join(", "),
            config.out_path
        )),
    );
    Ok(StepOutcome::succeeded(outputs))
}

/// Merges `overlay` into `base`: maps key by key (a `null` removes the key), anything else
/// replaced.
fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => {
            for (key, value) in overlay {
                if value.is_null() {
                    base.remove(&key);
                } else if let Some(slot) = base.get_mut(&key) {
                    merge(slot, value);
                } else {
                    base.insert(key, value);
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, context_with_log, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn overlays_merge_maps_replace_lists_and_null_removes() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir_all(w.join("src/qa")).unwrap();
        std::fs::write(
            w.join("src/values.yaml"),
            "image: {repository: app, tag: 1.0.0}\nhosts: [a, b]\ndebug: true\nresources: {cpu: 1}\n",
        )
        .unwrap();
        std::fs::write(
            w.join("src/qa/values.yaml"),
            "# qa\nimage: {tag: 1.2.0}\nhosts: [qa]\ndebug: null\nextra: 1\n",
        )
        .unwrap();
        let (ctx, log) = context_with_log(w);
        let out = outputs(
            YamlMerge
                .run(
                    &ctx,
                    json!({"inPaths": ["src/values.yaml", "src/qa/values.yaml", "src/qa/none.yaml"],
                           "outPath": "out/values.yaml"}),
                )
                .await,
        );
        let merged: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(w.join("out/values.yaml")).unwrap())
                .unwrap();
        let expected: Value = serde_yaml_ng::from_str(
            "image: {repository: app, tag: 1.2.0}\nhosts: [qa]\nresources: {cpu: 1}\nextra: 1\n",
        )
        .unwrap();
        assert_eq!(merged, expected);
        assert_eq!(
            out["commitMessage"],
            json!("merge src/values.yaml, src/qa/values.yaml into out/values.yaml")
        );
        assert!(
            log.lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("`src/qa/none.yaml` does not exist; skipped")),
            "{log:?}"
        );
        let strict = json!({"inPaths": ["src/values.yaml", "src/qa/none.yaml"], "outPath": "o.yaml", "strict": true});
        let reason = failed(YamlMerge.run(&context(w), strict).await);
        assert!(
            reason.contains("`src/qa/none.yaml` does not exist"),
            "{reason}"
        );
        assert!(!w.join("o.yaml").exists());
    }
}
