//! Configuration that the schema accepts but this build of Dray cannot honour. Dray's rule:
//! such configuration is rejected, loudly, never silently ignored. Delete a check here when
//! its feature lands.

use crate::api::ProjectConfigSpec;

use super::error::Issue;
use super::path::FieldPath;

/// Rejects auto-promotion, which is not implemented yet.
pub(crate) fn reject_unimplemented_features(spec: &ProjectConfigSpec) -> Vec<Issue> {
    let mut issues = Vec::new();
    let policies = FieldPath::of(&["spec", "promotionPolicies"]);
    for (i, policy) in spec.promotion_policies.iter().enumerate() {
        if policy.auto_promotion_enabled {
            issues.push(
                Issue::new(
                    policies.index(i).key("autoPromotionEnabled"),
                    "auto-promotion is not implemented in this build of Dray",
                )
                .hint("remove `autoPromotionEnabled: true` and promote by hand (`dray promote`) for now"),
            );
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rejects_auto_promotion_and_webhooks_but_not_plain_policies() {
        let spec: ProjectConfigSpec = serde_json::from_value(json!({
            "promotionPolicies": [
                {"stageSelector": {"name": "dev"}},
                {"stageSelector": {"name": "qa"}, "autoPromotionEnabled": true}
            ],
            "webhookReceivers": [{"name": "gh", "github": {"secretRef": "s"}}]
        }))
        .unwrap();
        let issues = reject_unimplemented_features(&spec);
        let found: Vec<_> = issues
            .iter()
            .map(|i| (i.path.to_string(), i.message.as_str()))
            .collect();
        assert_eq!(
            found,
            vec![(
                "spec.promotionPolicies[1].autoPromotionEnabled".to_owned(),
                "auto-promotion is not implemented in this build of Dray"
            ),]
        );
        assert!(reject_unimplemented_features(&ProjectConfigSpec::default()).is_empty());
    }
}
