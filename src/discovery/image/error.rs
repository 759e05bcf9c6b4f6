//! The errors of image discovery: one variant per failed operation, with the user's values
//! in backticks and a hint that says what to do next.
//!
//! Owns the wording. Does not decide whether a Warehouse retries: callers use
//! [`ImageDiscoveryError::is_config_error`] (terminal until the spec changes) and
//! [`ImageDiscoveryError::is_retryable`].

use std::fmt;

/// Why image discovery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageDiscoveryError {
    /// A field of the `ImageSubscription` is invalid (bad constraint, regex, platform, …).
    #[error("invalid `{field}` `{value}`: {reason}{}", hint_suffix(.hint))]
    InvalidSubscription {
        /// The field, as spelled in YAML, e.g. `constraint` or `allowTags[1]`.
        field: String,
        /// The value the user wrote.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// What to do instead, when known.
        hint: Option<String>,
    },

    /// The registry could not be reached (connection refused, DNS, TLS, timeout).
    #[error(
        "registry `{registry}` unreachable: {reason}; hint: check that the registry runs, \
         that `repoURL` names it, and set `insecure: true` only for a plain-HTTP registry"
    )]
    Unreachable {
        /// `host[:port]`.
        registry: String,
        /// The innermost cause, e.g. `connection refused`.
        reason: String,
    },

    /// The registry refused the credentials (or wanted some and got none).
    #[error(
        "authentication failed for `{repo}`: {detail}; hint: check the Credential for this \
         repository (some registries also answer this way for a repository that does not exist)"
    )]
    AuthFailed {
        /// `host[:port]/path`.
        repo: String,
        /// What the registry said, e.g. `no credentials were sent`.
        detail: String,
    },

    /// The registry does not know the repository.
    #[error("repository `{repo}` not found; hint: check `repoURL` (host, path, no tag)")]
    RepositoryNotFound {
        /// `host[:port]/path`.
        repo: String,
    },

    /// The tag followed by the `Digest` strategy does not exist.
    #[error("tag `{tag}` not found in `{repo}`; hint: `constraint` names the tag to follow")]
    TagNotFound {
        /// `host[:port]/path`.
        repo: String,
        /// The tag.
        tag: String,
    },

    /// No tag passed the filters and the constraint.
    #[error(
        "{criteria} matched 0 of {total} tags in `{repo}`{}; hint: push a matching tag or \
         widen the subscription",
        newest_suffix(.newest)
    )]
    NoTagMatched {
        /// `host[:port]/path`.
        repo: String,
        /// What selected, e.g. ``constraint `^1.3.0` ``.
        criteria: String,
        /// How many tags the repository has.
        total: usize,
        /// The newest tag regardless of the constraint, to show what exists.
        newest: Option<String>,
    },

    /// The image has no manifest for the subscription's `platform`.
    #[error(
        "`{image}` has no `{platform}` image (platforms present: {}); hint: push a \
         multi-platform image, fix `platform`, or skip this tag with `ignoreTags`",
        list(.present)
    )]
    PlatformNotFound {
        /// `repo:tag`.
        image: String,
        /// The requested platform, e.g. `linux/arm64`.
        platform: String,
        /// The platforms the image offers.
        present: Vec<String>,
    },

    /// The registry answered with an unexpected HTTP status.
    #[error("`{operation}` on `{url}` failed with HTTP {status}{}", detail_suffix(.detail))]
    RegistryResponse {
        /// What Dray asked, e.g. `list tags`.
        operation: String,
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The registry's error message, if any.
        detail: String,
    },

    /// The registry answered something Dray cannot read (bad JSON, wrong digest, …).
    #[error("invalid answer to `{operation}` from `{url}`: {reason}")]
    InvalidResponse {
        /// What Dray asked.
        operation: String,
        /// The request URL.
        url: String,
        /// What is wrong with the answer.
        reason: String,
    },

    /// The HTTP client could not be built (TLS set-up).
    #[error("failed to set up the registry HTTP client: {reason}")]
    ClientSetup {
        /// The cause.
        reason: String,
    },
}

impl ImageDiscoveryError {
    /// The subscription itself is wrong: retrying without a spec change cannot help.
    pub fn is_config_error(&self) -> bool {
        matches!(self, Self::InvalidSubscription { .. })
    }

    /// A later attempt may succeed without any change (network, registry 5xx or 429).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::InvalidResponse { .. } => true,
            Self::RegistryResponse { status, .. } => dray_steps::is_transient_status(*status),
            _ => false,
        }
    }

    /// An `InvalidSubscription` error.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
        hint: Option<&str>,
    ) -> Self {
        Self::InvalidSubscription {
            field: field.into(),
            value: value.into(),
            reason: reason.into(),
            hint: hint.map(str::to_owned),
        }
    }
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref()
        .map(|h| format!("; hint: {h}"))
        .unwrap_or_default()
}

fn newest_suffix(newest: &Option<String>) -> String {
    newest
        .as_ref()
        .map(|n| format!(" (newest: `{n}`)"))
        .unwrap_or_default()
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

fn list(items: &[String]) -> impl fmt::Display + '_ {
    struct List<'a>(&'a [String]);
    impl fmt::Display for List<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.0.is_empty() {
                return f.write_str("none");
            }
            for (i, item) in self.0.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "`{item}`")?;
            }
            Ok(())
        }
    }
    List(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_tag_matched_names_constraint_count_and_newest() {
        let err = ImageDiscoveryError::NoTagMatched {
            repo: "127.0.0.1:5000/app".into(),
            criteria: "constraint `^1.3.0`".into(),
            total: 42,
            newest: Some("2.0.0".into()),
        };
        let text = err.to_string();
        assert!(
            text.starts_with(
                "constraint `^1.3.0` matched 0 of 42 tags in `127.0.0.1:5000/app` (newest: `2.0.0`)"
            ),
            "{text}"
        );
        assert!(text.contains("hint: "), "{text}");
    }

    #[test]
    fn platform_not_found_lists_platforms() {
        let err = ImageDiscoveryError::PlatformNotFound {
            image: "r/app:1.0.0".into(),
            platform: "linux/arm64".into(),
            present: vec!["linux/amd64".into(), "linux/s390x".into()],
        };
        assert!(
            err.to_string()
                .contains("platforms present: `linux/amd64`, `linux/s390x`")
        );
    }

    #[test]
    fn invalid_subscription_is_a_config_error_with_a_hint() {
        let err = ImageDiscoveryError::invalid("allowTags[0]", "(", "unclosed group", Some("x"));
        assert_eq!(
            err.to_string(),
            "invalid `allowTags[0]` `(`: unclosed group; hint: x"
        );
        assert!(err.is_config_error());
        assert!(!err.is_retryable());
    }
}
