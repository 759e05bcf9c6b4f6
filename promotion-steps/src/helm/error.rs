//! Why reading a chart repository or downloading a chart failed: one variant per failed
//! operation, with the repository and the values in backticks and a hint.

/// Why a chart repository could not be read or a chart not be downloaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChartRepoError {
    /// A URL (the subscription's, or one in the index) cannot be used.
    #[error("invalid chart URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server could not be reached.
    #[error(
        "chart repository `{url}` unreachable: {reason}; hint: check that it runs and that \
         `repoURL` names it"
    )]
    Unreachable {
        /// What was asked for.
        url: String,
        /// The innermost cause.
        reason: String,
    },
    /// The server wants credentials, or refused the ones given.
    #[error(
        "authentication failed for `{repo}`: {detail}; hint: add or fix a Credential of type \
         `helm` whose `repoURL` is the chart repository"
    )]
    AuthFailed {
        /// The repository.
        repo: String,
        /// What happened (never a secret).
        detail: String,
    },
    /// The server answered an unexpected status.
    #[error("`{operation}` at `{url}` failed with HTTP {status}{hint}")]
    Status {
        /// What Dray asked.
        operation: String,
        /// The request URL.
        url: String,
        /// The status.
        status: u16,
        /// A hint for the status, e.g. for 404.
        hint: String,
    },
    /// The answer cannot be read (bad YAML/JSON, too large, wrong digest).
    #[error("invalid answer to `{operation}` from `{url}`: {reason}")]
    InvalidResponse {
        /// What Dray asked.
        operation: String,
        /// The request URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The repository's index has no chart of that name.
    #[error(
        "chart `{name}` is not in the index of `{repo}` (charts there: {available}); hint: check `name`"
    )]
    ChartNotFound {
        /// The repository.
        repo: String,
        /// The chart's name.
        name: String,
        /// The charts the index lists, in backticks, or `none`.
        available: String,
    },
    /// The chart has no such version.
    #[error(
        "chart `{name}` has no version `{version}` in `{repo}` (newest: {newest}); hint: \
         check the version, e.g. `${{{{ chartFrom('{repo}').version }}}}`"
    )]
    VersionNotFound {
        /// The repository.
        repo: String,
        /// The chart's name.
        name: String,
        /// The version asked for.
        version: String,
        /// The newest versions there, in backticks, or `none`.
        newest: String,
    },
    /// The OCI artifact is not a Helm chart.
    #[error(
        "`{reference}` is not a Helm chart: its config media type is `{media_type}`, not \
         `{}`; hint: push the chart with `helm push`, or subscribe to it as an `image`",
        super::CHART_CONFIG_MEDIA_TYPE
    )]
    NotAChart {
        /// `repo:tag`.
        reference: String,
        /// The media type found.
        media_type: String,
    },
}

impl ChartRepoError {
    /// A later attempt may succeed without any change (network, 5xx, 429).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Status { status, .. } => crate::is_transient_status(*status),
            _ => false,
        }
    }
}

/// `` `a`, `b` `` or `none`.
pub(super) fn listed<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| format!("`{i}`")).collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}
