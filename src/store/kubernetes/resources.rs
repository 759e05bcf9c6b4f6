//! Dray's kinds as Kubernetes resources: the `ApiResource` of each CRD (group `dray.dev`,
//! version `v1alpha1`), and objects between the API's JSON and [`StoredObject`].

use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

use crate::api::Kind;
use crate::store::{StoreError, StoredObject, key_of, resource_version_of};

/// The API group of Dray's CRDs.
pub(super) const GROUP: &str = "dray.dev";
/// Their version.
pub(super) const VERSION: &str = "v1alpha1";

/// The CRD of a kind, as kube's dynamic API addresses it.
pub(super) fn api_resource(kind: Kind) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: kind.as_str().into(),
        plural: kind.plural().into(),
    }
}

/// Whether the kind's CRD has a `status` subresource (then the API server ignores
/// `status` in writes to the object, and status is written through `/status`).
pub(super) fn has_status_subresource(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::AnalysisTemplate
            | Kind::PromotionTask
            | Kind::ClusterPromotionTask
            | Kind::Role
            | Kind::RoleBinding
    )
}

/// An object as the API returned it, as the store keeps it (its `apiVersion` and `kind`
/// filled in when the API left them out, as list items may).
pub(super) fn stored(kind: Kind, object: &DynamicObject) -> Result<StoredObject, StoreError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| StoreError::Internal(format!("cannot encode a {kind}: {e}")))?;
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "apiVersion".into(),
            Value::String(format!("{GROUP}/{VERSION}")),
        );
        map.insert("kind".into(), Value::String(kind.as_str().into()));
    }
    stored_value(value)
}

/// A JSON object with identity and `resourceVersion`, as the store keeps it.
pub(super) fn stored_value(object: Value) -> Result<StoredObject, StoreError> {
    let key = key_of(&object)?;
    let resource_version = resource_version_of(&object)?.ok_or_else(|| {
        StoreError::Internal(format!("the API returned {key} without a resourceVersion"))
    })?;
    Ok(StoredObject {
        key,
        resource_version,
        object,
    })
}

/// A JSON object as kube's dynamic API sends it.
pub(super) fn dynamic(object: &Value) -> Result<DynamicObject, StoreError> {
    serde_json::from_value(object.clone())
        .map_err(|e| StoreError::Invalid(format!("not a Kubernetes object: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_subresource_is_where_the_crds_declare_it() {
        let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/crds");
        for kind in Kind::ALL {
            let file = format!("{crds}/{GROUP}_{}.yaml", kind.plural());
            let text = std::fs::read_to_string(&file).unwrap();
            assert_eq!(
                text.contains("subresources:"),
                has_status_subresource(kind),
                "{file}"
            );
            assert!(
                text.contains(&format!("plural: {}", kind.plural())),
                "{file}"
            );
        }
    }
}
