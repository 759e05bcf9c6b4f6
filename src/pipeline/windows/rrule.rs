//! An `rrule` (RFC 5545 `DTSTART`, `RRULE`, `RDATE`, `EXDATE` lines) rewritten so that every
//! time in it is read in the window's zone, checked for what a window needs (not too
//! frequent, a DTSTART where the rule counts from one), and expanded into a set.

use jiff::tz::TimeZone;
use rrule::{Frequency, RRule, RRuleSet, Unvalidated};

use crate::api::PromotionWindow;

use super::duration::is_utc;
use super::error::WindowError;

/// An `rrule` rewritten so that every time in it is read in the window's zone.
pub(super) struct RruleText {
    /// `DTSTART`, `RRULE`, `RDATE` and `EXDATE` lines, floating times given a `TZID`.
    lines: Vec<String>,
    has_dtstart: bool,
    zone: String,
}

impl RruleText {
    pub(super) fn compile(
        window: &PromotionWindow,
        text: &str,
        zone: &str,
        tz: &TimeZone,
    ) -> Result<Self, WindowError> {
        let bad = |reason: String, hint: &str| WindowError::BadRrule {
            window: window.name.clone(),
            reason,
            hint: hint.to_owned(),
        };
        let example = "e.g. `FREQ=WEEKLY;BYDAY=FR;BYHOUR=22`, or `DTSTART:20261224T000000Z` \
            and `RRULE:FREQ=YEARLY;COUNT=3` on two lines";
        let mut lines = Vec::new();
        let mut has_dtstart = false;
        let mut rules = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some((head, value)) = line.split_once(':') else {
                // A bare rule, as `rrule` allows: `FREQ=…`.
                let rule = Self::utc_until(line, tz);
                lines.push(format!("RRULE:{rule}"));
                rules.push(rule);
                continue;
            };
            let (name, params) = match head.split_once(';') {
                Some((name, params)) => (name, Some(params)),
                None => (head, None),
            };
            match name.to_ascii_uppercase().as_str() {
                "RRULE" => {
                    let rule = Self::utc_until(value, tz);
                    lines.push(format!("{head}:{rule}"));
                    rules.push(rule);
                }
                property @ ("DTSTART" | "RDATE" | "EXDATE") => {
                    has_dtstart |= property == "DTSTART";
                    lines.push(
                        Self::zoned_line(property, params, value, zone).map_err(
                            |(reason, hint)| bad(format!("{property}: {reason}"), &hint),
                        )?,
                    );
                }
                other => {
                    return Err(bad(
                        format!("`{other}` is not supported"),
                        "use `DTSTART`, `RRULE`, `RDATE` and `EXDATE` lines only",
                    ));
                }
            }
        }
        if rules.is_empty() {
            return Err(bad("there is no RRULE".to_owned(), example));
        }
        for rule in &rules {
            let parsed: RRule<Unvalidated> = rule
                .parse()
                .map_err(|e: rrule::RRuleError| bad(e.to_string(), example))?;
            if matches!(parsed.get_freq(), Frequency::Secondly | Frequency::Minutely) {
                return Err(bad(
                    format!("FREQ={} is too frequent for a window", parsed.get_freq()),
                    "use `schedule` (cron) for windows that start more than once an hour",
                ));
            }
            if has_dtstart {
                continue;
            }
            let needs_start = if parsed.get_count().is_some() {
                Some("COUNT counts from DTSTART")
            } else if parsed.get_interval() > 1 {
                Some("INTERVAL counts from DTSTART")
            } else if parsed.get_freq() == Frequency::Weekly && parsed.get_by_weekday().is_empty() {
                Some("FREQ=WEEKLY without BYDAY takes its weekday from DTSTART")
            } else {
                None
            };
            if let Some(reason) = needs_start {
                return Err(bad(
                    format!("{reason}, and there is no DTSTART"),
                    "add a first line such as `DTSTART:20261224T090000` (read in `timeZone`), \
                     or say the weekday with BYDAY",
                ));
            }
        }
        let rule = RruleText {
            lines,
            has_dtstart,
            zone: zone.to_owned(),
        };
        // Parse and validate the whole set once, from a fixed start when there is none.
        rule.set(2000).map_err(|e| rule.error(window, e))?;
        Ok(rule)
    }

    /// `rule` with a floating `UNTIL` (no `Z`) read in `tz` and written in UTC, as RFC 5545
    /// wants when DTSTART has a zone. A date alone means the end of that day.
    fn utc_until(rule: &str, tz: &TimeZone) -> String {
        let parts: Vec<String> = rule
            .split(';')
            .map(|part| {
                let Some((key, value)) = part.split_once('=') else {
                    return part.to_owned();
                };
                if !key.trim().eq_ignore_ascii_case("UNTIL") || value.ends_with(['Z', 'z']) {
                    return part.to_owned();
                }
                let civil = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%S", value).or_else(|_| {
                    jiff::civil::Date::strptime("%Y%m%d", value).map(|d| d.at(23, 59, 59, 0))
                });
                match civil.and_then(|c| c.to_zoned(tz.clone())) {
                    Ok(zoned) => format!("{key}={}", zoned.timestamp().strftime("%Y%m%dT%H%M%SZ")),
                    // Left as written, for the parser to explain.
                    Err(_) => part.to_owned(),
                }
            })
            .collect();
        parts.join(";")
    }

    /// A `DTSTART`, `RDATE` or `EXDATE` line whose times are read in `zone`: a floating
    /// time gets `TZID=zone`; a `TZID` must be `zone`; a UTC time (`…Z`) needs a UTC zone.
    fn zoned_line(
        property: &str,
        params: Option<&str>,
        value: &str,
        zone: &str,
    ) -> Result<String, (String, String)> {
        let mut params: Vec<String> = params
            .map(|p| {
                p.split(';')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let tzid = params.iter().find_map(|p| {
            p.split_once('=')
                .filter(|(key, _)| key.eq_ignore_ascii_case("TZID"))
                .map(|(_, tzid)| tzid.to_owned())
        });
        let zulu = value
            .split(',')
            .any(|v| v.trim().to_ascii_uppercase().ends_with('Z'));
        if zulu && !is_utc(zone) {
            return Err((
                format!("`{value}` is in UTC (`Z`), but the window's timeZone is `{zone}`"),
                format!(
                    "drop the `Z` to read the time in `{zone}`, or remove `timeZone` to \
                     read the whole window in UTC"
                ),
            ));
        }
        match tzid {
            Some(tzid) if tzid != zone => {
                return Err((
                    format!("TZID `{tzid}` differs from the window's timeZone `{zone}`"),
                    format!("set `timeZone: {tzid}` and drop the TZID (or make them equal)"),
                ));
            }
            None if !zulu => params.push(format!("TZID={zone}")),
            _ => {}
        }
        Ok(if params.is_empty() {
            format!("{property}:{value}")
        } else {
            format!("{property};{}:{value}", params.join(";"))
        })
    }

    /// The recurrence set, starting on 1 January of `year` at midnight when the text has
    /// no DTSTART.
    pub(super) fn set(&self, year: i16) -> Result<RRuleSet, rrule::RRuleError> {
        let body = self.lines.join("\n");
        let text = if self.has_dtstart {
            body
        } else {
            format!("DTSTART;TZID={}:{year:04}0101T000000\n{body}", self.zone)
        };
        text.parse::<RRuleSet>().map(RRuleSet::limit)
    }

    pub(super) fn error(&self, window: &PromotionWindow, error: rrule::RRuleError) -> WindowError {
        if let rrule::RRuleError::ParserError(rrule::ParseError::InvalidTimezone(_)) = &error {
            return WindowError::UnknownTimeZone {
                window: window.name.clone(),
                zone: self.zone.clone(),
            };
        }
        WindowError::BadRrule {
            window: window.name.clone(),
            reason: error.to_string(),
            hint: "see RFC 5545 section 3.3.10, e.g. `FREQ=WEEKLY;BYDAY=FR;BYHOUR=22`; \
                   UNTIL is written in UTC (`…Z`) when DTSTART has a time zone"
                .to_owned(),
        }
    }
}
