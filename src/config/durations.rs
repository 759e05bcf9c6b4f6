//! Durations in configuration: written the Go way (`30s`, `5m`, `1h30m`, `2d`), which is
//! what the CRDs' schema pattern accepts, and parsed with [`crate::api::parse_duration`].

use crate::api::parse_duration;

use super::error::Issue;
use super::path::FieldPath;

const UNITS: [&str; 8] = ["ns", "us", "µs", "ms", "s", "m", "h", "d"];

/// Checks the duration `text` found at `path`.
pub(crate) fn check(text: &str, path: FieldPath) -> Option<Issue> {
    if let Err(e) = parse_duration(text) {
        return Some(Issue::new(path, e));
    }
    (!is_go_duration(text)).then(|| {
        Issue::new(
            path,
            format!("`{text}` is not a duration in the form the CRDs accept"),
        )
        .hint("write a duration such as `30s`, `5m` or `1h30m` (no spaces)")
    })
}

/// `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$`.
fn is_go_duration(text: &str) -> bool {
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        if let Some(fraction) = rest.strip_prefix('.') {
            let digits = fraction.len()
                - fraction
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            if digits == 0 {
                return false;
            }
            rest = &fraction[digits..];
        }
        // Longest unit first, so that `ms` is not read as `m` followed by `s`.
        let Some(unit) = UNITS
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len())
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_go_durations_only() {
        for good in ["30s", "5m", "1h30m", "2d", "1.5h", "100ms", "10µs"] {
            assert!(check(good, FieldPath::root()).is_none(), "{good}");
        }
        for bad in ["", "5", "5 minutes", "5min", "m", "1.h", "soon", "-5s"] {
            assert!(check(bad, FieldPath::root()).is_some(), "{bad}");
        }
        let issue = check("5 minutes", FieldPath::of(&["spec", "interval"])).unwrap();
        assert_eq!(
            issue.message,
            "`5 minutes` is not a duration in the form the CRDs accept"
        );
    }
}
