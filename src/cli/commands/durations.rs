//! The clap value parsers of every duration flag: one grammar, [`crate::api::parse_duration`]'s
//! Go form (`90s`, `10m`, `1h30m`, `500ms`), each flag with its bounds
//! ([`crate::api::DurationRule`]); a bare number only for `dray refresh --timeout`, which
//! was always documented in seconds, and weeks (`2w`) only for token lifetimes.

use std::time::Duration;

use crate::api::DurationRule;

/// `dray refresh --timeout`: at most the server's wait (120s); a bare number is seconds.
pub const REFRESH_TIMEOUT: DurationRule = DurationRule {
    min: Duration::from_secs(1),
    max: Duration::from_secs(120),
    bare_seconds: true,
    weeks: false,
};

/// `--wait` timeouts of commands that follow something (`dray verify --wait`): 1s to 24h.
pub const WAIT_TIMEOUT: DurationRule =
    DurationRule::between(Duration::from_secs(1), Duration::from_secs(24 * 3600));

/// `dray token create --expires-in`: 1s to ten years; weeks allowed (`2w`).
pub const TOKEN_LIFETIME: DurationRule = DurationRule {
    min: Duration::from_secs(1),
    max: Duration::from_secs(10 * 366 * 86_400),
    bare_seconds: false,
    weeks: true,
};

/// `dray freeze --until` as a duration from now: 1s to a year; weeks allowed (`2w`).
pub const FREEZE_LENGTH: DurationRule = DurationRule {
    min: Duration::from_secs(1),
    max: Duration::from_secs(366 * 86_400),
    bare_seconds: false,
    weeks: true,
};

/// The value parser of `dray freeze --until`: an RFC 3339 time (`2026-12-24T18:00:00Z`),
/// or a duration from now (`2h`, `1w`); the time, as RFC 3339.
pub fn freeze_until(text: &str) -> Result<String, String> {
    if let Ok(at) = text.trim().parse::<jiff::Timestamp>() {
        return Ok(at.to_string());
    }
    let length = FREEZE_LENGTH.parse(text).map_err(|e| {
        format!("{e}; give an RFC 3339 time (`2026-12-24T18:00:00Z`) or a duration (`2h`, `1w`)")
    })?;
    let length = jiff::SignedDuration::try_from(length).map_err(|e| e.to_string())?;
    Ok((jiff::Timestamp::now() + length)
        .round(jiff::Unit::Second)
        .map_err(|e| e.to_string())?
        .to_string())
}

/// `--git-fetch-timeout` of `dray serve` and `dray controller`: 1s to 24h.
pub const GIT_FETCH_TIMEOUT: DurationRule =
    DurationRule::between(Duration::from_secs(1), Duration::from_secs(24 * 3600));

/// The value parser of `--git-fetch-timeout`.
pub fn git_fetch_timeout(text: &str) -> Result<Duration, String> {
    GIT_FETCH_TIMEOUT.parse(text)
}

/// The value parser of `dray refresh --timeout`.
pub fn refresh_timeout(text: &str) -> Result<Duration, String> {
    REFRESH_TIMEOUT.parse(text)
}

/// The value parser of `--timeout` on `dray verify`.
pub fn wait_timeout(text: &str) -> Result<Duration, String> {
    WAIT_TIMEOUT.parse(text)
}

/// The value parser of `dray token create --expires-in`: the text, once it is a lifetime
/// (the server reads it again).
pub fn token_lifetime(text: &str) -> Result<String, String> {
    TOKEN_LIFETIME.parse(text).map(|_| text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_lasts_until_a_time_or_for_a_while() {
        assert_eq!(
            freeze_until("2026-12-24T18:00:00Z").as_deref(),
            Ok("2026-12-24T18:00:00Z")
        );
        let later: jiff::Timestamp = freeze_until("2h").unwrap().parse().unwrap();
        assert!(later > jiff::Timestamp::now());
        let error = freeze_until("tomorrow").unwrap_err();
        assert!(error.contains("RFC 3339"), "{error}");
    }

    #[test]
    fn each_flag_keeps_its_documented_bounds() {
        assert_eq!(refresh_timeout("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(refresh_timeout("90"), Ok(Duration::from_secs(90)));
        assert_eq!(refresh_timeout("500"), Err("at most 2m (120s)".to_owned()));
        assert_eq!(refresh_timeout("500s"), Err("at most 2m (120s)".to_owned()));
        assert_eq!(wait_timeout("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(git_fetch_timeout("5m"), Ok(Duration::from_secs(300)));
        assert!(git_fetch_timeout("500ms").is_err_and(|e| e.contains("at least")));
        assert!(
            wait_timeout("30").is_err(),
            "a bare number only for refresh"
        );
        assert_eq!(token_lifetime("1h30m"), Ok("1h30m".to_owned()));
        assert_eq!(token_lifetime("2w"), Ok("2w".to_owned()));
        assert!(token_lifetime("11000d").unwrap_err().starts_with("at most"));
    }
}
