//! Stages in pipeline order, as `dray get stages` lists them: every Stage after the Stages
//! it takes Freight from (`requestedFreight[].sources.stages`), ties by name; Stages in a
//! cycle (which `dray apply` refuses) come last, by name.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The names of the Stages `stage` takes Freight from.
pub fn upstream_of(stage: &Value) -> BTreeSet<String> {
    stage
        .pointer("/spec/requestedFreight")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.pointer("/sources/stages").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// `stages` in pipeline order (see the module doc).
pub fn pipeline_order(stages: Vec<Value>) -> Vec<Value> {
    let name = |s: &Value| {
        s.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let names: BTreeSet<String> = stages.iter().map(name).collect();
    let mut waiting: BTreeMap<String, BTreeSet<String>> = stages
        .iter()
        .map(|s| {
            let upstream = upstream_of(s)
                .into_iter()
                .filter(|u| names.contains(u) && *u != name(s))
                .collect();
            (name(s), upstream)
        })
        .collect();
    let mut order: Vec<String> = Vec::new();
    loop {
        let ready = waiting
            .iter()
            .find(|(_, upstream)| upstream.is_empty())
            .map(|(n, _)| n.clone());
        let Some(next) = ready else { break };
        waiting.remove(&next);
        for upstream in waiting.values_mut() {
            upstream.remove(&next);
        }
        order.push(next);
    }
    order.extend(waiting.into_keys());
    let mut by_name: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for stage in stages {
        by_name.entry(name(&stage)).or_default().push(stage);
    }
    order
        .iter()
        .filter_map(|n| by_name.remove(n))
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stage(name: &str, from: &[&str]) -> Value {
        json!({"metadata": {"name": name}, "spec": {"requestedFreight": [
            {"origin": {"kind": "Warehouse", "name": "app"},
             "sources": {"direct": from.is_empty(), "stages": from}}
        ]}})
    }

    #[test]
    fn upstream_before_downstream_ties_by_name() {
        let stages = vec![
            stage("prod", &["staging"]),
            stage("staging", &["dev", "qa"]),
            stage("qa", &[]),
            stage("dev", &[]),
            stage("canary", &["staging"]),
        ];
        let names: Vec<String> = pipeline_order(stages)
            .iter()
            .map(|s| {
                s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        assert_eq!(names, ["dev", "qa", "staging", "canary", "prod"]);
    }

    #[test]
    fn a_cycle_still_lists_every_stage() {
        let stages = vec![stage("b", &["a"]), stage("a", &["b"]), stage("c", &[])];
        let names: Vec<String> = pipeline_order(stages)
            .iter()
            .map(|s| {
                s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        assert_eq!(names, ["c", "a", "b"]);
    }
}
