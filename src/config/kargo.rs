//! Kargo's documents read as Dray's: `kargo.akuity.io/v1alpha1` Project, ProjectConfig,
//! Warehouse, Stage, PromotionTask, ClusterPromotionTask and Freight, and the Kubernetes
//! Secrets Kargo reads (labelled `kargo.akuity.io/cred-type`, or holding a webhook
//! receiver's `secret`), as Credentials.
//!
//! Dray's kinds already have Kargo's field names and defaults, so adopting a document is
//! small and done in place, before the ordinary checks run (which then name any field Dray
//! does not read): the envelope becomes `dray.dev/v1alpha1`, the expressions' language
//! (expr-lang) is kept in the `dray.dev/expression-language` annotation, and the few
//! shapes that differ are rewritten (`secretRef: {name: x}` is Dray's `secretRef: x`). What
//! cannot be honoured is refused here with the field and the reason, never dropped.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::api::API_VERSION;
use crate::expr::exprlang::ExprLanguage;

use super::error::Issue;
use super::path::FieldPath;

/// Kargo's API version.
pub(crate) const KARGO_API_VERSION: &str = "kargo.akuity.io/v1alpha1";

/// The label that makes a Secret one of Kargo's credentials, and its values.
pub(crate) const CRED_TYPE_LABEL: &str = "kargo.akuity.io/cred-type";

/// Kargo's kinds that Dray does not read, and what to do instead.
const UNREAD: [(&str, &str); 2] = [
    (
        "Promotion",
        "promote with `dray promote` (Promotions come from the promote path, so every gate is checked)",
    ),
    (
        "ClusterConfig",
        "leave it out: Dray's server-wide settings are `dray serve` flags, and `POST /webhooks/-/{kind}` serves cluster-wide receivers",
    ),
];

/// The Kargo kinds Dray reads, and whether their expressions need a language.
const KINDS: [(&str, bool); 7] = [
    ("Project", false),
    ("ProjectConfig", true),
    ("Warehouse", true),
    ("Stage", true),
    ("PromotionTask", true),
    ("ClusterPromotionTask", true),
    ("Freight", false),
];

/// What [`adopt`] did with a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Adopted {
    /// Not one of Kargo's: left alone.
    NotKargo,
    /// One of Kargo's, now Dray's (possibly with issues to report).
    Kargo(Vec<Issue>),
    /// One of Kargo's kinds that Dray does not read: nothing else is checked.
    Refused(Issue),
}

impl Adopted {
    /// The issues found while adopting.
    pub(crate) fn issues(self) -> Vec<Issue> {
        match self {
            Adopted::NotKargo => Vec::new(),
            Adopted::Kargo(issues) => issues,
            Adopted::Refused(issue) => vec![issue],
        }
    }
}

/// Rewrites `object` in place when it is one of Kargo's documents.
pub(crate) fn adopt(object: &mut Value) -> Adopted {
    let Some(map) = object.as_object_mut() else {
        return Adopted::NotKargo;
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str);
    let kind = map.get("kind").and_then(Value::as_str).map(str::to_owned);
    match (api_version, kind.as_deref()) {
        (Some(KARGO_API_VERSION), Some(kind)) => {
            if let Some((_, instead)) = UNREAD.iter().find(|(k, _)| *k == kind) {
                return Adopted::Refused(
                    Issue::new(
                        FieldPath::of(&["kind"]),
                        format!("Kargo's `{kind}` is not read by Dray"),
                    )
                    .hint(*instead),
                );
            }
            // An unknown kind is then named by the ordinary kind check, with did-you-mean.
            map.insert("apiVersion".into(), Value::from(API_VERSION));
            let has_expressions = KINDS.iter().any(|(k, e)| *k == kind && *e);
            if has_expressions {
                annotate_language(map);
            }
            let mut issues = Vec::new();
            if kind == "ProjectConfig" {
                adopt_receivers(map, &mut issues);
            }
            Adopted::Kargo(issues)
        }
        (Some("v1"), Some("Secret")) => Adopted::Kargo(adopt_secret(map)),
        _ => Adopted::NotKargo,
    }
}

/// Marks the document's expressions as expr-lang, unless it says otherwise already.
fn annotate_language(map: &mut Map<String, Value>) {
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations
            .entry(ExprLanguage::ANNOTATION)
            .or_insert_with(|| Value::from(ExprLanguage::ExprLang.as_str()));
    }
}

/// Kargo's receivers name their Secret as `secretRef: {name: x}`; Dray's as `secretRef: x`.
/// Generic receivers' expression-derived and selector-based targets are refused.
fn adopt_receivers(map: &mut Map<String, Value>, issues: &mut Vec<Issue>) {
    let receivers = map
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("webhookReceivers"))
        .and_then(Value::as_array_mut);
    for (i, receiver) in receivers.into_iter().flatten().enumerate() {
        let at = FieldPath::of(&["spec", "webhookReceivers"]).index(i);
        let Some(receiver) = receiver.as_object_mut() else {
            continue;
        };
        for (provider, block) in receiver.iter_mut() {
            let Some(block) = block.as_object_mut() else {
                continue;
            };
            let name = block
                .get("secretRef")
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(name) = name {
                block.insert("secretRef".into(), Value::from(name));
            }
            if provider == "generic" {
                check_generic_actions(block, &at.key("generic"), issues);
            }
        }
    }
}

/// Kargo's generic-receiver fields Dray does not evaluate, and why.
const GENERIC_UNSUPPORTED: [(&str, &str); 2] = [
    (
        "whenExpression",
        "Dray's generic receiver does not evaluate conditions on the request yet",
    ),
    (
        "parameters",
        "Dray's generic receiver does not evaluate expressions on the request yet",
    ),
];

/// Kargo's target fields Dray does not read, and why.
const TARGET_UNSUPPORTED: [(&str, &str); 2] = [
    (
        "labelSelector",
        "Dray's generic receiver selects Warehouses by name only",
    ),
    (
        "indexSelector",
        "Dray's generic receiver selects Warehouses by name only",
    ),
];

fn check_generic_actions(block: &Map<String, Value>, at: &FieldPath, issues: &mut Vec<Issue>) {
    let Some(actions) = block.get("actions").and_then(Value::as_array) else {
        return;
    };
    let hint = "name each Warehouse in `targetSelectionCriteria[].name`, or drop `actions` and \
                send `repoURL` in the call's JSON (docs/kargo-compatibility.md)";
    for (a, action) in actions.iter().enumerate() {
        let action_at = at.key("actions").index(a);
        for (field, why) in GENERIC_UNSUPPORTED {
            if action.get(field).is_some() {
                issues
                    .push(Issue::new(action_at.key(field), format!("`{field}`: {why}")).hint(hint));
            }
        }
        let targets = action
            .get("targetSelectionCriteria")
            .and_then(Value::as_array);
        for (t, target) in targets.into_iter().flatten().enumerate() {
            let target_at = action_at.key("targetSelectionCriteria").index(t);
            for (field, why) in TARGET_UNSUPPORTED {
                if target.get(field).is_some() {
                    issues.push(
                        Issue::new(target_at.key(field), format!("`{field}`: {why}")).hint(hint),
                    );
                }
            }
            let name = target.get("name").and_then(Value::as_str);
            if name.is_some_and(|n| n.contains("${{") || n.contains("${%")) {
                issues.push(
                    Issue::new(
                        target_at.key("name"),
                        "a target named by an expression on the request is not evaluated by Dray's generic receiver yet",
                    )
                    .hint(hint),
                );
            }
        }
    }
}

/// What a Kargo Secret is for, by its `kargo.akuity.io/cred-type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CredType {
    Git,
    Helm,
    Image,
    Generic,
}

impl CredType {
    fn parse(label: &str) -> Option<Self> {
        match label {
            "git" => Some(CredType::Git),
            "helm" => Some(CredType::Helm),
            "image" => Some(CredType::Image),
            "generic" => Some(CredType::Generic),
            _ => None,
        }
    }

    fn credential_type(self) -> &'static str {
        match self {
            CredType::Git => "git",
            CredType::Helm => "helm",
            CredType::Image => "image",
            CredType::Generic => "webhook",
        }
    }
}

/// A Kubernetes Secret as a Credential: Kargo's credentials (`repoURL`, `repoURLIsRegex`,
/// `username`, `password`) and webhook receivers' secrets (`secret`).
fn adopt_secret(map: &mut Map<String, Value>) -> Vec<Issue> {
    let label = map
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(CRED_TYPE_LABEL))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (data, mut issues) = secret_data(map);
    let label_path = FieldPath::of(&["metadata", "labels", CRED_TYPE_LABEL]);
    let cred_type = match label.as_deref() {
        Some(text) => match CredType::parse(text) {
            Some(t) => t,
            None => {
                issues.push(
                    Issue::new(
                        label_path,
                        format!(
                            "`{CRED_TYPE_LABEL}: {text}` is not one of Kargo's credential types"
                        ),
                    )
                    .hint("use `git`, `helm`, `image` or `generic`"),
                );
                return issues;
            }
        },
        None if data.contains_key("secret") => CredType::Generic,
        None => {
            issues.push(
                Issue::new(
                    FieldPath::root(),
                    "Dray reads a Secret only as one of Kargo's credentials (label \
                     `kargo.akuity.io/cred-type`) or as a webhook receiver's secret (key `secret`)",
                )
                .hint("label it `kargo.akuity.io/cred-type: git|helm|image`, give it a `secret` key, or leave it out"),
            );
            return issues;
        }
    };
    let mut spec = Map::new();
    spec.insert("type".into(), Value::from(cred_type.credential_type()));
    let text = |key: &str| data.get(key).cloned();
    if cred_type == CredType::Generic {
        match text("secret") {
            Some(secret) => {
                spec.insert("token".into(), Value::from(secret));
            }
            None => issues.push(
                Issue::new(
                    FieldPath::of(&["data"]),
                    "a `generic` Secret is read by Dray only as a webhook receiver's secret, and this one has no `secret` key",
                )
                .hint("add the `secret` key; Kargo's `secret()` expression function is not served by Dray (docs/kargo-compatibility.md)"),
            ),
        }
    } else {
        let is_regex = text("repoURLIsRegex").is_some_and(|v| v.trim() == "true");
        if let Some(url) = text("repoURL") {
            let field = if is_regex {
                "repoURLPattern"
            } else {
                "repoURL"
            };
            spec.insert(field.into(), Value::from(url));
        }
        for key in ["username", "password"] {
            if let Some(value) = text(key) {
                spec.insert(key.into(), Value::from(value));
            }
        }
        for key in ["sshPrivateKey", "githubAppID", "githubAppPrivateKey"] {
            if data.contains_key(key) {
                issues.push(
                    Issue::new(
                        FieldPath::of(&["data", key]),
                        format!("`{key}`: Dray authenticates to repositories with a user name and password or token over HTTPS only"),
                    )
                    .hint("use an HTTPS `repoURL` with `username` and `password` (a token)"),
                );
            }
        }
    }
    map.insert("apiVersion".into(), Value::from(API_VERSION));
    map.insert("kind".into(), Value::from("Credential"));
    map.remove("data");
    map.remove("stringData");
    map.remove("type");
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut)
    {
        labels.remove(CRED_TYPE_LABEL);
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
    map.insert("spec".into(), Value::Object(spec));
    issues
}

/// The Secret's values: `data` (base64) overlaid by `stringData`, as the API server does.
fn secret_data(map: &Map<String, Value>) -> (BTreeMap<String, String>, Vec<Issue>) {
    let mut out = BTreeMap::new();
    let mut issues = Vec::new();
    if let Some(data) = map.get("data").and_then(Value::as_object) {
        for (key, value) in data {
            let decoded = value
                .as_str()
                .and_then(|v| {
                    base64::engine::general_purpose::STANDARD
                        .decode(v.trim())
                        .ok()
                })
                .and_then(|bytes| String::from_utf8(bytes).ok());
            match decoded {
                Some(text) => {
                    out.insert(key.clone(), text);
                }
                None => issues.push(
                    Issue::new(
                        FieldPath::of(&["data", key]),
                        format!("`data.{key}` is not base64-encoded UTF-8 text"),
                    )
                    .hint("encode it with `base64 -w0`, or write it as text under `stringData`"),
                ),
            }
        }
    }
    if let Some(data) = map.get("stringData").and_then(Value::as_object) {
        for (key, value) in data {
            if let Some(text) = value.as_str() {
                out.insert(key.clone(), text.to_owned());
            }
        }
    }
    (out, issues)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kargo_documents_become_drays_with_their_language() {
        let mut stage = json!({"apiVersion": KARGO_API_VERSION, "kind": "Stage",
                               "metadata": {"name": "dev", "namespace": "myapp"}, "spec": {}});
        assert_eq!(adopt(&mut stage), Adopted::Kargo(vec![]));
        assert_eq!(stage["apiVersion"], API_VERSION);
        assert_eq!(
            stage["metadata"]["annotations"][ExprLanguage::ANNOTATION],
            "expr-lang"
        );
        let mut project = json!({"apiVersion": KARGO_API_VERSION, "kind": "Project",
                                 "metadata": {"name": "myapp"}});
        adopt(&mut project);
        assert_eq!(project["apiVersion"], API_VERSION);
        assert!(project["metadata"].get("annotations").is_none());
        let mut dray = json!({"apiVersion": API_VERSION, "kind": "Stage"});
        assert_eq!(adopt(&mut dray), Adopted::NotKargo);
        let mut other = json!({"apiVersion": KARGO_API_VERSION, "kind": "Promotion"});
        let Adopted::Refused(issue) = adopt(&mut other) else {
            panic!("a Kargo Promotion is refused")
        };
        assert!(issue.message.contains("not read by Dray"), "{issue:?}");
        assert!(issue.hint.unwrap().contains("dray promote"));
        let mut typo = json!({"apiVersion": KARGO_API_VERSION, "kind": "Stgae"});
        assert_eq!(adopt(&mut typo), Adopted::Kargo(vec![]));
        assert_eq!(typo["apiVersion"], API_VERSION);
    }

    #[test]
    fn receivers_name_their_secret_and_unsupported_targets_are_refused() {
        let mut config = json!({"apiVersion": KARGO_API_VERSION, "kind": "ProjectConfig",
        "metadata": {"name": "myapp", "namespace": "myapp"},
        "spec": {"webhookReceivers": [
            {"name": "ci", "generic": {"secretRef": {"name": "ci-webhook"},
                "actions": [{"action": "Refresh", "targetSelectionCriteria": [{"kind": "Warehouse", "name": "myapp"}]}]}},
            {"name": "gl", "gitlab": {"secretRef": {"name": "gitlab-webhook"}}},
            {"name": "x", "generic": {"secretRef": {"name": "s"},
                "actions": [{"action": "Refresh", "whenExpression": "true",
                             "targetSelectionCriteria": [{"kind": "Warehouse", "labelSelector": {}}]}]}}
        ]}});
        let issues = adopt(&mut config).issues();
        let receivers = &config["spec"]["webhookReceivers"];
        assert_eq!(receivers[0]["generic"]["secretRef"], "ci-webhook");
        assert_eq!(receivers[1]["gitlab"]["secretRef"], "gitlab-webhook");
        let fields: Vec<String> = issues.iter().map(|i| i.path.to_string()).collect();
        assert_eq!(
            fields,
            [
                "spec.webhookReceivers[2].generic.actions[0].whenExpression",
                "spec.webhookReceivers[2].generic.actions[0].targetSelectionCriteria[0].labelSelector"
            ]
        );
    }

    #[test]
    fn kargo_secrets_become_credentials() {
        let mut git = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "repo", "namespace": "myapp", "labels": {CRED_TYPE_LABEL: "git"}},
            "stringData": {"repoURL": "https://git.example.com/.*", "repoURLIsRegex": "true",
                           "username": "bot"},
            "data": {"password": "czNjcjN0"}});
        assert_eq!(adopt(&mut git), Adopted::Kargo(vec![]));
        assert_eq!(
            git,
            json!({"apiVersion": API_VERSION, "kind": "Credential",
                   "metadata": {"name": "repo", "namespace": "myapp"},
                   "spec": {"type": "git", "repoURLPattern": "https://git.example.com/.*",
                            "username": "bot", "password": "s3cr3t"}})
        );
        let mut hook = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hook", "namespace": "myapp"}, "data": {"secret": "aG9vaw=="}});
        adopt(&mut hook);
        assert_eq!(hook["spec"], json!({"type": "webhook", "token": "hook"}));
        let mut plain = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db"}, "stringData": {"url": "x"}});
        let issues = adopt(&mut plain).issues();
        assert!(
            issues[0]
                .message
                .contains("only as one of Kargo's credentials")
        );
        let mut ssh = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "k", "labels": {CRED_TYPE_LABEL: "git"}},
            "stringData": {"repoURL": "git@h:x", "sshPrivateKey": "-----BEGIN"}, "data": {"bad": "%%"}});
        let issues = adopt(&mut ssh).issues();
        let fields: Vec<String> = issues.iter().map(|i| i.path.to_string()).collect();
        assert_eq!(fields, ["data.bad", "data.sshPrivateKey"]);
        // The secret's value is never in a message.
        assert!(issues.iter().all(|i| !i.message.contains("BEGIN")));
    }
}
