//! Applying a batch of YAML documents: validate them all together against what is stored,
//! then write every change in one atomic commit. Used by `POST /api/v1/apply` and by
//! `dray serve --config`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{Kind, ObjectKey, Verb, annotations};
use crate::config::{self, ConfigError, ConfigErrors, Manifest, SourceFile};
use crate::pipeline::door::{self, Admitted, Operation};
use crate::secrets::SecretKey;
use crate::store::{Store, StoredObject, Write, desired_state};

use super::auth::Caller;
use super::credentials;
use super::error::ApiError;

/// The body of `POST /api/v1/apply`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    /// The files, with the paths the user gave (used in error messages).
    pub files: Vec<ApplyFile>,
    /// The project for documents that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_project: Option<String>,
}

/// One file of an apply request.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct ApplyFile {
    /// The path, as the user wrote it.
    pub path: String,
    /// The YAML text.
    pub content: String,
}

/// What happened to each resource.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ApplyResponse {
    /// One entry per document, in the order they were written.
    pub results: Vec<ApplyResult>,
}

/// What happened to one resource.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ApplyResult {
    /// The kind.
    pub kind: String,
    /// The project, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
}

/// The kinds that other documents refer to, loaded so references can be checked.
const REFERENCED_KINDS: [Kind; 8] = [
    Kind::Project,
    Kind::ProjectConfig,
    Kind::Role,
    Kind::Warehouse,
    Kind::PromotionTask,
    Kind::ClusterPromotionTask,
    Kind::AnalysisTemplate,
    Kind::Stage,
];

/// Everything stored that a batch of documents may refer to.
pub(crate) async fn referenced_objects(
    store: &dyn Store,
) -> Result<BTreeMap<ObjectKey, Value>, ApiError> {
    let mut existing = BTreeMap::new();
    for kind in REFERENCED_KINDS {
        for stored in store.list(kind, None).await? {
            existing.insert(stored.key, stored.object);
        }
    }
    Ok(existing)
}

/// Validates and stores a batch of documents; nothing is stored if anything is invalid,
/// or if `caller` (when given) may not create or update one of them.
pub async fn apply(
    store: &dyn Store,
    key: &SecretKey,
    request: ApplyRequest,
    caller: Option<&Caller>,
) -> Result<ApplyResponse, ApiError> {
    let files: Vec<SourceFile> = request
        .files
        .into_iter()
        .map(|f| SourceFile {
            path: f.path,
            content: f.content,
        })
        .collect();
    let existing = referenced_objects(store).await?;
    let manifests = config::load(&files, request.default_project.as_deref(), &existing)?;
    if manifests.is_empty() {
        return Err(ApiError::from(ConfigErrors(vec![config::ConfigError {
            file: files
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            document: None,
            kind: None,
            name: None,
            line: None,
            field: None,
            message: "no resources found".into(),
            hint: Some("the files hold no YAML documents with `kind:`".into()),
        }])));
    }

    let mut ordered = through_the_door(manifests)?;
    ordered.sort_by_key(|m| Kind::ALL.iter().position(|k| *k == m.key.kind));
    let mut writes = Vec::new();
    let mut results = Vec::new();
    let mut seen = BTreeSet::new();
    for manifest in ordered {
        seen.insert(manifest.key.clone());
        let current = store.get(&manifest.key).await?;
        if let Some(caller) = caller {
            let verb = if current.is_some() {
                Verb::Update
            } else {
                Verb::Create
            };
            let key = &manifest.key;
            caller
                .authorize(
                    store,
                    verb,
                    key.kind.plural(),
                    key.namespace.as_deref(),
                    Some(&key.name),
                )
                .await?;
        }
        let mut object = manifest.object;
        let action = match current {
            None => {
                credentials::seal(key, &mut object, None)?;
                derive_status(&mut object);
                writes.push(Write::Create(object));
                "created"
            }
            Some(current) if credentials::is_unchanged(key, &as_written(&current), &object)? => {
                "unchanged"
            }
            Some(current) => {
                credentials::seal(key, &mut object, Some(&current))?;
                let derived = derive_status(&mut object);
                let status = object.get("status").cloned();
                let mut desired = desired_state(&object);
                desired["metadata"]["resourceVersion"] =
                    Value::String(current.resource_version.to_string());
                writes.push(Write::Update(desired));
                if (derived || manifest.key.kind == Kind::Credential)
                    && let Some(status) = status
                {
                    let key = manifest.key.clone();
                    writes.push(Write::UpdateStatus {
                        key,
                        status,
                        resource_version: None,
                    });
                }
                "configured"
            }
        };
        results.push(ApplyResult {
            kind: manifest.key.kind.as_str().to_owned(),
            namespace: manifest.key.namespace.clone(),
            name: manifest.key.name.clone(),
            action: action.to_owned(),
        });
    }
    if !writes.is_empty() {
        store.commit(writes).await?;
    }
    Ok(ApplyResponse { results })
}

/// The documents as the door admits them (see [`crate::pipeline::door`]): statuses
/// dropped; Promotions (an action, not configuration) and Freight (minted, never written)
/// refused, each error naming its file, document and line.
fn through_the_door(manifests: Vec<Manifest>) -> Result<Vec<Manifest>, ConfigErrors> {
    let mut admitted = Vec::new();
    let mut errors = Vec::new();
    for mut manifest in manifests {
        let object = std::mem::take(&mut manifest.object);
        // Create or Update: the door answers both alike for what `apply` writes. A
        // Promotion is refused as a whole, whatever it holds: fixing its steps would not
        // make it configuration.
        let refusal = match door::admit(Operation::Create, &manifest.key, Some(object), None) {
            Ok(Admitted::Write(object)) => {
                manifest.object = object;
                admitted.push(manifest);
                continue;
            }
            _ if manifest.key.kind == Kind::Promotion => None,
            Ok(Admitted::Promote(_) | Admitted::Delete) => None,
            Err(refusal) => Some(refusal),
        };
        let (message, hint) = match refusal {
            Some(refusal) => (refusal.to_string(), refusal.hint()),
            None => (
                "a Promotion cannot be applied: it is a request to promote, not configuration"
                    .to_owned(),
                format!(
                    "use `dray promote -p {} --stage STAGE --alias ALIAS` (it goes through the Stage's gates)",
                    manifest.key.namespace.as_deref().unwrap_or("PROJECT")
                ),
            ),
        };
        let origin = &manifest.origin;
        errors.push(ConfigError {
            file: origin.file.clone(),
            document: Some(origin.document),
            kind: Some(manifest.key.kind.as_str().to_owned()),
            name: Some(match &manifest.key.namespace {
                Some(project) => format!("{project}/{}", manifest.key.name),
                None => manifest.key.name.clone(),
            }),
            line: Some(origin.line),
            field: None,
            message,
            hint: Some(hint),
        });
    }
    if errors.is_empty() {
        Ok(admitted)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Fills in the status that follows from the spec alone (a ProjectConfig's receiver URLs).
/// Returns whether it did.
/// Annotations Dray's own routes and controllers put on configuration (a refresh asked
/// for, a wake-up): not what the user wrote, so no reason to call a re-apply `configured`.
const SET_BY_DRAY: [&str; 2] = [annotations::REFRESH, annotations::WAKE];

/// `current` without [`SET_BY_DRAY`], to compare with what the user applies.
fn as_written(current: &StoredObject) -> StoredObject {
    let mut current = current.clone();
    if let Some(notes) = current
        .object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        for key in SET_BY_DRAY {
            notes.remove(key);
        }
    }
    current
}

fn derive_status(object: &mut Value) -> bool {
    if object.get("kind").and_then(Value::as_str) != Some("ProjectConfig") {
        return false;
    }
    let Ok(config) = serde_json::from_value::<crate::api::ProjectConfig>(object.clone()) else {
        return false;
    };
    let project = config.metadata.namespace.clone().unwrap_or_default();
    let receivers: Vec<Value> = config
        .spec
        .webhook_receivers
        .iter()
        .map(|r| serde_json::json!({"name": r.name, "path": super::webhooks::receiver_path(&project, r)}))
        .collect();
    object["status"] = serde_json::json!({"webhookReceivers": receivers});
    true
}
