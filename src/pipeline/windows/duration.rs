//! A window's `duration` and `timeZone`, read and checked.

use jiff::SignedDuration;
use jiff::tz::TimeZone;

use crate::api::{PromotionWindow, parse_duration};

use super::error::WindowError;

/// The window's `duration`, which must be present and positive.
pub(super) fn window_duration(window: &PromotionWindow) -> Result<SignedDuration, WindowError> {
    let Some(text) = window.duration.as_deref() else {
        return Err(WindowError::MissingDuration {
            window: window.name.clone(),
        });
    };
    let bad = |reason: String| WindowError::BadDuration {
        window: window.name.clone(),
        duration: text.to_owned(),
        reason,
    };
    let duration = parse_duration(text).map_err(bad)?;
    let duration = SignedDuration::try_from(duration).map_err(|e| bad(e.to_string()))?;
    if duration.is_zero() {
        return Err(bad("an occurrence must last longer than zero".to_owned()));
    }
    Ok(duration)
}

/// The time zone the window is read in; `UTC` when unset.
pub(super) fn zone_name(window: &PromotionWindow) -> &str {
    window.time_zone.as_deref().unwrap_or("UTC")
}

/// The time zone the window is read in, which must be known.
pub(super) fn window_zone(window: &PromotionWindow) -> Result<TimeZone, WindowError> {
    let zone = zone_name(window);
    TimeZone::get(zone).map_err(|_| WindowError::UnknownTimeZone {
        window: window.name.clone(),
        zone: zone.to_owned(),
    })
}

/// Whether `zone` names UTC itself, so that times written with `Z` are in it.
pub(super) fn is_utc(zone: &str) -> bool {
    ["UTC", "Etc/UTC", "Etc/Zulu", "Zulu", "Etc/UCT", "UCT"]
        .iter()
        .any(|utc| zone.eq_ignore_ascii_case(utc))
}
