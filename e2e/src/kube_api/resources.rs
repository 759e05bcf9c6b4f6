//! The kinds the double serves: built-ins (a fixed table) and custom resources (one per
//! served version of each stored, established CustomResourceDefinition), with what
//! discovery, OpenAPI, validation and tables need to know about each.
//!
//! It owns the type table; it stores no objects.

use serde_json::Value;

/// One served resource (group, version, plural) and what the server knows about it.
#[derive(Debug, Clone)]
pub(crate) struct ResourceType {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    /// Has a `/status` subresource (status written only there).
    pub(crate) status_subresource: bool,
    /// Only `create` (TokenReview, SubjectAccessReview).
    pub(crate) create_only: bool,
    /// The structural schema (`openAPIV3Schema`) of a custom resource.
    pub(crate) schema: Option<Value>,
    /// `additionalPrinterColumns` of a custom resource.
    pub(crate) printer_columns: Vec<Value>,
    /// A custom resource (merge patch only, schema validation, pruning).
    pub(crate) custom: bool,
}

impl ResourceType {
    fn builtin(group: &str, plural: &str, kind: &str, namespaced: bool, short: &[&str]) -> Self {
        Self {
            group: group.to_owned(),
            version: "v1".to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_lowercase(),
            kind: kind.to_owned(),
            namespaced,
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            categories: Vec::new(),
            status_subresource: false,
            create_only: false,
            schema: None,
            printer_columns: Vec::new(),
            custom: false,
        }
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    fn in_all(mut self) -> Self {
        self.categories = vec!["all".to_owned()];
        self
    }

    fn create_only(mut self) -> Self {
        self.create_only = true;
        self
    }

    /// `apps/v1`, or `v1` for the core group.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The verbs discovery lists for the main resource.
    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else {
            vec![
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }
}

/// The built-in kinds, stored generically.
pub(crate) fn builtins() -> Vec<ResourceType> {
    let b = ResourceType::builtin;
    vec![
        b("", "namespaces", "Namespace", false, &["ns"]).with_status(),
        b("", "secrets", "Secret", true, &[]),
        b("", "configmaps", "ConfigMap", true, &["cm"]),
        b("", "serviceaccounts", "ServiceAccount", true, &["sa"]),
        b("", "services", "Service", true, &["svc"])
            .with_status()
            .in_all(),
        b("", "events", "Event", true, &["ev"]),
        b("events.k8s.io", "events", "Event", true, &[]),
        b("apps", "deployments", "Deployment", true, &["deploy"])
            .with_status()
            .in_all(),
        b(
            "policy",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
        )
        .with_status(),
        b("coordination.k8s.io", "leases", "Lease", true, &[]),
        b("rbac.authorization.k8s.io", "roles", "Role", true, &[]),
        b(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
        ),
        b(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
        ),
        b(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
        ),
        b(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            false,
            &[],
        ),
        b("networking.k8s.io", "ingresses", "Ingress", true, &["ing"]).with_status(),
        b(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
        )
        .with_status(),
        b(
            "authentication.k8s.io",
            "tokenreviews",
            "TokenReview",
            false,
            &[],
        )
        .create_only(),
        b(
            "authorization.k8s.io",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
            &[],
        )
        .create_only(),
        b(
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
            &[],
        )
        .create_only(),
    ]
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The resource types of one CustomResourceDefinition (one per served version).
pub(crate) fn from_crd(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        names["plural"].as_str(),
        names["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    versions
        .iter()
        .filter(|version| version["served"].as_bool().unwrap_or(false))
        .filter_map(|version| {
            Some(ResourceType {
                group: group.to_owned(),
                version: version["name"].as_str()?.to_owned(),
                plural: plural.to_owned(),
                singular: names["singular"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| kind.to_lowercase()),
                kind: kind.to_owned(),
                namespaced: spec["scope"].as_str() != Some("Cluster"),
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                status_subresource: version["subresources"]["status"].is_object(),
                create_only: false,
                schema: version["schema"]["openAPIV3Schema"]
                    .is_object()
                    .then(|| version["schema"]["openAPIV3Schema"].clone()),
                printer_columns: version["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                custom: true,
            })
        })
        .collect()
}

/// All the served types: built-ins and those of the established `crds`.
pub(crate) fn served(crds: &[Value]) -> Vec<ResourceType> {
    let mut types = builtins();
    for crd in crds {
        let established = crd["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established && crd["metadata"]["deletionTimestamp"].is_null() {
            types.extend(from_crd(crd));
        }
    }
    types
}
