//! The CustomResourceDefinition of each kind, generated from the Rust types. `dray crds`
//! writes them; the loader reads their schemas to reject unknown fields.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::CustomResourceExt;

use super::{
    AnalysisTemplate, ClusterPromotionTask, Credential, Freight, Kind, Project, ProjectConfig,
    Promotion, PromotionTask, Role, RoleBinding, Stage, Warehouse,
};

/// The CRD for one kind.
pub fn crd(kind: Kind) -> CustomResourceDefinition {
    match kind {
        Kind::Project => Project::crd(),
        Kind::ProjectConfig => ProjectConfig::crd(),
        Kind::Credential => Credential::crd(),
        Kind::Role => Role::crd(),
        Kind::RoleBinding => RoleBinding::crd(),
        Kind::Warehouse => Warehouse::crd(),
        Kind::Freight => Freight::crd(),
        Kind::Stage => Stage::crd(),
        Kind::PromotionTask => PromotionTask::crd(),
        Kind::ClusterPromotionTask => ClusterPromotionTask::crd(),
        Kind::Promotion => Promotion::crd(),
        Kind::AnalysisTemplate => AnalysisTemplate::crd(),
    }
}

/// The `openAPIV3Schema` of one kind, as JSON.
pub fn schema(kind: Kind) -> serde_json::Value {
    let crd = crd(kind);
    let version = crd.spec.versions.into_iter().next().and_then(|v| v.schema);
    version
        .and_then(|s| s.open_api_v3_schema)
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .unwrap_or_default()
}

/// The CRD of one kind as YAML, exactly as `dray crds` writes it and `crds/` holds it.
pub fn yaml(kind: Kind) -> Result<String, serde_yaml_ng::Error> {
    serde_yaml_ng::to_string(&crd(kind))
}

/// The file name `dray crds` writes for a kind, e.g. `dray.dev_stages.yaml`.
pub fn file_name(kind: Kind) -> String {
    format!("{}_{}.yaml", super::GROUP, kind.plural())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(path: &str, v: &serde_json::Value, problems: &mut Vec<String>) {
        if let Some(obj) = v.as_object() {
            if obj.get("type").and_then(|t| t.as_str()) == Some("array") {
                match obj.get("items") {
                    Some(items) if items.as_object().is_some_and(|o| o.is_empty()) => {
                        problems.push(format!("{path}: items is {{}} (not structural)"))
                    }
                    None => problems.push(format!("{path}: array without items")),
                    _ => {}
                }
            }
            for (k, child) in obj {
                walk(&format!("{path}.{k}"), child, problems);
            }
        } else if let Some(arr) = v.as_array() {
            for (i, child) in arr.iter().enumerate() {
                walk(&format!("{path}[{i}]"), child, problems);
            }
        }
    }

    #[test]
    fn every_crd_is_structural() {
        let mut problems = Vec::new();
        for kind in Kind::ALL {
            let schema = schema(kind);
            assert!(schema.get("properties").is_some(), "{kind} has no schema");
            walk(kind.as_str(), &schema, &mut problems);
            let text = serde_json::to_string(&schema).unwrap();
            assert!(!text.contains("\"$ref\""), "{kind} schema has $ref");
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn committed_crds_match_the_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
        let mut stale = Vec::new();
        for kind in Kind::ALL {
            let path = dir.join(file_name(kind));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed != yaml(kind).unwrap() {
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "stale CRDs {stale:?}; run `cargo run -- crds --out crds`"
        );
    }

    #[test]
    fn freight_fields_sit_at_top_level() {
        let schema = schema(Kind::Freight);
        let props = schema["properties"].as_object().unwrap();
        assert!(props.contains_key("images"));
        assert!(props.contains_key("alias"));
        assert!(!props.contains_key("spec"));
    }
}
