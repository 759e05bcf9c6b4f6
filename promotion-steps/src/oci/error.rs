//! Why an OCI read or push failed: one variant per cause, naming the repository, the
//! object and the value, with what to do next.

/// Why talking to an OCI registry failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OciError {
    /// A reference in the step's config cannot be used.
    #[error("invalid `{field}` `{reference}`: {reason}")]
    InvalidReference {
        /// The config field.
        field: &'static str,
        /// The reference as written.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// The registry could not be reached or did not answer in time.
    #[error(
        "registry of `{repo}` unreachable at `{url}`: {reason}; hint: check that it runs and that the reference names it"
    )]
    Unreachable {
        /// `registry/repository`.
        repo: String,
        /// The request URL.
        url: String,
        /// The innermost cause (`timed out`, `connection refused`).
        reason: String,
    },
    /// The registry wants credentials, or refused the ones given.
    #[error(
        "authentication failed for `{repo}`: {detail}; hint: add or fix a Credential of type `{kind}` whose `repoURL` is `{repo}`"
    )]
    AuthFailed {
        /// `registry/repository`.
        repo: String,
        /// What happened (never a secret).
        detail: String,
        /// The Credential type looked for (`image`, or `helm` for `oci://`).
        kind: &'static str,
    },
    /// The registry answered an unexpected status.
    #[error("{operation} `{repo}` failed with HTTP {status}{detail}{hint}")]
    Status {
        /// What Dray asked (`fetch the manifest of`).
        operation: String,
        /// `registry/repository[:tag]`.
        repo: String,
        /// The status.
        status: u16,
        /// The registry's own error code and message, if it sent one.
        detail: String,
        /// A hint for the status.
        hint: &'static str,
    },
    /// The answer cannot be used (not JSON, no such layer, an unsupported media type).
    #[error("invalid answer to {operation} `{repo}`: {reason}")]
    InvalidResponse {
        /// What Dray asked.
        operation: String,
        /// `registry/repository[:tag]`.
        repo: String,
        /// What is wrong.
        reason: String,
    },
    /// Content does not hash to the digest that names it.
    #[error(
        "{what} of `{repo}` hashes to `{got}`, not `{expected}`; the registry or something between serves altered content, so nothing was kept"
    )]
    DigestMismatch {
        /// `the manifest`, `blob sha256:…`.
        what: String,
        /// `registry/repository`.
        repo: String,
        /// The digest that names it.
        expected: String,
        /// What the content hashes to.
        got: String,
    },
    /// A blob goes on past the size its descriptor gives.
    #[error(
        "{what} of `{repo}` is longer than the {size} bytes its manifest says; the registry or something between serves altered content, so nothing was kept"
    )]
    LongerThanDescribed {
        /// `blob sha256:…`.
        what: String,
        /// `registry/repository`.
        repo: String,
        /// The size the descriptor gives.
        size: u64,
    },
    /// Content is larger than the step allows.
    #[error("{what} of `{repo}` is larger than {limit} MiB, the most {step} handles; hint: {hint}")]
    TooLarge {
        /// `the manifest`, `the layer sha256:…`.
        what: String,
        /// `registry/repository`.
        repo: String,
        /// The limit in MiB.
        limit: u64,
        /// The step (`oci-download`).
        step: &'static str,
        /// What to do.
        hint: &'static str,
    },
    /// A local file could not be written.
    #[error("cannot write `{path}`: {reason}")]
    Io {
        /// The path, relative to the work directory.
        path: String,
        /// The cause.
        reason: String,
    },
}

impl OciError {
    /// A later attempt may succeed without any change (network, 5xx, 429).
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Io { .. } => true,
            Self::Status { status, .. } => crate::is_transient_status(*status),
            _ => false,
        }
    }

    /// The step outcome: `Errored` (the engine may retry) when retryable, else `Failed`.
    pub(crate) fn outcome(&self) -> crate::StepOutcome {
        if self.is_retryable() {
            crate::StepOutcome::errored(self.to_string())
        } else {
            crate::StepOutcome::failed(self.to_string())
        }
    }
}
