//! Kargo's own image-selection test cases, run through Dray's selection functions.
//!
//! Owns nothing but tests: each table follows one Kargo test (named in its comment, from
//! `akuity/kargo` `internal/image/*_test.go` and `pkg/controller/semver/parser.go`), with
//! Kargo's inputs and Kargo's expected answer. Where Dray answers differently on purpose
//! (see `docs/kargo-compatibility.md`, "Selection parity"), the case asserts Dray's answer
//! and carries Kargo's next to it, so the difference stays visible and a change to either
//! side fails here.

use jiff::{Timestamp, ToSpan};

use super::constraint::{Constraint, parse_tag};
use super::manifest::Platform;
use super::select::{Selector, newest_build_first};
use crate::api::{ImageSelectionStrategy as S, ImageSubscription};
use crate::expr::exprlang::ExprLanguage;

const REPO: &str = "example/image";

fn sub(strategy: S, constraint: &str) -> ImageSubscription {
    ImageSubscription {
        repo_url: REPO.into(),
        image_selection_strategy: strategy,
        constraint: Some(constraint.to_owned()).filter(|c| !c.is_empty()),
        discovery_limit: 20,
        ..ImageSubscription::default()
    }
}

fn list(tags: &[&str]) -> Vec<String> {
    tags.iter().map(|t| (*t).to_owned()).collect()
}

fn own(patterns: &[&str]) -> Vec<String> {
    list(patterns)
}

/// Kargo `TestNewSemVerSelector` / `TestNewSemVerTagSelector`: an unreadable constraint is
/// an error, none or `^1.24` builds a selector.
#[test]
fn kargo_new_semver_selector() {
    let cases: [(&str, bool); 3] = [("invalid", false), ("", true), ("^1.24", true)];
    for (constraint, builds) in cases {
        let got = Selector::new(&sub(S::SemVer, constraint), ExprLanguage::Cel);
        assert_eq!(got.is_ok(), builds, "constraint `{constraint}`: {got:?}");
        if let Err(err) = got {
            // Kargo: "error parsing semver constraint"; Dray names the field and the value.
            let text = err.to_string();
            assert!(text.starts_with("invalid `constraint` `invalid`"), "{text}");
        }
    }
    // `^1.24` means `>=1.24.0 <2.0.0` in Masterminds, as in npm.
    let selector = Selector::new(&sub(S::SemVer, "^1.24"), ExprLanguage::Cel).unwrap();
    let got = selector
        .rank(REPO, &list(&["1.23.9", "1.24.0", "1.99.1", "2.0.0"]))
        .unwrap();
    assert_eq!(got, ["1.99.1", "1.24.0"]);
}

/// Kargo `TestSortImagesBySemver` / `TestSortTagsBySemver`: highest version first.
#[test]
fn kargo_sort_images_by_semver() {
    let tags = [
        "5.0.0", "0.0.1", "0.2.1", "0.1.1", "1.1.1", "7.0.6", "1.0.0", "1.0.2",
    ];
    let expected = [
        "7.0.6", "5.0.0", "1.1.1", "1.0.2", "1.0.0", "0.2.1", "0.1.1", "0.0.1",
    ];
    let got = Selector::new(&sub(S::SemVer, ""), ExprLanguage::Cel)
        .unwrap()
        .rank(REPO, &list(&tags))
        .unwrap();
    assert_eq!(got, expected);
}

/// Kargo's `semverSelector.sort` comment: equal versions tie-break on the original string,
/// greatest first, so `1.0.0` ranks above `1.0` (and `v1.0.0` above `1.0.0`).
#[test]
fn kargo_semver_ties_break_on_the_original_tag() {
    let mut loose = sub(S::SemVer, "");
    loose.strict_semvers = false;
    let got = Selector::new(&loose, ExprLanguage::Cel)
        .unwrap()
        .rank(REPO, &list(&["1.0", "1.0.0", "v1.0.0", "0.9"]))
        .unwrap();
    assert_eq!(got, ["v1.0.0", "1.0.0", "1.0", "0.9"]);
}

/// Kargo `pkg/controller/semver.Parse` (no test file of its own; used by the SemVer
/// selector): a tag is a version if Masterminds' loose parser reads it; with
/// `strictSemvers` it must also be a strict `x.y.z` once one lowercase `v` is trimmed.
#[test]
fn kargo_semver_parse_strict_and_loose() {
    // (tag, Kargo strict, Kargo loose) as the version Kargo reads, `None` when not one.
    let cases: [(&str, Option<&str>, Option<&str>); 12] = [
        ("1.2.3", Some("1.2.3"), Some("1.2.3")),
        ("v1.2.3", Some("1.2.3"), Some("1.2.3")),
        ("1.2.3-rc.1", Some("1.2.3-rc.1"), Some("1.2.3-rc.1")),
        ("1.2", None, Some("1.2.0")),
        ("v2", None, Some("2.0.0")),
        ("1.2-rc.1", None, Some("1.2.0-rc.1")),
        ("1.2.3.4", None, None),
        ("latest", None, None),
        // Masterminds 3.4 (Kargo's) refuses leading zeros in loose mode too.
        ("01.2.3", None, None),
        ("1.02", None, None),
        ("1.2.3-01", None, None),
        // Masterminds accepts only a lowercase `v`.
        ("V1.2.3", None, None),
    ];
    for (tag, strict, loose) in cases {
        let read = |strict| parse_tag(tag, strict).map(|v| v.to_string());
        assert_eq!(read(true).as_deref(), strict, "strict `{tag}`");
        assert_eq!(read(false).as_deref(), loose, "loose `{tag}`");
    }
}

/// Kargo `Test_tagBasedSelector_MatchesTag`: `allowTags` must match, `ignoreTags` must not.
#[test]
fn kargo_tag_based_selector_matches_tag() {
    // (allow, ignore, tag, Kargo's answer)
    let cases: [(&[&str], &[&str], &str, bool); 6] = [
        (&[], &[], "abc", true),
        (&["[a-z]+"], &[], "abc", true),
        (&["[a-z]+"], &[], "123", false),
        (&[], &["abc"], "abc", false),
        (&[], &["abc"], "123", true),
        (&["[a-z]+"], &["abc"], "abc", false),
    ];
    for (allow, ignore, tag, kargo) in cases {
        let mut s = sub(S::Lexical, "");
        s.allow_tags = own(allow);
        s.ignore_tags = own(ignore);
        let got = Selector::new(&s, ExprLanguage::Cel)
            .unwrap()
            .passes_filters(tag)
            .unwrap();
        assert_eq!(got, kargo, "allow {allow:?} ignore {ignore:?} tag `{tag}`");
    }
}

/// Kargo `Test_tagBasedSelector_filterTags`: allowed but ignored, allowed, not allowed.
#[test]
fn kargo_tag_based_selector_filter_tags() {
    let mut s = sub(S::Lexical, "");
    s.allow_tags = own(&[r"v1\."]);
    s.ignore_tags = own(&["v1.0.0"]);
    let got = Selector::new(&s, ExprLanguage::Cel)
        .unwrap()
        .filter(REPO, &list(&["v1.0.0", "v1.1.0", "v2.0.0"]))
        .unwrap();
    assert_eq!(got, ["v1.1.0"]);
}

/// Kargo `Test_tagBasedSelector_MatchesTag`'s `ignores` compares whole tag names
/// (`ignoreTags: [abc]` ignores `abc` only); Dray's `ignoreTags` are unanchored regular
/// expressions (`docs/resources.md`), so the same entry also ignores `abcd`, and `v1.0.0`
/// also ignores `v1.0.0-rc.1` and `v1x0x0`. Dray's answer is asserted; Kargo's is beside it.
#[test]
fn kargo_ignore_tags_difference_whole_names_vs_regexes() {
    // (ignore, tag, Kargo's answer, Dray's answer)
    let cases: [(&str, &str, bool, bool); 4] = [
        ("abc", "abcd", true, false),
        ("v1.0.0", "v1.0.0-rc.1", true, false),
        ("v1.0.0", "v1x0x0", true, false),
        // Anchored, Dray's regex ignores exactly the name, as Kargo's entry does.
        ("^v1\\.0\\.0$", "v1.0.0-rc.1", true, true),
    ];
    for (ignore, tag, kargo, dray) in cases {
        let mut s = sub(S::Lexical, "");
        s.ignore_tags = own(&[ignore]);
        let got = Selector::new(&s, ExprLanguage::Cel)
            .unwrap()
            .passes_filters(tag)
            .unwrap();
        assert_eq!(got, dray, "ignore `{ignore}` tag `{tag}` (Kargo: {kargo})");
    }
}

/// Kargo `TestNewTagBasedSelector`: an `allowTags` that is not a regular expression is an
/// error; `^v1\.` with `ignoreTags: [v1.0.0]` and `discoveryLimit: 5` builds.
#[test]
fn kargo_new_tag_based_selector() {
    let mut s = sub(S::Lexical, "");
    s.allow_tags = own(&["["]);
    let err = Selector::new(&s, ExprLanguage::Cel)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid `allowTags[0]` `[`: it is not a regular expression"),
        "{err}"
    );
    s.allow_tags = own(&[r"^v1\."]);
    s.ignore_tags = own(&["v1.0.0"]);
    s.discovery_limit = 5;
    let selector = Selector::new(&s, ExprLanguage::Cel).unwrap();
    assert_eq!(selector.limit, 5);
}

/// Kargo `TestSortTagsNamesLexically`: greatest name first.
#[test]
fn kargo_sort_tag_names_lexically() {
    let tags = ["a", "z", "b", "y", "c", "x", "d", "w", "e", "v"];
    let got = Selector::new(&sub(S::Lexical, ""), ExprLanguage::Cel)
        .unwrap()
        .rank(REPO, &list(&tags))
        .unwrap();
    assert_eq!(got, ["z", "y", "x", "w", "v", "e", "d", "c", "b", "a"]);
}

/// Kargo `TestSelectLexicallyLastTag` (git, `internal/controller/warehouses`): the same
/// rule as image `Lexical`, greatest name first.
#[test]
fn kargo_select_lexically_last_tag() {
    let got = Selector::new(&sub(S::Lexical, ""), ExprLanguage::Cel)
        .unwrap()
        .rank(REPO, &list(&["abc", "xyz", "foo", "bar"]))
        .unwrap();
    assert_eq!(got.first().map(String::as_str), Some("xyz"));
}

/// Kargo `Test_newestBuildSelector_sort`: newest build first.
#[test]
fn kargo_newest_build_sort() {
    let now = Timestamp::from_second(1_767_225_600).unwrap();
    let at = |hours: i64| now.checked_add(hours.hours()).unwrap();
    // Tags name the hour offset so the expected order can be read off.
    let mut images: Vec<(String, Option<Timestamp>)> = [0, 1, 5, 24, 8, 2, 7, 3]
        .iter()
        .map(|h| (format!("h{h:02}"), Some(at(*h))))
        .collect();
    images.sort_by(|(ta, ca), (tb, cb)| newest_build_first((ta, *ca), (tb, *cb)));
    let order: Vec<&str> = images.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        order,
        ["h24", "h08", "h07", "h05", "h03", "h02", "h01", "h00"]
    );
}

/// Kargo `TestNewNewestBuildSelector`: Kargo builds a `NewestBuild` selector with a
/// constraint (`latest`) and ignores it; Dray refuses it at `dray apply` (configuration it
/// would not honour), a documented difference.
#[test]
fn kargo_new_newest_build_selector_with_a_constraint_is_refused() {
    let err = Selector::new(&sub(S::NewestBuild, "latest"), ExprLanguage::Cel)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`NewestBuild` does not use a constraint"),
        "{err}"
    );
    assert!(Selector::new(&sub(S::NewestBuild, ""), ExprLanguage::Cel).is_ok());
}

/// Kargo `TestNewDigestSelector`: the constraint is the tag whose digest is followed.
#[test]
fn kargo_new_digest_selector() {
    let selector = Selector::new(&sub(S::Digest, "latest"), ExprLanguage::Cel).unwrap();
    assert_eq!(selector.digest_tag.as_deref(), Some("latest"));
}

/// Kargo `TestValidatePlatformConstraint`, `TestParsePlatformConstraint` and
/// `TestPlatformConstraintString`.
#[test]
fn kargo_platform_constraints() {
    // (text, Kargo valid, how it prints)
    let cases: [(&str, bool, &str); 3] = [
        ("invalid", false, ""),
        ("linux/amd64", true, "linux/amd64"),
        ("linux/amd64/fake-variant", true, "linux/amd64/fake-variant"),
    ];
    for (text, valid, shown) in cases {
        let got = Platform::parse(text);
        assert_eq!(got.is_some(), valid, "`{text}`");
        if let Some(platform) = got {
            assert_eq!(platform.to_string(), shown);
            assert_eq!(platform.os, "linux");
            assert_eq!(platform.architecture, "amd64");
        }
    }
    assert_eq!(
        Platform::parse("linux/amd64/fake-variant")
            .and_then(|p| p.variant)
            .as_deref(),
        Some("fake-variant")
    );
    // The subscription takes it too.
    let mut s = sub(S::SemVer, "");
    s.platform = Some("linux/amd64/fake-variant".into());
    assert!(Selector::new(&s, ExprLanguage::Cel).is_ok());
}

/// Kargo `TestPlatformConstraintMatches`: an image for `linux/amd64` serves `linux/amd64`,
/// one for `linux/arm64` does not.
#[test]
fn kargo_platform_constraint_matches() {
    let wanted = Platform::parse("linux/amd64").unwrap();
    let cases: [(&str, bool); 2] = [("linux/amd64", true), ("linux/arm64", false)];
    for (image, matches) in cases {
        let image = Platform::parse(image).unwrap();
        assert_eq!(image.serves(&wanted), matches, "{image}");
    }
}

/// Kargo's SemVer selector checks tags with Masterminds `Constraints.Check`: with no
/// constraint every version counts, pre-releases too; a comparator naming any pre-release
/// admits every pre-release it orders. Dray follows npm instead (documented): without a
/// constraint pre-releases are skipped, and a pre-release counts only when a comparator
/// names one of the same `major.minor.patch`. Dray's answer is asserted, Kargo's beside it.
#[test]
fn kargo_pre_release_difference() {
    // (constraint, tag, Kargo's answer, Dray's answer)
    let cases: [(&str, &str, bool, bool); 5] = [
        ("", "1.2.0-rc.1", true, false),
        ("^1.0.0", "1.2.0-rc.1", false, false),
        (">=1.2.0-rc.0", "1.2.0-rc.1", true, true),
        (">=1.2.0-rc.0", "1.3.0-rc.1", true, false),
        (">=1.2.0-rc.0", "1.3.0", true, true),
    ];
    for (constraint, tag, kargo, dray) in cases {
        let got = Selector::new(&sub(S::SemVer, constraint), ExprLanguage::Cel)
            .unwrap()
            .rank(REPO, &list(&[tag]))
            .is_ok();
        assert_eq!(got, dray, "`{constraint}` on `{tag}` (Kargo: {kargo})");
    }
}

/// Masterminds constraint forms Kargo users write (Kargo's tests only check that `^1.24`
/// parses and `invalid` does not; these are Masterminds' documented meanings, which
/// Kargo inherits). Every one means the same in Dray.
#[test]
fn kargo_masterminds_constraint_forms() {
    // (constraint, matching versions, non-matching versions)
    let cases: [(&str, &[&str], &[&str]); 10] = [
        ("^1.2.3", &["1.2.3", "1.9.0"], &["1.2.2", "2.0.0"]),
        ("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0", "0.2.2"]),
        ("^0.0.3", &["0.0.3"], &["0.0.4"]),
        ("~1.2.3", &["1.2.3", "1.2.9"], &["1.3.0"]),
        ("~1", &["1.0.0", "1.9.9"], &["2.0.0"]),
        ("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.4.6", "1.1.9"]),
        ("2.x", &["2.0.0", "2.9.9"], &["3.0.0", "1.9.9"]),
        (">= 1.2, < 3.0.0", &["1.2.0", "2.9.9"], &["3.0.0", "1.1.0"]),
        ("!=4.1.0", &["4.0.0", "4.2.0"], &["4.1.0"]),
        ("^1.2 || ^3.0", &["1.5.0", "3.1.0"], &["2.0.0", "4.0.0"]),
    ];
    for (text, yes, no) in cases {
        let c = Constraint::parse(text).unwrap_or_else(|e| panic!("`{text}`: {e}"));
        for v in yes {
            assert!(c.matches(&parse_tag(v, true).unwrap()), "`{text}` on {v}");
        }
        for v in no {
            assert!(!c.matches(&parse_tag(v, true).unwrap()), "`{text}` on {v}");
        }
    }
}
