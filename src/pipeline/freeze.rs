//! Stopping the line by hand (`dray freeze`, `dray unfreeze`): a person with `freeze` on a
//! Stage (or on the project, for every Stage) stops promotions into it until the freeze is
//! lifted or its `until` passes. While it holds:
//! - the promote path refuses with `frozen by <user>: <reason>` — unless the caller has
//!   `override` and says why, which is kept on the Promotion and in its commit's
//!   `Dray-Override` trailer ([`super::request::request_promotion`]);
//! - auto-promotion leaves the Stage alone ([`super::auto`]);
//! - a running promotion that has not written yet waits before its first writing step
//!   (the engine reads the same [`Freeze`] from the Stage's and the Project's status).
//!
//! The freeze is kept in `status.freeze` of the Stage or of the Project; only this module
//! writes it. An expired freeze gates nothing and is shown as expired.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::{Freeze, Kind, ObjectKey, Project, Scope, Stage, Verb, active_freezes};
use crate::store::{Store, StoreError, modify_status};

use super::availability::Reason;
use super::door::Authorizer;
use super::lever::{LeverError, required_reason};

/// Where a freeze is kept: the Stage's or the Project's key, and the resource `freeze` is
/// authorized on.
fn target(project: &str, stage: Option<&str>) -> (ObjectKey, &'static str, String) {
    match stage {
        Some(stage) => (
            ObjectKey::namespaced(Kind::Stage, project, stage),
            Kind::Stage.plural(),
            stage.to_owned(),
        ),
        None => (
            ObjectKey::cluster(Kind::Project, project),
            Kind::Project.plural(),
            project.to_owned(),
        ),
    }
}

async fn checked(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    stage: Option<&str>,
) -> Result<ObjectKey, LeverError> {
    let (key, resource, name) = target(project, stage);
    who.authorize(store, Verb::Freeze, resource, project, &name)
        .await?;
    if store.get(&key).await?.is_none() {
        return Err(match stage {
            Some(stage) => LeverError::NoStage {
                project: project.to_owned(),
                stage: stage.to_owned(),
            },
            None => LeverError::NoProject {
                project: project.to_owned(),
            },
        });
    }
    Ok(key)
}

/// Freezes `stage` (or, without one, the whole project) as `who`, for `reason`, until
/// `until` (or until lifted); returns the freeze as stored.
pub async fn freeze(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    stage: Option<&str>,
    reason: &str,
    until: Option<Timestamp>,
) -> Result<Freeze, LeverError> {
    let key = checked(store, who, project, stage).await?;
    let scope = scope_of(project, stage);
    let reason = required_reason(reason, || format!("freezing {scope}"))?;
    let mut freeze = json!({
        "by": who.actor().name(),
        "reason": reason,
        "since": Timestamp::now().to_string(),
    });
    if let Some(until) = until {
        freeze["until"] = json!(until.to_string());
    }
    modify_status(store, &key, |_, status| {
        status["freeze"] = freeze.clone();
        Ok(true)
    })
    .await?;
    serde_json::from_value(freeze).map_err(|e| StoreError::Internal(e.to_string()).into())
}

/// Lifts the freeze of `stage` (or of the project) as `who`; returns the freeze there
/// was (`None` when there was none).
pub async fn unfreeze(
    store: &dyn Store,
    who: &dyn Authorizer,
    project: &str,
    stage: Option<&str>,
) -> Result<Option<Freeze>, LeverError> {
    let key = checked(store, who, project, stage).await?;
    let mut before = None;
    modify_status(store, &key, |_, status| {
        let Some(map) = status.as_object_mut() else {
            return Ok(false);
        };
        before = map.remove("freeze").filter(|f| !f.is_null());
        Ok(before.is_some())
    })
    .await?;
    Ok(before.and_then(|f: Value| serde_json::from_value(f).ok()))
}

fn scope_of(project: &str, stage: Option<&str>) -> Scope {
    match stage {
        Some(stage) => Scope::Stage(stage.to_owned()),
        None => Scope::Project(project.to_owned()),
    }
}

/// The freezes that gate promotions into `stage` at `now` (see [`active_freezes`]).
pub fn active(project: Option<&Project>, stage: &Stage, now: Timestamp) -> Vec<(Scope, Freeze)> {
    active_freezes(project, stage, now)
}

/// [`active`] as the gates' reasons.
pub fn reasons(project: Option<&Project>, stage: &Stage, now: Timestamp) -> Vec<Reason> {
    active(project, stage, now)
        .into_iter()
        .map(|(scope, f)| Reason::Frozen {
            by: f.by,
            reason: f.reason,
            until: f.until.map(|u| u.0),
            scope,
        })
        .collect()
}

/// The Project `project` as stored, if it is.
pub async fn load_project(store: &dyn Store, project: &str) -> Result<Option<Project>, StoreError> {
    let key = ObjectKey::cluster(Kind::Project, project);
    Ok(store.get(&key).await?.and_then(|p| p.to_typed().ok()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::API_VERSION;
    use crate::pipeline::door::tests::Allowed;
    use crate::store::SqliteStore;

    async fn world() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        for object in [
            json!({"apiVersion": API_VERSION, "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "prod", "namespace": "demo"}, "spec": {"requestedFreight": []}}),
            json!({"apiVersion": API_VERSION, "kind": "Stage",
                   "metadata": {"name": "dev", "namespace": "demo"}, "spec": {"requestedFreight": []}}),
        ] {
            store.create(object).await.unwrap();
        }
        (dir, store)
    }

    async fn said(store: &dyn Store, stage: &str, now: Timestamp) -> Vec<String> {
        let key = ObjectKey::namespaced(Kind::Stage, "demo", stage);
        let stage: Stage = store.get(&key).await.unwrap().unwrap().to_typed().unwrap();
        let project = load_project(store, "demo").await.unwrap();
        reasons(project.as_ref(), &stage, now)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[tokio::test]
    async fn a_stage_freeze_gates_that_stage_until_lifted() {
        let (_dir, store) = world().await;
        let store = store.as_ref();
        let ann = Allowed::person("ann");
        let now = Timestamp::now();
        freeze(store, &ann, "demo", Some("prod"), "incident 42", None)
            .await
            .unwrap();
        assert_eq!(
            said(store, "prod", now).await,
            ["frozen by ann: incident 42 (Stage `prod`)"]
        );
        assert!(said(store, "dev", now).await.is_empty());
        let lifted = unfreeze(store, &ann, "demo", Some("prod")).await.unwrap();
        assert_eq!(lifted.map(|f| f.by).as_deref(), Some("ann"));
        assert!(said(store, "prod", now).await.is_empty());
        assert_eq!(
            unfreeze(store, &ann, "demo", Some("prod")).await.unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn a_project_freeze_gates_every_stage_and_expires() {
        let (_dir, store) = world().await;
        let store = store.as_ref();
        let ann = Allowed::person("ann");
        let until: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        freeze(store, &ann, "demo", None, "release week", Some(until))
            .await
            .unwrap();
        let before: Timestamp = "2029-12-31T23:00:00Z".parse().unwrap();
        for stage in ["dev", "prod"] {
            assert_eq!(
                said(store, stage, before).await,
                ["frozen by ann: release week (project `demo`, until 2030-01-01T00:00:00Z)"]
            );
            assert!(said(store, stage, until).await.is_empty(), "expired");
        }
        let error = freeze(store, &ann, "demo", None, "", None)
            .await
            .unwrap_err();
        assert!(matches!(error, LeverError::NoReason { .. }), "{error}");
        let error = freeze(store, &ann, "demo", Some("qa"), "x", None)
            .await
            .unwrap_err();
        assert!(matches!(error, LeverError::NoStage { .. }), "{error}");
    }
}
