//! `Role` and `RoleBinding`: who may do what in a project, shaped like Kubernetes RBAC.
//!
//! A Role lists `rules`, each granting `verbs` on `resources` (kind plurals, optionally
//! only `resourceNames`); a RoleBinding gives a Role (by `roleRef.name`) to `subjects`
//! (users and groups). Both live in a project and apply to it alone. Three roles are built
//! in, never stored and always present: [`BUILTIN_ROLES`]. A binding may name a built-in
//! role or a Role of its own project.
//!
//! As Kubernetes' `rbac.authorization.k8s.io` kinds, both keep their fields at the top
//! level (no `spec`). Cluster-wide bindings (which apply to every project) are not a kind:
//! the server keeps them with its API tokens. This module holds the types and the
//! built-in roles' rules; deciding (`authorize`) is the server's.

use std::fmt;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

/// Matches every verb, resource or name.
pub const WILDCARD: &str = "*";

/// The pseudo-resource for API tokens (`dray token create` needs `create` on it).
pub const TOKENS_RESOURCE: &str = "tokens";

/// The built-in roles: `dray-admin` (everything), `dray-promoter` (read everything, promote,
/// approve, abort and sign off) and `dray-viewer` (read everything).
/// approve, abort, reject Freight and freeze Stages and projects) and `dray-viewer` (read
/// everything).
pub const BUILTIN_ROLES: [&str; 3] = ["dray-admin", "dray-promoter", "dray-viewer"];

/// The label on the built-in roles the API shows.
pub use super::annotations::BUILTIN_LABEL;

/// What a rule may allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Read one resource.
    Get,
    /// List resources.
    List,
    /// Create a resource.
    Create,
    /// Change a resource (also its status, and `dray apply` over an existing one).
    Update,
    /// Delete a resource.
    Delete,
    /// Promote Freight into a Stage (and lift a Stage's hold).
    Promote,
    /// Approve Freight for a Stage.
    Approve,
    /// Abort a promotion.
    Abort,
    /// Promote through a closed promotion window.
    Override,
    /// Run or skip verification.
    Verify,
    /// Sign Freight off for a Stage (its `spec.signoff` gate).
    Signoff,
    /// Reject Freight (for a Stage, or everywhere) and lift a rejection.
    Reject,
    /// Stop the line: freeze a Stage or a whole project, and lift the freeze.
    Freeze,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 13] = [
        Verb::Get,
        Verb::List,
        Verb::Create,
        Verb::Update,
        Verb::Delete,
        Verb::Promote,
        Verb::Approve,
        Verb::Abort,
        Verb::Override,
        Verb::Verify,
        Verb::Signoff,
        Verb::Reject,
        Verb::Freeze,
    ];

    /// The verb as rules write it, e.g. `promote`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
            Verb::Promote => "promote",
            Verb::Approve => "approve",
            Verb::Abort => "abort",
            Verb::Override => "override",
            Verb::Verify => "verify",
            Verb::Signoff => "signoff",
            Verb::Reject => "reject",
            Verb::Freeze => "freeze",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every resource a rule may name: the kinds' plurals and `tokens`.
pub fn rule_resources() -> impl Iterator<Item = &'static str> {
    Kind::ALL
        .into_iter()
        .map(Kind::plural)
        .chain([TOKENS_RESOURCE])
}

/// A set of permissions in a project.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Role",
    namespaced,
    no_spec
)]
#[serde(rename_all = "camelCase")]
pub struct RoleFields {
    /// What the role allows; anything not allowed is refused.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// One permission: `verbs` on `resources`, optionally only on `resourceNames`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Kind plurals (`stages`, `freight`, `warehouses`, `promotions`, `promotiontasks`,
    /// `analysistemplates`, `projectconfigs`, `credentials`, `projects`, `roles`, `rolebindings`, `tokens`), or `*`.
    pub resources: Vec<String>,
    /// Only these resources by name (e.g. `[dev, staging]`); all when empty. Never limits
    /// `list` or `create`, which name no single resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// `get`, `list`, `create`, `update`, `delete`, `promote`, `approve`, `abort`,
    /// `override`, `verify`, `signoff`, or `*`.
    /// `override`, `verify`, `reject`, `freeze`, or `*`.
    pub verbs: Vec<String>,
}

impl PolicyRule {
    /// A rule from literal lists.
    pub fn new(verbs: &[&str], resources: &[&str]) -> Self {
        PolicyRule {
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            resource_names: Vec::new(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    /// Whether this rule allows `verb` on `resource` (named `name`, when one is).
    pub fn allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        let has = |list: &[String], wanted: &str| list.iter().any(|v| v == WILDCARD || v == wanted);
        has(&self.verbs, verb.as_str())
            && has(&self.resources, resource)
            && (self.resource_names.is_empty()
                || name.is_some_and(|n| self.resource_names.iter().any(|r| r == n)))
    }
}

impl Role {
    /// A built-in role by name, as the API shows it (labelled [`BUILTIN_LABEL`]).
    pub fn builtin(name: &str) -> Option<Role> {
        let read = || PolicyRule::new(&["get", "list"], &[WILDCARD]);
        let rules = match name {
            "dray-admin" => vec![PolicyRule::new(&[WILDCARD], &[WILDCARD])],
            "dray-promoter" => vec![
                read(),
                PolicyRule::new(&["promote", "approve", "abort", "signoff"], &["stages"]),
                PolicyRule::new(&["create", "abort"], &["promotions"]),
                PolicyRule::new(&["reject"], &["freight"]),
                PolicyRule::new(&["freeze"], &["stages", "projects"]),
            ],
            "dray-viewer" => vec![read()],
            _ => return None,
        };
        let mut role = Role::new(name, RoleFields { rules });
        role.metadata.labels = Some([(BUILTIN_LABEL.to_owned(), "true".to_owned())].into());
        Some(role)
    }
}

/// Gives a role to users and groups in a project.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "RoleBinding",
    namespaced,
    no_spec,
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".roleRef.name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RoleBindingFields {
    /// The role given: a built-in one (`dray-admin`, `dray-promoter`, `dray-viewer`) or a
    /// Role in the same project.
    pub role_ref: RoleRef,
    /// Who gets it.
    #[serde(default)]
    pub subjects: Vec<Subject>,
}

/// The role a binding gives.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// The role's name.
    pub name: String,
}

/// A user or group a binding applies to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User` or `Group`.
    pub kind: SubjectKind,
    /// The user's or group's name, as its API token (or, later, identity provider) says.
    pub name: String,
}

/// What a subject is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SubjectKind {
    /// One user.
    #[default]
    User,
    /// Every user in a group.
    Group,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_verbs_resources_and_names() {
        let rule = PolicyRule {
            resource_names: vec!["dev".into(), "staging".into()],
            ..PolicyRule::new(&["promote"], &["stages"])
        };
        assert!(rule.allows(Verb::Promote, "stages", Some("dev")));
        assert!(!rule.allows(Verb::Promote, "stages", Some("prod")));
        assert!(!rule.allows(Verb::Promote, "stages", None));
        assert!(!rule.allows(Verb::Approve, "stages", Some("dev")));
        assert!(!rule.allows(Verb::Promote, "freight", Some("dev")));
        let admin = Role::builtin("dray-admin").unwrap();
        assert!(admin.spec.rules[0].allows(Verb::Delete, "tokens", None));
    }

    #[test]
    fn the_promoter_reads_and_promotes_but_does_not_write() {
        let promoter = Role::builtin("dray-promoter").unwrap();
        let allows = |verb, resource, name| {
            promoter
                .spec
                .rules
                .iter()
                .any(|r| r.allows(verb, resource, name))
        };
        assert!(allows(Verb::Get, "credentials", Some("git")));
        assert!(allows(Verb::Promote, "stages", Some("prod")));
        assert!(allows(Verb::Abort, "promotions", Some("p-1")));
        assert!(allows(Verb::Signoff, "stages", Some("prod")));
        assert!(!allows(Verb::Update, "stages", Some("prod")));
        assert!(!allows(Verb::Override, "stages", Some("prod")));
        assert!(allows(Verb::Reject, "freight", Some("f1")));
        assert!(allows(Verb::Freeze, "stages", Some("prod")));
        assert!(allows(Verb::Freeze, "projects", Some("demo")));
        let viewer = Role::builtin("dray-viewer").unwrap();
        assert!(
            !viewer
                .spec
                .rules
                .iter()
                .any(|r| r.allows(Verb::Reject, "freight", Some("f1"))
                    || r.allows(Verb::Freeze, "stages", Some("prod")))
        );
        assert!(Role::builtin("dray-viewer").is_some());
        assert!(Role::builtin("root").is_none());
        assert!(rule_resources().any(|r| r == "rolebindings"));
    }
}
