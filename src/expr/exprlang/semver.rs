//! `semverParse` and `semverDiff` as Kargo has them (on Masterminds' semver): versions read
//! leniently (a `v` prefix, missing minor and patch are 0), and a difference named by the
//! most significant part that differs: `Major`, `Minor`, `Patch`, `Metadata`, `None`
//! (a prerelease difference alone is `None`, as in Kargo), or `Incomparable`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::json;

/// A parsed version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    prerelease: String,
    metadata: String,
    original: String,
}

impl Version {
    /// Kargo's shape: `{Major, Minor, Patch, Prerelease, Metadata, Original}`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        json!({
            "Major": self.major,
            "Minor": self.minor,
            "Patch": self.patch,
            "Prerelease": self.prerelease,
            "Metadata": self.metadata,
            "Original": self.original,
        })
    }
}

static VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$",
    )
    .unwrap_or_else(|err| panic!("semver pattern: {err}"))
});

/// `text` as a version, as Masterminds' `NewVersion` reads it.
pub(crate) fn parse(text: &str) -> Option<Version> {
    let caps = VERSION.captures(text)?;
    let number =
        |i: usize| -> Option<u64> { caps.get(i).map_or(Some(0), |m| m.as_str().parse().ok()) };
    let text_of = |i: usize| caps.get(i).map_or(String::new(), |m| m.as_str().to_owned());
    Some(Version {
        major: number(1)?,
        minor: number(2)?,
        patch: number(3)?,
        prerelease: text_of(4),
        metadata: text_of(5),
        original: text.to_owned(),
    })
}

/// `semverDiff(a, b)`.
pub(crate) fn diff(a: &str, b: &str) -> &'static str {
    let (Some(a), Some(b)) = (parse(a), parse(b)) else {
        return "Incomparable";
    };
    if a.major != b.major {
        "Major"
    } else if a.minor != b.minor {
        "Minor"
    } else if a.patch != b.patch {
        "Patch"
    } else if a.metadata != b.metadata {
        "Metadata"
    } else {
        "None"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_leniently() {
        let v = parse("v1.2.3-rc.1+build.5").unwrap();
        assert_eq!(
            v.to_json(),
            json!({"Major": 1, "Minor": 2, "Patch": 3, "Prerelease": "rc.1",
                   "Metadata": "build.5", "Original": "v1.2.3-rc.1+build.5"})
        );
        assert_eq!(parse("1.2").unwrap().to_json()["Patch"], 0);
        assert!(parse("not-a-version").is_none());
        assert!(parse("1.2.3.4").is_none());
        assert!(parse("99999999999999999999999.0.0").is_none());
    }

    #[test]
    fn diff_names_the_largest_difference() {
        assert_eq!(diff("1.0.0", "2.0.0"), "Major");
        assert_eq!(diff("1.0.0", "1.1.0"), "Minor");
        assert_eq!(diff("1.0.0", "1.0.1"), "Patch");
        assert_eq!(diff("1.0.0+a", "1.0.0+b"), "Metadata");
        assert_eq!(diff("1.0.0", "v1.0.0"), "None");
        assert_eq!(diff("1.0.0-alpha", "1.0.0-beta"), "None");
        assert_eq!(diff("1.0.0", "bogus"), "Incomparable");
    }
}
