//! Which Rust type is which stored kind: the typed view a cache hands to reconcilers.
//!
//! Every kind is a `kube::CustomResource`, so a reconciler written against [`Resource`]
//! takes the same `Arc<K>` that kube-runtime hands its reconcilers in Kubernetes mode.

use serde::de::DeserializeOwned;

use crate::api::{
    AnalysisTemplate, ClusterPromotionTask, Credential, Freight, Kind, ObjectKey, Project,
    ProjectConfig, Promotion, PromotionTask, Role, RoleBinding, Stage, Warehouse,
};

/// A typed resource kind the runtime can cache and reconcile.
pub trait Resource:
    kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static
{
    /// The stored kind this type reads.
    const KIND: Kind;

    /// The key of one object of this kind.
    fn key_of(&self) -> ObjectKey {
        let meta = self.meta();
        let name = meta.name.clone().unwrap_or_default();
        match &meta.namespace {
            Some(namespace) if Self::KIND.is_namespaced() => {
                ObjectKey::namespaced(Self::KIND, namespace, &name)
            }
            _ => ObjectKey::cluster(Self::KIND, &name),
        }
    }

    /// The project (namespace) of a namespaced object; empty for cluster-scoped ones.
    fn project(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or_default()
    }

    /// The object's name.
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// The store revision of the last write the object saw (`metadata.resourceVersion`).
    fn revision(&self) -> u64 {
        self.meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

macro_rules! resources {
    ($($type:ty => $kind:expr),* $(,)?) => {
        $(impl Resource for $type {
            const KIND: Kind = $kind;
        })*
    };
}

resources! {
    Project => Kind::Project,
    ProjectConfig => Kind::ProjectConfig,
    Credential => Kind::Credential,
    Role => Kind::Role,
    RoleBinding => Kind::RoleBinding,
    Warehouse => Kind::Warehouse,
    Freight => Kind::Freight,
    Stage => Kind::Stage,
    PromotionTask => Kind::PromotionTask,
    ClusterPromotionTask => Kind::ClusterPromotionTask,
    Promotion => Kind::Promotion,
    AnalysisTemplate => Kind::AnalysisTemplate,
}
