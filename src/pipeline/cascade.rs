//! What deleting a Project or a Warehouse with `cascade` removes with it, and the removal as
//! one store commit (all or nothing).
//!
//! - A Project: every resource in it (Stages, Warehouses, Freight, Promotions,
//!   PromotionTasks, AnalysisTemplates, VerificationRuns, Credentials, Roles, RoleBindings,
//!   its ProjectConfig), then the Project. Refused while a Promotion in it is `Running`
//!   (its steps are pushing somewhere): abort it or let it end first.
//! - A Warehouse: its Freight, then the Warehouse. Refused while Stages subscribe to it
//!   (cascading never removes a Stage that names another resource): change or delete
//!   those Stages first. Freight of the Warehouse that an unfinished Promotion names
//!   cannot be left without its Stage subscribing, so no Freight it removes is held.

use crate::api::{Kind, ObjectKey, PromotionPhase, Stage};
use crate::store::{Store, StoreError, StoredObject, Write};

use super::promotion_phase;

/// What a cascading delete removes: `removes` in order, `root` last among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The Project or Warehouse asked for.
    pub root: ObjectKey,
    /// Everything removed, dependents first and `root` last.
    pub removes: Vec<ObjectKey>,
}

/// Why a cascading delete is refused.
#[derive(Debug, thiserror::Error)]
pub enum CascadeError {
    /// Only Projects and Warehouses cascade.
    #[error(
        "{key} has nothing to cascade to: only projects and warehouses are deleted with --cascade"
    )]
    NotCascading {
        /// What was asked for.
        key: ObjectKey,
    },
    /// The root does not exist.
    #[error("{key} does not exist")]
    NotFound {
        /// What was asked for.
        key: ObjectKey,
    },
    /// Promotions of the project are running.
    #[error("project `{project}` has running promotions: {}", promotions.join(", "))]
    Running {
        /// The project.
        project: String,
        /// The running promotions.
        promotions: Vec<String>,
    },
    /// Stages subscribe to the Warehouse.
    #[error("Warehouse `{warehouse}` in project `{project}` is subscribed to by stages {}", stages.join(", "))]
    Subscribed {
        /// The project.
        project: String,
        /// The Warehouse.
        warehouse: String,
        /// The subscribing Stages.
        stages: Vec<String>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CascadeError {
    /// What to do next.
    pub fn hint(&self) -> String {
        match self {
            CascadeError::NotCascading { .. } => "leave out --cascade".into(),
            CascadeError::NotFound { .. } => "run `dray get` to see what exists".into(),
            CascadeError::Running { promotions, .. } => format!(
                "abort them (`dray abort promotion {}`) or wait for them to end, then delete again",
                promotions.first().map_or("NAME", String::as_str)
            ),
            CascadeError::Subscribed { stages, .. } => format!(
                "delete or change those stages first (`dray delete stage {}`), then delete the warehouse again",
                stages.first().map_or("NAME", String::as_str)
            ),
            CascadeError::Store(_) => "try again".into(),
        }
    }
}

/// What deleting `root` with cascade would remove, or why it may not.
pub async fn plan(store: &dyn Store, root: &ObjectKey) -> Result<Plan, CascadeError> {
    if store.get(root).await?.is_none() {
        return Err(CascadeError::NotFound { key: root.clone() });
    }
    let mut removes = Vec::new();
    match (root.kind, root.namespace.as_deref()) {
        (Kind::Project, None) => {
            let project = root.name.as_str();
            let mut running = Vec::new();
            for kind in Kind::ALL.into_iter().filter(|k| k.is_namespaced()) {
                for object in store.list(kind, Some(project)).await? {
                    if kind == Kind::Promotion
                        && promotion_phase(&object.object) == PromotionPhase::Running
                    {
                        running.push(object.key.name.clone());
                    }
                    removes.push(object.key);
                }
            }
            if !running.is_empty() {
                return Err(CascadeError::Running {
                    project: project.to_owned(),
                    promotions: running,
                });
            }
        }
        (Kind::Warehouse, Some(project)) => {
            let mut stages = Vec::new();
            for stage in store.list(Kind::Stage, Some(project)).await? {
                let spec = stage.to_typed::<Stage>()?.spec;
                if spec
                    .requested_freight
                    .iter()
                    .any(|r| r.origin.name == root.name)
                {
                    stages.push(stage.key.name.clone());
                }
            }
            if !stages.is_empty() {
                return Err(CascadeError::Subscribed {
                    project: project.to_owned(),
                    warehouse: root.name.clone(),
                    stages,
                });
            }
            removes.extend(
                owned_freight(&store.list(Kind::Freight, Some(project)).await?, &root.name)
                    .map(|f| f.key.clone()),
            );
        }
        _ => return Err(CascadeError::NotCascading { key: root.clone() }),
    }
    removes.push(root.clone());
    Ok(Plan {
        root: root.clone(),
        removes,
    })
}

/// The Freight of `warehouse` among `freight`.
pub fn owned_freight<'a>(
    freight: &'a [StoredObject],
    warehouse: &'a str,
) -> impl Iterator<Item = &'a StoredObject> {
    freight.iter().filter(move |f| {
        f.object
            .pointer("/origin/name")
            .and_then(serde_json::Value::as_str)
            == Some(warehouse)
    })
}

/// Removes everything `plan` names in one commit: all of it or, when anything changed
/// meanwhile (a resource already gone), none.
pub async fn execute(store: &dyn Store, plan: &Plan) -> Result<Vec<StoredObject>, StoreError> {
    let writes = plan
        .removes
        .iter()
        .map(|key| Write::Delete {
            key: key.clone(),
            resource_version: None,
        })
        .collect();
    store.commit(writes).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use serde_json::json;

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let objects = [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse", "metadata": {"name": "app", "namespace": "demo"},
                   "spec": {"subscriptions": [{"image": {"repoURL": "reg/app"}}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse", "metadata": {"name": "lib", "namespace": "demo"},
                   "spec": {"subscriptions": [{"image": {"repoURL": "reg/lib"}}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage", "metadata": {"name": "dev", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"}, "sources": {"direct": true}}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight", "metadata": {"name": "f1", "namespace": "demo"},
                   "alias": "one", "origin": {"kind": "Warehouse", "name": "app"}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight", "metadata": {"name": "f2", "namespace": "demo"},
                   "alias": "two", "origin": {"kind": "Warehouse", "name": "lib"}}),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        (store, dir)
    }

    #[tokio::test]
    async fn a_project_goes_with_everything_in_it_in_one_commit() {
        let (store, _dir) = store().await;
        let root = ObjectKey::cluster(Kind::Project, "demo");
        let plan = plan(&store, &root).await.unwrap();
        assert_eq!(plan.removes.len(), 6, "{plan:?}");
        assert_eq!(plan.removes.last(), Some(&root));
        execute(&store, &plan).await.unwrap();
        for kind in [Kind::Stage, Kind::Warehouse, Kind::Freight] {
            assert!(store.list(kind, Some("demo")).await.unwrap().is_empty());
        }
        assert!(store.get(&root).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_warehouse_goes_with_its_freight_unless_stages_subscribe() {
        let (store, _dir) = store().await;
        let app = ObjectKey::namespaced(Kind::Warehouse, "demo", "app");
        let refused = plan(&store, &app).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Warehouse `app` in project `demo` is subscribed to by stages dev"
        );
        assert!(refused.hint().contains("dray delete stage dev"));
        let lib = ObjectKey::namespaced(Kind::Warehouse, "demo", "lib");
        let plan = plan(&store, &lib).await.unwrap();
        assert_eq!(
            plan.removes,
            [
                ObjectKey::namespaced(Kind::Freight, "demo", "f2"),
                lib.clone()
            ]
        );
        execute(&store, &plan).await.unwrap();
        let left = store.list(Kind::Freight, Some("demo")).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].key.name, "f1");
    }

    #[tokio::test]
    async fn a_running_promotion_stops_a_project_cascade() {
        let (store, _dir) = store().await;
        store
            .create(
                json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
                "metadata": {"name": "dev-one-1", "namespace": "demo"},
                "spec": {"stage": "dev", "freight": "f1"}}),
            )
            .await
            .unwrap();
        let key = ObjectKey::namespaced(Kind::Promotion, "demo", "dev-one-1");
        store
            .update_status(&key, json!({"phase": "Running"}), None)
            .await
            .unwrap();
        let root = ObjectKey::cluster(Kind::Project, "demo");
        let refused = plan(&store, &root).await.unwrap_err();
        assert!(matches!(refused, CascadeError::Running { .. }), "{refused}");
        assert!(refused.hint().contains("dray abort promotion dev-one-1"));
    }
}
