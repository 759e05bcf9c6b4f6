//! Rejecting Freight by hand (`dray freight reject`): a person with `reject` on the Freight
//! takes it out of circulation for one Stage (`--stage`) or everywhere; it becomes
//! unavailable there ([`super::availability`] says `rejected by <user>: <reason>`), so
//! promote refuses it and auto-promotion passes it over, until `dray freight unreject`.
//!
//! Freight itself is never changed: the rejection is kept in its status, beside its
//! approvals and verifications, and only this module writes it.

use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey, Verb};
use crate::store::{Store, StoredObject, modify_status};

use super::door::Authorizer;
use super::lever::{LeverError, required_reason};

/// What an unreject did.
#[derive(Debug, Clone)]
pub struct Unrejected {
    /// The Freight as stored now.
    pub freight: StoredObject,
    /// Whether there was a rejection to lift.
    pub lifted: bool,
}

/// Checks `who` may `reject` Freight `id` of `project` and that it (and `stage`) exist.
async fn checked(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    id: &str,
    stage: Option<&str>,
) -> Result<ObjectKey, LeverError> {
    who.authorize(store, Verb::Reject, Kind::Freight.plural(), project, id)
        .await?;
    let key = ObjectKey::namespaced(Kind::Freight, project, id);
    if store.get(&key).await?.is_none() {
        return Err(LeverError::NoFreight {
            project: project.to_owned(),
            freight: id.to_owned(),
        });
    }
    if let Some(stage) = stage {
        let stage_key = ObjectKey::namespaced(Kind::Stage, project, stage);
        if store.get(&stage_key).await?.is_none() {
            return Err(LeverError::NoStage {
                project: project.to_owned(),
                stage: stage.to_owned(),
            });
        }
    }
    Ok(key)
}

/// Rejects Freight `id` for `stage` (or everywhere, without one) as `who`, for `reason`;
/// returns the Freight as stored.
pub async fn reject(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    id: &str,
    stage: Option<&str>,
    reason: &str,
) -> Result<StoredObject, LeverError> {
    let key = checked(store, who, project, id, stage).await?;
    let reason = required_reason(reason, || format!("rejecting Freight `{id}`"))?;
    let rejection = json!({
        "by": who.actor().name(),
        "reason": reason,
        "rejectedAt": jiff::Timestamp::now().to_string(),
    });
    let written = modify_status(store, &key, |_, status| {
        match stage {
            Some(stage) => status["rejectedFor"][stage] = rejection.clone(),
            None => status["rejected"] = rejection.clone(),
        }
        Ok(true)
    })
    .await?;
    match written {
        Some(written) => Ok(written),
        None => Err(LeverError::NoFreight {
            project: project.to_owned(),
            freight: id.to_owned(),
        }),
    }
}

/// Lifts the rejection of Freight `id` for `stage` — or, without one, every rejection it
/// has (everywhere and per Stage) — as `who` (who needs `reject` on it).
pub async fn unreject(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    id: &str,
    stage: Option<&str>,
) -> Result<Unrejected, LeverError> {
    let key = checked(store, who, project, id, stage).await?;
    let mut lifted = false;
    let written = modify_status(store, &key, |_, status| {
        let Some(map) = status.as_object_mut() else {
            return Ok(false);
        };
        lifted = match stage {
            Some(stage) => {
                let per_stage = map.get_mut("rejectedFor").and_then(Value::as_object_mut);
                let removed = per_stage.and_then(|m| m.remove(stage)).is_some();
                if map
                    .get("rejectedFor")
                    .and_then(Value::as_object)
                    .is_some_and(serde_json::Map::is_empty)
                {
                    map.remove("rejectedFor");
                }
                removed
            }
            None => {
                let everywhere = map.remove("rejected").is_some_and(|r| !r.is_null());
                let per_stage = map
                    .remove("rejectedFor")
                    .and_then(|r| r.as_object().map(|m| !m.is_empty()))
                    .unwrap_or(false);
                everywhere || per_stage
            }
        };
        Ok(lifted)
    })
    .await?;
    let freight = match written {
        Some(written) => written,
        None => store
            .get(&key)
            .await?
            .ok_or_else(|| LeverError::NoFreight {
                project: project.to_owned(),
                freight: id.to_owned(),
            })?,
    };
    Ok(Unrejected { freight, lifted })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::{API_VERSION, Freight, Stage};
    use crate::pipeline::availability::availability;
    use crate::pipeline::door::tests::Allowed;
    use crate::store::SqliteStore;

    async fn world() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        for object in [
            json!({"apiVersion": API_VERSION, "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "prod", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                                  "sources": {"direct": true}}]}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "dev", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                                  "sources": {"direct": true}}]}}),
            json!({"apiVersion": API_VERSION, "kind": "Freight",
                "metadata": {"name": "f1", "namespace": "demo"},
                "alias": "one", "origin": {"kind": "Warehouse", "name": "app"},
                "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}]}),
        ] {
            store.create(object).await.unwrap();
        }
        (dir, store)
    }

    async fn reasons(store: &dyn Store, stage: &str) -> Vec<String> {
        let get = |kind, name: &str| ObjectKey::namespaced(kind, "demo", name);
        let stage: Stage = store
            .get(&get(Kind::Stage, stage))
            .await
            .unwrap()
            .unwrap()
            .to_typed()
            .unwrap();
        let freight: Freight = store
            .get(&get(Kind::Freight, "f1"))
            .await
            .unwrap()
            .unwrap()
            .to_typed()
            .unwrap();
        availability(&stage, &freight, jiff::Timestamp::now())
            .reasons
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[tokio::test]
    async fn a_rejection_for_a_stage_gates_there_only_until_it_is_lifted() {
        let (_dir, store) = world().await;
        let store = store.as_ref();
        let ann = Allowed::person("ann");
        reject(store, &ann, "demo", "f1", Some("prod"), " bad build\n")
            .await
            .unwrap();
        assert_eq!(
            reasons(store, "prod").await,
            ["rejected by ann: bad build (for Stage `prod`)"]
        );
        assert!(reasons(store, "dev").await.is_empty());
        let lifted = unreject(store, &ann, "demo", "f1", Some("prod"))
            .await
            .unwrap();
        assert!(lifted.lifted);
        assert!(reasons(store, "prod").await.is_empty());
        let again = unreject(store, &ann, "demo", "f1", Some("prod"))
            .await
            .unwrap();
        assert!(!again.lifted, "nothing left to lift");
    }

    #[tokio::test]
    async fn a_rejection_everywhere_gates_every_stage_and_needs_a_reason() {
        let (_dir, store) = world().await;
        let store = store.as_ref();
        let ann = Allowed::person("ann");
        let error = reject(store, &ann, "demo", "f1", None, "  ")
            .await
            .unwrap_err();
        assert!(matches!(error, LeverError::NoReason { .. }), "{error}");
        reject(store, &ann, "demo", "f1", None, "CVE-2026-1")
            .await
            .unwrap();
        for stage in ["dev", "prod"] {
            assert_eq!(
                reasons(store, stage).await,
                ["rejected by ann: CVE-2026-1 (everywhere)"]
            );
        }
        assert!(
            unreject(store, &ann, "demo", "f1", None)
                .await
                .unwrap()
                .lifted
        );
        assert!(reasons(store, "prod").await.is_empty());
        let missing = reject(store, &ann, "demo", "nope", None, "x")
            .await
            .unwrap_err();
        assert!(matches!(missing, LeverError::NoFreight { .. }), "{missing}");
        let no_stage = reject(store, &ann, "demo", "f1", Some("qa"), "x")
            .await
            .unwrap_err();
        assert!(matches!(no_stage, LeverError::NoStage { .. }), "{no_stage}");
    }
}
