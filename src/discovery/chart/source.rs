//! Where a chart subscription's chart is: a classic repository (`https://` or `http://`,
//! with the chart's `name`) or an OCI repository (`oci://host[:port]/path/chart`, the
//! chart named by the last path segment, no `name`).
//!
//! Owns the spelling rules, shared by `dray apply` (`config::semantics`) and discovery, so
//! both refuse the same subscriptions with the same words. Talks to nothing.

use dray_steps::helm::{is_oci, oci_chart_name};

use crate::api::ChartSubscription;

/// A validated chart location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChartSource {
    /// A classic repository serving `index.yaml`.
    Classic {
        /// The repository URL, as written (trimmed).
        repo_url: String,
        /// The chart's name in the index.
        name: String,
    },
    /// A repository in an OCI registry.
    Oci {
        /// `host[:port]/path/chart`, as the registry client takes it.
        repository: String,
        /// The chart's name: the last path segment.
        name: String,
    },
}

/// Why a chart subscription cannot be used: the field (as spelled in YAML), what is wrong,
/// and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceIssue {
    /// `repoURL` or `name`.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
    /// What to do instead.
    pub hint: &'static str,
}

impl ChartSource {
    /// Validate `sub`'s `repoURL` and `name`.
    pub fn of(sub: &ChartSubscription) -> Result<Self, SourceIssue> {
        let url = sub.repo_url.trim();
        let name = sub.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
        let issue = |field, reason: String, hint| SourceIssue {
            field,
            reason,
            hint,
        };
        if url.is_empty() {
            return Err(issue(
                "repoURL",
                "`repoURL` is empty".into(),
                "give the chart repository, e.g. `https://charts.example.com` or `oci://registry.example.com/charts/app`",
            ));
        }
        if is_oci(url) {
            if let Some(name) = name {
                return Err(issue(
                    "name",
                    format!("`name` (`{name}`) must not be set for an `oci://` repository"),
                    "the chart is the repository's last path segment: remove `name`, or append it to `repoURL`",
                ));
            }
            let repository = url.trim_start_matches("oci://").trim_end_matches('/');
            let valid = repository
                .split_once('/')
                .is_some_and(|(host, path)| !host.is_empty() && !path.is_empty());
            if !valid
                || repository.contains(['@', '?', '#'])
                || repository
                    .rsplit('/')
                    .next()
                    .is_some_and(|l| l.contains(':'))
            {
                return Err(issue(
                    "repoURL",
                    format!("`{url}` is not `oci://host[:port]/path/chart`"),
                    "name the chart's repository without tag or digest, e.g. `oci://ghcr.io/team/charts/app`",
                ));
            }
            return Ok(ChartSource::Oci {
                name: oci_chart_name(url).to_owned(),
                repository: repository.to_owned(),
            });
        }
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(issue(
                "repoURL",
                format!(
                    "`{url}` is neither a classic chart repository (`https://`, `http://`) nor `oci://`"
                ),
                "e.g. `https://charts.example.com` (with `name`) or `oci://registry.example.com/charts/app`",
            ));
        }
        if url.contains('@') {
            return Err(issue(
                "repoURL",
                "`repoURL` carries credentials or an `@`".into(),
                "put user name and password in a Credential of type `helm` for this repository",
            ));
        }
        let Some(name) = name else {
            return Err(issue(
                "name",
                "a classic chart repository needs the chart's `name`".into(),
                "set `name` to the chart's name in the repository's index.yaml",
            ));
        };
        Ok(ChartSource::Classic {
            repo_url: url.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The chart's name.
    pub fn name(&self) -> &str {
        match self {
            ChartSource::Classic { name, .. } | ChartSource::Oci { name, .. } => name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(url: &str, name: Option<&str>) -> Result<ChartSource, SourceIssue> {
        ChartSource::of(&ChartSubscription {
            repo_url: url.into(),
            name: name.map(str::to_owned),
            discovery_limit: 20,
            ..ChartSubscription::default()
        })
    }

    #[test]
    fn classic_needs_a_name_and_oci_refuses_one() {
        assert_eq!(
            source("https://charts.example.com", Some("app")).unwrap(),
            ChartSource::Classic {
                repo_url: "https://charts.example.com".into(),
                name: "app".into()
            }
        );
        assert_eq!(
            source("https://charts.example.com", None)
                .unwrap_err()
                .field,
            "name"
        );
        let oci = source("oci://127.0.0.1:5000/charts/app", None).unwrap();
        assert_eq!(
            oci,
            ChartSource::Oci {
                repository: "127.0.0.1:5000/charts/app".into(),
                name: "app".into()
            }
        );
        assert_eq!(oci.name(), "app");
        let err = source("oci://r/charts/app", Some("app")).unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.reason.contains("must not be set"), "{err:?}");
    }

    #[test]
    fn bad_urls_name_the_field() {
        for (url, name) in [
            ("", Some("app")),
            ("ftp://x/y", Some("app")),
            ("charts.example.com", Some("app")),
            ("oci://r", None),
            ("oci://r/app:1.0", None),
            ("oci://r/app@sha256:00", None),
            ("https://u:p@h/c", Some("app")),
        ] {
            let err = source(url, name).unwrap_err();
            assert_eq!(err.field, "repoURL", "{url}: {err:?}");
            assert!(!err.reason.contains(":p@"), "{url}: {err:?}");
        }
        assert!(
            source("ftp://x/y", Some("a"))
                .unwrap_err()
                .reason
                .contains("neither")
        );
    }
}
