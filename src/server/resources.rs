//! CRUD and list routes for every kind, scoped by project:
//!
//! - `GET|POST /api/v1/projects`, `GET|PUT|DELETE /api/v1/projects/{name}`
//! - `GET|POST /api/v1/projects/{project}/{plural}`
//! - `GET|PUT|DELETE /api/v1/projects/{project}/{plural}/{name}`
//! - `PUT /api/v1/projects/{project}/{plural}/{name}/status`
//!
//! Creates and updates go through the same validation as `dray apply`, then through the
//! pipeline's door ([`crate::pipeline::door`]): a Promotion document becomes a request on
//! the promote path, Freight is never written, a Promotion never changed, and status is
//! never a client's to write (the status route always refuses, naming why). Each route needs
//! its verb (`list`, `create`, `get`, `update`, `delete`) on the kind's plural; listing
//! projects shows those the caller may `get`. The built-in roles show among `roles`.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::api::{BUILTIN_ROLES, Kind, ObjectKey, ResourceBody as _, Role, Verb};
use crate::config::{self, SourceFile};
use crate::pipeline::door::{self, Admitted, Operation};
use crate::pipeline::{cascade, in_use};
use crate::store::{StoredObject, key_of};

use super::AppState;
use super::apply::referenced_objects;
use super::auth::Caller;
use super::credentials::{present, seal};
use super::error::ApiError;

/// Optional preconditions on deletes, and cascading (projects and warehouses): with
/// `cascade`, what belongs to the resource goes with it in one commit, and the answer is
/// `{"removed": [{kind, namespace?, name}…], "dryRun": bool}`; with `dryRun` too, nothing
/// is removed and the answer says what would be.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeleteParams {
    resource_version: Option<u64>,
    #[serde(default)]
    cascade: bool,
    #[serde(default)]
    dry_run: bool,
}

/// The kind `plural` names, once the caller may `verb` it (named `name`) in `project`.
async fn authorized_kind(
    state: &AppState,
    caller: &Caller,
    verb: Verb,
    plural: &str,
    project: &str,
    name: Option<&str>,
) -> Result<Kind, ApiError> {
    let kind = kind_from_plural(plural)?;
    caller
        .authorize(
            state.store.as_ref(),
            verb,
            kind.plural(),
            Some(project),
            name,
        )
        .await?;
    Ok(kind)
}

fn kind_from_plural(plural: &str) -> Result<Kind, ApiError> {
    Kind::from_user_input(plural)
        .filter(|k| k.is_namespaced())
        .ok_or_else(|| {
            let known: Vec<_> = Kind::ALL
                .iter()
                .filter(|k| k.is_namespaced())
                .map(|k| k.plural())
                .collect();
            ApiError::not_found(format!("there is no resource type `{plural}`"))
                .with_hint(format!("use one of: {}", known.join(", ")))
        })
}

fn bodies(objects: Vec<StoredObject>) -> Json<Vec<Value>> {
    Json(objects.into_iter().map(|o| present(o.object)).collect())
}

fn body(object: StoredObject) -> Json<Value> {
    Json(present(object.object))
}

async fn require_project(state: &AppState, project: &str) -> Result<(), ApiError> {
    let key = ObjectKey::cluster(Kind::Project, project);
    match state.store.get(&key).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::missing_from(state.store.as_ref(), &key).await),
    }
}

/// Validates one object like `dray apply` would, and returns it as loaded.
async fn validated(state: &AppState, object: &Value) -> Result<Value, ApiError> {
    let existing = referenced_objects(state.store.as_ref()).await?;
    let file = SourceFile {
        path: "request body".into(),
        content: object.to_string(),
    };
    let mut manifests = config::load(&[file], None, &existing)?;
    let manifest = manifests.pop().ok_or_else(|| {
        ApiError::bad_request("the request body holds no resource")
            .with_hint("send one resource as JSON, with `apiVersion`, `kind` and `metadata.name`")
    })?;
    let mut loaded = manifest.object;
    if let Some(rv) = object
        .metadata()
        .and_then(|meta| meta.get("resourceVersion"))
    {
        loaded["metadata"]["resourceVersion"] = rv.clone();
    }
    Ok(loaded)
}

fn check_path_matches(object: &Value, expected: &ObjectKey) -> Result<(), ApiError> {
    let actual = key_of(object)?;
    if &actual != expected {
        return Err(ApiError::bad_request(format!(
            "the body describes {actual} but the URL names {expected}"
        ))
        .with_hint(
            "make the body's `kind`, `metadata.namespace` and `metadata.name` match the URL",
        ));
    }
    Ok(())
}

fn fill_namespace(object: &mut Value, project: &str) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("namespace")
            .or_insert_with(|| Value::String(project.to_owned()));
    }
}

/// What the cluster-task routes serve.
const CLUSTER_TASKS: Kind = Kind::ClusterPromotionTask;

/// `GET /api/v1/clusterpromotiontasks`.
pub(crate) async fn list_cluster_tasks(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<Value>>, ApiError> {
    let store = state.store.as_ref();
    caller
        .authorize(store, Verb::List, CLUSTER_TASKS.plural(), None, None)
        .await?;
    Ok(bodies(store.list(CLUSTER_TASKS, None).await?))
}

/// `GET /api/v1/clusterpromotiontasks/{name}`.
pub(crate) async fn get_cluster_task(
    State(state): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let store = state.store.as_ref();
    caller
        .authorize(store, Verb::Get, CLUSTER_TASKS.plural(), None, Some(&name))
        .await?;
    let key = ObjectKey::cluster(CLUSTER_TASKS, &name);
    match store.get(&key).await? {
        Some(stored) => Ok(body(stored)),
        None => Err(ApiError::missing_from(store, &key).await),
    }
}

/// `DELETE /api/v1/clusterpromotiontasks/{name}`: refused while a Stage of any project
/// uses it.
pub(crate) async fn delete_cluster_task(
    State(state): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
    Query(params): Query<DeleteParams>,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Delete,
            CLUSTER_TASKS.plural(),
            None,
            Some(&name),
        )
        .await?;
    let key = ObjectKey::cluster(CLUSTER_TASKS, &name);
    delete_key(&state, &caller, key, params).await
}

/// A cascading delete (see [`cascade`]): the plan, and unless `dry_run` its one commit.
/// The caller needs `delete` on every kind the plan removes, not only on its root: a
/// cascade is no way around a Role that keeps Freight (say) from being deleted.
async fn delete_cascading(
    state: &AppState,
    caller: &Caller,
    key: ObjectKey,
    dry_run: bool,
) -> Result<Json<Value>, ApiError> {
    let plan = cascade::plan(state.store.as_ref(), &key)
        .await
        .map_err(|error| match error {
            cascade::CascadeError::Store(error) => error.into(),
            cascade::CascadeError::NotFound { .. } => {
                ApiError::not_found(error.to_string()).with_hint(error.hint())
            }
            cascade::CascadeError::NotCascading { .. } => {
                ApiError::bad_request(error.to_string()).with_hint(error.hint())
            }
            _ => ApiError::conflict(error.to_string()).with_hint(error.hint()),
        })?;
    let mut kinds: Vec<(Kind, Option<&str>)> = plan
        .removes
        .iter()
        .filter(|k| **k != key)
        .map(|k| (k.kind, k.namespace.as_deref()))
        .collect();
    kinds.sort_by_key(|(kind, namespace)| (kind.as_str(), *namespace));
    kinds.dedup();
    for (kind, namespace) in kinds {
        caller
            .authorize(
                state.store.as_ref(),
                Verb::Delete,
                kind.plural(),
                namespace,
                None,
            )
            .await?;
    }
    let removed: Vec<Value> = plan
        .removes
        .iter()
        .map(|k| match &k.namespace {
            Some(namespace) => {
                serde_json::json!({"kind": k.kind.as_str(), "namespace": namespace, "name": k.name})
            }
            None => serde_json::json!({"kind": k.kind.as_str(), "name": k.name}),
        })
        .collect();
    if !dry_run {
        cascade::execute(state.store.as_ref(), &plan).await?;
        tracing::info!(resource = %key, removed = plan.removes.len(), "deleted with cascade");
    }
    Ok(Json(
        serde_json::json!({"removed": removed, "dryRun": dry_run}),
    ))
}

async fn delete_key(
    state: &AppState,
    caller: &Caller,
    key: ObjectKey,
    params: DeleteParams,
) -> Result<Json<Value>, ApiError> {
    if params.cascade {
        return delete_cascading(state, caller, key, params.dry_run).await;
    }
    let current = state.store.get(&key).await?;
    door::admit(
        Operation::Delete,
        &key,
        None,
        current.as_ref().map(|c| &c.object),
    )?;
    if let Err(refused) = in_use::check_delete(state.store.as_ref(), &key).await? {
        return Err(ApiError::conflict(refused.to_string()).with_hint(refused.hint()));
    }
    let deleted = state.store.delete(&key, params.resource_version).await?;
    tracing::info!(resource = %key, "deleted");
    Ok(body(deleted))
}

pub(crate) async fn list_projects(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<Value>>, ApiError> {
    let store = state.store.as_ref();
    let mut projects = store.list(Kind::Project, None).await?;
    if !caller
        .may(store, Verb::List, "projects", None, None)
        .await?
    {
        let mut visible = Vec::new();
        for project in projects {
            let name = Some(project.key.name.as_str());
            if caller.may(store, Verb::Get, "projects", None, name).await? {
                visible.push(project);
            }
        }
        projects = visible;
    }
    Ok(bodies(projects))
}

pub(crate) async fn create_project(
    State(state): State<AppState>,
    caller: Caller,
    Json(object): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = object.name();
    caller
        .authorize(state.store.as_ref(), Verb::Create, "projects", None, name)
        .await?;
    let object = validated(&state, &object).await?;
    let created = state.store.create(object).await?;
    tracing::info!(resource = %created.key, "created");
    Ok((StatusCode::CREATED, body(created)))
}

pub(crate) async fn get_project(
    State(state): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Get,
            "projects",
            None,
            Some(&name),
        )
        .await?;
    let key = ObjectKey::cluster(Kind::Project, &name);
    let stored = state.store.get(&key).await?.ok_or_else(|| {
        ApiError::not_found(format!("project `{name}` does not exist"))
            .with_hint("run `dray get projects` to list projects")
    })?;
    Ok(body(stored))
}

pub(crate) async fn put_project(
    State(state): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
    Json(object): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Update,
            "projects",
            None,
            Some(&name),
        )
        .await?;
    check_path_matches(&object, &ObjectKey::cluster(Kind::Project, &name))?;
    let object = validated(&state, &object).await?;
    let updated = state.store.update(object).await?;
    Ok(body(updated))
}

pub(crate) async fn delete_project(
    State(state): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
    Query(params): Query<DeleteParams>,
) -> Result<Json<Value>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Delete,
            "projects",
            None,
            Some(&name),
        )
        .await?;
    delete_key(
        &state,
        &caller,
        ObjectKey::cluster(Kind::Project, &name),
        params,
    )
    .await
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Path((project, plural)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Vec<Value>>, ApiError> {
    let kind = authorized_kind(&state, &caller, Verb::List, &plural, &project, None).await?;
    require_project(&state, &project).await?;
    let mut stored = bodies(state.store.list(kind, Some(&project)).await?);
    if kind == Kind::Stage {
        super::gates::add_window_state(&state, &project, &mut stored.0).await?;
    }
    if kind != Kind::Role {
        return Ok(stored);
    }
    let mut roles: Vec<Value> = BUILTIN_ROLES
        .iter()
        .filter_map(|name| builtin_role(name, &project))
        .collect();
    roles.extend(stored.0);
    Ok(Json(roles))
}

/// A built-in role as the API shows it in `project`.
fn builtin_role(name: &str, project: &str) -> Option<Value> {
    let mut role = serde_json::to_value(Role::builtin(name)?).ok()?;
    role["metadata"]["namespace"] = Value::String(project.to_owned());
    Some(role)
}

pub(crate) async fn create(
    State(state): State<AppState>,
    Path((project, plural)): Path<(String, String)>,
    caller: Caller,
    Json(mut object): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    fill_namespace(&mut object, &project);
    let name = object.name().unwrap_or_default();
    let kind =
        authorized_kind(&state, &caller, Verb::Create, &plural, &project, Some(name)).await?;
    let key = ObjectKey::namespaced(kind, &project, name);
    check_path_matches(&object, &key)?;
    let object = validated(&state, &object).await?;
    let mut object = match door::admit(Operation::Create, &key, Some(object), None)? {
        Admitted::Promote(request) => {
            let created =
                super::promotions::request_through_door(&state, &caller, &project, request).await?;
            return Ok((StatusCode::CREATED, Json(created)));
        }
        Admitted::Write(object) => object,
        Admitted::Delete => {
            return Err(ApiError::internal("the door admitted a create as a delete"));
        }
    };
    seal(&state.secret_key, &mut object, None)?;
    let created = state.store.create(object).await?;
    tracing::info!(resource = %created.key, "created");
    Ok((StatusCode::CREATED, body(created)))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    Path((project, plural, name)): Path<(String, String, String)>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let kind = authorized_kind(&state, &caller, Verb::Get, &plural, &project, Some(&name)).await?;
    if kind == Kind::Role
        && let Some(role) = builtin_role(&name, &project)
    {
        return Ok(Json(role));
    }
    if kind == Kind::Freight {
        let found = freight_by_name(&state, &caller, Verb::Get, &project, &name).await?;
        return Ok(body(found));
    }
    let key = ObjectKey::namespaced(kind, &project, &name);
    let Some(stored) = state.store.get(&key).await? else {
        return Err(ApiError::missing_from(state.store.as_ref(), &key).await);
    };
    let mut shown = vec![body(stored).0];
    if kind == Kind::Stage {
        super::gates::add_window_state(&state, &project, &mut shown).await?;
    }
    Ok(Json(shown.remove(0)))
}

pub(crate) async fn put(
    State(state): State<AppState>,
    Path((project, plural, name)): Path<(String, String, String)>,
    caller: Caller,
    Json(mut object): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    let kind = authorized_kind(
        &state,
        &caller,
        Verb::Update,
        &plural,
        &project,
        Some(&name),
    )
    .await?;
    fill_namespace(&mut object, &project);
    let key = ObjectKey::namespaced(kind, &project, &name);
    check_path_matches(&object, &key)?;
    let object = validated(&state, &object).await?;
    let Admitted::Write(mut object) = door::admit(Operation::Update, &key, Some(object), None)?
    else {
        return Err(ApiError::internal(
            "the door admitted an update as something else",
        ));
    };
    if kind == Kind::Credential {
        let previous = state.store.get(&key).await?;
        seal(&state.secret_key, &mut object, previous.as_ref())?;
        let status = object.get("status").cloned().unwrap_or_default();
        let updated = state.store.update(object).await?;
        let updated = state
            .store
            .update_status(&key, status, Some(updated.resource_version))
            .await?;
        return Ok(body(updated));
    }
    let updated = state.store.update(object).await?;
    tracing::info!(resource = %updated.key, "updated");
    Ok(body(updated))
}

pub(crate) async fn put_status(
    State(state): State<AppState>,
    Path((project, plural, name)): Path<(String, String, String)>,
    caller: Caller,
    Json(object): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    let kind = authorized_kind(
        &state,
        &caller,
        Verb::Update,
        &plural,
        &project,
        Some(&name),
    )
    .await?;
    let key = ObjectKey::namespaced(kind, &project, &name);
    let refused = match door::admit(Operation::WriteStatus, &key, Some(object), None) {
        Err(refusal) => refusal,
        Ok(_) => {
            return Err(ApiError::internal(
                "the door admitted a client's status write",
            ));
        }
    };
    tracing::info!(resource = %key, user = %caller.user, "refused a status write");
    Err(refused.into())
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    Path((project, plural, name)): Path<(String, String, String)>,
    caller: Caller,
    Query(params): Query<DeleteParams>,
) -> Result<Json<Value>, ApiError> {
    let kind = authorized_kind(
        &state,
        &caller,
        Verb::Delete,
        &plural,
        &project,
        Some(&name),
    )
    .await?;
    let name = if kind == Kind::Freight {
        freight_by_name(&state, &caller, Verb::Delete, &project, &name)
            .await?
            .key
            .name
    } else {
        name
    };
    delete_key(
        &state,
        &caller,
        ObjectKey::namespaced(kind, &project, &name),
        params,
    )
    .await
}

/// The Freight `name` names (id, id prefix or alias: [`super::freight_names`]), once the
/// caller may `verb` it by its id too.
async fn freight_by_name(
    state: &AppState,
    caller: &Caller,
    verb: Verb,
    project: &str,
    name: &str,
) -> Result<StoredObject, ApiError> {
    require_project(state, project).await?;
    let found = super::freight_names::resolve(state.store.as_ref(), project, name).await?;
    if found.key.name != name {
        authorized_kind(
            state,
            caller,
            verb,
            "freight",
            project,
            Some(&found.key.name),
        )
        .await?;
    }
    Ok(found)
}
