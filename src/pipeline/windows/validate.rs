//! Checking a promotion window as it is applied: every problem at once ([`problems`]), or
//! the first ([`validate`]). Shares the parsing with evaluation, so what passes here can be
//! evaluated.

use globset::Glob;
use jiff::tz::TimeZone;

use crate::api::PromotionWindow;

use super::duration::{window_duration, window_zone, zone_name};
use super::error::WindowError;
use super::recurrence::Recurrence;

/// Checks `window` as it is applied: the first problem found, if any. See [`problems`].
pub fn validate(window: &PromotionWindow) -> Result<(), WindowError> {
    match problems(window).into_iter().next() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Every problem with `window`: schedule/rrule (exactly one, and parseable), duration
/// (present, parseable, positive), time zone (known), stage selector (a valid glob).
pub fn problems(window: &PromotionWindow) -> Vec<WindowError> {
    let mut found = Vec::new();
    if let Some(name) = window.stage_selector.name.as_deref()
        && let Some(pattern) = name.strip_prefix("glob:")
        && let Err(error) = Glob::new(pattern)
    {
        found.push(WindowError::BadSelector {
            window: window.name.clone(),
            pattern: name.to_owned(),
            reason: error.kind().to_string(),
        });
    }
    if let Err(error) = window_duration(window) {
        found.push(error);
    }
    // A bad zone is reported, and a cron schedule is still checked (in UTC); an rrule is
    // not, since its times depend on the zone.
    let (zone, tz) = match window_zone(window) {
        Ok(tz) => (zone_name(window), tz),
        Err(error) => {
            found.push(error);
            if window.rrule.is_some() && window.schedule.is_none() {
                return found;
            }
            ("UTC", TimeZone::UTC)
        }
    };
    match Recurrence::compile_in(window, zone, tz) {
        Ok(recurrence) => {
            if let Err(error) = recurrence.check_occurs(window) {
                found.push(error);
            }
        }
        Err(error) => found.push(error),
    }
    found
}
