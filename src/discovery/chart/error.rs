//! The errors of chart discovery: one variant per failed operation, with the user's values
//! in backticks and a hint that says what to do next. Reading a classic repository and
//! the chart checks are `dray_steps::helm`'s errors; the registry's are image discovery's.

use dray_steps::helm::ChartRepoError;

use crate::discovery::image::ImageDiscoveryError;

/// Why chart discovery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChartDiscoveryError {
    /// A field of the `ChartSubscription` is invalid.
    #[error("invalid `{field}` `{value}`: {reason}; hint: {hint}")]
    InvalidSubscription {
        /// The field, as spelled in YAML.
        field: String,
        /// The value the user wrote.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// What to do instead.
        hint: String,
    },
    /// The classic repository could not be read, or the artifact is not a chart.
    #[error(transparent)]
    Repository(#[from] ChartRepoError),
    /// The OCI registry failed.
    #[error(transparent)]
    Registry(#[from] ImageDiscoveryError),
    /// No version passed the rules.
    #[error(
        "{criteria} matched 0 of {total} versions of chart `{name}` in `{repo}`{}; hint: \
         publish a matching version or widen `semverConstraint`",
        newest.as_ref().map(|n| format!(" (highest: `{n}`)")).unwrap_or_default()
    )]
    NoVersionMatched {
        /// The repository.
        repo: String,
        /// The chart's name.
        name: String,
        /// What selected, e.g. ``semverConstraint `^1.3.0` ``.
        criteria: String,
        /// How many versions (or tags) the repository lists.
        total: usize,
        /// The highest version regardless of the rules.
        newest: Option<String>,
    },
    /// The HTTP client could not be built (TLS set-up).
    #[error("failed to set up the chart repository HTTP client: {reason}")]
    ClientSetup {
        /// The cause.
        reason: String,
    },
}

impl ChartDiscoveryError {
    /// An `InvalidSubscription` error.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self::InvalidSubscription {
            field: field.into(),
            value: value.into(),
            reason: reason.into(),
            hint: hint.into(),
        }
    }
}
