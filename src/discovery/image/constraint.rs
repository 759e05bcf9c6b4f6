//! Semantic-version constraints as Kargo users write them (Masterminds/npm style), and tags
//! read as versions.
//!
//! Owns the grammar check that `node-semver` lacks: that crate parses "loosely" and
//! silently drops what it does not understand (`>=1.0.0, <2.0.0` became `<2.0.0`,
//! `^1.0.0 || foo` became `^1.0.0`) and turns two disjoint comparators into an *or*
//! (`^1.0.0 ^2.0.0`). Here every comparator is checked, each is parsed on its own, and
//! the comparators of one alternative are intersected, so an impossible constraint is an
//! error. The comparison itself (including the npm pre-release rule) is `node-semver`'s.
//! Does not order or filter tags: see `select`.
//!
//! Accepted: `=`, `>`, `>=`, `<`, `<=`, `~`, `~>`, `^`, `!=`, wildcards (`1.x`, `1.2.*`,
//! `*`), partial versions (`^1.2`), hyphen ranges (`1.2 - 1.4`), `,` or space for *and*,
//! `||` for *or*, and a leading `v` on any version.
//!
//! Pre-releases follow npm: a version like `1.2.0-rc.1` satisfies a constraint only when
//! one of its comparators names a pre-release of the same `major.minor.patch`
//! (`>=1.2.0-rc.0` admits `1.2.0-rc.1` but not `1.3.0-rc.1`).

use std::sync::LazyLock;

use node_semver::{Range, Version};
use regex::Regex;

/// One comparator: optional operator, a partial version with wildcards.
static COMPARATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:=|!=|>=|<=|>|<|~>|~|\^)?[vV]?(?:\d+|[xX*])(?:\.(?:\d+|[xX*])){0,2}(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$",
    )
    .expect("static regex")
});

/// A tag that is a full `major.minor.patch` (semver 2.0 grammar, optional lowercase `v`,
/// as Kargo's Masterminds parser).
static STRICT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?$",
    )
    .expect("static regex")
});

/// A tag with one to three numeric components (`1`, `1.2`, `v1.2.3-rc.1`), without leading
/// zeros (in the numbers or numeric pre-release parts), as Masterminds' `NewVersion`.
static LOOSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^v?(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:\.(0|[1-9]\d*))?(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?$",
    )
    .expect("static regex")
});

const OPERATORS: [&str; 9] = ["=", "!=", ">=", "<=", ">", "<", "~>", "~", "^"];

/// A parsed constraint: versions satisfying any alternative are accepted.
#[derive(Clone, Debug)]
pub(crate) struct Constraint {
    alternatives: Vec<Alternative>,
}

/// Comparators joined by *and*.
#[derive(Clone, Debug)]
struct Alternative {
    range: Range,
    excluded: Vec<Range>,
}

impl Constraint {
    /// Parse `text`; the error is a reason, to be attached to the field by the caller.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let alternatives = text
            .split("||")
            .map(|alt| parse_alternative(alt.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { alternatives })
    }

    /// Whether `version` satisfies the constraint.
    pub(crate) fn matches(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|alt| {
            alt.range.satisfies(version) && !alt.excluded.iter().any(|ex| ex.satisfies(version))
        })
    }
}

/// `node_semver`'s `Range::parse`, which panics (`unreachable!`) on some inputs, e.g. `~*`
/// (found by fuzzing): such a range is an error like any other unreadable one.
pub(crate) fn parse_range(text: &str) -> Result<Range, String> {
    std::panic::catch_unwind(|| Range::parse(text))
        .map_err(|_| "not a range node-semver can read".to_owned())?
        .map_err(|err| err.to_string())
}

fn parse_alternative(text: &str) -> Result<Alternative, String> {
    if text.is_empty() {
        return Err("an alternative of `||` is empty".into());
    }
    let mut range = Range::any();
    let mut excluded = Vec::new();
    for comparator in comparators(text)? {
        let parsed =
            |c: &str| parse_range(c).map_err(|err| format!("cannot read `{comparator}`: {err}"));
        if let Some(rest) = comparator.strip_prefix("!=") {
            excluded.push(parsed(rest)?);
            continue;
        }
        let next = parsed(&comparator)?;
        range = range.intersect(&next).ok_or_else(|| {
            format!("no version can satisfy `{text}` (`{comparator}` contradicts the rest)")
        })?;
    }
    Ok(Alternative { range, excluded })
}

/// Split one alternative into comparators, joining `>= 1.0` and `1.0 - 2.0`.
fn comparators(text: &str) -> Result<Vec<String>, String> {
    let tokens: Vec<&str> = text
        .split([' ', '\t', ','])
        .filter(|t| !t.is_empty())
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if token == "-" {
            let (Some(low), Some(high)) = (out.pop(), tokens.get(i + 1)) else {
                return Err("a hyphen range needs a version on both sides".into());
            };
            if !is_bare(&low) || !is_bare(high) {
                return Err(format!(
                    "`{low} - {high}` is not a hyphen range of two versions"
                ));
            }
            out.push(format!("{low} - {high}"));
            i += 2;
            continue;
        }
        let comparator = if OPERATORS.contains(&token) {
            let next = tokens
                .get(i + 1)
                .ok_or_else(|| format!("`{token}` needs a version"))?;
            i += 1;
            format!("{token}{next}")
        } else {
            token.to_owned()
        };
        if !COMPARATOR.is_match(&comparator) {
            return Err(format!("`{comparator}` is not a version comparator"));
        }
        out.push(comparator);
        i += 1;
    }
    Ok(out)
}

/// A comparator without operator (a side of a hyphen range).
fn is_bare(comparator: &str) -> bool {
    COMPARATOR.is_match(comparator) && comparator.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// Read `tag` as a version. `strict` requires `major.minor.patch` (a leading lowercase `v`
/// is fine; `V1.2.3` is not a version, as in Kargo);
/// otherwise `1` and `1.2` count as `1.0.0` and `1.2.0`. Build metadata cannot occur: `+`
/// is not allowed in tags.
pub(crate) fn parse_tag(tag: &str, strict: bool) -> Option<Version> {
    if strict {
        let caps = STRICT.captures(tag)?;
        return Version::parse(caps.get(0)?.as_str().trim_start_matches('v')).ok();
    }
    let caps = LOOSE.captures(tag)?;
    let part = |i: usize| caps.get(i).map_or("0", |m| m.as_str());
    let mut text = format!("{}.{}.{}", part(1), part(2), part(3));
    if let Some(pre) = caps.get(4) {
        text = format!("{text}-{}", pre.as_str());
    }
    Version::parse(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(constraint: &str, version: &str) -> bool {
        let c = Constraint::parse(constraint).unwrap_or_else(|e| panic!("{constraint}: {e}"));
        c.matches(&Version::parse(version).unwrap())
    }

    #[test]
    fn caret_tilde_ranges_and_wildcards() {
        assert!(ok("^1.0.0", "1.9.3") && !ok("^1.0.0", "2.0.0"));
        assert!(ok(">=1.0.0 <2.0.0", "1.5.0") && !ok(">=1.0.0 <2.0.0", "2.0.0"));
        assert!(ok(">=1.0.0, <2.0.0", "1.5.0") && !ok(">=1.0.0, <2.0.0", "0.9.0"));
        assert!(ok(">= 1.0.0 < 2.0.0", "1.0.0"));
        assert!(ok("1.2 - 1.4", "1.4.9") && !ok("1.2 - 1.4", "1.5.0"));
        assert!(ok("^1.2 || ^2.0", "2.3.0") && !ok("^1.2 || ^2.0", "3.0.0"));
        assert!(ok("~1.2", "1.2.7") && !ok("~1.2", "1.3.0"));
        assert!(ok("~> 1.2", "1.2.7"));
        assert!(ok("1.x", "1.7.0") && ok("*", "9.9.9"));
        assert!(ok("^v1.2.0", "1.3.0"));
        assert!(ok(">=1.0.0 != 1.2.0", "1.3.0") && !ok(">=1.0.0 !=1.2.0", "1.2.0"));
    }

    #[test]
    fn pre_releases_only_when_named() {
        assert!(!ok("^1.0.0", "1.2.0-rc.1"));
        assert!(!ok("*", "1.2.0-rc.1"));
        assert!(ok(">=1.2.0-rc.0", "1.2.0-rc.1"));
        assert!(!ok(">=1.2.0-rc.0", "1.3.0-rc.1"));
        assert!(ok(">=1.2.0-rc.0 <2.0.0", "1.2.0-rc.1"));
    }

    #[test]
    fn fuzz_semver_tilde_star_is_an_error_not_a_panic() {
        for text in ["~*", "~x", "~*.*", ">=1.0 ~*"] {
            let reason = Constraint::parse(text).unwrap_err();
            assert!(reason.contains("cannot read"), "{text}: {reason}");
            assert!(
                parse_range(text.trim_start_matches(">=1.0 ")).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_node_semver_would_drop() {
        let err = |c: &str| Constraint::parse(c).unwrap_err();
        assert!(err("garbage").contains("`garbage` is not a version comparator"));
        assert!(err("^1.0.0 || foo").contains("`foo`"));
        assert!(err(">=1.0.0 <2.x.y").contains("`<2.x.y`"));
        assert!(err("^1.0.0 ||").contains("empty"));
        assert!(err("^1.0.0 ^2.0.0").contains("no version can satisfy"));
        assert!(err(">=").contains("needs a version"));
        assert!(err("- 1.0.0").contains("hyphen"));
    }

    #[test]
    fn tags_as_versions() {
        let v = |t: &str, strict| parse_tag(t, strict).map(|v| v.to_string());
        assert_eq!(v("1.2.3", true).as_deref(), Some("1.2.3"));
        assert_eq!(v("v1.2.3", true).as_deref(), Some("1.2.3"));
        assert_eq!(v("1.2.0-rc.1", true).as_deref(), Some("1.2.0-rc.1"));
        assert_eq!(v("1.2", true), None);
        assert_eq!(v("01.2.3", true), None);
        assert_eq!(v("1.2.3.4", true), None);
        assert_eq!(v("latest", true), None);
        assert_eq!(v("v 1.2.3", true), None);
        assert_eq!(v("1.2", false).as_deref(), Some("1.2.0"));
        assert_eq!(v("v2", false).as_deref(), Some("2.0.0"));
        assert_eq!(v("1.2-rc.1", false).as_deref(), Some("1.2.0-rc.1"));
        assert_eq!(v("1.2.3-", false), None);
    }
}
