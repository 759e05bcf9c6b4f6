//! Durations in configuration: written the Go way (`30s`, `5m`, `1h30m`, `2d`), which is
//! what the CRDs' schema pattern accepts, checked with [`crate::api::parse_duration`] — the
//! parser that reads them when they are used, and the steps' own ([`dray_steps::duration`]).

use crate::api::parse_duration;

use super::error::Issue;
use super::path::FieldPath;

/// Checks the duration `text` found at `path`.
pub(crate) fn check(text: &str, path: FieldPath) -> Option<Issue> {
    parse_duration(text).err().map(|e| Issue::new(path, e))
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
            "`5 minutes` is not a duration; write a duration such as `30s`, `5m` or `1h30m` \
             (no spaces)"
        );
    }
}
