//! Who still refers to a resource about to be deleted: the Stages that request a Warehouse,
//! take Freight from a Stage, verify with an AnalysisTemplate or run a (cluster)
//! PromotionTask; the RoleBindings of a Role; what a Project holds. Read by
//! [`super::in_use::check_delete`], the one rule that the API's delete route, `dray delete`
//! and the Kubernetes admission webhook all apply.

use crate::api::{Kind, ObjectKey, RoleBinding, Stage, StageSpec, TaskKind};
use crate::store::{Store, StoreError};

/// Who still refers to `key`, each as it is named in a refusal (`stage \`dev\``); for a
/// Project, how many objects of each kind it holds (`3 stages`).
pub(super) async fn referrers(
    store: &dyn Store,
    key: &ObjectKey,
) -> Result<Vec<String>, StoreError> {
    if key.kind == Kind::ClusterPromotionTask {
        let mut names = Vec::new();
        for stage in store.list(Kind::Stage, None).await? {
            let spec = stage.to_typed::<Stage>()?.spec;
            if uses_task(&spec, TaskKind::Cluster, &key.name) {
                let project = stage.key.namespace.as_deref().unwrap_or_default();
                names.push(format!("stage `{project}/{}`", stage.key.name));
            }
        }
        return Ok(names);
    }
    let Some(project) = key.namespace.as_deref() else {
        if key.kind != Kind::Project {
            return Ok(Vec::new());
        }
        let mut held = Vec::new();
        for kind in Kind::ALL.into_iter().filter(|k| k.is_namespaced()) {
            let count = store.list(kind, Some(&key.name)).await?.len();
            if count > 0 {
                held.push(format!("{count} {}", kind.plural()));
            }
        }
        return Ok(held);
    };
    let mut names = Vec::new();
    if key.kind == Kind::Role {
        for binding in store.list(Kind::RoleBinding, Some(project)).await? {
            if binding.to_typed::<RoleBinding>()?.spec.role_ref.name == key.name {
                names.push(format!("rolebinding `{}`", binding.key.name));
            }
        }
    }
    for stage in store.list(Kind::Stage, Some(project)).await? {
        let spec = stage.to_typed::<Stage>()?.spec;
        let name = key.name.as_str();
        let refers = match key.kind {
            Kind::Warehouse => spec.requested_freight.iter().any(|r| r.origin.name == name),
            Kind::Stage => spec
                .requested_freight
                .iter()
                .any(|r| r.sources.stages.iter().any(|s| s == name)),
            Kind::AnalysisTemplate => spec
                .verification
                .iter()
                .flat_map(|v| &v.analysis_templates)
                .any(|t| t.name == name),
            Kind::PromotionTask => uses_task(&spec, TaskKind::Project, name),
            _ => false,
        };
        if refers {
            names.push(format!("stage `{}`", stage.key.name));
        }
    }
    Ok(names)
}

/// Whether a Stage's template runs the task `name` of `kind`.
fn uses_task(spec: &StageSpec, kind: TaskKind, name: &str) -> bool {
    spec.promotion_template
        .iter()
        .flat_map(|t| &t.spec.steps)
        .filter_map(|s| s.task.as_ref())
        .any(|t| t.name == name && t.task_kind() == Some(kind))
}
