//! The list of kinds Dray knows, with their names in every spelling the CLI, the API
//! and manifests use.

use std::fmt;

/// One of Dray's resource kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// [`crate::api::Project`], cluster-scoped.
    Project,
    /// [`crate::api::ProjectConfig`].
    ProjectConfig,
    /// [`crate::api::Credential`].
    Credential,
    /// [`crate::api::Role`].
    Role,
    /// [`crate::api::RoleBinding`].
    RoleBinding,
    /// [`crate::api::Warehouse`].
    Warehouse,
    /// [`crate::api::Freight`].
    Freight,
    /// [`crate::api::Stage`].
    Stage,
    /// [`crate::api::PromotionTask`].
    PromotionTask,
    /// [`crate::api::ClusterPromotionTask`], cluster-scoped.
    ClusterPromotionTask,
    /// [`crate::api::Promotion`].
    Promotion,
    /// [`crate::api::AnalysisTemplate`].
    AnalysisTemplate,
}

impl Kind {
    /// Every kind, in the order in which `dray apply` writes them (dependencies first).
    pub const ALL: [Kind; 12] = [
        Kind::Project,
        Kind::ProjectConfig,
        Kind::Credential,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Warehouse,
        Kind::PromotionTask,
        Kind::ClusterPromotionTask,
        Kind::AnalysisTemplate,
        Kind::Stage,
        Kind::Freight,
        Kind::Promotion,
    ];

    /// The `kind` field in manifests, e.g. `PromotionTask`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Project => "Project",
            Kind::ProjectConfig => "ProjectConfig",
            Kind::Credential => "Credential",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
            Kind::Warehouse => "Warehouse",
            Kind::Freight => "Freight",
            Kind::Stage => "Stage",
            Kind::PromotionTask => "PromotionTask",
            Kind::ClusterPromotionTask => "ClusterPromotionTask",
            Kind::Promotion => "Promotion",
            Kind::AnalysisTemplate => "AnalysisTemplate",
        }
    }

    /// The plural used in URLs and by the CLI, e.g. `promotiontasks`.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Project => "projects",
            Kind::ProjectConfig => "projectconfigs",
            Kind::Credential => "credentials",
            Kind::Role => "roles",
            Kind::RoleBinding => "rolebindings",
            Kind::Warehouse => "warehouses",
            Kind::Freight => "freight",
            Kind::Stage => "stages",
            Kind::PromotionTask => "promotiontasks",
            Kind::ClusterPromotionTask => "clusterpromotiontasks",
            Kind::Promotion => "promotions",
            Kind::AnalysisTemplate => "analysistemplates",
        }
    }

    /// The short name the CLI (and `kubectl`, from the CRD) accepts, e.g. `wh`.
    pub fn short_name(self) -> Option<&'static str> {
        match self {
            Kind::Warehouse => Some("wh"),
            Kind::AnalysisTemplate => Some("at"),
            _ => None,
        }
    }

    /// Whether resources of this kind live inside a project.
    pub fn is_namespaced(self) -> bool {
        !matches!(self, Kind::Project | Kind::ClusterPromotionTask)
    }

    /// Whether the kind's fields sit under `spec` (Freight, Role and RoleBinding keep them
    /// at the top level).
    pub fn has_spec(self) -> bool {
        !matches!(self, Kind::Freight | Kind::Role | Kind::RoleBinding)
    }

    /// Parses the `kind` field of a manifest (exact spelling).
    pub fn from_manifest_kind(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// Parses what a user types: plural, singular, kind name or short name, any case
    /// (`stages`, `stage`, `Stage`, `promotiontask`, `at`).
    pub fn from_user_input(text: &str) -> Option<Kind> {
        let lower = text.to_ascii_lowercase();
        Kind::ALL.into_iter().find(|k| {
            lower == k.plural()
                || k.short_name() == Some(lower.as_str())
                || lower == k.as_str().to_ascii_lowercase()
                || lower.strip_suffix('s') == Some(&k.as_str().to_ascii_lowercase())
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_spellings_resolve() {
        assert_eq!(Kind::from_user_input("stages"), Some(Kind::Stage));
        assert_eq!(Kind::from_user_input("Stage"), Some(Kind::Stage));
        assert_eq!(Kind::from_user_input("freight"), Some(Kind::Freight));
        assert_eq!(
            Kind::from_user_input("PromotionTasks"),
            Some(Kind::PromotionTask)
        );
        assert_eq!(
            Kind::from_user_input("projectconfig"),
            Some(Kind::ProjectConfig)
        );
        assert_eq!(Kind::from_user_input("stagez"), None);
        assert_eq!(
            Kind::from_user_input("analysistemplates"),
            Some(Kind::AnalysisTemplate)
        );
        assert_eq!(
            Kind::from_user_input("AnalysisTemplate"),
            Some(Kind::AnalysisTemplate)
        );
        assert_eq!(Kind::from_user_input("at"), Some(Kind::AnalysisTemplate));
        assert_eq!(Kind::from_user_input("wh"), Some(Kind::Warehouse));
        assert_eq!(Kind::from_user_input("roles"), Some(Kind::Role));
        assert_eq!(
            Kind::from_user_input("rolebindings"),
            Some(Kind::RoleBinding)
        );
    }
}
