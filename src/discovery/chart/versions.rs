//! Which versions of a chart a subscription accepts, highest first: chart versions read as
//! semantic versions (a leading `v` accepted, build metadata kept), `semverConstraint`
//! with the constraint grammar and pre-release rule of image discovery
//! (`discovery::image::constraint`: pre-releases only when the constraint names one), and
//! `discoveryLimit`. Pure; talks to nothing.

use node_semver::Version;

use super::error::ChartDiscoveryError;
use crate::api::ChartSubscription;
use crate::discovery::image::constraint::Constraint;

/// The largest `discoveryLimit`.
pub(crate) const MAX_DISCOVERY_LIMIT: u32 = 100;

/// A subscription's version rules, validated.
#[derive(Clone, Debug)]
pub(crate) struct VersionRule {
    constraint: Option<(String, Constraint)>,
    /// How many versions to keep.
    pub(crate) limit: usize,
}

/// The versions a rule accepts among those a repository lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The accepted versions as listed (tags for OCI), highest first, at most the limit.
    pub(crate) versions: Vec<String>,
}

impl VersionRule {
    /// Validate `semverConstraint` and `discoveryLimit` of `sub`.
    pub(crate) fn new(sub: &ChartSubscription) -> Result<Self, ChartDiscoveryError> {
        let text = sub
            .semver_constraint
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let constraint = match text {
            None => None,
            Some(text) => Some((
                text.to_owned(),
                Constraint::parse(text).map_err(|reason| {
                    ChartDiscoveryError::invalid(
                        "semverConstraint",
                        text,
                        reason,
                        "write a range such as `^1.2.0`, `>=1.0.0 <2.0.0` or `~1.4`",
                    )
                })?,
            )),
        };
        if !(1..=MAX_DISCOVERY_LIMIT).contains(&sub.discovery_limit) {
            return Err(ChartDiscoveryError::invalid(
                "discoveryLimit",
                sub.discovery_limit.to_string(),
                format!("it must be between 1 and {MAX_DISCOVERY_LIMIT}"),
                "remove it to use the default (20)",
            ));
        }
        Ok(Self {
            constraint,
            limit: sub.discovery_limit as usize,
        })
    }

    /// The accepted versions among `listed` (as `(text, version text)`: for OCI the text
    /// is the tag and the version its `_`→`+` reading), or why none is.
    pub(crate) fn accept(
        &self,
        repo: &str,
        name: &str,
        listed: &[(String, String)],
    ) -> Result<Accepted, ChartDiscoveryError> {
        let mut versions: Vec<(Version, &str)> = listed
            .iter()
            .filter_map(|(text, version)| parse_version(version).map(|v| (v, text.as_str())))
            .collect();
        versions.sort_by(|a, b| b.0.cmp(&a.0));
        let accepted: Vec<String> = versions
            .iter()
            .filter(|(v, _)| match &self.constraint {
                Some((_, c)) => c.matches(v),
                None => !v.is_prerelease(),
            })
            .map(|(_, text)| (*text).to_owned())
            .take(self.limit)
            .collect();
        if accepted.is_empty() {
            let criteria = match &self.constraint {
                Some((text, _)) => format!("`semverConstraint` `{text}`"),
                None if versions.is_empty() => "semantic versions".to_owned(),
                None => "releases (no `semverConstraint`, so pre-releases are skipped)".to_owned(),
            };
            return Err(ChartDiscoveryError::NoVersionMatched {
                repo: repo.to_owned(),
                name: name.to_owned(),
                criteria,
                total: listed.len(),
                newest: versions.first().map(|(_, text)| (*text).to_owned()),
            });
        }
        Ok(Accepted { versions: accepted })
    }
}

/// A chart version as a semantic version: `1.2.3`, `v1.2.3`, `1.2.3-rc.1+build.5`.
pub(crate) fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim();
    let text = text.strip_prefix(['v', 'V']).unwrap_or(text);
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Version::parse(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(constraint: Option<&str>, limit: u32) -> VersionRule {
        VersionRule::new(&ChartSubscription {
            repo_url: "https://c".into(),
            semver_constraint: constraint.map(str::to_owned),
            discovery_limit: limit,
            ..ChartSubscription::default()
        })
        .unwrap()
    }

    fn listed(versions: &[&str]) -> Vec<(String, String)> {
        versions
            .iter()
            .map(|v| ((*v).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn accepted(rule: &VersionRule, versions: &[&str]) -> Vec<String> {
        rule.accept("r", "app", &listed(versions)).unwrap().versions
    }

    #[test]
    fn highest_in_range_first_and_pre_releases_only_when_named() {
        let all = [
            "1.0.0",
            "1.2.0",
            "1.10.0",
            "1.11.0-rc.1",
            "2.0.0",
            "v1.3.0",
            "latest",
        ];
        assert_eq!(
            accepted(&rule(Some("^1.0.0"), 20), &all),
            ["1.10.0", "v1.3.0", "1.2.0", "1.0.0"]
        );
        assert_eq!(accepted(&rule(None, 2), &all), ["2.0.0", "1.10.0"]);
        assert_eq!(
            accepted(&rule(Some(">=1.11.0-rc.0 <2.0.0"), 20), &all),
            ["1.11.0-rc.1"]
        );
    }

    #[test]
    fn oci_tags_are_read_with_plus_for_underscore() {
        let tags = vec![
            ("1.0.0_build.2".to_owned(), "1.0.0+build.2".to_owned()),
            ("0.9.0".to_owned(), "0.9.0".to_owned()),
        ];
        let found = rule(None, 20).accept("r", "app", &tags).unwrap();
        assert_eq!(found.versions, ["1.0.0_build.2", "0.9.0"]);
        assert_eq!(
            parse_version("1.0.0+build.2").unwrap().to_string(),
            "1.0.0+build.2"
        );
        assert!(parse_version("v1.2.3").is_some() && parse_version("latest").is_none());
    }

    #[test]
    fn no_match_and_bad_rules_say_why() {
        let err = rule(Some("^3.0.0"), 20)
            .accept("https://c", "app", &listed(&["1.0.0", "2.0.0"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("`semverConstraint` `^3.0.0` matched 0 of 2 versions of chart `app` in `https://c` (highest: `2.0.0`)"),
            "{err}"
        );
        let err = rule(None, 20)
            .accept("r", "app", &listed(&["1.0.0-rc.1"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pre-releases are skipped"), "{err}");
        let bad = VersionRule::new(&ChartSubscription {
            semver_constraint: Some(">=1.0 <2.x.y".into()),
            discovery_limit: 20,
            ..ChartSubscription::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            bad.starts_with("invalid `semverConstraint` `>=1.0 <2.x.y`"),
            "{bad}"
        );
        let bad = VersionRule::new(&ChartSubscription {
            discovery_limit: 101,
            ..ChartSubscription::default()
        })
        .unwrap_err()
        .to_string();
        assert!(bad.contains("between 1 and 100"), "{bad}");
    }
}
