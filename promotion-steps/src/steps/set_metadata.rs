//! `set-metadata`: records key → JSON value pairs on Stages and Freight of the promotion's
//! project (Kargo's `set-metadata`). The step only checks its configuration and reports one
//! [`Effect::SetMetadata`] per update; the engine records them when the step succeeds (a
//! resource that does not exist, or a key or value beyond Dray's limits, fails the step
//! there), so later steps and Stages read them with `freightMetadata()` / `stageMetadata()`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::{Effect, MetadataKind, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "set-metadata";

/// Configuration of `set-metadata`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The metadata to record, per resource (at least one).
    updates: Vec<Update>,
}

/// Metadata for one Stage or Freight.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Update {
    /// `Stage` or `Freight`.
    kind: MetadataKind,
    /// The Stage's name, or the Freight's name (id), in the promotion's project.
    name: String,
    /// Key → any JSON value (at least one); `null` removes the key.
    values: Map<String, Value>,
}

/// The `set-metadata` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SetMetadata;

#[async_trait]
impl TypedStep for SetMetadata {
    const KIND: &'static str = KIND;
    // It changes Dray's own resources, through the engine: nothing outside Dray.
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    /// At `dray apply`: no update at all, a kind other than `Stage` / `Freight`, or an
    /// update without values (what expressions decide is left to the run).
    fn check(&self, config: &Value) -> Vec<crate::ConfigProblem> {
        let Some(updates) = config.get("updates").and_then(Value::as_array) else {
            return Vec::new();
        };
        let problem = |message: String, hint: &str| crate::ConfigProblem {
            field: "updates",
            message,
            hint: hint.to_owned(),
        };
        if updates.is_empty() {
            return vec![problem(
                "`updates` is empty".into(),
                "list at least one `{kind, name, values}`",
            )];
        }
        let mut problems = Vec::new();
        for (i, update) in updates.iter().enumerate() {
            if let Some(kind) = update.get("kind").and_then(Value::as_str)
                && !kind.contains("${{")
                && !matches!(kind, "Stage" | "Freight")
            {
                problems.push(problem(
                    format!(
                        "`updates[{i}].kind` is `{kind}`: only Stages and Freight hold metadata"
                    ),
                    "use `kind: Stage` or `kind: Freight`",
                ));
            }
            if update
                .get("values")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                problems.push(problem(
                    format!("`updates[{i}].values` is empty"),
                    "set at least one key, e.g. `values: {deployedBy: ${{ ctx.actor }}}`",
                ));
            }
        }
        problems
    }

    async fn run_config(&self, _ctx: &StepContext, config: Config) -> StepOutcome {
        if config.updates.is_empty() {
            return StepOutcome::failed(
                "`updates` is empty: list at least one `{kind, name, values}`",
            );
        }
        let mut effects = Vec::with_capacity(config.updates.len());
        for (i, update) in config.updates.into_iter().enumerate() {
            let name = update.name.trim();
            if name.is_empty() {
                return StepOutcome::failed(format!(
                    "`updates[{i}].name` is empty: name the {} whose metadata to set",
                    update.kind
                ));
            }
            if update.values.is_empty() {
                return StepOutcome::failed(format!(
                    "`updates[{i}].values` is empty: set at least one key on {} `{name}`",
                    update.kind
                ));
            }
            effects.push(Effect::SetMetadata {
                kind: update.kind,
                name: name.to_owned(),
                values: update.values,
            });
        }
        StepOutcome::wrote(Map::new(), effects)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};

    #[tokio::test]
    async fn reports_one_effect_per_update_and_touches_nothing() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let config = json!({"updates": [
            {"kind": "Stage", "name": "prod", "values": {"deployedBy": "ana", "n": 2}},
            {"kind": "Freight", "name": " f1 ", "values": {"ok": true}},
        ]});
        let outcome = SetMetadata.run(&ctx, config).await;
        assert!(
            matches!(&outcome, StepOutcome::Succeeded { outputs, .. } if outputs.is_empty()),
            "{outcome:?}"
        );
        assert_eq!(
            outcome.effects(),
            [
                Effect::SetMetadata {
                    kind: MetadataKind::Stage,
                    name: "prod".into(),
                    values: json!({"deployedBy": "ana", "n": 2})
                        .as_object()
                        .cloned()
                        .unwrap(),
                },
                Effect::SetMetadata {
                    kind: MetadataKind::Freight,
                    name: "f1".into(),
                    values: json!({"ok": true}).as_object().cloned().unwrap(),
                },
            ]
        );
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    }

    #[test]
    fn apply_time_checks_name_the_update() {
        let check = |config: Value| {
            SetMetadata
                .check_config(&config)
                .into_iter()
                .map(|p| p.message)
                .collect::<Vec<_>>()
        };
        assert_eq!(check(json!({"updates": []})), ["`updates` is empty"]);
        assert_eq!(
            check(json!({"updates": [
                {"kind": "Stage", "name": "dev", "values": {"a": 1}},
                {"kind": "Warehouse", "name": "w", "values": {}},
                {"kind": "${{ vars.kind }}", "name": "x", "values": {"a": 1}},
            ]})),
            [
                "`updates[1].kind` is `Warehouse`: only Stages and Freight hold metadata",
                "`updates[1].values` is empty",
            ]
        );
    }

    #[tokio::test]
    async fn refuses_empty_updates_names_values_and_unknown_kinds() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let reason = failed(SetMetadata.run(&ctx, json!({"updates": []})).await);
        assert!(reason.contains("`updates` is empty"), "{reason}");
        let config = json!({"updates": [{"kind": "Stage", "name": "", "values": {"a": 1}}]});
        let reason = failed(SetMetadata.run(&ctx, config).await);
        assert!(reason.contains("`updates[0].name` is empty"), "{reason}");
        let config = json!({"updates": [{"kind": "Freight", "name": "f1", "values": {}}]});
        let reason = failed(SetMetadata.run(&ctx, config).await);
        assert!(
            reason.contains("`updates[0].values` is empty") && reason.contains("Freight `f1`"),
            "{reason}"
        );
        let config = json!({"updates": [{"kind": "Warehouse", "name": "w", "values": {"a": 1}}]});
        let reason = failed(SetMetadata.run(&ctx, config).await);
        assert!(reason.contains("Warehouse"), "{reason}");
    }
}
