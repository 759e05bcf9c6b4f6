//! Pure selection rules: path filters (`includePaths`/`excludePaths`), tag filters
//! (`allowTags`/`ignoreTags`), the tag orders of the `SemVer`, `Lexical` and `NewestTag`
//! strategies, and recognising Dray's own commits by their `Dray-Promotion:` trailer.
//!
//! Owns no I/O: [`super::history`] feeds it paths and messages read from the mirror.

use std::cmp::Ordering;

use globset::{GlobBuilder, GlobMatcher};
use node_semver::Version;
use regex::Regex;

use super::error::GitDiscoveryError;
use crate::discovery::image::constraint::Constraint;

/// The trailer that marks commits Dray wrote itself.
pub const PROMOTION_TRAILER: &str = "Dray-Promotion";

/// One path pattern: a plain prefix, `glob:PATTERN` or `regex:PATTERN` (also spelt
/// `regexp:`, as Kargo accepts both).
#[derive(Clone, Debug)]
enum PathPattern {
    /// A plain path, as Kargo compares: the path itself or anything under it (`apps`
    /// matches `apps` and `apps/a.yaml`, not `apps2/x`), without a trailing `/`.
    Prefix(String),
    /// A glob where `*` does not cross `/` (use `**` for that).
    Glob(GlobMatcher),
    /// An unanchored regular expression.
    Regex(Regex),
}

impl PathPattern {
    fn parse(field: &'static str, pattern: &str) -> Result<Self, GitDiscoveryError> {
        let invalid = |reason: String| GitDiscoveryError::InvalidPattern {
            field,
            pattern: pattern.to_owned(),
            reason,
        };
        if let Some(glob) = pattern.strip_prefix("glob:") {
            let glob = GlobBuilder::new(glob.trim_start_matches('/'))
                .literal_separator(true)
                .build()
                .map_err(|e| invalid(e.kind().to_string()))?;
            Ok(Self::Glob(glob.compile_matcher()))
        } else if let Some(regex) = pattern
            .strip_prefix("regex:")
            .or_else(|| pattern.strip_prefix("regexp:"))
        {
            Ok(Self::Regex(
                Regex::new(regex).map_err(|e| invalid(e.to_string()))?,
            ))
        } else {
            let prefix = pattern
                .trim_start_matches("./")
                .trim_start_matches('/')
                .trim_end_matches('/');
            if prefix.is_empty() {
                return Err(invalid("an empty path would match every path".to_owned()));
            }
            Ok(Self::Prefix(prefix.to_owned()))
        }
    }

    fn is_match(&self, path: &str) -> bool {
        match self {
            Self::Prefix(prefix) => path
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
            Self::Glob(glob) => glob.is_match(path),
            Self::Regex(regex) => regex.is_match(path),
        }
    }
}

/// `includePaths` and `excludePaths`, compiled.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathFilter {
    include: Vec<PathPattern>,
    exclude: Vec<PathPattern>,
}

impl PathFilter {
    /// Compile both lists; the first bad pattern is named in the error.
    pub(crate) fn new(include: &[String], exclude: &[String]) -> Result<Self, GitDiscoveryError> {
        let compile = |field, list: &[String]| -> Result<Vec<_>, GitDiscoveryError> {
            list.iter().map(|p| PathPattern::parse(field, p)).collect()
        };
        Ok(Self {
            include: compile("includePaths", include)?,
            exclude: compile("excludePaths", exclude)?,
        })
    }

    /// Whether there is any filter at all (without one every commit counts).
    pub(crate) fn is_active(&self) -> bool {
        !self.include.is_empty() || !self.exclude.is_empty()
    }

    /// Literal pathspecs whose matches include every path `includePaths` matches (a
    /// superset: the exact check is [`is_relevant`](Self::is_relevant)), so that `git log`
    /// can skip other commits with the changed-path Bloom filters. `None` when no literal
    /// directory bounds them: no `includePaths`, a `regex:`, or a glob starting with a
    /// wildcard at the top level.
    ///
    /// A plain path is its own pathspec (git's literal pathspec matches the path and what
    /// is under it, as Kargo's path filter does). A glob is narrowed to the directory
    /// before its first wildcard. `excludePaths` only ever remove commits, so they are left
    /// to the exact check.
    pub(crate) fn pathspecs(&self) -> Option<Vec<String>> {
        if self.include.is_empty() {
            return None;
        }
        let mut specs: Vec<String> = Vec::new();
        for pattern in &self.include {
            let literal = match pattern {
                PathPattern::Prefix(path) => {
                    let spec = format!(":(literal){path}");
                    if !specs.contains(&spec) {
                        specs.push(spec);
                    }
                    continue;
                }
                PathPattern::Glob(glob) => {
                    let text = glob.glob().glob();
                    &text[..text.find(['*', '?', '[', '{', '\\']).unwrap_or(text.len())]
                }
                PathPattern::Regex(_) => return None,
            };
            let dir = match literal.rfind('/') {
                Some(end) => &literal[..=end],
                None => return None,
            };
            let spec = format!(":(literal){dir}");
            if !specs.contains(&spec) {
                specs.push(spec);
            }
        }
        Some(specs)
    }

    /// Whether a commit that changed `paths` counts: at least one path is included (every
    /// path is when `includePaths` is empty) and not excluded. A commit changing nothing
    /// counts only without filters.
    pub(crate) fn is_relevant<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> bool {
        if !self.is_active() {
            return true;
        }
        paths.into_iter().any(|path| {
            (self.include.is_empty() || self.include.iter().any(|p| p.is_match(path)))
                && !self.exclude.iter().any(|p| p.is_match(path))
        })
    }
}

/// `allowTags` and `ignoreTags`, compiled.
#[derive(Clone, Debug, Default)]
pub(crate) struct TagFilter {
    allow: Vec<Regex>,
    ignore: Vec<Regex>,
}

impl TagFilter {
    /// Compile both lists of regular expressions.
    pub(crate) fn new(allow: &[String], ignore: &[String]) -> Result<Self, GitDiscoveryError> {
        let compile = |field, list: &[String]| -> Result<Vec<Regex>, GitDiscoveryError> {
            list.iter()
                .map(|p| {
                    Regex::new(p).map_err(|e| GitDiscoveryError::InvalidPattern {
                        field,
                        pattern: p.clone(),
                        reason: e.to_string(),
                    })
                })
                .collect()
        };
        Ok(Self {
            allow: compile("allowTags", allow)?,
            ignore: compile("ignoreTags", ignore)?,
        })
    }

    /// Whether the filter rejects nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ignore.is_empty()
    }

    /// Whether `tag` may be considered.
    pub(crate) fn allows(&self, tag: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|r| r.is_match(tag)))
            && !self.ignore.iter().any(|r| r.is_match(tag))
    }
}

/// A semver range (Masterminds/npm syntax: `^1.2`, `>=1.0.0 <2.0.0`, `1.2 - 1.4`).
#[derive(Clone, Debug)]
pub(crate) struct SemverConstraint {
    text: String,
    constraint: Option<Constraint>,
}

impl SemverConstraint {
    /// Parse `semverConstraint`; none (or blank) accepts every release (no pre-releases).
    pub(crate) fn new(constraint: Option<&str>) -> Result<Self, GitDiscoveryError> {
        let text = constraint.map(str::trim).unwrap_or_default().to_owned();
        if text.is_empty() {
            return Ok(Self {
                text,
                constraint: None,
            });
        }
        // One reading of constraints for images and git (Masterminds' forms: `,` joins,
        // `!=` excludes), so `>= 1.2, < 3.0.0` never drops a comparator.
        let constraint =
            Constraint::parse(&text).map_err(|reason| GitDiscoveryError::InvalidConstraint {
                constraint: text.clone(),
                reason,
            })?;
        Ok(Self {
            text,
            constraint: Some(constraint),
        })
    }

    /// How errors name it: ``constraint `^2.0.0` `` or `semver` when unconstrained.
    pub(crate) fn describe(&self) -> String {
        if self.text.is_empty() {
            "a release version (no semverConstraint)".to_owned()
        } else {
            format!("constraint `{}`", self.text)
        }
    }

    /// Whether `version` is acceptable. Pre-releases only when the range names one with
    /// the same `major.minor.patch`.
    pub(crate) fn allows(&self, version: &Version) -> bool {
        match &self.constraint {
            Some(constraint) => constraint.matches(version),
            None => !version.is_prerelease(),
        }
    }
}

/// A tag as a semantic version: `1.2.3`, `v1.2.3`, `1.2.3-rc.1`; `None` otherwise. With
/// `strict` (`strictSemvers`, the default) only full `major.minor.patch` versions count;
/// without, `1.2` and `v1` count too, as `1.2.0` and `1.0.0` (as Kargo coerces them).
pub(crate) fn parse_version(tag: &str, strict: bool) -> Option<Version> {
    let bare = tag.strip_prefix(['v', 'V']).unwrap_or(tag);
    let core_end = bare.find(['-', '+']).unwrap_or(bare.len());
    let (core, rest) = bare.split_at(core_end);
    let parts = core.split('.').count();
    match parts {
        3 => Version::parse(bare).ok(),
        1 | 2
            if !strict
                && core
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            let padded = format!("{core}{}{rest}", ".0".repeat(3 - parts));
            Version::parse(&padded).ok()
        }
        _ => None,
    }
}

/// Sort `(tag, version)` by version, highest first (ties: name, greatest first).
pub(crate) fn sort_semver(tags: &mut [(String, Version)]) {
    tags.sort_by(|(a_name, a), (b_name, b)| match b.cmp(a) {
        Ordering::Equal => b_name.cmp(a_name),
        other => other,
    });
}

/// Whether a commit message carries Dray's `Dray-Promotion:` trailer in its last
/// paragraph (the trailer block).
pub fn is_dray_commit(message: &str) -> bool {
    let message = message.trim_end();
    let Some((_, last)) = message.rsplit_once("\n\n") else {
        return false; // a subject alone has no trailers
    };
    last.lines().any(|line| {
        line.split_once(':').is_some_and(|(key, value)| {
            key.trim().eq_ignore_ascii_case(PROMOTION_TRAILER) && !value.trim().is_empty()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> PathFilter {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PathFilter::new(&own(include), &own(exclude)).unwrap()
    }

    #[test]
    fn plain_prefix_glob_and_regex_paths() {
        let f = filter(&["apps/"], &[]);
        assert!(f.is_relevant(["README.md", "apps/a.yaml"]));
        assert!(!f.is_relevant(["README.md"]));
        assert!(!f.is_relevant([]));

        let f = filter(&["glob:apps/*/values.yaml"], &[]);
        assert!(f.is_relevant(["apps/web/values.yaml"]));
        assert!(
            !f.is_relevant(["apps/web/nested/values.yaml"]),
            "`*` must not cross `/`"
        );
        let f = filter(&["glob:apps/**/*.yaml"], &[]);
        assert!(f.is_relevant(["apps/web/nested/x.yaml"]));

        let f = filter(&[r"regex:^env/(dev|prod)/"], &[]);
        assert!(f.is_relevant(["env/dev/a"]) && !f.is_relevant(["env/qa/a"]));
        // Kargo's other spelling is the same regular expression, not a literal prefix.
        let f = filter(&[r"regexp:^env/(dev|prod)/"], &[]);
        assert!(f.is_relevant(["env/dev/a"]) && !f.is_relevant(["env/qa/a"]));
        assert!(!f.is_relevant(["regexp:^env/(dev|prod)/x"]));
    }

    #[test]
    fn a_commit_touching_only_excluded_paths_does_not_count() {
        let f = filter(&[], &["docs/", "glob:**/*.md"]);
        assert!(!f.is_relevant(["docs/a.txt", "apps/README.md"]));
        assert!(f.is_relevant(["docs/a.txt", "apps/a.yaml"]));
        let f = filter(&["apps/"], &["apps/legacy/"]);
        assert!(!f.is_relevant(["apps/legacy/x", "README.md"]));
        assert!(filter(&[], &[]).is_relevant([]));
    }

    #[test]
    fn bad_patterns_are_named() {
        let err = PathFilter::new(&["glob:apps/[".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid includePaths pattern `glob:apps/[`"),
            "{err}"
        );
        let err = PathFilter::new(&[], &["regex:(".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid excludePaths pattern `regex:(`"),
            "{err}"
        );
        let err = TagFilter::new(&["[".into()], &[]).unwrap_err().to_string();
        assert!(err.contains("invalid allowTags pattern `[`"), "{err}");
    }

    #[test]
    fn semver_excludes_pre_releases_unless_named() {
        let v = |s: &str| parse_version(s, true).unwrap();
        let c = SemverConstraint::new(Some("^1.0.0")).unwrap();
        assert!(c.allows(&v("v1.4.0")));
        assert!(!c.allows(&v("v1.5.0-rc.1")));
        assert!(!c.allows(&v("2.0.0")));
        let c = SemverConstraint::new(Some(">=1.5.0-rc.0")).unwrap();
        assert!(c.allows(&v("1.5.0-rc.1")));
        let c = SemverConstraint::new(Some(">=1.0.0 <2.0.0")).unwrap();
        assert!(c.allows(&v("1.9.9")));
        assert!(
            !SemverConstraint::new(None)
                .unwrap()
                .allows(&v("1.0.0-alpha"))
        );
        assert!(parse_version("release-1", true).is_none() && parse_version("1.2", true).is_none());
        // strictSemvers: false takes partial versions, as Kargo coerces them.
        assert_eq!(parse_version("1.2", false).unwrap().to_string(), "1.2.0");
        assert_eq!(parse_version("v1", false).unwrap().to_string(), "1.0.0");
        assert_eq!(
            parse_version("v1.4-rc.1", false).unwrap().to_string(),
            "1.4.0-rc.1"
        );
        assert!(
            parse_version("release-1", false).is_none() && parse_version("1..2", false).is_none()
        );
        assert!(SemverConstraint::new(Some("not a range")).is_err());
    }

    #[test]
    fn semver_order_is_numeric() {
        let mut tags: Vec<_> = ["v1.10.0", "v1.9.0", "v1.2.0"]
            .iter()
            .map(|t| (t.to_string(), parse_version(t, true).unwrap()))
            .collect();
        sort_semver(&mut tags);
        assert_eq!(tags[0].0, "v1.10.0");
    }

    #[test]
    fn dray_commits_are_recognised_by_their_trailer() {
        assert!(is_dray_commit(
            "Promote\n\nbody\n\nDray-Freight: abc\nDray-Promotion: p-1\n"
        ));
        assert!(!is_dray_commit("Dray-Promotion: p-1"));
        assert!(!is_dray_commit(
            "Fix\n\nmentions Dray-Promotion: in prose\n\nSigned-off-by: x"
        ));
    }
}
