//! Kargo's own git-selection test cases, run through Dray's selection functions.
//!
//! Owns nothing but tests: each table follows one Kargo test of
//! `akuity/kargo` `internal/controller/warehouses/git_test.go` (named in its comment), with
//! Kargo's inputs and Kargo's expected answer, run through [`super::select`]. Where Dray
//! answers differently, the case asserts Dray's answer with Kargo's beside it and says
//! whether the difference is deliberate or reported (`docs/kargo-compatibility.md`,
//! "Selection parity"), so a change on either side fails here.

use super::select::{PathFilter, SemverConstraint, TagFilter, parse_version, sort_semver};

fn own(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `matchesPathsFilters` through Dray: compile both lists, then ask about the diff.
fn matches(include: &[&str], exclude: &[&str], diffs: &[&str]) -> Result<bool, String> {
    let filter = PathFilter::new(&own(include), &own(exclude)).map_err(|e| e.to_string())?;
    Ok(filter.is_relevant(diffs.iter().copied()))
}

/// `selectSemverTag` through Dray: the tags that read as versions and satisfy the
/// constraint, highest first; the first is the selection.
fn select_semver(tags: &[&str], constraint: &str) -> Result<Option<String>, String> {
    let constraint = SemverConstraint::new(Some(constraint)).map_err(|e| e.to_string())?;
    let mut versions: Vec<_> = tags
        .iter()
        .filter_map(|t| Some(((*t).to_owned(), parse_version(t, true)?)))
        .filter(|(_, v)| constraint.allows(v))
        .collect();
    sort_semver(&mut versions);
    Ok(versions.into_iter().next().map(|(t, _)| t))
}

const R: &str = "regex:";
const RP: &str = "regexp:";
const G: &str = "glob:";

/// Kargo `TestMatchesPathsFilters`, every case. `None` is Kargo's error.
#[test]
fn kargo_matches_paths_filters() {
    let two = ["path1/values.yaml", "path2/_helpers.tpl"];
    let many = [
        "path1/values.yaml",
        "path2/_helpers.tpl",
        "abc",
        "abb",
        "aba",
        "abz",
        "aby",
        "abx",
        "abw",
        "abv",
        "abu",
    ];
    let mix1_diffs: Vec<&str> = many
        .iter()
        .copied()
        .chain(["path3/abc/abd/abe/deployment.yaml", "path4.txt"])
        .collect();
    struct Case<'a> {
        name: &'a str,
        include: Vec<String>,
        exclude: Vec<String>,
        diffs: Vec<&'a str>,
        kargo: Option<bool>,
    }
    let p = |prefix: &str, s: &str| format!("{prefix}{s}");
    let cases = [
        Case {
            name: "success with no includePaths configured",
            include: vec![],
            exclude: vec![p(RP, "nonexistent")],
            diffs: two.to_vec(),
            kargo: Some(true),
        },
        Case {
            name: "success with a matching regexp filters configuration",
            include: vec![p(RP, r"values\.ya?ml$")],
            exclude: vec![p(R, "nonexistent")],
            diffs: two.to_vec(),
            kargo: Some(true),
        },
        Case {
            name: "success with unmatching regexp filters configuration",
            include: vec![p(RP, r"values\.ya?ml$")],
            exclude: vec![p(R, "nonexistent"), p(RP, ".*val.*")],
            diffs: two.to_vec(),
            kargo: Some(false),
        },
        Case {
            name: "success with matching glob filters configuration",
            include: vec!["glob:path2/*.tpl".into()],
            exclude: vec!["nonexistent".into()],
            diffs: two.to_vec(),
            kargo: Some(true),
        },
        Case {
            name: "success with unmatching glob filters configuration",
            include: vec!["path2/*.tpl".into()],
            exclude: vec![p(R, "nonexistent"), "*/?helpers.tpl".into()],
            diffs: two.to_vec(),
            kargo: Some(false),
        },
        Case {
            name: "success with matching prefix filters configuration",
            include: vec!["path1/".into()],
            exclude: vec!["nonexistent".into()],
            diffs: two.to_vec(),
            kargo: Some(true),
        },
        Case {
            name: "success with unmatching prefix filters configuration",
            include: vec!["path3/".into()],
            exclude: vec![p(R, "nonexistent"), "*/?helpers.tpl".into()],
            diffs: two.to_vec(),
            kargo: Some(false),
        },
        Case {
            name: "error with invalid regexp in excludePaths configuration",
            include: vec![p(R, r"values\.ya?ml$")],
            exclude: vec![p(RP, "nonexistent"), p(RP, ".*val.*"), p(R, "[")],
            diffs: two.to_vec(),
            kargo: None,
        },
        Case {
            name: "error with invalid glob syntax",
            include: vec!["glob:path2/*.tpl[".into()],
            exclude: vec![],
            diffs: two.to_vec(),
            kargo: None,
        },
        Case {
            name: "success unmatching mix1",
            include: vec!["path3".into(), p(R, "nonexistent"), p(G, "nonexistent")],
            exclude: vec![
                p(R, "nonexistent"),
                "*/?helpers.tpl".into(),
                p(G, "nonexistent"),
            ],
            diffs: two.to_vec(),
            kargo: Some(false),
        },
        Case {
            name: "success unmatching mix2",
            include: vec!["path1".into(), p(R, "[_-]"), p(G, "nonexistent")],
            exclude: vec![
                p(R, "nonexistent"),
                "path1".into(),
                "path1".into(),
                p(G, "*.tpl"),
                p(G, "*/*.tpl"),
                p(G, "*.tpl"),
                "path1".into(),
            ],
            diffs: vec![
                "path1/values.yaml",
                "path2/_helpers.tpl",
                "path2/ingress.yaml",
            ],
            kargo: Some(false),
        },
        Case {
            // Kargo leaves `path1/file1` out of `path1/f` (a path, not a string prefix) and
            // Dray keeps it (see the difference below); `\d` excludes every path anyway.
            name: "success unmatching mix3",
            include: vec!["path1/f".into(), p(RP, "path[1-3]"), p(G, "file*")],
            exclude: vec![
                p(R, r"\d"),
                "yaml".into(),
                p(G, "*.tpl"),
                p(G, "*.tpl"),
                "nonexistent".into(),
            ],
            diffs: vec!["path1/file1", "path2/file2", "path3/file3"],
            kargo: Some(false),
        },
        Case {
            name: "success matching mix1",
            include: vec![
                "path1".into(),
                p(R, "[_-]"),
                p(G, "nonexistent"),
                p(R, "no"),
                p(G, "*/*/*/abe/*"),
            ],
            exclude: vec![
                p(R, "nonexistent"),
                "path1".into(),
                "path1".into(),
                p(G, "*.tpl"),
                p(G, "*/*.tpl"),
                p(G, "*.tpl"),
                p(RP, ".*q"),
            ],
            diffs: mix1_diffs.clone(),
            kargo: Some(true),
        },
        Case {
            name: "success matching mix3; no includePaths",
            include: vec![],
            exclude: vec![p(RP, "ab[cbazxwvu]"), "helpers.tpl".into(), p(G, "path*/*")],
            diffs: many.to_vec(),
            kargo: Some(true),
        },
    ];
    for case in &cases {
        let include: Vec<&str> = case.include.iter().map(String::as_str).collect();
        let exclude: Vec<&str> = case.exclude.iter().map(String::as_str).collect();
        let got = matches(&include, &exclude, &case.diffs);
        match case.kargo {
            Some(expected) => assert_eq!(got, Ok(expected), "{}", case.name),
            None => assert!(got.is_err(), "{}: {got:?}", case.name),
        }
    }
    assert_eq!(cases.len(), 14);
}

/// Kargo `TestMatchesPathsFilters` "success unmatching mix2; no config": no filters and no
/// changed paths is `false` in Kargo's function, but Kargo never calls it without filters
/// (a commit then always counts, as in its "newest from branch; success" case). Dray's
/// filter answers for that whole rule: without filters every commit counts. Deliberate.
#[test]
fn kargo_no_path_filters_every_commit_counts() {
    assert_eq!(matches(&[], &[], &[]), Ok(true));
}

/// Found by these tests and fixed: Kargo reads a plain `includePaths`/`excludePaths` entry
/// as a *directory or file path* (it takes `filepath.Rel(entry, path)` and matches when
/// the result has no `..`); Dray read it as a string prefix and now reads it as Kargo
/// does. One deliberate difference stays: a file whose name contains `..` is under its
/// directory in Dray (Kargo's `..` test on the relative path also rejects it).
#[test]
fn kargo_plain_paths_are_paths_not_string_prefixes() {
    // (entry, changed path, Kargo's answer, Dray's answer)
    let cases: [(&str, &str, bool, bool); 6] = [
        // From "success unmatching mix3": `path1/f` is not a parent of `path1/file1`.
        ("path1/f", "path1/file1", false, false),
        ("path1", "path10/values.yaml", false, false),
        ("path1/", "path1/values.yaml", true, true),
        // The same answer where the entry names a directory or the file itself.
        ("path1", "path1/values.yaml", true, true),
        ("path1/values.yaml", "path1/values.yaml", true, true),
        // Kargo's `..` test also rejects a file whose name contains `..`.
        ("apps", "apps/a..b.yaml", false, true),
    ];
    for (entry, path, kargo, dray) in cases {
        assert_eq!(
            matches(&[entry], &[], &[path]),
            Ok(dray),
            "include `{entry}` on `{path}` (Kargo: {kargo})"
        );
    }
}

/// Deliberate extension: Kargo's `glob:` is Go's `filepath.Match`, where `**` is two `*`
/// and crosses no `/`; Dray's glob takes `**` across directories. Where `**` is not
/// written they agree (`*` crosses no `/` in either).
#[test]
fn kargo_glob_double_star_difference() {
    // (glob, changed path, Kargo's answer, Dray's answer)
    let cases: [(&str, &str, bool, bool); 3] = [
        ("glob:**/x.yaml", "a/b/x.yaml", false, true),
        ("glob:**/x.yaml", "a/x.yaml", true, true),
        ("glob:*/x.yaml", "a/b/x.yaml", false, false),
    ];
    for (glob, path, kargo, dray) in cases {
        assert_eq!(
            matches(&[glob], &[], &[path]),
            Ok(dray),
            "`{glob}` on `{path}` (Kargo: {kargo})"
        );
    }
}

/// Kargo `TestSelectCommitID`'s path-filter cases: an unreadable `regexp:` is an error; a
/// commit whose changed paths all miss `includePaths` does not count.
#[test]
fn kargo_select_commit_id_path_filters() {
    let diffs = ["first_path_to_a/file", "second_path_to_a/file"];
    assert!(matches(&["regexp:["], &[], &["some_path_to_a/file"]).is_err());
    assert_eq!(matches(&["regexp:^third.*"], &[], &diffs), Ok(false));
    assert_eq!(
        matches(&["regexp:^.*third_path_to_a/file$"], &[], &diffs),
        Ok(false)
    );
}

/// Kargo `TestSelectCommitID`'s tag cases: `allowTags: "["` is an error, `ignoreTags: [abc]`
/// filters out the only tag `abc`, an unreadable `semverConstraint` is an error, and SemVer
/// over `1.0.0`, `2.0.0` takes `2.0.0`.
#[test]
fn kargo_select_commit_id_tags() {
    assert!(TagFilter::new(&own(&["["]), &[]).is_err());
    let ignore = TagFilter::new(&[], &own(&["abc"])).unwrap();
    assert!(!ignore.allows("abc"));
    assert!(select_semver(&["1.0.0", "2.0.0"], "invalid").is_err());
    assert_eq!(
        select_semver(&["1.0.0", "2.0.0"], "").unwrap().as_deref(),
        Some("2.0.0")
    );
}

/// Kargo `TestAllows` and `TestIgnores`.
#[test]
fn kargo_allows_and_ignores() {
    // (allow, ignore, tag, Kargo's answer)
    let cases: [(&[&str], &[&str], &str, bool); 5] = [
        (&[], &[], "abc", true),
        (&["[a-z]+"], &[], "abc", true),
        (&["[a-z]+"], &[], "123", false),
        (&[], &["abc"], "abc", false),
        (&[], &["abc"], "123", true),
    ];
    for (allow, ignore, tag, kargo) in cases {
        let filter = TagFilter::new(&own(allow), &own(ignore)).unwrap();
        assert_eq!(filter.allows(tag), kargo, "{allow:?} {ignore:?} `{tag}`");
    }
}

/// Reported difference: Kargo's `ignores` compares whole tag names; Dray's git
/// `ignoreTags` are unanchored regular expressions (`docs/resources.md`), as its image
/// `ignoreTags` are. Dray's answer is asserted; Kargo's is beside it.
#[test]
fn kargo_ignore_tags_difference_whole_names_vs_regexes() {
    // (ignore, tag, Kargo's answer, Dray's answer)
    let cases: [(&str, &str, bool, bool); 3] = [
        ("abc", "abcd", true, false),
        ("v1.0.0", "v1.0.0-rc.1", true, false),
        ("^v1\\.0\\.0$", "v1.0.0-rc.1", true, true),
    ];
    for (ignore, tag, kargo, dray) in cases {
        let filter = TagFilter::new(&[], &own(&[ignore])).unwrap();
        assert_eq!(
            filter.allows(tag),
            dray,
            "ignore `{ignore}` on `{tag}` (Kargo: {kargo})"
        );
    }
}

/// Kargo `TestSelectSemverTag`, every case. `Err` is Kargo's error, `Ok(None)` no tag.
#[test]
fn kargo_select_semver_tag() {
    // (constraint, tags, Kargo's answer)
    type Case<'a> = (&'a str, &'a [&'a str], Result<Option<&'a str>, ()>);
    let cases: [Case; 6] = [
        ("invalid", &[], Err(())),
        ("", &[], Ok(None)),
        ("", &["abc", "xyz", "foo", "bar"], Ok(None)),
        (">=2.0.0", &["v1.0.0", "v1.2.3"], Ok(None)),
        ("", &["v1.0.0", "v1.2.3"], Ok(Some("v1.2.3"))),
        ("<2.0.0", &["v1.0.0", "v2.2.3"], Ok(Some("v1.0.0"))),
    ];
    for (constraint, tags, kargo) in cases {
        let got = select_semver(tags, constraint);
        match kargo {
            Ok(expected) => assert_eq!(
                got.as_ref().map(Option::as_deref),
                Ok(expected),
                "`{constraint}` on {tags:?}"
            ),
            Err(()) => assert!(got.is_err(), "`{constraint}`: {got:?}"),
        }
    }
}

/// Masterminds constraint forms (Kargo's git `semverConstraint` is Masterminds, like its
/// image `constraint`) on which Dray's git constraint agrees: `(constraint, version,
/// Kargo's answer)`.
#[test]
fn kargo_masterminds_constraint_forms() {
    let cases: [(&str, &str, bool); 9] = [
        ("^1.2.3", "1.9.0", true),
        ("^1.2.3", "2.0.0", false),
        ("^0.2.3", "0.3.0", false),
        ("~1.2.3", "1.3.0", false),
        ("1.2 - 1.4.5", "1.4.6", false),
        ("2.x", "2.9.9", true),
        (">= 1.2, < 3.0.0", "2.9.9", true),
        ("^1.2 || ^3.0", "2.0.0", false),
        ("^1.2 || ^3.0", "3.1.0", true),
    ];
    for (text, version, kargo) in cases {
        let c = SemverConstraint::new(Some(text)).unwrap_or_else(|e| panic!("`{text}`: {e}"));
        let v = parse_version(version, true).unwrap();
        assert_eq!(c.allows(&v), kargo, "`{text}` on {version}");
    }
}

/// Found by these tests and fixed: the git `semverConstraint` went to `node-semver` as
/// written, which dropped a comparator before `, ` (so `>= 1.2, < 3.0.0` admitted `1.1.0`)
/// and could not read `,` without a space or `!=`. Kargo (Masterminds) reads all three,
/// and now the git side reads them as the image side does (`discovery::image::constraint`).
/// `None` would be Dray refusing the constraint.
#[test]
fn kargo_git_constraint_forms_read_as_the_image_side_reads_them() {
    // (constraint, version, Kargo's answer, Dray's answer): git subscriptions read
    // constraints as image subscriptions do, so Masterminds' `,` and `!=` forms agree.
    let cases: [(&str, &str, bool, Option<bool>); 4] = [
        (">= 1.2, < 3.0.0", "1.1.0", false, Some(false)),
        (">=1.2.0,<3.0.0", "1.1.0", false, Some(false)),
        (">=1.2.0,<3.0.0", "2.5.0", true, Some(true)),
        ("!=4.1.0", "4.2.0", true, Some(true)),
    ];
    for (text, version, kargo, dray) in cases {
        let v = parse_version(version, true).unwrap();
        let got = SemverConstraint::new(Some(text)).ok().map(|c| c.allows(&v));
        assert_eq!(got, dray, "`{text}` on {version} (Kargo: {kargo})");
    }
}
