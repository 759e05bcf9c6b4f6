//! Rules for a Stage's `spec.signoff`: at least one sign-off required, group names that are
//! non-empty and listed once. Counting sign-offs is the pipeline's (`pipeline::signoff`).

use std::collections::BTreeSet;

use crate::api::SignoffPolicy;

use super::error::Issue;
use super::path::FieldPath;

/// Every problem with `policy`.
pub(super) fn policy(policy: &SignoffPolicy) -> Vec<Issue> {
    let at = FieldPath::of(&["spec", "signoff"]);
    let mut issues = Vec::new();
    if policy.required == 0 {
        issues.push(
            Issue::new(
                at.key("required"),
                "`required` is 0: the gate would ask nobody",
            )
            .hint("set `required: 1` or more, or remove `signoff`"),
        );
    }
    let mut seen = BTreeSet::new();
    for (i, group) in policy.groups.iter().enumerate() {
        let path = at.key("groups").index(i);
        if group.trim().is_empty() {
            issues.push(Issue::new(path, "a group name is empty").hint(
                "name a group as the identity provider or `dray token create --group` spells it",
            ));
        } else if !seen.insert(group.as_str()) {
            issues.push(
                Issue::new(path, format!("group `{group}` is listed twice")).hint("list it once"),
            );
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_is_at_least_one_and_groups_are_named_once() {
        let bad = SignoffPolicy {
            required: 0,
            groups: vec!["sre".into(), " ".into(), "sre".into()],
            allow_self: false,
        };
        let found: Vec<(String, String)> = policy(&bad)
            .into_iter()
            .map(|i| (i.path.to_string(), i.message))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "spec.signoff.required".to_owned(),
                    "`required` is 0: the gate would ask nobody".to_owned()
                ),
                (
                    "spec.signoff.groups[1]".to_owned(),
                    "a group name is empty".to_owned()
                ),
                (
                    "spec.signoff.groups[2]".to_owned(),
                    "group `sre` is listed twice".to_owned()
                ),
            ]
        );
        let good = SignoffPolicy {
            required: 2,
            groups: vec!["sre".into()],
            allow_self: true,
        };
        assert!(policy(&good).is_empty());
    }
}
