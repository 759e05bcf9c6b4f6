//! `yaml-update`: sets values in a YAML file (a Helm values file, a manifest) by key path,
//! keeping comments, key order and the formatting of every line it does not change.
//!
//! Owns key-path parsing and the edit; the lossless editing itself is in `yaml_doc.rs`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use serde_yaml_ng::Value;
use std::str::FromStr;
use yaml_edit::{AsYaml, ScalarValue, YamlFile, YamlNode};

use super::files::{read_text, resolve};
use super::key_path;
use super::typed::TypedStep;
use super::yaml_doc::{YamlEdit, plain, string_like};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "yaml-update";

/// Configuration of `yaml-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The YAML file to edit, relative to the work directory (it holds one document).
    path: String,
    /// The values to set, in order.
    #[schemars(length(min = 1))]
    updates: Vec<Update>,
    /// Add map keys that do not exist yet, with the maps leading to them. Off by default, so
    /// that a mistyped key fails instead of adding a key nothing reads. Lists never grow.
    #[serde(default)]
    create: bool,
}

/// One value to set.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Update {
    /// The key path: map keys separated by dots, list items by number, e.g.
    /// `spec.template.spec.containers.0.image`. Write a dot inside a key as `\.`
    /// (`metadata.annotations.argocd\.argoproj\.io/sync-wave`).
    key: String,
    /// The new value: a string, number, boolean, null, list or map. A string that replaces
    /// an unquoted number or boolean and reads as one is written unquoted, so `replicas`
    /// stays a number.
    value: Json,
}

/// The `yaml-update` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct YamlUpdate;

#[async_trait]
impl TypedStep for YamlUpdate {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    if config.updates.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `updates`: list at least one key to set"
        )));
    }
    let keys = config
        .updates
        .iter()
        .map(|u| key_path::parse(KIND, &u.key))
        .collect::<Result<Vec<_>, _>>()?;
    let file = resolve(ctx, &config.path, true)?;
    let text = read_text(&file, &config.path)?;
    let edit = YamlEdit::parse(&text, &config.path)?;
    let mut expected = edit.before.clone();
    for (update, key) in config.updates.iter().zip(&keys) {
        apply(&edit, &mut expected, key, &update.value, config.create).map_err(|why| {
            StepOutcome::failed(format!(
                "cannot set `{}` in `{}`: {why}",
                update.key, config.path
            ))
        })?;
    }
    let edited = edit.finish(&expected, &config.path)?;
    key_path::write_edit(
        ctx,
        &file,
        &config.path,
        &edited,
        config.updates.iter().map(|u| (u.key.as_str(), &u.value)),
    )
}

/// Sets `key` to `value` in the lossless tree and, in step, in `expected` (the plain data
/// the file must hold afterwards). The error says, in words, what is missing.
pub(crate) fn apply(
    edit: &YamlEdit,
    expected: &mut Value,
    key: &[String],
    value: &Json,
    create: bool,
) -> Result<(), String> {
    if edit.before.is_null() && !create {
        return Err("the file is empty; set `create: true` to add keys".to_owned());
    }
    let mut node = match (edit.doc.as_mapping(), edit.doc.as_sequence()) {
        (Some(m), _) => YamlNode::Mapping(m),
        (None, Some(s)) => YamlNode::Sequence(s),
        (None, None) if edit.before.is_null() && create => {
            let new = nested(&key[1..], value)?;
            let yaml = to_yaml(None, &new);
            edit.doc.set(key[0].as_str(), &*yaml);
            *expected = plain(&nested(key, value)?);
            return Ok(());
        }
        (None, None) => return Err("the file holds a single value, not a map or list".to_owned()),
    };
    let mut plain_node = expected;
    for (depth, part) in key.iter().enumerate() {
        let at = key_path::place(&key[..depth]);
        let last = depth + 1 == key.len();
        let child = match &node {
            YamlNode::Mapping(m) => {
                let child = m.get(part.as_str());
                if last || child.is_none() {
                    if child.is_none() && !create {
                        return Err(format!(
                            "{} has no key `{part}`; check the key, or set `create: true` to add it",
                            at
                        ));
                    }
                    let new = nested(&key[depth + 1..], value)?;
                    let old_plain = plain_node.get(part.as_str()).cloned();
                    let (yaml, plain_value) = typed(child.as_ref(), old_plain.as_ref(), &new);
                    m.set(part.as_str(), &*yaml);
                    if plain_node.is_null() {
                        *plain_node = Value::Mapping(serde_yaml_ng::Mapping::new());
                    }
                    if let Some(map) = plain_node.as_mapping_mut() {
                        map.insert(Value::from(part.as_str()), plain_value);
                    }
                    return Ok(());
                }
                child
            }
            YamlNode::Sequence(s) => {
                let index: usize = part.parse().map_err(|_| {
                    format!("{} is a list: use an item number instead of `{part}`", at)
                })?;
                let Some(child) = s.get(index) else {
                    return Err(format!(
                        "{} has {} items, so there is no item {index} (lists never grow)",
                        at,
                        s.len()
                    ));
                };
                if last {
                    let old_plain = plain_node.get(index).cloned();
                    let (yaml, plain_value) = typed(Some(&child), old_plain.as_ref(), value);
                    s.set(index, &*yaml);
                    if let Some(item) = plain_node.get_mut(index) {
                        *item = plain_value;
                    }
                    return Ok(());
                }
                Some(child)
            }
            _ => None,
        };
        let Some(child) = child else {
            return Err(format!(
                "{} is a single value, not a map or list, so it has no `{part}`",
                at
            ));
        };
        plain_node = match plain_node {
            Value::Sequence(items) => part.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            other => other.get_mut(part.as_str()),
        }
        .ok_or_else(|| format!("{} could not be followed to `{part}`", at))?;
        node = child;
    }
    Ok(())
}

/// `value` under the map keys `rest` (for keys created with `create: true`).
fn nested(rest: &[String], value: &Json) -> Result<Json, String> {
    rest.iter().rev().try_fold(value.clone(), |inner, part| {
        if part.parse::<usize>().is_ok() {
            return Err(format!(
                "`{part}` would be a list item, and only map keys are created; add the list first"
            ));
        }
        let mut map = Map::new();
        map.insert(part.clone(), inner);
        Ok(Json::Object(map))
    })
}

/// The YAML to write for `value` replacing `old` (plain form `old_plain`), and the plain
/// value it reads back as.
fn typed(
    old: Option<&YamlNode>,
    old_plain: Option<&Value>,
    value: &Json,
) -> (Box<dyn AsYaml>, Value) {
    if let (Json::String(s), Some(Value::Number(_) | Value::Bool(_))) = (value, old_plain) {
        if let Ok(read @ (Value::Number(_) | Value::Bool(_))) = serde_yaml_ng::from_str(s) {
            if let Ok(json) = serde_json::to_value(&read) {
                return (to_yaml(old, &json), read);
            }
        }
    }
    (to_yaml(old, value), plain(value))
}

/// The YAML node for a JSON value; strings keep the quoting of `old`.
fn to_yaml(old: Option<&YamlNode>, value: &Json) -> Box<dyn AsYaml> {
    match value {
        Json::Null => Box::new(ScalarValue::null()),
        Json::Bool(b) => Box::new(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Box::new(i),
            (None, Some(u), _) => Box::new(u),
            (None, None, f) => Box::new(f.unwrap_or(f64::NAN)),
        },
        Json::String(s) => Box::new(string_like(old, s)),
        Json::Array(_) | Json::Object(_) => {
            let text = serde_yaml_ng::to_string(value).unwrap_or_default();
            let root = YamlFile::from_str(&text).ok().and_then(|f| f.document());
            match root.and_then(|d| {
                d.as_mapping()
                    .map(YamlNode::Mapping)
                    .or_else(|| d.as_sequence().map(YamlNode::Sequence))
            }) {
                Some(node) => Box::new(node),
                None => Box::new(ScalarValue::null()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    const DEPLOYMENT: &str = r#"# The app's Deployment.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app   # do not rename
  annotations:
    argocd.argoproj.io/sync-wave: "1"
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: app
          image: "registry.example.com/team/app:1.0.0" # pinned by Dray
          args: ["--port", "8080"]
        - {name: sidecar, image: 'envoy:1'}
# end
"#;

    async fn update(dir: &std::path::Path, config: Json) -> StepOutcome {
        YamlUpdate.run(&context(dir), config).await
    }

    #[tokio::test]
    async fn values_change_and_everything_else_stays_as_written() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("deploy.yaml"), DEPLOYMENT).unwrap();
        let config = json!({"path": "deploy.yaml", "updates": [
            {"key": "spec.template.spec.containers.0.image", "value": "registry.example.com/team/app:1.2.0"},
            {"key": "spec.template.spec.containers.1.image", "value": "envoy:2"},
            {"key": "spec.replicas", "value": "3"},
            {"key": "metadata.annotations.argocd\\.argoproj\\.io/sync-wave", "value": "2"},
        ]});
        let out = outputs(update(work.path(), config.clone()).await);
        let expected = DEPLOYMENT
            .replace("app:1.0.0\"", "app:1.2.0\"")
            .replace("'envoy:1'", "'envoy:2'")
            .replace("replicas: 2", "replicas: 3")
            .replace("sync-wave: \"1\"", "sync-wave: \"2\"");
        let written = std::fs::read_to_string(work.path().join("deploy.yaml")).unwrap();
        assert_eq!(written, expected);
        assert_eq!(
            out["commitMessage"],
            "update deploy.yaml: spec.template.spec.containers.0.image = \
             registry.example.com/team/app:1.2.0, spec.template.spec.containers.1.image = \
             envoy:2, spec.replicas = 3, metadata.annotations.argocd\\.argoproj\\.io/sync-wave = 2"
        );
        // Idempotent: a second run changes nothing.
        outputs(update(work.path(), config).await);
        let again = std::fs::read_to_string(work.path().join("deploy.yaml")).unwrap();
        assert_eq!(again, expected);
    }

    #[tokio::test]
    async fn a_missing_key_fails_naming_it_unless_create_is_set() {
        let work = tempfile::tempdir().unwrap();
        let values = "image:\n  repository: app # the repo\nreplicas: 1\n";
        std::fs::write(work.path().join("values.yaml"), values).unwrap();
        let config = |create: bool| {
            json!({"path": "values.yaml", "create": create,
                   "updates": [{"key": "image.tag", "value": "1.20"},
                               {"key": "resources.limits.cpu", "value": 1}]})
        };
        let reason = failed(update(work.path(), config(false)).await);
        assert_eq!(
            reason,
            "cannot set `image.tag` in `values.yaml`: `image` has no key `tag`; check the key, \
             or set `create: true` to add it"
        );
        assert_eq!(
            std::fs::read_to_string(work.path().join("values.yaml")).unwrap(),
            values
        );

        outputs(update(work.path(), config(true)).await);
        let written = std::fs::read_to_string(work.path().join("values.yaml")).unwrap();
        assert_eq!(
            written,
            "image:\n  repository: app # the repo\n  tag: '1.20'\nreplicas: 1\nresources:\n  \
             limits:\n    cpu: 1\n"
        );
    }

    #[tokio::test]
    async fn an_empty_file_gets_keys_only_with_create() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("values.yaml"), "# overrides\n").unwrap();
        let config = |create: bool| {
            json!({"path": "values.yaml", "create": create,
                   "updates": [{"key": "image.tag", "value": "1.2.0"}]})
        };
        let reason = failed(update(work.path(), config(false)).await);
        assert!(
            reason.ends_with("the file is empty; set `create: true` to add keys"),
            "{reason}"
        );
        outputs(update(work.path(), config(true)).await);
        let written = std::fs::read_to_string(work.path().join("values.yaml")).unwrap();
        let parsed: Value = serde_yaml_ng::from_str(&written).unwrap();
        assert_eq!(parsed["image"]["tag"], Value::from("1.2.0"), "{written}");
        assert!(written.starts_with("# overrides\n"), "{written}");
    }

    #[tokio::test]
    async fn lists_and_values_explain_what_is_wrong() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("d.yaml"), DEPLOYMENT).unwrap();
        let cases = [
            (
                "spec.template.spec.containers.5.image",
                "`spec.template.spec.containers` has 2 items, so there is no item 5",
            ),
            (
                "spec.template.spec.containers.app.image",
                "`spec.template.spec.containers` is a list: use an item number instead of `app`",
            ),
            (
                "spec.replicas.count",
                "`spec.replicas` is a single value, not a map or list, so it has no `count`",
            ),
            ("spec..replicas", "key `spec..replicas` has an empty part"),
        ];
        for (key, want) in cases {
            let config =
                json!({"path": "d.yaml", "create": true, "updates": [{"key": key, "value": "x"}]});
            let reason = failed(update(work.path(), config).await);
            assert!(reason.contains(want), "{key}: {reason}");
        }
        let reason = failed(update(work.path(), json!({"path": "d.yaml", "updates": []})).await);
        assert!(reason.contains("at `updates`"), "{reason}");
        let reason = failed(
            update(
                work.path(),
                json!({"path": "../d.yaml", "updates": [{"key": "a", "value": 1}]}),
            )
            .await,
        );
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
        let reason = failed(
            update(
                work.path(),
                json!({"path": "none.yaml", "updates": [{"key": "a", "value": 1}]}),
            )
            .await,
        );
        assert!(reason.contains("`none.yaml` does not exist"), "{reason}");
        let reason = failed(update(work.path(), json!({"path": "d.yaml", "update": []})).await);
        assert!(reason.contains("unknown field `update`"), "{reason}");
    }

    #[tokio::test]
    async fn maps_lists_and_anchors() {
        let work = tempfile::tempdir().unwrap();
        let text = "base: &base\n  image: a\nother: *base\nenv: []\n";
        std::fs::write(work.path().join("v.yaml"), text).unwrap();
        let config = json!({"path": "v.yaml", "updates": [{"key": "env", "value": [{"name": "A", "value": "1"}]}]});
        outputs(update(work.path(), config).await);
        let written = std::fs::read_to_string(work.path().join("v.yaml")).unwrap();
        let parsed: Value = serde_yaml_ng::from_str(&written).unwrap();
        assert_eq!(parsed["env"][0]["value"], Value::from("1"));
        assert!(
            written.starts_with("base: &base\n  image: a\nother: *base\n"),
            "{written}"
        );

        // Changing a value shared through an anchor would change more than asked: refused.
        let config = json!({"path": "v.yaml", "updates": [{"key": "base.image", "value": "b"}]});
        let reason = failed(update(work.path(), config).await);
        assert!(reason.contains("YAML anchor"), "{reason}");
        assert_eq!(
            std::fs::read_to_string(work.path().join("v.yaml")).unwrap(),
            written
        );
    }
}
