//! What the webhook answers: the pipeline's one door ([`crate::pipeline::door`]) put to a
//! write that came to the Kubernetes API instead of Dray's. Dray's own ServiceAccount
//! writes freely (it is the promote path and the controllers); for everyone else:
//!
//! - a `CREATE` of a Promotion is denied: a document that brings its own steps, vars or
//!   `dray.dev/` keys, or lacks `spec.stage`/`spec.freight`, with the door's own refusal;
//!   any other with the promote path's reasons (no such Stage or Freight, the gates'
//!   refusals) and how to promote instead;
//! - an `UPDATE` of the `status` sub-resource of any `dray.dev` object is denied (the
//!   door's "written by Dray's controllers only");
//! - an `UPDATE` of a Promotion that changes its `spec` is denied (the door's "cannot be
//!   changed once it is requested"); labels and annotations may change;
//! - every other write is put to the same door as Dray's API: a `CREATE` or `UPDATE` of
//!   Freight is denied (minted, never written), a `DELETE` of a Promotion that has not
//!   ended is denied; the rest is allowed (the chart's webhook configuration sends only
//!   Promotions, Freight and status writes);
//! - a `DELETE` of anything but a Promotion is put to the API's own delete rule
//!   ([`crate::pipeline::in_use::check_delete`]): Freight a Stage holds or an unfinished
//!   Promotion names, a Warehouse, Stage, (cluster) PromotionTask, AnalysisTemplate or Role
//!   that others still use, a Warehouse with Freight, a Project that holds objects;
//! - except that the namespace and garbage-collector controllers delete freely: their
//!   deletes follow a namespace or owner someone already deleted.
//!
//! The words are the pipeline's; this module only maps a review onto its operations.

use serde_json::Value;

use crate::api::{Freight, Kind, ObjectKey, Stage};
use crate::pipeline::door::{self, Admitted, Operation, PromoteRequest, Refusal, RefusalKind};
use crate::pipeline::in_use;
use crate::pipeline::request::{PromoteError, refusals};
use crate::store::{Store, StoreError};

use super::review::{AdmissionOperation, AdmissionRequest, Denial};

/// The API group whose writes the webhook judges.
const GROUP: &str = "dray.dev";

/// The cluster's own controllers whose deletes follow a delete someone already made (a
/// namespace, an owner): refusing them would leave a project's namespace `Terminating` for
/// good. The chart leaves them out with `matchConditions` too; this holds where an older
/// API server ignores those.
const CLUSTER_CLEANUP: [&str; 2] = [
    "system:serviceaccount:kube-system:namespace-controller",
    "system:serviceaccount:kube-system:generic-garbage-collector",
];

/// The denial for `request`, or none when it may go ahead.
pub async fn judge(
    store: &dyn Store,
    service_account: &str,
    request: &AdmissionRequest,
) -> Result<Option<Denial>, StoreError> {
    let username = request.user_info.username.as_str();
    if request.resource.group != GROUP
        || username == service_account
        || (request.operation == AdmissionOperation::Delete && CLUSTER_CLEANUP.contains(&username))
    {
        return Ok(None);
    }
    let Some(kind) = Kind::from_manifest_kind(&request.kind.kind) else {
        return Ok(None);
    };
    let name = object_name(request);
    let key = match request.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(namespace) => ObjectKey::namespaced(kind, namespace, &name),
        None => ObjectKey::cluster(kind, &name),
    };
    let sub_resource = request.sub_resource.as_deref().filter(|s| !s.is_empty());
    match (request.operation, sub_resource, kind) {
        (AdmissionOperation::Update, Some("status"), _) => Ok(refused(door::admit(
            Operation::WriteStatus,
            &key,
            None,
            None,
        ))),
        (_, Some(_), _) => Ok(None),
        (AdmissionOperation::Create, None, Kind::Promotion) => {
            match door::admit(Operation::Create, &key, request.object.clone(), None) {
                Ok(Admitted::Promote(promote)) => {
                    not_through_the_promote_path(store, &key, &promote)
                        .await
                        .map(Some)
                }
                other => Ok(refused(other)),
            }
        }
        (AdmissionOperation::Update, None, Kind::Promotion)
            if spec(&request.object) == spec(&request.old_object) =>
        {
            // Labels and annotations of a Promotion may change; its spec may not.
            Ok(None)
        }
        (AdmissionOperation::Delete, None, kind) if kind != Kind::Promotion => {
            // The API's delete route asks the same question, in the same words.
            Ok(in_use::check_delete(store, &key)
                .await?
                .err()
                .map(|refused| Denial {
                    code: 409,
                    reason: "Conflict",
                    message: format!("{refused}; hint: {}", refused.hint()),
                }))
        }
        (operation, None, _) => {
            let operation = match operation {
                AdmissionOperation::Create => Operation::Create,
                AdmissionOperation::Update => Operation::Update,
                AdmissionOperation::Delete => Operation::Delete,
                AdmissionOperation::Connect => return Ok(None),
            };
            // Everything else asks the same door as Dray's API: Freight is minted, never
            // written; a Promotion is changed by no one and deleted only once it ended.
            Ok(refused(door::admit(
                operation,
                &key,
                request.object.clone(),
                request.old_object.as_ref(),
            )))
        }
    }
}

fn spec(object: &Option<Value>) -> Option<Value> {
    object.as_ref().and_then(|o| o.get("spec")).cloned()
}

fn object_name(request: &AdmissionRequest) -> String {
    request
        .object
        .as_ref()
        .and_then(|o| o.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(&request.name)
        .to_owned()
}

/// The door's refusal as a denial; none when the door let it through.
fn refused(admitted: Result<Admitted, Refusal>) -> Option<Denial> {
    let refusal = admitted.err()?;
    let (code, reason) = match refusal.kind() {
        RefusalKind::Invalid => (422, "Invalid"),
        RefusalKind::NotAllowed => (405, "MethodNotAllowed"),
        RefusalKind::Conflict => (409, "Conflict"),
    };
    Some(Denial {
        code,
        reason,
        message: format!("{refusal}; hint: {}", refusal.hint()),
    })
}

/// A well-formed Promotion created through the Kubernetes API: denied, saying what the
/// promote path would say about it now (no such Stage or Freight, the gates' reasons) and
/// how to go through it.
async fn not_through_the_promote_path(
    store: &dyn Store,
    key: &ObjectKey,
    promote: &PromoteRequest,
) -> Result<Denial, StoreError> {
    let project = key.namespace.clone().unwrap_or_default();
    let freight_id = promote.freight.clone().unwrap_or_default();
    let stage_key = ObjectKey::namespaced(Kind::Stage, &project, &promote.stage);
    let freight_key = ObjectKey::namespaced(Kind::Freight, &project, &freight_id);
    let stage = store.get(&stage_key).await?;
    let freight = store.get(&freight_key).await?;
    let blocked = match (stage, freight) {
        (None, _) => Some(PromoteError::NoStage {
            project: project.clone(),
            stage: promote.stage.clone(),
            meant: None,
        }),
        (_, None) => Some(PromoteError::NoFreight {
            project: project.clone(),
            what: format!("with id `{freight_id}`"),
            meant: None,
        }),
        (Some(stage), Some(freight)) => {
            let stage: Stage = stage.to_typed()?;
            let freight: Freight = freight.to_typed()?;
            let reasons = refusals(&stage, &freight);
            (!reasons.is_empty()).then(|| PromoteError::Refused {
                project: project.clone(),
                freight: freight.spec.alias.clone(),
                stage: promote.stage.clone(),
                reasons,
            })
        }
    };
    let now = blocked
        .map(|error| format!(" (and now it would refuse: {error})"))
        .unwrap_or_default();
    Ok(Denial {
        code: 403,
        reason: "Forbidden",
        message: format!(
            "Promotion `{}` cannot be created through the Kubernetes API: a Promotion comes into being only through Dray's promote path, which checks `promote` on stages/{stage}, the Stage's gates and windows, and takes its steps from the Stage's promotionTemplate{now}; hint: run `dray promote --stage {stage} --freight {freight_id} -p {project}`, or use the web UI's Promote button",
            key.name,
            stage = promote.stage,
        ),
    })
}
