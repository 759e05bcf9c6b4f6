//! Typed reads of a resource held as untyped JSON (a stored object's body, a request body,
//! an API answer): its metadata by name, and its `spec` or `status` as the kind's types.
//! Code that holds such a body reads it through [`ResourceBody`] rather than by JSON
//! pointer, so a field's name and type are written once, in the kind's file.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Reads of a resource's JSON body.
pub trait ResourceBody {
    /// `metadata`, when it is an object.
    fn metadata(&self) -> Option<&Map<String, Value>>;

    /// `spec` or `status` (or, for Freight, the whole body) read as `T`; `None` when the
    /// part is absent, an error when it does not match `T`.
    fn part<T: DeserializeOwned>(&self, part: BodyPart) -> Result<Option<T>, serde_json::Error>;

    /// `metadata.name`.
    fn name(&self) -> Option<&str> {
        self.metadata()?.get("name")?.as_str()
    }

    /// `metadata.namespace` (the project).
    fn namespace(&self) -> Option<&str> {
        self.metadata()?.get("namespace")?.as_str()
    }

    /// `metadata.creationTimestamp`, as the store wrote it (RFC 3339, UTC).
    fn creation_timestamp(&self) -> Option<&str> {
        self.metadata()?.get("creationTimestamp")?.as_str()
    }

    /// The label `key` (see [`super::annotations`] for Dray's own keys).
    fn label(&self, key: &str) -> Option<&str> {
        self.metadata()?.get("labels")?.get(key)?.as_str()
    }

    /// Every label (empty when none).
    fn labels(&self) -> std::collections::BTreeMap<String, String> {
        self.metadata()
            .and_then(|m| m.get("labels"))
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default()
    }

    /// `metadata.annotations[key]`, when it is a string.
    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()?.get("annotations")?.get(key)?.as_str()
    }

    /// `spec` as `T`; `None` when absent or not a `T`.
    fn spec<T: DeserializeOwned>(&self) -> Option<T> {
        self.part(BodyPart::Spec).ok().flatten()
    }

    /// `status` as `T`; `None` when absent or not a `T`.
    fn status<T: DeserializeOwned>(&self) -> Option<T> {
        self.part(BodyPart::Status).ok().flatten()
    }
}

/// A part of a resource's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyPart {
    /// `spec`: what its author asked for.
    Spec,
    /// `status`: what Dray's controllers observed.
    Status,
    /// The whole body (for Freight, whose fields sit at the top level).
    Whole,
}

impl ResourceBody for Value {
    fn metadata(&self) -> Option<&Map<String, Value>> {
        self.get("metadata")?.as_object()
    }

    fn part<T: DeserializeOwned>(&self, part: BodyPart) -> Result<Option<T>, serde_json::Error> {
        let value = match part {
            BodyPart::Spec => self.get("spec"),
            BodyPart::Status => self.get("status"),
            BodyPart::Whole => Some(self),
        };
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(value) => T::deserialize(value).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{PromotionPhase, PromotionStatus, annotations};

    #[test]
    fn reads_metadata_and_typed_parts() {
        let object = json!({
            "metadata": {"name": "p1", "namespace": "demo",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {(annotations::STAGE_LABEL): "dev"},
                         "annotations": {(annotations::ACTOR): "ann"}},
            "status": {"phase": "Running"}
        });
        assert_eq!(object.name(), Some("p1"));
        assert_eq!(object.namespace(), Some("demo"));
        assert_eq!(object.creation_timestamp(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(object.label(annotations::STAGE_LABEL), Some("dev"));
        assert_eq!(object.annotation(annotations::ACTOR), Some("ann"));
        assert_eq!(object.annotation(annotations::ABORT), None);
        let status: PromotionStatus = object.status().unwrap();
        assert_eq!(status.phase, PromotionPhase::Running);
        assert_eq!(object.spec::<PromotionStatus>(), None);
        assert!(
            json!({"status": {"phase": 3}})
                .part::<PromotionStatus>(BodyPart::Status)
                .is_err()
        );
    }
}
