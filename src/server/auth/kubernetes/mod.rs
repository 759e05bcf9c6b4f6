//! Kubernetes mode (`dray serve --kubernetes`): who a bearer token stands for and what they
//! may do are asked of the Kubernetes API, as the API server itself asks its webhooks.
//!
//! - [`KubeAuth::review_token`]: a `TokenReview` (`authentication.k8s.io/v1`) of the bearer
//!   token gives the user and groups of the request's [`Caller`](super::Caller). Accepted
//!   reviews are kept for [`REVIEW_TTL`], keyed by the token's SHA-256 (never the token);
//!   refusals are never kept, so a token that was just made works at once.
//! - [`KubeAuth::review_access`]: a `SubjectAccessReview` (`authorization.k8s.io/v1`) with
//!   `resourceAttributes {group: dray.dev, resource: <plural>, namespace: <project>, verb,
//!   name}` answers [`Caller::authorize`](super::Caller::authorize). Answers (yes and no)
//!   are kept for [`ACCESS_TTL`], keyed by user, groups and attributes, so that the web
//!   UI's permission snapshots do not ask again on every page.
//!
//! Dray's verbs are Kubernetes verbs of the same name ([`kubernetes_verb`]): `get`, `list`,
//! `create`, `update`, `delete`, and the custom verbs `promote`, `approve`, `override` and
//! `verify` on `stages`, `abort` on `promotions` (see `docs/decisions.md`, "Kubernetes
//! RBAC verbs"). The chart's ClusterRoles bundle them ([`cluster_role_for`]).
//!
//! This module asks; the refusal's wording stays with `caller`, which says who may not do
//! what and how to bind the role that would allow it.

mod access;
mod cache;
mod review;

use std::sync::Mutex;
use std::time::Duration;

pub use access::{AccessQuestion, Answer, cluster_role_for, kubernetes_verb, rolebinding_hint};
pub use review::Reviewed;

use cache::TtlCache;

/// How long an accepted TokenReview is believed.
pub const REVIEW_TTL: Duration = Duration::from_secs(10);

/// How long a SubjectAccessReview's answer is believed.
pub const ACCESS_TTL: Duration = Duration::from_secs(10);

/// At most this many reviews and answers are kept (each).
const CACHE_CAPACITY: usize = 4096;

/// The API group of Dray's resources, as SubjectAccessReviews name it.
pub const GROUP: &str = "dray.dev";

/// Why Kubernetes could not be asked, or said the token stands for no one.
#[derive(Debug, thiserror::Error)]
pub enum KubeAuthError {
    /// The TokenReview said the token is not valid.
    #[error("Kubernetes did not accept the bearer token ({reason})")]
    Unauthenticated {
        /// The review's `status.error`, or that it was not authenticated.
        reason: String,
    },
    /// The TokenReview could not be made.
    #[error("cannot ask the Kubernetes API who the bearer token stands for (TokenReview): {cause}")]
    TokenReview {
        /// What failed.
        #[source]
        cause: kube::Error,
    },
    /// The SubjectAccessReview could not be made.
    #[error(
        "cannot ask the Kubernetes API whether user `{user}` may {verb} {resource} (SubjectAccessReview): {cause}"
    )]
    AccessReview {
        /// Who was asked about.
        user: String,
        /// The verb.
        verb: String,
        /// `stages/prod`, `promotions`, …
        resource: String,
        /// What failed.
        #[source]
        cause: kube::Error,
    },
}

impl KubeAuthError {
    /// As the store's error for a failed Kubernetes request (a 502 naming what was asked,
    /// the API's answer and what to check), for callers whose errors are store errors.
    pub fn into_store_error(self) -> crate::store::StoreError {
        let what = match &self {
            KubeAuthError::Unauthenticated { .. } | KubeAuthError::TokenReview { .. } => {
                "create a TokenReview".to_owned()
            }
            KubeAuthError::AccessReview {
                user,
                verb,
                resource,
                ..
            } => format!("create a SubjectAccessReview (may `{user}` {verb} {resource})"),
        };
        let (code, message) = match self {
            KubeAuthError::Unauthenticated { reason } => (401, reason),
            KubeAuthError::TokenReview { cause } | KubeAuthError::AccessReview { cause, .. } => {
                match cause {
                    kube::Error::Api(status) => (status.code, status.message),
                    other => (0, other.to_string()),
                }
            }
        };
        crate::store::StoreError::Kubernetes {
            what,
            code,
            message,
        }
    }
}

/// Authentication and authorisation by the Kubernetes API, with short-lived caches.
pub struct KubeAuth {
    client: kube::Client,
    reviews: Mutex<TtlCache<[u8; 32], Reviewed>>,
    answers: Mutex<TtlCache<AccessQuestion, Answer>>,
}

impl KubeAuth {
    /// Asks the API server `client` talks to (in a cluster: `kube::Client::try_default()`,
    /// as Dray's ServiceAccount, which needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`; the chart's ClusterRole `dray` has it).
    pub fn new(client: kube::Client) -> Self {
        KubeAuth {
            client,
            reviews: Mutex::new(TtlCache::new(REVIEW_TTL, CACHE_CAPACITY)),
            answers: Mutex::new(TtlCache::new(ACCESS_TTL, CACHE_CAPACITY)),
        }
    }
}

impl std::fmt::Debug for KubeAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAuth").finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(crate) mod stub;
#[cfg(test)]
mod tests;
