//! The RBAC authorizer over the Role, RoleBinding, ClusterRole and ClusterRoleBinding
//! objects in the store, as Kubernetes' RBAC evaluates them (verbs, apiGroups, resources
//! incl. `resource/subresource` and `*/subresource`, resourceNames, `*`; subjects User,
//! Group, ServiceAccount), with `system:masters` allowed everything. Its reasons and
//! denials are worded as the real authorizer's.
//!
//! It decides; it does not know about HTTP.

use serde_json::Value;

use super::store::Store;

/// The authenticated user.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// What a request does (the authorizer's attributes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// An authorisation decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    pub(crate) reason: String,
}

const RBAC: &str = "rbac.authorization.k8s.io";

fn contains(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .is_some_and(|items| items.iter().any(|item| item == "*" || item == wanted))
}

fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let verb_ok = contains(&rule["verbs"], &attrs.verb);
    let group_ok = contains(&rule["apiGroups"], &attrs.group);
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_ok = rule["resources"].as_array().is_some_and(|resources| {
        resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!attrs.subresource.is_empty() && *r == format!("*/{}", attrs.subresource))
        })
    });
    let names = rule["resourceNames"].as_array();
    let name_ok =
        names.is_none_or(|names| names.is_empty() || names.iter().any(|n| *n == attrs.name));
    verb_ok && group_ok && resource_ok && name_ok
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_namespace: &str) -> Option<String> {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str()? {
        "User" if user.username == name => Some(format!("User {name:?}")),
        "Group" if user.groups.iter().any(|group| group == name) => Some(format!("Group {name:?}")),
        "ServiceAccount" => {
            let namespace = subject["namespace"]
                .as_str()
                .filter(|ns| !ns.is_empty())
                .unwrap_or(binding_namespace);
            (user.username == format!("system:serviceaccount:{namespace}:{name}"))
                .then(|| format!("ServiceAccount {:?}", format!("{namespace}/{name}")))
        }
        _ => None,
    }
}

fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> (String, Vec<Value>) {
    let kind = role_ref["kind"].as_str().unwrap_or_default().to_owned();
    let name = role_ref["name"].as_str().unwrap_or_default();
    let (plural, ns) = if kind == "ClusterRole" {
        ("clusterroles", "")
    } else {
        ("roles", namespace)
    };
    let key = super::store::ObjKey {
        group: RBAC.into(),
        plural: plural.into(),
        namespace: ns.into(),
        name: name.into(),
    };
    let Some(role) = store.get(&key) else {
        return (kind, Vec::new());
    };
    let mut rules = role["rules"].as_array().cloned().unwrap_or_default();
    if let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() {
        for (_, other) in store.all(RBAC, "clusterroles") {
            if selectors.iter().any(|selector| {
                super::selector::LabelSelector::object_matches(
                    selector,
                    &other["metadata"]["labels"],
                )
            }) {
                rules.extend(other["rules"].as_array().cloned().unwrap_or_default());
            }
        }
    }
    (kind, rules)
}

/// Decides `attrs` for `user` from the RBAC objects in `store`.
pub(crate) fn authorize(store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
    if user.groups.iter().any(|group| group == "system:masters") {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut bindings: Vec<(&str, String, Value)> = store
        .all(RBAC, "clusterrolebindings")
        .into_iter()
        .map(|(key, binding)| ("ClusterRoleBinding", key.name, binding))
        .collect();
    if !attrs.namespace.is_empty() {
        bindings.extend(
            store
                .list(RBAC, "rolebindings", Some(&attrs.namespace))
                .into_iter()
                .map(|binding| {
                    let name = binding["metadata"]["name"].as_str().unwrap_or_default();
                    (
                        "RoleBinding",
                        format!("{name}/{}", attrs.namespace),
                        binding.clone(),
                    )
                }),
        );
    }
    for (binding_kind, binding_name, binding) in bindings {
        let namespace = if binding_kind == "RoleBinding" {
            attrs.namespace.as_str()
        } else {
            ""
        };
        let Some(subject) = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|subject| subject_matches(subject, user, namespace))
        else {
            continue;
        };
        let (role_kind, rules) = role_rules(store, &binding["roleRef"], namespace);
        if rules.iter().any(|rule| rule_allows(rule, attrs)) {
            let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
            return Decision {
                allowed: true,
                reason: format!(
                    "RBAC: allowed by {binding_kind} {binding_name:?} of {role_kind} {role_name:?} to {subject}"
                ),
            };
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// The real server's 403 text: `User "ann" cannot update resource "stages" in API group
/// "dray.dev" in the namespace "demo"`.
pub(crate) fn forbidden_message(user: &UserInfo, attrs: &Attributes) -> String {
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", attrs.namespace)
    };
    format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        user.username, attrs.verb, attrs.group
    )
}
