//! The untyped view of a resource that the store, the loader and the server pass around:
//! its identity ([`ObjectKey`]) and its whole JSON body.

use std::fmt;

use super::Kind;

/// The identity of a resource: kind, project (namespace) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The kind.
    pub kind: Kind,
    /// The project, for namespaced kinds; `None` for Projects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// A key for a namespaced kind.
    pub fn namespaced(kind: Kind, namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    /// A key for a cluster-scoped kind (a Project).
    pub fn cluster(kind: Kind, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: None,
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ObjectKey {
    /// `Stage demo/dev`, or `Project demo`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}
