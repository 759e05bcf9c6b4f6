//! Argo Rollouts' `argoproj.io/v1alpha1` `AnalysisTemplate` and `ClusterAnalysisTemplate`
//! documents, read as Dray's AnalysisTemplate (Kargo verifies with them as they are): the
//! envelope becomes `dray.dev/v1alpha1` `AnalysisTemplate`, the language of the
//! conditions (expr-lang) is kept in the `dray.dev/expression-language` annotation, and
//! Argo Rollouts' int-or-string counts (`count: "5"`) become numbers. Everything else is
//! checked by the ordinary rules, which name any field Dray does not read.

use serde_json::{Map, Value};

use crate::api::API_VERSION;
use crate::expr::exprlang::ExprLanguage;

/// Argo Rollouts' API version.
pub(crate) const ARGO_ROLLOUTS_API_VERSION: &str = "argoproj.io/v1alpha1";

/// The metric fields Argo Rollouts writes as int-or-string.
const INT_OR_STRING: [&str; 4] = [
    "count",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
];

/// Rewrites `object` in place when it is an Argo Rollouts analysis template; returns
/// whether it was one.
pub(crate) fn adopt(object: &mut Value) -> bool {
    let Some(map) = object.as_object_mut() else {
        return false;
    };
    let is_argo = map.get("apiVersion").and_then(Value::as_str) == Some(ARGO_ROLLOUTS_API_VERSION);
    let kind = map.get("kind").and_then(Value::as_str);
    if !is_argo || !matches!(kind, Some("AnalysisTemplate" | "ClusterAnalysisTemplate")) {
        return false;
    }
    map.insert("apiVersion".into(), Value::from(API_VERSION));
    map.insert("kind".into(), Value::from("AnalysisTemplate"));
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(metadata) = metadata.as_object_mut() {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(
                ExprLanguage::ANNOTATION.into(),
                Value::from(ExprLanguage::ExprLang.as_str()),
            );
        }
    }
    let metrics = map
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("metrics"))
        .and_then(Value::as_array_mut);
    for metric in metrics
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        for field in INT_OR_STRING {
            let number = metric
                .get(field)
                .and_then(Value::as_str)
                .and_then(|s| s.trim().parse::<u32>().ok());
            if let Some(number) = number {
                metric.insert(field.into(), Value::from(number));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_argo_rollouts_template_becomes_drays_with_its_language() {
        let mut object = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "error-rate"},
            "spec": {"metrics": [{"name": "rate", "count": "3", "failureLimit": 1,
                                   "successCondition": "len(result) > 0 && result[0] < 0.05",
                                   "provider": {"prometheus": {"address": "http://p", "query": "q"}}}]},
        });
        assert!(adopt(&mut object));
        assert_eq!(object["apiVersion"], API_VERSION);
        assert_eq!(object["kind"], "AnalysisTemplate");
        assert_eq!(
            object["metadata"]["annotations"]["dray.dev/expression-language"],
            "expr-lang"
        );
        assert_eq!(object["spec"]["metrics"][0]["count"], 3);
        assert_eq!(object["spec"]["metrics"][0]["failureLimit"], 1);
        let mut cluster = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "ClusterAnalysisTemplate",
                                 "metadata": {"name": "x", "annotations": {"a": "b"}}, "spec": {}});
        assert!(adopt(&mut cluster));
        assert_eq!(cluster["metadata"]["annotations"]["a"], "b");
        assert_eq!(cluster["kind"], "AnalysisTemplate");
    }

    #[test]
    fn other_documents_are_left_alone() {
        for object in [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "AnalysisTemplate"}),
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout"}),
            json!("not a mapping"),
        ] {
            let mut copy = object.clone();
            assert!(!adopt(&mut copy));
            assert_eq!(copy, object);
        }
    }

    const PROJECT: &str =
        "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {name: demo}\nspec: {}\n";

    fn argo(success: &str) -> String {
        format!(
            "\
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: error-rate, namespace: demo}}
spec:
  args: [{{name: max}}]
  metrics:
  - name: rate
    count: \"2\"
    interval: 1m
    successCondition: '{success}'
    provider:
      prometheus: {{address: 'http://prometheus:9090', query: 'sum(rate(errors[5m]))'}}
"
        )
    }

    fn load(text: &str) -> Result<Vec<crate::config::Manifest>, Vec<String>> {
        let files = [
            crate::config::SourceFile {
                path: "project.yaml".into(),
                content: PROJECT.into(),
            },
            crate::config::SourceFile {
                path: "analysis.yaml".into(),
                content: text.into(),
            },
        ];
        crate::config::load(&files, None, &Default::default()).map_err(|errors| {
            errors
                .0
                .iter()
                .map(|e| format!("{}: {}", e.field.clone().unwrap_or_default(), e.message))
                .collect()
        })
    }

    #[test]
    fn dray_apply_reads_argo_rollouts_templates_and_checks_expr_lang_conditions() {
        let manifests = load(&argo("len(result) > 0 && result[0] < 0.05")).unwrap();
        let template = manifests
            .iter()
            .find(|m| m.key.kind == crate::api::Kind::AnalysisTemplate)
            .unwrap();
        assert_eq!(
            template.object["metadata"]["annotations"][ExprLanguage::ANNOTATION],
            "expr-lang"
        );
        assert_eq!(template.object["spec"]["metrics"][0]["count"], 2);
        assert!(load(&argo("result[0] < {{args.max}} && !isNaN(result[0])")).is_ok());
        let errors = load(&argo("lenn(result) > 0")).unwrap_err();
        assert_eq!(
            errors,
            [
                "spec.metrics[0].successCondition: metric `rate`: `successCondition` (expr-lang, as in \
              Argo Rollouts): unknown function `lenn`; did you mean `len`?"
            ]
        );
        let errors = load(&argo("results[0] < 0.05")).unwrap_err();
        assert!(
            errors[0].contains("unknown variable `results`"),
            "{errors:?}"
        );
        let errors = load(&argo("result[0] <")).unwrap_err();
        assert!(
            errors[0].contains("syntax error in expr-lang expression `result[0] <`"),
            "{errors:?}"
        );
    }
}
