//! The one door to a Stage, and what a client may write at all.
//!
//! Every hop is gated and on the record only if no way in goes around the gates. This
//! module holds that rule once, for every way in — the promote route and the web UI's
//! Promote button, the generic resource routes, `dray apply`, and (in Kubernetes mode) an
//! admission webhook — so that each of them calls the same code:
//!
//! - **A Promotion comes into being only through
//!   [`request_promotion`](super::request::request_promotion)**, which asks the
//!   [`Authorizer`] for `promote` on `stages/<stage>` (and `override` to pass a closed
//!   window), checks availability, soak, approval and windows, and copies the steps and
//!   vars from the Stage's template. [`admit`] turns a client's Promotion document into such
//!   a [`PromoteRequest`] (its `metadata.name`, `spec.stage`, `spec.freight`) and refuses
//!   one that brings its own steps, vars or `dray.dev/` keys.
//! - A Promotion is never changed by a client (it is aborted: `dray abort`) and is deleted
//!   only once it has ended.
//! - Freight is minted — by a Warehouse's discovery, or assembled by `dray freight
//!   create` — never written as a document, and never changed.
//! - Status is written by Dray's controllers only: a client's status write is refused, and
//!   a status inside a document a client creates is dropped, as the Kubernetes API server
//!   drops it for a kind with a status sub-resource.
//!
//! The actor is never taken from a request: it is [`Authorizer::actor`], the authenticated
//! caller (or auto-promotion), and nothing else.

use async_trait::async_trait;
use serde_json::Value;

use crate::api::{Actor, Kind, ObjectKey, PromotionPhase, Verb, annotations};
use crate::store::{Store, StoreError};

/// What to promote where. Who asks is not part of it: that is the [`Authorizer`]'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromoteRequest {
    /// The Stage.
    pub stage: String,
    /// The Freight, by id.
    pub freight: Option<String>,
    /// The Freight, by alias.
    pub alias: Option<String>,
    /// Promote through a closed promotion window, for this reason (needs `override`).
    pub override_window: Option<String>,
    /// The Promotion's name, when the client chose one (a Promotion document's
    /// `metadata.name`); otherwise Dray names it after the Stage and the Freight.
    pub name: Option<String>,
}

/// Who asks, and what they may do: the authenticated caller of a route, Kubernetes'
/// SubjectAccessReview in Kubernetes mode, or auto-promotion.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// Who asks: recorded as the Promotion's actor and in its commit's `Dray-Actor` trailer.
    fn actor(&self) -> Actor;

    /// The groups the caller's identity carries (an API token's `--group`s, the OIDC groups
    /// claim, Kubernetes' user groups): what a Stage's sign-off `groups` are matched against.
    /// Roles and bindings are not groups. None for auto-promotion.
    fn groups(&self) -> Vec<String> {
        Vec::new()
    }

    /// Ok when they may `verb` the `resource` (a kind's plural) named `name` in `project`.
    async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: &str,
        name: &str,
    ) -> Result<(), AuthorizeError>;
}

/// Why an [`Authorizer`] said no.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// Not allowed; the message names user, verb and resource.
    #[error("{message}")]
    Denied {
        /// ``user `ann` may not promote stages/prod in project `demo` ``.
        message: String,
        /// What to do about it.
        hint: String,
    },
    /// The bindings could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Auto-promotion's authority: the Project's policy asked it to promote, so it may
/// `promote`; it never overrides a window or does anything else.
pub struct AutoPromotion;

#[async_trait]
impl Authorizer for AutoPromotion {
    fn actor(&self) -> Actor {
        Actor::AutoPromotion
    }

    async fn authorize(
        &self,
        _store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: &str,
        name: &str,
    ) -> Result<(), AuthorizeError> {
        if verb == Verb::Promote && resource == Kind::Stage.plural() {
            return Ok(());
        }
        Err(AuthorizeError::Denied {
            message: format!(
                "auto-promotion may not {verb} {resource}/{name} in project `{project}`"
            ),
            hint: "a person with that right must do it".to_owned(),
        })
    }
}

/// What a client asks to do to a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Create it (a POST, or `dray apply` of a new resource).
    Create,
    /// Replace its spec (a PUT, or `dray apply` of a stored resource).
    Update,
    /// Delete it.
    Delete,
    /// Write its status.
    WriteStatus,
}

/// What the door lets through.
#[derive(Debug, Clone, PartialEq)]
pub enum Admitted {
    /// Store this object; a status the client sent is removed.
    Write(Value),
    /// Delete the resource.
    Delete,
    /// Store nothing directly: send this request through the promote path.
    Promote(PromoteRequest),
}

/// Why the door refused a client's write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A Promotion document with its own steps or vars.
    #[error(
        "Promotion `{name}` sets `{field}`: a Promotion's steps and vars come from its Stage's promotionTemplate, never from the request"
    )]
    OwnSteps {
        /// The Promotion.
        name: String,
        /// `spec.steps` or `spec.vars`.
        field: &'static str,
    },
    /// A Promotion document with one of Dray's own keys.
    #[error("Promotion `{name}` sets `{field}`, which only Dray writes")]
    ReservedKey {
        /// The Promotion.
        name: String,
        /// `metadata.annotations.dray.dev/actor`, …
        field: String,
    },
    /// A Promotion document that is not `{stage, freight}`.
    #[error("Promotion `{name}` does not say {missing}")]
    Incomplete {
        /// The Promotion.
        name: String,
        /// `spec.stage`, `spec.freight`.
        missing: &'static str,
    },
    /// A change to a requested Promotion.
    #[error("Promotion `{name}` cannot be changed once it is requested")]
    PromotionUnchangeable {
        /// The Promotion.
        name: String,
    },
    /// Deleting a Promotion that has not ended.
    #[error("Promotion `{name}` is {phase:?}: only a Promotion that has ended can be deleted")]
    PromotionNotEnded {
        /// The Promotion.
        name: String,
        /// Where it is.
        phase: PromotionPhase,
    },
    /// A Freight document.
    #[error(
        "Freight `{name}` cannot be written as a document: Freight is minted by Dray from what its Warehouse discovers"
    )]
    FreightIsMinted {
        /// The Freight.
        name: String,
    },
    /// A change to Freight.
    #[error(
        "Freight `{name}` cannot be changed: it is the immutable record of exact artifact versions"
    )]
    FreightUnchangeable {
        /// The Freight.
        name: String,
    },
    /// A client writing a status.
    #[error("the status of {key} is written by Dray's controllers only")]
    StatusIsDrays {
        /// The resource.
        key: String,
    },
}

/// How a [`Refusal`] is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The document is not acceptable as written (HTTP 422).
    Invalid,
    /// This operation is never allowed to a client (HTTP 405).
    NotAllowed,
    /// Not now, given the resource's state (HTTP 409).
    Conflict,
}

impl Refusal {
    /// What to do instead.
    pub fn hint(&self) -> String {
        match self {
            Refusal::OwnSteps { .. } | Refusal::ReservedKey { .. } => {
                "leave out spec.steps, spec.vars and dray.dev/ keys, or use `dray promote --stage STAGE --alias ALIAS`".to_owned()
            }
            Refusal::Incomplete { .. } => {
                "give spec.stage and spec.freight (the Freight's id), or use `dray promote --stage STAGE --alias ALIAS`".to_owned()
            }
            Refusal::PromotionUnchangeable { name } => format!(
                "to stop it: `dray abort {name}`; to promote other Freight: `dray promote`"
            ),
            Refusal::PromotionNotEnded { name, .. } => {
                format!("abort it first (`dray abort {name}`), then delete it once it has ended")
            }
            Refusal::FreightIsMinted { .. } => {
                "run `dray refresh warehouse NAME` to discover artifacts, or `dray freight create` to assemble Freight by hand".to_owned()
            }
            Refusal::FreightUnchangeable { .. } => {
                "mint new Freight instead (`dray refresh warehouse NAME` or `dray freight create`)".to_owned()
            }
            Refusal::StatusIsDrays { .. } => {
                "change the spec, or act through the routes that gate it: promote, approve, verify, abort, lift the hold".to_owned()
            }
        }
    }

    /// How it is answered.
    pub fn kind(&self) -> RefusalKind {
        match self {
            Refusal::OwnSteps { .. } | Refusal::ReservedKey { .. } | Refusal::Incomplete { .. } => {
                RefusalKind::Invalid
            }
            Refusal::PromotionNotEnded { .. } => RefusalKind::Conflict,
            Refusal::PromotionUnchangeable { .. }
            | Refusal::FreightIsMinted { .. }
            | Refusal::FreightUnchangeable { .. }
            | Refusal::StatusIsDrays { .. } => RefusalKind::NotAllowed,
        }
    }
}

/// Decides what a client's write to `key` becomes. `object` is the document (for creates and
/// updates), `current` the stored resource (for updates and deletes). The caller's own verb
/// on the kind (`create`, `update`, `delete`) is checked before; a [`Admitted::Promote`]
/// is then checked by the promote path.
pub fn admit(
    operation: Operation,
    key: &ObjectKey,
    object: Option<Value>,
    current: Option<&Value>,
) -> Result<Admitted, Refusal> {
    let name = key.name.clone();
    match (key.kind, operation) {
        (_, Operation::WriteStatus) => Err(Refusal::StatusIsDrays {
            key: key.to_string(),
        }),
        (Kind::Promotion, Operation::Create) => {
            promote_request(&name, object.as_ref().unwrap_or(&Value::Null)).map(Admitted::Promote)
        }
        (Kind::Promotion, Operation::Update) => Err(Refusal::PromotionUnchangeable { name }),
        (Kind::Promotion, Operation::Delete) => {
            let phase = current
                .map(super::promotion_phase)
                .unwrap_or(PromotionPhase::Succeeded);
            if phase.is_terminal() {
                Ok(Admitted::Delete)
            } else {
                Err(Refusal::PromotionNotEnded { name, phase })
            }
        }
        (Kind::Freight, Operation::Create) => Err(Refusal::FreightIsMinted { name }),
        (Kind::Freight, Operation::Update) => Err(Refusal::FreightUnchangeable { name }),
        (_, Operation::Delete) => Ok(Admitted::Delete),
        (_, Operation::Create | Operation::Update) => {
            let mut object = object.unwrap_or(Value::Null);
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
            Ok(Admitted::Write(object))
        }
    }
}

/// A client's Promotion document as a request for the promote path.
fn promote_request(name: &str, object: &Value) -> Result<PromoteRequest, Refusal> {
    for (field, pointer) in [("spec.steps", "/spec/steps"), ("spec.vars", "/spec/vars")] {
        let given = object.pointer(pointer);
        if given.is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty())) {
            return Err(Refusal::OwnSteps {
                name: name.to_owned(),
                field,
            });
        }
    }
    for map in ["annotations", "labels"] {
        let keys = object
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object);
        if let Some(reserved) = keys
            .into_iter()
            .flat_map(|m| m.keys())
            .find(|k| annotations::is_reserved(k))
        {
            return Err(Refusal::ReservedKey {
                name: name.to_owned(),
                field: format!("metadata.{map}.{reserved}"),
            });
        }
    }
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let stage = text("/spec/stage").ok_or_else(|| Refusal::Incomplete {
        name: name.to_owned(),
        missing: "spec.stage",
    })?;
    let freight = text("/spec/freight").ok_or_else(|| Refusal::Incomplete {
        name: name.to_owned(),
        missing: "spec.freight",
    })?;
    Ok(PromoteRequest {
        stage,
        freight: Some(freight),
        alias: None,
        override_window: None,
        name: Some(name.to_owned()),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// A person who may do anything: for tests of what happens after authorization.
    pub(crate) struct Allowed(Actor);

    impl Allowed {
        pub(crate) fn person(name: &str) -> Self {
            Allowed(Actor::Person(name.to_owned()))
        }
    }

    #[async_trait]
    impl Authorizer for Allowed {
        fn actor(&self) -> Actor {
            self.0.clone()
        }

        async fn authorize(
            &self,
            _: &dyn Store,
            _: Verb,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<(), AuthorizeError> {
            Ok(())
        }
    }

    fn promotion(spec: Value) -> Value {
        json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
               "metadata": {"name": "p1", "namespace": "demo"}, "spec": spec})
    }

    fn key(kind: Kind) -> ObjectKey {
        ObjectKey::namespaced(kind, "demo", "p1")
    }

    #[test]
    fn a_promotion_document_becomes_a_request_for_the_promote_path() {
        let admitted = admit(
            Operation::Create,
            &key(Kind::Promotion),
            Some(promotion(json!({"stage": "prod", "freight": "f1"}))),
            None,
        );
        assert_eq!(
            admitted,
            Ok(Admitted::Promote(PromoteRequest {
                stage: "prod".into(),
                freight: Some("f1".into()),
                name: Some("p1".into()),
                ..Default::default()
            }))
        );
    }

    #[test]
    fn a_promotion_that_brings_its_own_steps_vars_or_actor_is_refused() {
        let steps = json!({"stage": "prod", "freight": "f1",
                           "steps": [{"uses": "git-push", "config": {"path": "."}}]});
        let vars = json!({"stage": "prod", "freight": "f1", "vars": [{"name": "a", "value": "b"}]});
        for (spec, field) in [(steps, "spec.steps"), (vars, "spec.vars")] {
            let refused = admit(
                Operation::Create,
                &key(Kind::Promotion),
                Some(promotion(spec)),
                None,
            );
            assert_eq!(
                refused,
                Err(Refusal::OwnSteps {
                    name: "p1".into(),
                    field
                })
            );
        }
        let mut forged = promotion(json!({"stage": "prod", "freight": "f1"}));
        forged["metadata"]["annotations"] = json!({"dray.dev/actor": "auditor-favourite"});
        let refused = admit(Operation::Create, &key(Kind::Promotion), Some(forged), None);
        assert_eq!(
            refused,
            Err(Refusal::ReservedKey {
                name: "p1".into(),
                field: "metadata.annotations.dray.dev/actor".into()
            })
        );
    }

    #[test]
    fn promotions_are_never_changed_and_deleted_only_once_ended() {
        let k = key(Kind::Promotion);
        assert!(matches!(
            admit(Operation::Update, &k, Some(promotion(json!({}))), None),
            Err(Refusal::PromotionUnchangeable { .. })
        ));
        let running = json!({"status": {"phase": "Running"}});
        let refused = admit(Operation::Delete, &k, None, Some(&running));
        assert_eq!(refused.unwrap_err().kind(), RefusalKind::Conflict);
        let ended = json!({"status": {"phase": "Failed"}});
        assert_eq!(
            admit(Operation::Delete, &k, None, Some(&ended)),
            Ok(Admitted::Delete)
        );
    }

    #[test]
    fn freight_is_minted_never_written_and_status_is_drays() {
        let freight = key(Kind::Freight);
        let doc = json!({"kind": "Freight", "status": {"verifiedIn": {"staging": {}}}});
        for operation in [Operation::Create, Operation::Update] {
            let refused = admit(operation, &freight, Some(doc.clone()), None).unwrap_err();
            assert_eq!(refused.kind(), RefusalKind::NotAllowed, "{refused}");
        }
        for kind in [Kind::Stage, Kind::Freight, Kind::Promotion, Kind::Warehouse] {
            let refused = admit(Operation::WriteStatus, &key(kind), None, None).unwrap_err();
            assert!(matches!(refused, Refusal::StatusIsDrays { .. }), "{kind:?}");
        }
    }

    #[test]
    fn a_status_in_a_created_document_is_dropped() {
        let stage =
            json!({"kind": "Stage", "spec": {}, "status": {"currentFreight": {"name": "f9"}}});
        let admitted = admit(Operation::Create, &key(Kind::Stage), Some(stage), None);
        assert_eq!(
            admitted,
            Ok(Admitted::Write(json!({"kind": "Stage", "spec": {}})))
        );
    }
}
