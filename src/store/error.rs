//! The store's errors, one variant per way a read or write can fail.

use crate::api::ObjectKey;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The resource does not exist.
    #[error("{0} not found")]
    NotFound(ObjectKey),
    /// A create named a resource that exists.
    #[error("{0} already exists")]
    AlreadyExists(ObjectKey),
    /// An update or delete named a stale `resourceVersion`.
    #[error(
        "{key} was changed by someone else (you had resourceVersion {expected}, it is now {actual}); read it again and retry"
    )]
    Conflict {
        /// The resource.
        key: ObjectKey,
        /// The version the caller had.
        expected: u64,
        /// The version stored now.
        actual: u64,
    },
    /// The object handed to the store is not a well-formed resource.
    #[error("invalid object: {0}")]
    Invalid(String),
    /// The database could not be opened or migrated.
    #[error("cannot open the data directory `{path}`: {cause}")]
    Open {
        /// The data directory or database file.
        path: String,
        /// What went wrong.
        cause: String,
    },
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] rusqlite::Error),
    /// The Kubernetes API (the Kubernetes store's backend) refused or failed a request.
    #[error("the Kubernetes API answered {code} to {what}: {message}{}", hint_for(*code))]
    Kubernetes {
        /// What was asked, e.g. `create Stage demo/dev`.
        what: String,
        /// The HTTP status (0 when no answer came).
        code: u16,
        /// The API's message.
        message: String,
    },
    /// Anything else that should not happen.
    #[error("internal store error: {0}")]
    Internal(String),
}

/// What to do about a Kubernetes refusal.
fn hint_for(code: u16) -> &'static str {
    match code {
        401 => {
            "; Dray's credentials for the cluster are not accepted: check its ServiceAccount token or --kubeconfig"
        }
        403 => {
            "; grant Dray's ServiceAccount the rights in deploy/helm/dray (its ClusterRole `dray`)"
        }
        0 => "; the API server could not be reached: check --kubeconfig or the in-cluster address",
        _ => "",
    }
}
