//! Type checking: deserializes a document into its Rust kind (`Stage`, `Warehouse`, …) and
//! turns serde's complaints into issues with the exact field path. Metadata, the body
//! (`spec`, or Freight's top-level fields) and `status` are checked separately, and after
//! an error the offending field is dropped and the rest checked again, so that one document
//! reports all its type errors at once.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{
    AnalysisTemplate, AnalysisTemplateSpec, ClusterPromotionTask, ClusterPromotionTaskSpec,
    Credential, CredentialSpec, CredentialStatus, Freight, FreightFields, FreightStatus, Kind,
    Project, ProjectConfig, ProjectConfigSpec, ProjectConfigStatus, ProjectSpec, ProjectStatus,
    Promotion, PromotionSpec, PromotionStatus, PromotionTask, PromotionTaskSpec, Role, RoleBinding,
    RoleBindingFields, RoleFields, Stage, StageSpec, StageStatus, Warehouse, WarehouseSpec,
    WarehouseStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::Issue;
use super::path::{FieldPath, Segment};
use super::schema_check::{describe, schema_at};
use crate::secrets::SECRET_FIELDS;

/// The most type errors reported for one part (metadata, body, status) of a document.
const MAX_ERRORS_PER_PART: usize = 20;

/// A document as its Rust type.
// One per document, short-lived: boxing the large Stage would only add noise to matches.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum Resource {
    Project(Project),
    Credential(Credential),
    Role(Role),
    RoleBinding(RoleBinding),
    ProjectConfig(ProjectConfig),
    Warehouse(Warehouse),
    Freight(Freight),
    Stage(Stage),
    PromotionTask(PromotionTask),
    Promotion(Promotion),
    AnalysisTemplate(AnalysisTemplate),
}

impl Resource {
    /// The object's metadata.
    pub(crate) fn metadata(&self) -> &ObjectMeta {
        match self {
            Resource::Project(r) => &r.metadata,
            Resource::Credential(r) => &r.metadata,
            Resource::Role(r) => &r.metadata,
            Resource::RoleBinding(r) => &r.metadata,
            Resource::ProjectConfig(r) => &r.metadata,
            Resource::Warehouse(r) => &r.metadata,
            Resource::Freight(r) => &r.metadata,
            Resource::Stage(r) => &r.metadata,
            Resource::PromotionTask(r) => &r.metadata,
            Resource::Promotion(r) => &r.metadata,
            Resource::AnalysisTemplate(r) => &r.metadata,
        }
    }
}

/// Deserializes a whole object of `kind`, or explains every part that does not fit.
pub(crate) fn deserialize(
    kind: Kind,
    object: &Value,
    schema: &Value,
) -> Result<Resource, Vec<Issue>> {
    let mut issues = Vec::new();
    let check = Checker {
        object,
        schema,
        kind,
    };
    check.part::<ObjectMeta>("metadata", &mut issues);
    match kind {
        Kind::Project => check.body::<ProjectSpec, ProjectStatus>(&mut issues),
        Kind::ProjectConfig => check.body::<ProjectConfigSpec, ProjectConfigStatus>(&mut issues),
        Kind::Credential => check.body::<CredentialSpec, CredentialStatus>(&mut issues),
        Kind::Warehouse => check.body::<WarehouseSpec, WarehouseStatus>(&mut issues),
        Kind::Stage => check.body::<StageSpec, StageStatus>(&mut issues),
        Kind::PromotionTask => check.body::<PromotionTaskSpec, serde::de::IgnoredAny>(&mut issues),
        Kind::ClusterPromotionTask => {
            check.body::<ClusterPromotionTaskSpec, serde::de::IgnoredAny>(&mut issues)
        }
        Kind::Promotion => check.body::<PromotionSpec, PromotionStatus>(&mut issues),
        Kind::AnalysisTemplate => {
            check.body::<AnalysisTemplateSpec, serde::de::IgnoredAny>(&mut issues)
        }
        Kind::Freight => {
            check.value::<FreightFields>(&top_level(object), &FieldPath::root(), &mut issues);
            check.part::<FreightStatus>("status", &mut issues);
        }
        Kind::Role => {
            check.value::<RoleFields>(&top_level(object), &FieldPath::root(), &mut issues);
        }
        Kind::RoleBinding => {
            let fields = top_level(object);
            check.value::<RoleBindingFields>(&fields, &FieldPath::root(), &mut issues);
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    whole(kind, object).map_err(|e| vec![Issue::new(FieldPath::root(), e.to_string())])
}

/// The fields of a kind without `spec` (Freight, Role, RoleBinding): the object without its
/// envelope and status.
fn top_level(object: &Value) -> Value {
    let mut fields = object.clone();
    if let Some(map) = fields.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata", "status"] {
            map.remove(key);
        }
    }
    fields
}

/// What can still be read of an object whose type check found `issues`: the object
/// without each offending field, as its Rust type, and the fields left out. `None` when
/// the rest does not make a resource either (a required field is missing or mistyped).
/// The document's other rules run on it, so that one type error does not hide them.
pub(crate) fn salvage(
    kind: Kind,
    object: &Value,
    issues: &[Issue],
) -> Option<(Resource, Vec<FieldPath>)> {
    let mut rest = object.clone();
    let mut dropped = Vec::new();
    for issue in issues {
        if missing_field(&issue.message).is_some() {
            return None; // nothing to leave out: the field is not there at all
        }
        if !remove(&mut rest, &issue.path) {
            return None;
        }
        dropped.push(issue.path.clone());
    }
    Some((whole(kind, &rest).ok()?, dropped))
}

/// Deserializes a stored object without explaining failures (for references to it).
pub(crate) fn quietly(kind: Kind, object: &Value) -> Option<Resource> {
    whole(kind, object).ok()
}

fn whole(kind: Kind, object: &Value) -> Result<Resource, serde_json::Error> {
    let v = object.clone();
    Ok(match kind {
        Kind::Project => Resource::Project(serde_json::from_value(v)?),
        Kind::ProjectConfig => Resource::ProjectConfig(serde_json::from_value(v)?),
        Kind::Credential => Resource::Credential(serde_json::from_value(v)?),
        Kind::Role => Resource::Role(serde_json::from_value(v)?),
        Kind::RoleBinding => Resource::RoleBinding(serde_json::from_value(v)?),
        Kind::Warehouse => Resource::Warehouse(serde_json::from_value(v)?),
        Kind::Freight => Resource::Freight(serde_json::from_value(v)?),
        Kind::Stage => Resource::Stage(serde_json::from_value(v)?),
        Kind::PromotionTask => Resource::PromotionTask(serde_json::from_value(v)?),
        // A cluster task is checked and referred to as a project's task is.
        Kind::ClusterPromotionTask => {
            Resource::PromotionTask(serde_json::from_value::<ClusterPromotionTask>(v)?.as_task())
        }
        Kind::Promotion => Resource::Promotion(serde_json::from_value(v)?),
        Kind::AnalysisTemplate => Resource::AnalysisTemplate(serde_json::from_value(v)?),
    })
}

struct Checker<'a> {
    object: &'a Value,
    schema: &'a Value,
    kind: Kind,
}

impl Checker<'_> {
    /// Checks `spec` (which must be present) and `status` (which may be).
    fn body<S: DeserializeOwned, T: DeserializeOwned>(&self, issues: &mut Vec<Issue>) {
        if self.object.get("spec").is_none() {
            let hint = match self.object.get("kind").and_then(Value::as_str) {
                Some("Project") => "add `spec: {}`".to_owned(),
                _ => "add a `spec:` mapping with the fields of this kind".to_owned(),
            };
            issues.push(Issue::new(FieldPath::root(), "missing field `spec`").hint(hint));
        } else {
            self.part::<S>("spec", issues);
        }
        self.part::<T>("status", issues);
    }

    /// Checks the member `key` of the object, if present.
    fn part<T: DeserializeOwned>(&self, key: &str, issues: &mut Vec<Issue>) {
        if let Some(value) = self.object.get(key) {
            self.value::<T>(value, &FieldPath::of(&[key]), issues);
        }
    }

    /// Deserializes `value` (found at `at`) as a `T`. After an error the offending member is
    /// dropped and the rest tried again, so that one document reports all its type errors.
    fn value<T: DeserializeOwned>(&self, value: &Value, at: &FieldPath, issues: &mut Vec<Issue>) {
        let mut value = value.clone();
        let mut dropped: Vec<FieldPath> = Vec::new();
        for _ in 0..MAX_ERRORS_PER_PART {
            let Err(e) = serde_path_to_error::deserialize::<_, T>(&value) else {
                return;
            };
            let relative = FieldPath::from(e.path());
            let message = e.inner().to_string();
            let missing = missing_field(&message).map(str::to_owned);
            if missing
                .as_deref()
                .is_some_and(|field| dropped.contains(&relative.key(field)))
            {
                return; // a consequence of our own dropping, not the author's
            }
            let path = at.join(&relative);
            let hint = self.hint(&path, &message);
            let message = if self.is_secret(&path) {
                without_values(&message)
            } else {
                message
            };
            issues.push(Issue::new(path, message).maybe_hint(hint));
            if missing.is_some() || !remove(&mut value, &relative) {
                return;
            }
            dropped.push(relative);
        }
    }

    /// Whether `path` is (inside) a Credential's secret field, whose value an error must
    /// never repeat.
    fn is_secret(&self, path: &FieldPath) -> bool {
        self.kind == Kind::Credential
            && matches!(path.segments(), [Segment::Key(spec), Segment::Key(field), ..]
                if spec == "spec" && SECRET_FIELDS.contains(&field.as_str()))
    }

    fn hint(&self, path: &FieldPath, message: &str) -> Option<String> {
        if let Some(field) = missing_field(message) {
            let described = schema_at(self.schema, &path.key(field))
                .and_then(|node| node.get("description"))
                .and_then(Value::as_str)
                .and_then(|d| d.lines().next());
            return Some(match described {
                Some(d) => format!("add `{field}`: {}", d.trim_end_matches('.')),
                None => format!("add `{field}`"),
            });
        }
        let described = schema_at(self.schema, path).and_then(describe);
        if message.contains("expected a string") {
            let quote = "quote the value to make it a string, e.g. `\"1.0\"`";
            return Some(described.map_or(quote.to_owned(), |d| format!("{d}; {quote}")));
        }
        described
    }
}

/// Removes the object member at `path`; false if `path` does not end in one.
fn remove(value: &mut Value, path: &FieldPath) -> bool {
    let (Some(parent), Some(key)) = (path.parent(), path.last_key()) else {
        return false;
    };
    let mut node = value;
    for segment in parent.segments() {
        let next = match segment {
            Segment::Key(k) => node.get_mut(k),
            Segment::Index(i) => node.get_mut(*i),
        };
        let Some(next) = next else { return false };
        node = next;
    }
    node.as_object_mut()
        .and_then(|map| map.remove(key))
        .is_some()
}

/// serde's `message` without the values it quotes: ``invalid type: integer `5`, expected a
/// string`` → `invalid type: integer, expected a string`.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        } else {
            out.truncate(out.trim_end().len());
        }
    }
    out
}

/// `missing field `name`` → `name`.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::crd::schema;

    fn errors(kind: Kind, object: Value) -> Vec<(String, String, Option<String>)> {
        match deserialize(kind, &object, &schema(kind)) {
            Ok(_) => Vec::new(),
            Err(issues) => issues
                .into_iter()
                .map(|i| (i.path.to_string(), i.message, i.hint))
                .collect(),
        }
    }

    #[test]
    fn accepts_a_valid_stage() {
        let stage = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "dev", "namespace": "demo"},
            "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                           "sources": {"direct": true}}]}
        });
        let resource = deserialize(Kind::Stage, &stage, &schema(Kind::Stage)).unwrap();
        assert!(matches!(resource, Resource::Stage(s) if s.spec.requested_freight.len() == 1));
    }

    #[test]
    fn reports_type_errors_with_paths_and_hints() {
        let stage = json!({
            "kind": "Stage", "metadata": {"name": "dev", "labels": {"tier": 1}},
            "spec": {
                "requestedFreight": [{"origin": {"kind": "Warehouse"}, "sources": {"direct": true}}]
            },
            "status": {"currentPromotion": 5}
        });
        let errors = errors(Kind::Stage, stage);
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert_eq!(errors[0].0, "metadata.labels.tier");
        assert!(
            errors[0]
                .1
                .starts_with("invalid type: integer `1`, expected a string")
        );
        assert_eq!(errors[1].0, "spec.requestedFreight[0].origin");
        assert_eq!(errors[1].1, "missing field `name`");
        assert_eq!(
            errors[1].2.as_deref(),
            Some("add `name`: The origin's name, in the same project")
        );
        assert_eq!(errors[2].0, "status.currentPromotion");
    }

    #[test]
    fn reports_enum_errors_and_missing_spec() {
        let stage = json!({"kind": "Stage", "metadata": {"name": "dev"},
                           "spec": {"requestedFreight": [], "queuePolicy": "Sometimes"}});
        let errors = errors(Kind::Stage, stage);
        assert_eq!(errors[0].0, "spec.queuePolicy");
        assert!(errors[0].1.contains("unknown variant `Sometimes`"));
        assert!(
            errors[0]
                .2
                .as_deref()
                .unwrap()
                .starts_with("expected one of `Supersede`, `Queue`")
        );

        let project = json!({"kind": "Project", "metadata": {"name": "demo"}});
        let errors = super::tests::errors(Kind::Project, project);
        assert_eq!(
            errors,
            vec![(
                "".into(),
                "missing field `spec`".into(),
                Some("add `spec: {}`".into())
            )]
        );
    }

    #[test]
    fn reports_every_type_error_of_a_part() {
        let warehouse = json!({"kind": "Warehouse", "metadata": {"name": "app"}, "spec": {
            "interval": 5,
            "freightCreationPolicy": "Sometimes",
            "subscriptions": [{"image": {"repoURL": "r", "discoveryLimit": "lots", "insecure": "no"}}]
        }});
        let found = errors(Kind::Warehouse, warehouse);
        let paths: Vec<_> = found.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "spec.freightCreationPolicy",
                "spec.interval",
                "spec.subscriptions[0].image.discoveryLimit",
                "spec.subscriptions[0].image.insecure"
            ]
        );
        // Dropping a bad required field does not add a "missing field" error.
        let stage =
            json!({"kind": "Stage", "metadata": {"name": "dev"}, "spec": {"requestedFreight": 5}});
        assert_eq!(errors(Kind::Stage, stage).len(), 1);
    }

    #[test]
    fn a_mistyped_secret_is_not_repeated_in_the_error() {
        let credential = json!({"kind": "Credential", "metadata": {"name": "c"}, "spec": {
            "type": "git", "repoURL": "https://x", "username": 1.5,
            "password": 98765432, "token": true, "sshPrivateKey": ["k"]
        }});
        let found = errors(Kind::Credential, credential);
        let text = format!("{found:?}");
        assert!(
            !text.contains("98765432") && !text.contains("true"),
            "{text}"
        );
        let messages: Vec<(&str, &str)> = found
            .iter()
            .map(|(path, message, _)| (path.as_str(), message.as_str()))
            .collect();
        assert_eq!(
            messages,
            vec![
                ("spec.password", "invalid type: integer, expected a string"),
                (
                    "spec.sshPrivateKey",
                    "invalid type: sequence, expected a string"
                ),
                ("spec.token", "invalid type: boolean, expected a string"),
                (
                    "spec.username",
                    "invalid type: floating point `1.5`, expected a string"
                ),
            ]
        );
    }

    #[test]
    fn salvages_what_is_left_without_the_mistyped_fields() {
        let stage = json!({"kind": "Stage", "metadata": {"name": "qa"}, "spec": {
            "queuePolicy": 5,
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "ap"},
                                  "sources": {"direct": true}}]
        }});
        let issues = deserialize(Kind::Stage, &stage, &schema(Kind::Stage)).unwrap_err();
        let (resource, dropped) = salvage(Kind::Stage, &stage, &issues).unwrap();
        let Resource::Stage(stage) = resource else {
            panic!("not a Stage: {resource:?}")
        };
        assert_eq!(stage.spec.requested_freight[0].origin.name, "ap");
        assert_eq!(dropped, vec![FieldPath::of(&["spec", "queuePolicy"])]);

        let missing = json!({"kind": "Stage", "metadata": {"name": "qa"}, "spec": {
            "requestedFreight": [{"origin": {"kind": "Warehouse"}, "sources": {"direct": true}}]
        }});
        let issues = deserialize(Kind::Stage, &missing, &schema(Kind::Stage)).unwrap_err();
        assert!(salvage(Kind::Stage, &missing, &issues).is_none());
    }

    #[test]
    fn checks_freight_fields_at_the_top_level() {
        let freight = json!({"kind": "Freight", "metadata": {"name": "abc"},
                             "origin": {"kind": "Warehouse", "name": "app"},
                             "images": [{"repoURL": "r", "digest": 5}]});
        let errors = errors(Kind::Freight, freight);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, "images[0].digest");
    }
}
