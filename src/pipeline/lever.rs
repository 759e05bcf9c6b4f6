//! What can go wrong pulling a lever by hand — rejecting Freight ([`super::reject`]) or
//! stopping the line ([`super::freeze`]): the caller may not, the thing named does not
//! exist, or no reason was given (a lever is always on the record with its reason).

use crate::store::StoreError;

use super::door::AuthorizeError;

/// Why a reject, unreject, freeze or unfreeze did nothing.
#[derive(Debug, thiserror::Error)]
pub enum LeverError {
    /// The one who asks may not.
    #[error("{message}")]
    Forbidden {
        /// Names user, verb and resource.
        message: String,
        /// What to do about it.
        hint: String,
    },
    /// The Stage does not exist.
    #[error("Stage `{stage}` does not exist in project `{project}`")]
    NoStage {
        /// The project.
        project: String,
        /// The Stage.
        stage: String,
    },
    /// The Freight does not exist.
    #[error("Freight `{freight}` does not exist in project `{project}`")]
    NoFreight {
        /// The project.
        project: String,
        /// The Freight id.
        freight: String,
    },
    /// The project does not exist.
    #[error("project `{project}` does not exist")]
    NoProject {
        /// The project.
        project: String,
    },
    /// No reason was given.
    #[error("{what} needs a reason: it is kept on the record and shown in every refusal")]
    NoReason {
        /// `rejecting Freight `f1``, `freezing Stage `prod``.
        what: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AuthorizeError> for LeverError {
    fn from(error: AuthorizeError) -> Self {
        match error {
            AuthorizeError::Denied { message, hint } => LeverError::Forbidden { message, hint },
            AuthorizeError::Store(error) => LeverError::Store(error),
        }
    }
}

/// `reason` trimmed, or [`LeverError::NoReason`] naming `what` when it is empty.
pub(super) fn required_reason(
    reason: &str,
    what: impl FnOnce() -> String,
) -> Result<String, LeverError> {
    let reason = reason.trim().replace(['\r', '\n'], " ");
    if reason.is_empty() {
        return Err(LeverError::NoReason { what: what() });
    }
    Ok(reason)
}
