//! Checks one document on its own: the envelope (`apiVersion`, `kind`, `metadata.name`,
//! `metadata.namespace`), unknown fields, types and single-resource rules. The result,
//! [`Checked`], carries what cross-document checks need and places issues in the file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::api::{API_VERSION, Kind, ObjectKey, crd};

use super::error::{ConfigError, Issue};
use super::names::{self, MAX_FREIGHT, MAX_LABEL};
use super::path::FieldPath;
use super::schema_check::{METADATA_IGNORED, Respelling, respelled, unknown_fields};
use super::typed::{self, Resource};
use super::yaml::{Document, LineIndex};
use super::{DocumentOrigin, semantics};
use crate::api::RESERVED_NAMESPACE_PREFIX;
use crate::api::suggest;

/// One document after its own checks.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    /// Where it was written.
    pub(crate) origin: DocumentOrigin,
    /// Its identity, when kind, name and project are known.
    pub(crate) key: Option<ObjectKey>,
    /// Its `kind` as written, for error context.
    kind: Option<String>,
    /// `project/name` or `name`, for error context.
    name: Option<String>,
    /// The object, with `metadata.namespace` filled in and server-set metadata dropped.
    pub(crate) object: Value,
    /// The object as its Rust type, when it passed the type check without misspellings:
    /// what other documents may rely on.
    pub(crate) resource: Option<Resource>,
    /// The object as far as it could be read (misspelled fields respelled, mistyped ones
    /// left out): what its own rules and references are checked on.
    pub(crate) readable: Option<Resource>,
    /// Fields left out of `readable` because their type was wrong.
    left_out: Vec<FieldPath>,
    /// Fields renamed in `readable` because they were misspelled.
    renamed: Vec<Respelling>,
    lines: LineIndex,
    /// Problems found in this document alone.
    pub(crate) issues: Vec<Issue>,
}

impl Checked {
    /// Places `issue` in this document, under the field names the author wrote.
    pub(crate) fn error(&self, issue: &Issue) -> ConfigError {
        let path = self
            .renamed
            .iter()
            .find_map(|r| issue.path.moved(&r.meant, &r.written))
            .unwrap_or_else(|| issue.path.clone());
        ConfigError {
            file: self.origin.file.clone(),
            document: Some(self.origin.document),
            kind: self.kind.clone(),
            name: self.name.clone(),
            line: Some(issue.line.unwrap_or_else(|| self.lines.line(&path))),
            field: (!path.is_root()).then(|| path.to_string()),
            message: issue.message.clone(),
            hint: issue.hint.clone(),
        }
    }

    /// Whether a rule's `issue` about [`Checked::readable`] stands: an issue about a field
    /// left out for its type, or about what contains it, may only be a consequence of
    /// leaving it out.
    pub(crate) fn stands(&self, issue: &Issue) -> bool {
        !self.left_out.iter().any(|field| issue.path.contains(field))
    }
}

/// Each kind's schema, generated once per load.
#[derive(Debug, Default)]
pub(crate) struct Schemas(BTreeMap<Kind, Value>);

impl Schemas {
    fn of(&mut self, kind: Kind) -> &Value {
        self.0.entry(kind).or_insert_with(|| crd::schema(kind))
    }
}

/// Runs every single-document check on `doc` from `file`.
pub(crate) fn check(
    file: &str,
    doc: Document,
    default_namespace: Option<&str>,
    schemas: &mut Schemas,
) -> Checked {
    let origin = DocumentOrigin {
        file: file.to_owned(),
        document: doc.number,
        line: doc.lines.start(),
    };
    let mut object = doc.value;
    // Argo Rollouts' analysis templates are read as Dray's (expr-lang conditions)
    super::argo_rollouts::adopt(&mut object);
    // Kargo's documents are read as Dray's (expr-lang expressions)
    let adopted = super::kargo::adopt(&mut object);
    let refused = matches!(adopted, super::kargo::Adopted::Refused(_));
    let mut issues = doc.problems;
    issues.extend(adopted.issues());
    let text = |object: &Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let written_kind = text(&object, "/kind");
    let kind = written_kind.as_deref().and_then(Kind::from_manifest_kind);
    let name = text(&object, "/metadata/name");
    let namespace = match kind {
        Some(kind) if !kind.is_namespaced() => None,
        _ => text(&object, "/metadata/namespace").or_else(|| default_namespace.map(str::to_owned)),
    };
    let mut checked = Checked {
        origin,
        key: None,
        kind: written_kind,
        name: match (&namespace, &name) {
            (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
            (_, name) => name.clone(),
        },
        object: Value::Null,
        resource: None,
        readable: None,
        left_out: Vec::new(),
        renamed: Vec::new(),
        lines: doc.lines,
        issues: Vec::new(),
    };
    if refused {
        checked.issues = issues;
        return checked;
    }
    let Some(map) = object.as_object_mut() else {
        issues.push(
            Issue::new(FieldPath::root(), "a document must be a mapping")
                .hint("start it with `apiVersion: dray.dev/v1alpha1`, `kind:` and `metadata:`"),
        );
        checked.issues = issues;
        return checked;
    };
    envelope(map, kind, namespace.as_deref(), &mut issues);
    if let (Some(kind), Some(name)) = (kind, &name) {
        checked.key = match (kind.is_namespaced(), &namespace) {
            (false, _) => Some(ObjectKey::cluster(kind, name)),
            (true, Some(ns)) => Some(ObjectKey::namespaced(kind, ns, name)),
            (true, None) => None,
        };
    }
    if kind == Some(Kind::Project) && !map.contains_key("spec") {
        map.insert("spec".into(), Value::Object(Map::new()));
    }
    if let (Some(kind), false) = (kind, doc.is_broken) {
        let schema = schemas.of(kind);
        let unknown = unknown_fields(kind, &object, schema);
        let metadata_is_map = object.get("metadata").is_none_or(Value::is_object);
        if metadata_is_map {
            let (meant, renamed) = respelled(&object, &unknown);
            checked.renamed = renamed;
            match typed::deserialize(kind, &meant, schema) {
                Ok(resource) => {
                    // Only a document without misspellings may be referred to by its content.
                    if unknown.is_empty() {
                        checked.resource = Some(resource.clone());
                    }
                    checked.readable = Some(resource);
                }
                Err(found) => {
                    if let Some((resource, left_out)) = typed::salvage(kind, &meant, &found) {
                        checked.readable = Some(resource);
                        checked.left_out = left_out;
                    }
                    issues.extend(found);
                }
            }
            if let (Some(resource), Some(key)) = (&checked.readable, &checked.key) {
                let rules = semantics::check(resource, key);
                issues.extend(rules.into_iter().filter(|i| checked.stands(i)));
            }
        }
        issues.extend(unknown.into_iter().map(|u| u.issue));
    }
    checked.object = object;
    checked.issues = issues;
    checked
}

/// Checks `apiVersion`, `kind` and `metadata`; fills in the namespace and drops server-set
/// metadata fields.
fn envelope(
    map: &mut Map<String, Value>,
    kind: Option<Kind>,
    namespace: Option<&str>,
    issues: &mut Vec<Issue>,
) {
    let api_version_hint = format!("use `apiVersion: {API_VERSION}`");
    match map.get("apiVersion") {
        None => issues
            .push(Issue::new(FieldPath::root(), "missing `apiVersion`").hint(api_version_hint)),
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(v) => {
            let shown = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let message = format!("`apiVersion` is `{shown}`, but Dray reads `{API_VERSION}`");
            issues.push(Issue::new(FieldPath::of(&["apiVersion"]), message).hint(api_version_hint));
        }
    }
    let kinds = || Kind::ALL.iter().map(|k| k.as_str());
    match (map.get("kind"), kind) {
        (_, Some(_)) => {}
        (None, None) => issues.push(
            Issue::new(FieldPath::root(), "missing `kind`").hint(format!(
                "add `kind:`, one of {}",
                suggest::list(kinds(), 10)
            )),
        ),
        (Some(written), None) => {
            let shown = written
                .as_str()
                .map_or_else(|| written.to_string(), str::to_owned);
            let hint = match suggest::closest(&shown, kinds()) {
                Some(best) => format!(
                    "did you mean `{best}`? The kinds are {}",
                    suggest::list(kinds(), 10)
                ),
                None => format!("the kinds are {}", suggest::list(kinds(), 10)),
            };
            issues.push(
                Issue::new(FieldPath::of(&["kind"]), format!("unknown kind `{shown}`")).hint(hint),
            );
        }
    }
    let Some(metadata) = map.get_mut("metadata") else {
        issues.push(
            Issue::new(FieldPath::root(), "missing `metadata`")
                .hint("add `metadata: {name: <name>}`"),
        );
        return;
    };
    let Some(metadata) = metadata.as_object_mut() else {
        issues.push(
            Issue::new(FieldPath::of(&["metadata"]), "`metadata` must be a mapping")
                .hint("write `metadata: {name: <name>}`"),
        );
        return;
    };
    for key in METADATA_IGNORED {
        metadata.remove(key);
    }
    let at = FieldPath::of(&["metadata"]);
    match metadata.get("name").map(Value::as_str) {
        None => issues.push(
            Issue::new(at.clone(), "missing `metadata.name`")
                .hint("add `name: <name>` under `metadata`"),
        ),
        Some(Some(name)) => {
            let max = if kind == Some(Kind::Freight) {
                MAX_FREIGHT
            } else {
                MAX_LABEL
            };
            issues.extend(names::check(name, max, "name", at.key("name")));
            if kind == Some(Kind::Project) && name.starts_with(RESERVED_NAMESPACE_PREFIX) {
                issues.push(
                    Issue::new(
                        at.key("name"),
                        format!(
                            "`{name}` cannot name a Project: a Project's name is its namespace's, \
                             and `{RESERVED_NAMESPACE_PREFIX}` namespaces belong to Kubernetes"
                        ),
                    )
                    .hint("choose a name that does not start with `kube-`, such as `payments`"),
                );
            }
        }
        Some(None) => {} // the type check reports it
    }
    match kind {
        Some(kind) if !kind.is_namespaced() && metadata.contains_key("namespace") => issues.push(
            Issue::new(
                at.key("namespace"),
                format!("a {kind} is cluster-scoped and takes no `metadata.namespace`"),
            )
            .hint("remove `metadata.namespace`"),
        ),
        Some(kind) if !kind.is_namespaced() => {}
        None => {}
        Some(kind) => match namespace {
            Some(ns) => {
                issues.extend(names::check(
                    ns,
                    MAX_LABEL,
                    "project name",
                    at.key("namespace"),
                ));
                metadata.insert("namespace".to_owned(), Value::String(ns.to_owned()));
            }
            None => issues.push(
                Issue::new(
                    at.clone(),
                    format!("a {kind} belongs to a project, but `metadata.namespace` is not set"),
                )
                .hint("add `metadata.namespace: <project>` or pass `-p <project>`"),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::yaml;

    fn checked(text: &str, default_namespace: Option<&str>) -> Checked {
        let doc = yaml::parse(text).documents.into_iter().next().unwrap();
        check("f.yaml", doc, default_namespace, &mut Schemas::default())
    }

    fn found(c: &Checked) -> Vec<(usize, String, String)> {
        c.issues
            .iter()
            .map(|i| {
                let e = c.error(i);
                (e.line.unwrap(), e.field.unwrap_or_default(), e.message)
            })
            .collect()
    }

    #[test]
    fn checks_the_envelope() {
        let c = checked(
            "apiVersion: kargo.io/v1\nkind: Stgae\nmetadata:\n  name: Dev\n",
            None,
        );
        let found = found(&c);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_eq!(found[0].0, 1);
        assert_eq!(
            c.issues[0].hint.as_deref(),
            Some("use `apiVersion: dray.dev/v1alpha1`")
        );
        assert_eq!(
            (found[1].0, found[1].2.as_str()),
            (2, "unknown kind `Stgae`")
        );
        assert!(
            c.issues[1]
                .hint
                .as_deref()
                .unwrap()
                .starts_with("did you mean `Stage`?")
        );
        assert_eq!((found[2].0, found[2].1.as_str()), (4, "metadata.name"));
        assert!(c.key.is_none());
    }

    #[test]
    fn fills_the_namespace_and_drops_server_fields() {
        let text = "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata:\n  name: demo\n  uid: x\nspec: {}\n";
        let c = checked(text, Some("ignored"));
        assert!(c.issues.is_empty(), "{:?}", c.issues);
        assert_eq!(c.key, Some(ObjectKey::cluster(Kind::Project, "demo")));
        assert_eq!(c.object["metadata"], serde_json::json!({"name": "demo"}));

        let text = "apiVersion: dray.dev/v1alpha1\nkind: PromotionTask\nmetadata:\n  name: t\nspec:\n  steps:\n  - uses: git-clone\n";
        let c = checked(text, Some("demo"));
        assert!(c.issues.is_empty(), "{:?}", c.issues);
        assert_eq!(c.object["metadata"]["namespace"], "demo");
        assert_eq!(
            c.key,
            Some(ObjectKey::namespaced(Kind::PromotionTask, "demo", "t"))
        );

        let c = checked(text, None);
        let e = c.error(&c.issues[0]);
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("metadata")));
        assert_eq!(
            e.hint.as_deref(),
            Some("add `metadata.namespace: <project>` or pass `-p <project>`")
        );
    }

    #[test]
    fn projects_take_no_namespace() {
        let text = "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata:\n  name: demo\n  namespace: x\nspec: {}\n";
        let c = checked(text, None);
        assert_eq!(
            found(&c),
            vec![(
                5,
                "metadata.namespace".to_owned(),
                "a Project is cluster-scoped and takes no `metadata.namespace`".to_owned()
            )]
        );
    }

    #[test]
    fn rejects_documents_that_are_not_mappings() {
        let c = checked("- a\n- b\n", None);
        assert_eq!(
            found(&c),
            vec![(1, String::new(), "a document must be a mapping".to_owned())]
        );
    }
}
