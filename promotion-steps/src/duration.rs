//! Durations as Dray's configuration writes them, the Go way: one or more `<number><unit>`
//! with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, `d` and an optional fraction (`30s`,
//! `1h30m`, `1.5h`, `500ms`, `2d`) — exactly what the CRDs' schema pattern
//! `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$` accepts. The one parser for every step's
//! durations and for `dray apply`'s check of them; with [`Units::WithWeeks`] also for API
//! token lifetimes (`2w`).

use std::time::Duration;

/// The units, each with its length in nanoseconds.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3_600 * 1_000_000_000),
    ("d", 86_400 * 1_000_000_000),
];

/// A week, which only [`Units::WithWeeks`] reads.
const WEEK: (&str, u128) = ("w", 7 * 86_400 * 1_000_000_000);

/// The units a duration may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// `ns` to `d`: what the CRDs' schema pattern accepts.
    Go,
    /// [`Units::Go`] and `w` (seven days), for token lifetimes.
    WithWeeks,
}

impl Units {
    fn all(self) -> impl Iterator<Item = &'static (&'static str, u128)> {
        let week = match self {
            Units::Go => None,
            Units::WithWeeks => Some(&WEEK),
        };
        UNITS.iter().chain(week)
    }
}

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not of the form `<number><unit>…`.
    #[error("`{0}` is not a duration")]
    Malformed(String),
    /// Longer than Dray can count.
    #[error("`{0}` is too long a duration")]
    TooLong(String),
}

/// Reads a Go-style duration (see the module's documentation). Surrounding spaces are
/// ignored; spaces inside are not allowed.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    parse_with(text, Units::Go)
}

/// [`parse`], in a chosen set of [`Units`].
pub fn parse_with(text: &str, units: Units) -> Result<Duration, DurationError> {
    let malformed = || DurationError::Malformed(text.to_owned());
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(malformed());
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if whole_len == 0 {
            return Err(malformed());
        }
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let len = after_dot.len()
                - after_dot
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            if len == 0 {
                return Err(malformed());
            }
            fraction = &after_dot[..len];
            rest = &after_dot[len..];
        }
        // Longest unit first, so that `ms` is not read as `m` followed by `s`.
        let (unit, scale) = units
            .all()
            .filter(|(unit, _)| rest.starts_with(unit))
            .max_by_key(|(unit, _)| unit.len())
            .ok_or_else(malformed)?;
        rest = &rest[unit.len()..];
        let too_long = || DurationError::TooLong(text.to_owned());
        let whole: u128 = whole.parse().map_err(|_| too_long())?;
        let mut part = whole.checked_mul(*scale).ok_or_else(too_long)?;
        // Digits beyond nanoseconds cannot change the value.
        let mut place = *scale;
        for digit in fraction.bytes().take(20) {
            place /= 10;
            part = part.saturating_add(u128::from(digit - b'0') * place);
        }
        nanos = nanos.checked_add(part).ok_or_else(too_long)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000)
        .map_err(|_| DurationError::TooLong(text.to_owned()))?;
    let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_crd_pattern_accepts() {
        let ok = |text: &str| parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("72h"), Duration::from_secs(72 * 3600));
        assert_eq!(ok("2d"), Duration::from_secs(2 * 86_400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("10µs"), Duration::from_micros(10));
        assert_eq!(ok("10us"), Duration::from_micros(10));
        assert_eq!(ok("1m0.25s"), Duration::from_millis(60_250));
        assert_eq!(ok(" 5m "), Duration::from_secs(300));
        for bad in [
            "",
            "5",
            "5 minutes",
            "5min",
            "m",
            "1.h",
            "soon",
            "-5s",
            "1h 30m",
            ".5s",
        ] {
            assert_eq!(
                parse(bad),
                Err(DurationError::Malformed(bad.to_owned())),
                "{bad}"
            );
        }
        assert!(matches!(
            parse("18446744073709551615d"),
            Err(DurationError::TooLong(_))
        ));
    }

    #[test]
    fn weeks_are_read_only_when_asked_for() {
        assert_eq!(parse("2w"), Err(DurationError::Malformed("2w".to_owned())));
        assert_eq!(
            parse_with("2w", Units::WithWeeks),
            Ok(Duration::from_secs(14 * 86_400))
        );
        assert_eq!(
            parse_with("1w1d", Units::WithWeeks),
            Ok(Duration::from_secs(8 * 86_400))
        );
    }
}
