//! The resource verbs as the API server carries them out: get, list (selectors, tables),
//! create (generateName, uid, timestamps, generation, NamespaceLifecycle), update and patch
//! (resourceVersion preconditions → 409, the status subresource, generation bumps, merge /
//! JSON / strategic patches, server-side apply), delete (preconditions, finalizers) and
//! deletecollection; admission and `dryRun=All` on every write.
//!
//! It owns what a write does to an object; storage ordering is [`super::store`]'s.

use serde_json::{Value, json};

use super::admission::{self, Operation};
use super::managed::{self, Writer};
use super::patch::{self, PatchType};
use super::routes::Call;
use super::state::{Inner, Shared};
use super::status::{ApiError, Cause};
use super::store::ObjKey;
use super::{objects, reviews, schema, selector, table};

/// A verb's answer: HTTP code, body and `Warning` texts.
pub(crate) type Outcome = Result<(u16, Value, Vec<String>), ApiError>;

fn key(call: &Call, name: &str) -> ObjKey {
    ObjKey {
        group: call.target.ty.group.clone(),
        plural: call.target.ty.plural.clone(),
        namespace: call.target.namespace.clone(),
        name: name.to_owned(),
    }
}

/// The field manager of a non-apply write: `fieldManager`, else the User-Agent's product.
fn manager(call: &Call) -> String {
    if let Some(manager) = call.param("fieldManager") {
        return manager.to_owned();
    }
    let agent = call.header(axum::http::header::USER_AGENT);
    match agent.split('/').next() {
        Some(product) if !product.is_empty() => product.to_owned(),
        _ => "unknown".to_owned(),
    }
}

fn not_found(call: &Call) -> ApiError {
    ApiError::not_found(
        &call.target.ty.group,
        &call.target.ty.plural,
        &call.target.name,
    )
}

pub(crate) fn get(shared: &Shared, call: &Call) -> Outcome {
    let inner = shared.lock();
    let object = inner
        .store
        .get(&key(call, &call.target.name))
        .ok_or_else(|| not_found(call))?;
    let object = objects::typed(&call.target.ty, object.clone());
    if table::wants_table(call.header(axum::http::header::ACCEPT)) {
        return Ok((
            200,
            table::table(&call.target.ty, &[object], inner.store.revision()),
            Vec::new(),
        ));
    }
    Ok((200, object, Vec::new()))
}

pub(crate) fn list(shared: &Shared, call: &Call) -> Outcome {
    let labels = selector::LabelSelector::parse(call.param("labelSelector").unwrap_or_default())?;
    let fields = selector::FieldSelector::parse(call.param("fieldSelector").unwrap_or_default())?;
    let inner = shared.lock();
    if call.param("resourceVersionMatch") == Some("Exact")
        && let Some(rv) = call
            .param("resourceVersion")
            .and_then(|rv| rv.parse::<u64>().ok())
        && let Err(gone) = inner.store.check_not_compacted(rv)
    {
        return Err(ApiError::expired(gone.0, gone.1));
    }
    let namespace = (!call.target.namespace.is_empty()).then_some(call.target.namespace.as_str());
    let ty = &call.target.ty;
    let items: Vec<Value> = inner
        .store
        .list(&ty.group, &ty.plural, namespace)
        .into_iter()
        .filter(|object| labels.matches(&object["metadata"]["labels"]) && fields.matches(object))
        .map(|object| objects::typed(ty, object.clone()))
        .collect();
    let limit = call
        .param("limit")
        .and_then(|limit| limit.parse::<usize>().ok());
    let page = super::paging::page(
        items,
        limit,
        call.param("continue"),
        inner.store.revision(),
        inner.store.compacted(),
    )?;
    let mut metadata = json!({"resourceVersion": page.rv.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(page.remaining);
    }
    if table::wants_table(call.header(axum::http::header::ACCEPT)) {
        let mut table = table::table(ty, &page.items, page.rv);
        table["metadata"] = metadata;
        return Ok((200, table, Vec::new()));
    }
    Ok((
        200,
        json!({
            "kind": format!("{}List", ty.kind),
            "apiVersion": ty.api_version(),
            "metadata": metadata,
            "items": page.items,
        }),
        Vec::new(),
    ))
}

/// Checks a new or changed object against its CRD schema (pruning unknown fields), and
/// the `fieldValidation` directive for what was pruned.
fn validate(call: &Call, object: &mut Value) -> Result<Vec<String>, ApiError> {
    let ty = &call.target.ty;
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut causes = objects::check_name(&name);
    let mut warnings = Vec::new();
    if let Some(schema) = &ty.schema {
        let checked = schema::check(object, schema);
        if !checked.unknown.is_empty() {
            let texts: Vec<String> = checked
                .unknown
                .iter()
                .map(|path| format!("unknown field {path:?}"))
                .collect();
            match call.param("fieldValidation") {
                Some("Strict") => {
                    return Err(ApiError::bad_request(format!(
                        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
                        ty.kind,
                        ty.version,
                        ty.kind,
                        texts.join(", ")
                    )));
                }
                Some("Ignore") => {}
                _ => warnings.extend(texts),
            }
        }
        causes.extend(checked.causes);
    }
    if ty.plural == "customresourcedefinitions" {
        causes.extend(objects::check_crd(object));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&ty.group, &ty.kind, &name, &causes));
    }
    Ok(warnings)
}

fn parse_object(call: &Call) -> Result<Value, ApiError> {
    let object = patch::parse_body(&call.body, false)?;
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    }
    objects::check_type(&call.target.ty, &object)?;
    Ok(object)
}

pub(crate) async fn create(shared: &Shared, call: &Call) -> Outcome {
    let body = parse_object(call)?;
    match call.target.ty.plural.as_str() {
        "tokenreviews" => {
            return Ok((
                201,
                reviews::token_review(&shared.lock(), &body),
                Vec::new(),
            ));
        }
        "subjectaccessreviews" => {
            return Ok((
                201,
                reviews::subject_access_review(&shared.lock(), &body),
                Vec::new(),
            ));
        }
        "selfsubjectaccessreviews" => {
            let mut body = body;
            if !body["spec"].is_object() {
                body["spec"] = json!({});
            }
            body["spec"]["user"] = json!(call.user.username);
            body["spec"]["groups"] = json!(call.user.groups);
            body["spec"]["uid"] = json!(call.user.uid);
            let mut review = reviews::subject_access_review(&shared.lock(), &body);
            review["kind"] = json!("SelfSubjectAccessReview");
            return Ok((201, review, Vec::new()));
        }
        _ => {}
    }
    create_object(shared, call, body, Writer::Update(manager(call))).await
}

async fn create_object(shared: &Shared, call: &Call, mut object: Value, writer: Writer) -> Outcome {
    let ty = &call.target.ty;
    if ty.namespaced {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !namespace.is_empty() && namespace != call.target.namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        object["metadata"]["namespace"] = json!(call.target.namespace);
    } else if let Some(metadata) = object["metadata"].as_object_mut() {
        // A cluster-scoped object has no namespace, whatever the body says.
        metadata.remove("namespace");
    }
    let name = objects::name_for_create(&mut object).ok_or_else(|| {
        ApiError::invalid(
            &ty.group,
            &ty.kind,
            "",
            &[Cause {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        )
    })?;
    let warnings = {
        let inner = shared.lock();
        check_namespace(&inner, call)?;
        objects::prepare_create(ty, &mut object);
        validate(call, &mut object)?
    };
    let mut warnings = warnings;
    warnings.extend(admission::review(shared, call, Operation::Create, Some(&object), None).await?);
    let mut inner = shared.lock();
    if call.dry_run() {
        if inner.store.get(&key(call, &name)).is_some() {
            return Err(ApiError::already_exists(&ty.group, &ty.plural, &name));
        }
        return Ok((201, objects::typed(ty, object), warnings));
    }
    check_namespace(&inner, call)?;
    let object_key = key(call, &name);
    if inner.store.get(&object_key).is_some() {
        return Err(ApiError::already_exists(&ty.group, &ty.plural, &name));
    }
    let stored = inner.store.put(object_key.clone(), object);
    managed::record(
        inner.owners.entry(object_key).or_default(),
        None,
        &stored,
        &writer,
        true,
    );
    if ty.plural == "customresourcedefinitions" {
        inner.refresh_types();
    }
    Ok((201, objects::typed(ty, stored), warnings))
}

fn check_namespace(inner: &Inner, call: &Call) -> Result<(), ApiError> {
    if !call.target.ty.namespaced {
        return Ok(());
    }
    let namespace = ObjKey {
        group: String::new(),
        plural: "namespaces".into(),
        namespace: String::new(),
        name: call.target.namespace.clone(),
    };
    match inner.store.get(&namespace) {
        None => Err(ApiError::not_found(
            "",
            "namespaces",
            &call.target.namespace,
        )),
        Some(ns) if !ns["metadata"]["deletionTimestamp"].is_null() => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                super::status::qualified(&call.target.ty.group, &call.target.ty.plural),
                call.target.name,
                call.target.namespace
            ),
            None,
        )),
        Some(_) => Ok(()),
    }
}

pub(crate) async fn update(shared: &Shared, call: &Call) -> Outcome {
    let body = parse_object(call)?;
    let body_name = body["metadata"]["name"].as_str().unwrap_or_default();
    if !body_name.is_empty() && body_name != call.target.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            call.target.name
        )));
    }
    let current = current(shared, call)?;
    let wanted_rv = body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if !wanted_rv.is_empty()
        && wanted_rv
            != current["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
    {
        return Err(conflict(call));
    }
    write_update(shared, call, current, body, Writer::Update(manager(call))).await
}

fn current(shared: &Shared, call: &Call) -> Result<Value, ApiError> {
    shared
        .lock()
        .store
        .get(&key(call, &call.target.name))
        .cloned()
        .ok_or_else(|| not_found(call))
}

fn conflict(call: &Call) -> ApiError {
    ApiError::conflict(
        &call.target.ty.group,
        &call.target.ty.plural,
        &call.target.name,
    )
}

/// Turns `body` into the next version of `current` (status subresource rules, generation)
/// and writes it after admission, unless nothing changed.
async fn write_update(
    shared: &Shared,
    call: &Call,
    current: Value,
    body: Value,
    writer: Writer,
) -> Outcome {
    let ty = &call.target.ty;
    let mut next = objects::next_version(ty, &call.target.subresource, &current, body);
    let mut warnings = if call.target.subresource.is_empty() || ty.schema.is_some() {
        validate(call, &mut next)?
    } else {
        Vec::new()
    };
    if ty.plural == "customresourcedefinitions" {
        objects::establish_crd(&mut next);
    }
    objects::bump_generation(ty, &current, &mut next);
    if objects::same(&current, &next) {
        return Ok((200, objects::typed(ty, current), warnings));
    }
    warnings.extend(
        admission::review(shared, call, Operation::Update, Some(&next), Some(&current)).await?,
    );
    if call.dry_run() {
        return Ok((200, objects::typed(ty, next), warnings));
    }
    let mut inner = shared.lock();
    let object_key = key(call, &call.target.name);
    let still = inner
        .store
        .get(&object_key)
        .map(|object| object["metadata"]["resourceVersion"].clone());
    if still.as_ref() != Some(&current["metadata"]["resourceVersion"]) {
        return Err(if still.is_none() {
            not_found(call)
        } else {
            conflict(call)
        });
    }
    let finished = !next["metadata"]["deletionTimestamp"].is_null()
        && next["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
    let stored = if finished {
        inner.owners.remove(&object_key);
        inner.applied.retain(|(key, _), _| *key != object_key);
        let removed = inner.store.remove_as(&object_key, next).unwrap_or_default();
        super::gc::collect(&mut inner.store, &removed, false);
        removed
    } else {
        let stored = inner.store.put(object_key.clone(), next);
        let force = call.flag("force");
        managed::record(
            inner.owners.entry(object_key).or_default(),
            Some(&current),
            &stored,
            &writer,
            force,
        );
        stored
    };
    if ty.plural == "customresourcedefinitions" {
        inner.refresh_types();
    }
    Ok((200, objects::typed(ty, stored), warnings))
}

pub(crate) async fn patch(shared: &Shared, call: &Call) -> Outcome {
    let content_type = call.header(axum::http::header::CONTENT_TYPE).to_owned();
    let kind = PatchType::from_content_type(&content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(&content_type))?;
    if kind == PatchType::Strategic && call.target.ty.custom {
        return Err(ApiError::unsupported_media_type(&content_type));
    }
    let patch_doc = patch::parse_body(&call.body, kind == PatchType::Apply)?;
    if kind == PatchType::Apply {
        return apply(shared, call, patch_doc).await;
    }
    let current = current(shared, call)?;
    let patched = patch::apply_patch(&current, kind, &patch_doc)?;
    objects::check_shape(&call.target.ty, &patched)?;
    if patched["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
        return Err(conflict(call));
    }
    write_update(
        shared,
        call,
        current,
        patched,
        Writer::Update(manager(call)),
    )
    .await
}

/// Server-side apply (`application/apply-patch+yaml`): creates or merges the applied
/// configuration, remembering it per field manager.
async fn apply(shared: &Shared, call: &Call, applied: Value) -> Outcome {
    let Some(manager) = call.param("fieldManager").map(str::to_owned) else {
        return Err(ApiError::bad_request(
            "PATCH /apply requires fieldManager: fieldManager is required for apply requests",
        ));
    };
    objects::check_type(&call.target.ty, &applied)?;
    let object_key = key(call, &call.target.name);
    // The status subresource keeps its own applied configuration per manager.
    let manager = if call.target.subresource.is_empty() {
        manager
    } else {
        format!("{manager}/{}", call.target.subresource)
    };
    let (existing, previous, owners) = {
        let inner = shared.lock();
        let existing = inner.store.get(&object_key).cloned();
        (
            existing,
            inner
                .applied
                .get(&(object_key.clone(), manager.clone()))
                .cloned(),
            inner.owners.get(&object_key).cloned().unwrap_or_default(),
        )
    };
    let remember = |shared: &Shared| {
        if !call.dry_run() {
            shared
                .lock()
                .applied
                .insert((object_key.clone(), manager.clone()), applied.clone());
        }
    };
    let writer = Writer::Apply {
        manager: manager.clone(),
        applied: applied.clone(),
    };
    let Some(current) = existing else {
        if !call.target.subresource.is_empty() {
            return Err(not_found(call));
        }
        let mut object = applied.clone();
        object["metadata"]["name"] = json!(call.target.name);
        objects::set_managed(
            &mut object,
            &manager,
            &call.target.ty.api_version(),
            &applied,
        );
        let outcome = create_object(shared, call, object, writer).await?;
        remember(shared);
        return Ok((201, outcome.1, outcome.2));
    };
    let sole_owner = |path: &str| {
        owners
            .get(path)
            .is_none_or(|set| set.iter().all(|owner| *owner == manager))
    };
    let mut merged = patch::server_side_apply(&current, previous.as_ref(), &applied, &sole_owner);
    if !call.flag("force") {
        // Conflicts are judged on what the apply would store (defaults included).
        let mut next = merged.clone();
        if let Some(schema) = &call.target.ty.schema {
            schema::check(&mut next, schema);
        }
        let inner = shared.lock();
        managed::conflicts(
            inner.owners.get(&object_key),
            &current,
            &next,
            &applied,
            &manager,
            &call.target.ty.api_version(),
        )?;
    }
    merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    objects::set_managed(
        &mut merged,
        &manager,
        &call.target.ty.api_version(),
        &applied,
    );
    let outcome = write_update(shared, call, current, merged, writer).await?;
    remember(shared);
    Ok(outcome)
}

pub(crate) async fn delete(shared: &Shared, call: &Call) -> Outcome {
    let options = if call.body.is_empty() {
        json!({})
    } else {
        patch::parse_body(&call.body, false)?
    };
    let ty = &call.target.ty;
    let current = current(shared, call)?;
    let pre = &options["preconditions"];
    if let Some(rv) = pre["resourceVersion"].as_str() {
        let actual = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if rv != actual {
            return Err(ApiError::precondition_failed(
                &ty.group,
                &ty.plural,
                &call.target.name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(uid) = pre["uid"].as_str() {
        let actual = current["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != actual {
            return Err(ApiError::precondition_failed(
                &ty.group,
                &ty.plural,
                &call.target.name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    let dry_run = call.dry_run()
        || options["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    let warnings = admission::review(shared, call, Operation::Delete, None, Some(&current)).await?;
    let has_finalizers = current["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if dry_run {
        return Ok((200, objects::typed(ty, current), warnings));
    }
    let mut inner = shared.lock();
    let object_key = key(call, &call.target.name);
    let Some(now) = inner.store.get(&object_key).cloned() else {
        return Err(not_found(call));
    };
    if has_finalizers {
        if !now["metadata"]["deletionTimestamp"].is_null() {
            return Ok((202, objects::typed(ty, now), warnings));
        }
        let mut marked = now;
        marked["metadata"]["deletionTimestamp"] = json!(objects::now());
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        let stored = inner.store.put(object_key, marked);
        return Ok((202, objects::typed(ty, stored), warnings));
    }
    if ty.group.is_empty() && ty.plural == "namespaces" {
        let contained: Vec<ObjKey> = inner.store.keys_in_namespace(&call.target.name);
        for contained in contained {
            inner.store.remove(&contained);
        }
    }
    inner.owners.remove(&object_key);
    inner.applied.retain(|(key, _), _| *key != object_key);
    let removed = inner.store.remove(&object_key).unwrap_or_default();
    let orphan = options["propagationPolicy"] == "Orphan" || options["orphanDependents"] == true;
    super::gc::collect(&mut inner.store, &removed, orphan);
    if ty.plural == "customresourcedefinitions" {
        // Deleting a CRD deletes its custom objects.
        let group = removed["spec"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let plural = removed["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for (contained, _) in inner.store.all(&group, &plural) {
            inner.store.remove(&contained);
        }
        inner.refresh_types();
    }
    Ok((200, objects::typed(ty, removed), warnings))
}

pub(crate) async fn delete_collection(shared: &Shared, call: &Call) -> Outcome {
    let labels = selector::LabelSelector::parse(call.param("labelSelector").unwrap_or_default())?;
    let ty = &call.target.ty;
    let mut inner = shared.lock();
    let namespace = (!call.target.namespace.is_empty()).then_some(call.target.namespace.as_str());
    let doomed: Vec<Value> = inner
        .store
        .list(&ty.group, &ty.plural, namespace)
        .into_iter()
        .filter(|object| labels.matches(&object["metadata"]["labels"]))
        .cloned()
        .collect();
    let mut items = Vec::new();
    for object in doomed {
        let object_key = ObjKey {
            group: ty.group.clone(),
            plural: ty.plural.clone(),
            namespace: object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        if !call.dry_run()
            && let Some(removed) = inner.store.remove(&object_key)
        {
            items.push(objects::typed(ty, removed));
        }
    }
    let rv = inner.store.revision().to_string();
    Ok((
        200,
        json!({"kind": format!("{}List", ty.kind), "apiVersion": ty.api_version(), "metadata": {"resourceVersion": rv}, "items": items}),
        Vec::new(),
    ))
}
