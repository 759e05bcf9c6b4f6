//! Promotion windows: when a Stage may be promoted, in the manner of Argo CD sync windows.
//!
//! A window recurs: each occurrence starts at a time given by a 5-field cron `schedule` or
//! an RFC 5545 `rrule`, read in the window's `timeZone` (default UTC), and lasts
//! `duration`. Occurrences that overlap or touch merge into one period.
//!
//! For one Stage, only the windows whose `stageSelector` [`matches`] it count:
//! - a `Deny` window that is active blocks promotion until it ends;
//! - if any `Allow` window applies, promotion is permitted only while one of them is
//!   active, and blocked otherwise until the next one starts;
//! - deny wins over allow.
//!
//! [`evaluate`] says whether promotion is open now, which window blocks it and until when,
//! and when the state next flips (looking at most [`HORIZON`] ahead). [`validate`] checks a
//! window at apply time. Everything here is pure: `now` is always given.

use std::collections::BTreeMap;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use globset::Glob;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use rrule::{Frequency, RRule, RRuleSet, Unvalidated};
use serde::Serialize;

use crate::api::{PromotionWindow, StageSelector, WindowKind, parse_duration};

/// How far ahead [`evaluate`] looks for the next change of state (and for a blocking
/// window's end): 366 days.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(366 * 24);

/// Whether `selector` selects the Stage `stage_name` with `stage_labels`.
///
/// `name` is compared exactly, or as a glob when prefixed with `glob:` (`glob:prod-*`);
/// every `matchLabels` entry must be carried by the Stage. An empty selector selects
/// every Stage. A `glob:` pattern that is not a glob selects nothing ([`validate`] rejects
/// it at apply time).
pub fn matches(
    selector: &StageSelector,
    stage_name: &str,
    stage_labels: &BTreeMap<String, String>,
) -> bool {
    let name_matches = match selector.name.as_deref() {
        None => true,
        Some(name) => match name.strip_prefix("glob:") {
            Some(pattern) => Glob::new(pattern)
                .map(|glob| glob.compile_matcher().is_match(stage_name))
                .unwrap_or(false),
            None => name == stage_name,
        },
    };
    name_matches
        && selector
            .match_labels
            .iter()
            .all(|(key, value)| stage_labels.get(key) == Some(value))
}

/// Whether a Stage may be promoted at a given moment, and for how long that holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowState {
    /// Promotion is permitted now.
    pub open: bool,
    /// Why promotion is not permitted; `None` exactly when `open`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<Blocked>,
    /// When `open` next flips ("closes at" / "opens at"), if within [`HORIZON`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_change: Option<Timestamp>,
}

/// The window that blocks a promotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    /// The window's name.
    pub window: String,
    /// `Deny`: the window is active. `Allow`: allow windows apply to the Stage and none is
    /// active; `window` is the one that opens first.
    pub kind: WindowKind,
    /// `Deny`: when this window's current period ends. `Allow`: when `window` next starts.
    /// `None` if not within [`HORIZON`]. Another window may still block at that moment:
    /// [`WindowState::next_change`] is when promotion actually becomes possible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

/// A promotion window that cannot be used. Each names the window and, through
/// [`WindowError::field`], the offending field; [`WindowError::hint`] says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// Neither or both of `schedule` and `rrule` are set.
    #[error("promotion window `{window}` must set exactly one of `schedule` and `rrule`{}", if *.both { ", not both" } else { "" })]
    ScheduleOrRrule {
        /// The window's name.
        window: String,
        /// Both were set (else neither).
        both: bool,
    },
    /// `duration` is missing.
    #[error("promotion window `{window}` has no `duration`")]
    MissingDuration {
        /// The window's name.
        window: String,
    },
    /// `duration` cannot be parsed or is zero.
    #[error("promotion window `{window}`: duration `{duration}` is not usable: {reason}")]
    BadDuration {
        /// The window's name.
        window: String,
        /// The text as written.
        duration: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `schedule` is not a 5-field cron expression, or never occurs.
    #[error(
        "promotion window `{window}`: schedule `{schedule}` is not a usable 5-field cron expression: {reason}"
    )]
    BadCron {
        /// The window's name.
        window: String,
        /// The text as written.
        schedule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `rrule` is not a recurrence rule Dray can use.
    #[error("promotion window `{window}`: rrule is not usable: {reason}")]
    BadRrule {
        /// The window's name.
        window: String,
        /// What is wrong with it.
        reason: String,
        /// What to do about it.
        hint: String,
    },
    /// `timeZone` is not a known IANA time zone.
    #[error("promotion window `{window}`: timeZone `{zone}` is not a known IANA time zone")]
    UnknownTimeZone {
        /// The window's name.
        window: String,
        /// The text as written.
        zone: String,
    },
    /// `stageSelector.name` starts with `glob:` but is not a glob.
    #[error("promotion window `{window}`: stageSelector.name `{pattern}` is not a glob: {reason}")]
    BadSelector {
        /// The window's name.
        window: String,
        /// The text as written.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl WindowError {
    /// The name of the window at fault.
    pub fn window(&self) -> &str {
        match self {
            Self::ScheduleOrRrule { window, .. }
            | Self::MissingDuration { window }
            | Self::BadDuration { window, .. }
            | Self::BadCron { window, .. }
            | Self::BadRrule { window, .. }
            | Self::UnknownTimeZone { window, .. }
            | Self::BadSelector { window, .. } => window,
        }
    }

    /// The offending field inside the window, as written in YAML (`schedule`, `rrule`,
    /// `duration`, `timeZone`, `stageSelector.name`).
    pub fn field(&self) -> &'static str {
        match self {
            Self::ScheduleOrRrule { .. } | Self::BadCron { .. } => "schedule",
            Self::MissingDuration { .. } | Self::BadDuration { .. } => "duration",
            Self::BadRrule { .. } => "rrule",
            Self::UnknownTimeZone { .. } => "timeZone",
            Self::BadSelector { .. } => "stageSelector.name",
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            Self::ScheduleOrRrule { .. } => "give either `schedule: \"0 22 * * 5\"` (cron) or \
                `rrule: \"FREQ=WEEKLY;BYDAY=FR;BYHOUR=22\"`, with a `duration`"
                .to_owned(),
            Self::MissingDuration { .. } => {
                "say how long each occurrence lasts, e.g. `duration: 60h`".to_owned()
            }
            Self::BadDuration { .. } => {
                "write a positive duration such as `30m`, `60h` or `1h30m`".to_owned()
            }
            Self::BadCron { .. } => "write five fields: minute hour day-of-month month \
                day-of-week, e.g. `0 22 * * 5` (Fridays at 22:00 in `timeZone`)"
                .to_owned(),
            Self::BadRrule { hint, .. } => hint.clone(),
            Self::UnknownTimeZone { .. } => {
                "use an IANA name such as `UTC`, `Europe/Berlin` or `America/New_York`".to_owned()
            }
            Self::BadSelector { .. } => {
                "write a glob such as `glob:prod-*`, or the exact Stage name".to_owned()
            }
        }
    }
}

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

/// Whether promotion to the Stage `stage_name` (with `stage_labels`) is permitted at `now`
/// under `windows`, which window blocks it and until when, and when that next changes.
///
/// Only the windows whose selector [`matches`] the Stage count; an error in one of them is
/// returned (the caller should refuse rather than guess), errors in others are ignored.
pub fn evaluate(
    windows: &[PromotionWindow],
    stage_name: &str,
    stage_labels: &BTreeMap<String, String>,
    now: Timestamp,
) -> Result<WindowState, WindowError> {
    let horizon_end = now.checked_add(HORIZON).unwrap_or(Timestamp::MAX);
    let mut tracks = Vec::new();
    for window in windows
        .iter()
        .filter(|w| matches(&w.stage_selector, stage_name, stage_labels))
    {
        let duration = window_duration(window)?;
        let recurrence = Recurrence::compile(window)?;
        // A start at or before `now - duration` has ended by `now`.
        let after = now.checked_sub(duration).unwrap_or(Timestamp::MIN);
        let starts = recurrence.starts(window, after, horizon_end)?;
        tracks.push(Track {
            window,
            intervals: Intervals {
                starts: starts.peekable(),
                duration,
            }
            .peekable(),
        });
    }

    let open_now = is_open(&mut tracks, now);
    let blocked_by = if open_now {
        None
    } else {
        Some(blocked(&mut tracks, now, horizon_end))
    };

    let mut t = now;
    let next_change = loop {
        let Some(next) = tracks.iter_mut().filter_map(|tr| tr.next_event(t)).min() else {
            break None;
        };
        if next > horizon_end {
            break None;
        }
        t = next;
        if is_open(&mut tracks, t) != open_now {
            break Some(t);
        }
    };

    Ok(WindowState {
        open: open_now,
        blocked_by,
        next_change,
    })
}

/// Whether promotion is permitted at `t`: no deny window active, and either no allow
/// window applies or one of them is active.
fn is_open(tracks: &mut [Track<'_>], t: Timestamp) -> bool {
    let mut any_allow = false;
    let mut allow_active = false;
    for track in tracks.iter_mut() {
        let active = track.is_active(t);
        match track.window.kind {
            WindowKind::Deny if active => return false,
            WindowKind::Deny => {}
            WindowKind::Allow => {
                any_allow = true;
                allow_active |= active;
            }
        }
    }
    !any_allow || allow_active
}

/// Why promotion is blocked at `now` (which must not be open).
fn blocked(tracks: &mut [Track<'_>], now: Timestamp, horizon_end: Timestamp) -> Blocked {
    // An active deny window: the one that holds longest (`None` = beyond the horizon).
    let mut deny: Option<(&PromotionWindow, Option<Timestamp>)> = None;
    for track in tracks.iter_mut() {
        if track.window.kind != WindowKind::Deny || !track.is_active(now) {
            continue;
        }
        let end = track
            .current(now)
            .map(|(_, end)| end)
            .filter(|end| *end <= horizon_end);
        let longer = match (&deny, end) {
            (None, _) => true,
            (Some((_, None)), _) => false,
            (Some((_, Some(_))), None) => true,
            (Some((_, Some(held))), Some(end)) => end > *held,
        };
        if longer {
            deny = Some((track.window, end));
        }
    }
    if let Some((window, until)) = deny {
        return Blocked {
            window: window.name.clone(),
            kind: WindowKind::Deny,
            until,
        };
    }
    // Otherwise no allow window is active: the one that opens first.
    let mut allow: Option<(&PromotionWindow, Option<Timestamp>)> = None;
    for track in tracks.iter_mut() {
        if track.window.kind != WindowKind::Allow {
            continue;
        }
        let start = track.current(now).map(|(start, _)| start);
        let sooner = match (&allow, start) {
            (None, _) => true,
            (Some((_, None)), Some(_)) => true,
            (Some((_, Some(first))), Some(start)) => start < *first,
            (Some(_), None) => false,
        };
        if sooner {
            allow = Some((track.window, start));
        }
    }
    let (window, until) = allow.expect("a closed state has an active deny or an allow window");
    Blocked {
        window: window.name.clone(),
        kind: WindowKind::Allow,
        until,
    }
}

/// One window's periods, walked forwards in time.
struct Track<'a> {
    window: &'a PromotionWindow,
    intervals: std::iter::Peekable<Intervals>,
}

impl Track<'_> {
    /// The first period that has not ended at `t` (`t` never goes back between calls).
    fn current(&mut self, t: Timestamp) -> Option<(Timestamp, Timestamp)> {
        while self.intervals.next_if(|(_, end)| *end <= t).is_some() {}
        self.intervals.peek().copied()
    }

    fn is_active(&mut self, t: Timestamp) -> bool {
        self.current(t).is_some_and(|(start, _)| start <= t)
    }

    /// The next moment after `t` at which this window starts or stops being active.
    fn next_event(&mut self, t: Timestamp) -> Option<Timestamp> {
        self.current(t)
            .map(|(start, end)| if start <= t { end } else { start })
    }
}

/// Occurrences `[start, start + duration)` merged where they overlap or touch.
struct Intervals {
    starts: std::iter::Peekable<Box<dyn Iterator<Item = Timestamp>>>,
    duration: SignedDuration,
}

impl Iterator for Intervals {
    type Item = (Timestamp, Timestamp);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.starts.next()?;
        let end_of = |s: Timestamp| s.checked_add(self.duration).unwrap_or(Timestamp::MAX);
        let mut end = end_of(start);
        while let Some(next) = self.starts.next_if(|s| *s <= end) {
            end = end.max(end_of(next));
        }
        Some((start, end))
    }
}

/// The window's `duration`, which must be present and positive.
fn window_duration(window: &PromotionWindow) -> Result<SignedDuration, WindowError> {
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
fn zone_name(window: &PromotionWindow) -> &str {
    window.time_zone.as_deref().unwrap_or("UTC")
}

/// The time zone the window is read in, which must be known.
fn window_zone(window: &PromotionWindow) -> Result<TimeZone, WindowError> {
    let zone = zone_name(window);
    TimeZone::get(zone).map_err(|_| WindowError::UnknownTimeZone {
        window: window.name.clone(),
        zone: zone.to_owned(),
    })
}

/// Whether `zone` names UTC itself, so that times written with `Z` are in it.
fn is_utc(zone: &str) -> bool {
    ["UTC", "Etc/UTC", "Etc/Zulu", "Zulu", "Etc/UCT", "UCT"]
        .iter()
        .any(|utc| zone.eq_ignore_ascii_case(utc))
}

/// When a window's occurrences start.
enum Recurrence {
    Cron { cron: Box<Cron>, tz: TimeZone },
    Rrule(RruleText),
}

impl Recurrence {
    fn compile(window: &PromotionWindow) -> Result<Self, WindowError> {
        Self::compile_in(window, zone_name(window), window_zone(window)?)
    }

    /// Compiles the window as read in `zone`, which is `tz`.
    fn compile_in(window: &PromotionWindow, zone: &str, tz: TimeZone) -> Result<Self, WindowError> {
        match (window.schedule.as_deref(), window.rrule.as_deref()) {
            (Some(schedule), None) => {
                let cron = CronParser::builder()
                    .seconds(Seconds::Disallowed)
                    .year(Year::Disallowed)
                    .build()
                    .parse(schedule)
                    .map_err(|e| WindowError::BadCron {
                        window: window.name.clone(),
                        schedule: schedule.to_owned(),
                        reason: e.to_string(),
                    })?;
                Ok(Self::Cron {
                    cron: Box::new(cron),
                    tz,
                })
            }
            (None, Some(text)) => RruleText::compile(window, text, zone, &tz).map(Self::Rrule),
            (schedule, _) => Err(WindowError::ScheduleOrRrule {
                window: window.name.clone(),
                both: schedule.is_some(),
            }),
        }
    }

    /// Rejects a recurrence that can never start (`0 0 30 2 *`), which as an allow window
    /// would block forever.
    fn check_occurs(&self, window: &PromotionWindow) -> Result<(), WindowError> {
        match self {
            Self::Cron { cron, tz } => {
                let from = Timestamp::UNIX_EPOCH.to_zoned(tz.clone());
                cron.find_next_occurrence(&from, false)
                    .map(drop)
                    .map_err(|e| WindowError::BadCron {
                        window: window.name.clone(),
                        schedule: window.schedule.clone().unwrap_or_default(),
                        reason: format!("it never occurs ({e})"),
                    })
            }
            // Parsed and validated against a start in `compile`; a rule whose every
            // occurrence has passed is legitimate (it simply no longer applies).
            Self::Rrule(_) => Ok(()),
        }
    }

    /// Occurrence starts `s` with `after < s <= until`, ascending.
    fn starts(
        &self,
        window: &PromotionWindow,
        after: Timestamp,
        until: Timestamp,
    ) -> Result<Box<dyn Iterator<Item = Timestamp>>, WindowError> {
        match self {
            Self::Cron { cron, tz } => Ok(Box::new(
                cron.iter_after(after.to_zoned(tz.clone()))
                    .map(|z| z.timestamp())
                    .take_while(move |s| *s <= until),
            )),
            Self::Rrule(rule) => {
                // Without DTSTART the rule is phase-free (checked in `compile`), so it may
                // start from any 1 January before `after`.
                let year = after
                    .to_zoned(TimeZone::UTC)
                    .year()
                    .saturating_sub(1)
                    .max(1);
                let set = rule.set(year).map_err(|e| rule.error(window, e))?;
                let starts: Vec<Timestamp> = (&set)
                    .into_iter()
                    .filter_map(|dt| {
                        Timestamp::new(dt.timestamp(), dt.timestamp_subsec_nanos() as i32).ok()
                    })
                    .skip_while(|s| *s <= after)
                    .take_while(|s| *s <= until)
                    .collect();
                Ok(Box::new(starts.into_iter()))
            }
        }
    }
}

/// An `rrule` rewritten so that every time in it is read in the window's zone.
struct RruleText {
    /// `DTSTART`, `RRULE`, `RDATE` and `EXDATE` lines, floating times given a `TZID`.
    lines: Vec<String>,
    has_dtstart: bool,
    zone: String,
}

impl RruleText {
    fn compile(
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
    fn set(&self, year: i16) -> Result<RRuleSet, rrule::RRuleError> {
        let body = self.lines.join("\n");
        let text = if self.has_dtstart {
            body
        } else {
            format!("DTSTART;TZID={}:{year:04}0101T000000\n{body}", self.zone)
        };
        text.parse::<RRuleSet>().map(RRuleSet::limit)
    }

    fn error(&self, window: &PromotionWindow, error: rrule::RRuleError) -> WindowError {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn no_labels() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn cron(name: &str, kind: WindowKind, schedule: &str, duration: &str) -> PromotionWindow {
        PromotionWindow {
            name: name.to_owned(),
            kind,
            schedule: Some(schedule.to_owned()),
            duration: Some(duration.to_owned()),
            ..PromotionWindow::default()
        }
    }

    fn rrule(name: &str, kind: WindowKind, rule: &str, duration: &str) -> PromotionWindow {
        PromotionWindow {
            name: name.to_owned(),
            kind,
            rrule: Some(rule.to_owned()),
            duration: Some(duration.to_owned()),
            ..PromotionWindow::default()
        }
    }

    fn eval(windows: &[PromotionWindow], stage: &str, now: &str) -> WindowState {
        evaluate(windows, stage, &no_labels(), ts(now)).unwrap()
    }

    /// Friday 22:00 UTC for 60 hours: until Monday 10:00.
    fn weekend_freeze() -> PromotionWindow {
        cron("weekend-freeze", WindowKind::Deny, "0 22 * * 5", "60h")
    }

    #[test]
    fn no_windows_is_open_forever() {
        let state = eval(&[], "prod", "2026-03-25T12:00:00Z");
        assert_eq!(
            state,
            WindowState {
                open: true,
                blocked_by: None,
                next_change: None
            }
        );
    }

    #[test]
    fn active_deny_window_blocks_until_its_end() {
        // Saturday 2026-03-28 12:00 UTC, inside the freeze that began Friday 22:00.
        let state = eval(&[weekend_freeze()], "prod", "2026-03-28T12:00:00Z");
        assert!(!state.open);
        assert_eq!(
            state.blocked_by,
            Some(Blocked {
                window: "weekend-freeze".into(),
                kind: WindowKind::Deny,
                until: Some(ts("2026-03-30T10:00:00Z")),
            })
        );
        assert_eq!(state.next_change, Some(ts("2026-03-30T10:00:00Z")));
    }

    #[test]
    fn the_start_is_inside_and_the_end_is_outside() {
        let windows = [weekend_freeze()];
        assert!(!eval(&windows, "prod", "2026-03-27T22:00:00Z").open);
        assert!(eval(&windows, "prod", "2026-03-30T10:00:00Z").open);
        assert!(!eval(&windows, "prod", "2026-03-30T09:59:59Z").open);
    }

    #[test]
    fn outside_a_deny_window_is_open_until_its_next_start() {
        // Wednesday.
        let state = eval(&[weekend_freeze()], "prod", "2026-03-25T12:00:00Z");
        assert!(state.open);
        assert_eq!(state.blocked_by, None);
        assert_eq!(state.next_change, Some(ts("2026-03-27T22:00:00Z")));
    }

    #[test]
    fn allow_only_window_blocks_outside_and_opens_inside() {
        // Weekdays 09:00-17:00 UTC.
        let windows = [cron("office-hours", WindowKind::Allow, "0 9 * * 1-5", "8h")];
        // Wednesday 07:00: closed until 09:00.
        let state = eval(&windows, "prod", "2026-03-25T07:00:00Z");
        assert!(!state.open);
        assert_eq!(
            state.blocked_by,
            Some(Blocked {
                window: "office-hours".into(),
                kind: WindowKind::Allow,
                until: Some(ts("2026-03-25T09:00:00Z")),
            })
        );
        assert_eq!(state.next_change, Some(ts("2026-03-25T09:00:00Z")));
        // Wednesday 10:00: open until 17:00.
        let state = eval(&windows, "prod", "2026-03-25T10:00:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, Some(ts("2026-03-25T17:00:00Z")));
        // Friday 18:00: closed over the weekend, until Monday 09:00.
        let state = eval(&windows, "prod", "2026-03-27T18:00:00Z");
        assert!(!state.open);
        assert_eq!(
            state.blocked_by.unwrap().until,
            Some(ts("2026-03-30T09:00:00Z"))
        );
        assert_eq!(state.next_change, Some(ts("2026-03-30T09:00:00Z")));
    }

    #[test]
    fn deny_beats_allow() {
        let windows = [
            cron("office-hours", WindowKind::Allow, "0 9 * * 1-5", "8h"),
            // A release freeze, every day 12:00-13:00.
            cron("lunch-freeze", WindowKind::Deny, "0 12 * * *", "1h"),
        ];
        // Wednesday 12:30: inside both; the deny wins.
        let state = eval(&windows, "prod", "2026-03-25T12:30:00Z");
        assert!(!state.open);
        assert_eq!(
            state.blocked_by,
            Some(Blocked {
                window: "lunch-freeze".into(),
                kind: WindowKind::Deny,
                until: Some(ts("2026-03-25T13:00:00Z")),
            })
        );
        assert_eq!(state.next_change, Some(ts("2026-03-25T13:00:00Z")));
        // Wednesday 11:00: allowed; closes at the freeze.
        let state = eval(&windows, "prod", "2026-03-25T11:00:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, Some(ts("2026-03-25T12:00:00Z")));
    }

    #[test]
    fn a_deny_that_ends_outside_every_allow_window_stays_closed() {
        let windows = [
            cron("office-hours", WindowKind::Allow, "0 9 * * 1-5", "8h"),
            cron("late-freeze", WindowKind::Deny, "0 16 * * *", "3h"),
        ];
        // Wednesday 16:30: the freeze ends at 19:00, but then office hours are over.
        let state = eval(&windows, "prod", "2026-03-25T16:30:00Z");
        assert!(!state.open);
        let blocked = state.blocked_by.unwrap();
        assert_eq!(blocked.window, "late-freeze");
        assert_eq!(blocked.until, Some(ts("2026-03-25T19:00:00Z")));
        assert_eq!(state.next_change, Some(ts("2026-03-26T09:00:00Z")));
    }

    #[test]
    fn overlapping_occurrences_merge() {
        // Every hour for 90 minutes: one long period, never a gap.
        let windows = [cron("always", WindowKind::Deny, "0 * * * *", "90m")];
        let state = eval(&windows, "prod", "2026-03-25T12:00:00Z");
        assert!(!state.open);
        assert_eq!(state.blocked_by.unwrap().until, None);
        assert_eq!(state.next_change, None);
    }

    #[test]
    fn selector_picks_the_stages() {
        let mut freeze = weekend_freeze();
        freeze.stage_selector.name = Some("glob:prod-*".into());
        let windows = [freeze];
        let saturday = "2026-03-28T12:00:00Z";
        assert!(!eval(&windows, "prod-eu", saturday).open);
        assert!(!eval(&windows, "prod-us", saturday).open);
        assert!(eval(&windows, "staging", saturday).open);
        assert!(eval(&windows, "preprod-eu", saturday).open);
        assert_eq!(eval(&windows, "staging", saturday).next_change, None);
    }

    #[test]
    fn matches_by_name_glob_and_labels() {
        let labels: BTreeMap<String, String> = [("tier", "prod"), ("region", "eu")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let select = |name: Option<&str>, want: &[(&str, &str)]| StageSelector {
            name: name.map(str::to_owned),
            match_labels: want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        assert!(matches(&select(None, &[]), "anything", &no_labels()));
        assert!(matches(&select(Some("prod"), &[]), "prod", &labels));
        assert!(!matches(&select(Some("prod"), &[]), "prod-eu", &labels));
        assert!(matches(
            &select(Some("glob:prod-*"), &[]),
            "prod-eu",
            &labels
        ));
        assert!(!matches(&select(Some("glob:prod-*"), &[]), "prod", &labels));
        assert!(matches(&select(None, &[("tier", "prod")]), "x", &labels));
        assert!(matches(
            &select(Some("glob:*"), &[("tier", "prod"), ("region", "eu")]),
            "x",
            &labels
        ));
        assert!(!matches(
            &select(None, &[("tier", "prod"), ("region", "us")]),
            "x",
            &labels
        ));
        assert!(!matches(
            &select(None, &[("tier", "prod")]),
            "x",
            &no_labels()
        ));
        assert!(!matches(&select(Some("glob:[prod"), &[]), "[prod", &labels));
    }

    #[test]
    fn schedule_is_read_in_the_time_zone_across_dst() {
        let mut window = cron("berlin-morning", WindowKind::Deny, "0 9 * * *", "1h");
        window.time_zone = Some("Europe/Berlin".into());
        let windows = [window];
        // Winter (CET, UTC+1): 09:00 Berlin is 08:00 UTC.
        let state = eval(&windows, "prod", "2026-01-15T07:30:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, Some(ts("2026-01-15T08:00:00Z")));
        let state = eval(&windows, "prod", "2026-01-15T08:30:00Z");
        assert!(!state.open);
        assert_eq!(state.next_change, Some(ts("2026-01-15T09:00:00Z")));
        // Summer (CEST, UTC+2): 09:00 Berlin is 07:00 UTC.
        let state = eval(&windows, "prod", "2026-07-15T06:30:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, Some(ts("2026-07-15T07:00:00Z")));
        assert!(!eval(&windows, "prod", "2026-07-15T07:30:00Z").open);
        assert!(eval(&windows, "prod", "2026-07-15T08:30:00Z").open);
        // The night DST starts (Sunday 2026-03-29): Saturday is CET, Sunday CEST.
        let state = eval(&windows, "prod", "2026-03-28T12:00:00Z");
        assert_eq!(state.next_change, Some(ts("2026-03-29T07:00:00Z")));
    }

    #[test]
    fn rrule_with_count_stops_after_count() {
        // Christmas Eve, three years running, all day.
        let windows = [rrule(
            "xmas",
            WindowKind::Deny,
            "DTSTART:20261224T000000Z\nRRULE:FREQ=YEARLY;COUNT=3",
            "24h",
        )];
        for year in [2026, 2027, 2028] {
            let state = eval(&windows, "prod", &format!("{year}-12-24T12:00:00Z"));
            assert!(!state.open, "{year}");
            assert_eq!(
                state.blocked_by.unwrap().until,
                Some(ts(&format!("{year}-12-25T00:00:00Z")))
            );
        }
        let state = eval(&windows, "prod", "2027-06-01T00:00:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, Some(ts("2027-12-24T00:00:00Z")));
        // The fourth Christmas Eve is not frozen.
        let state = eval(&windows, "prod", "2029-12-24T12:00:00Z");
        assert!(state.open);
        assert_eq!(state.next_change, None);
        // Before the first one.
        assert!(eval(&windows, "prod", "2026-12-23T23:59:59Z").open);
    }

    #[test]
    fn bare_rrule_without_dtstart() {
        // Fridays 22:00 UTC for 60 hours, written as a bare rule.
        let windows = [rrule(
            "weekend-freeze",
            WindowKind::Deny,
            "FREQ=WEEKLY;BYDAY=FR;BYHOUR=22",
            "60h",
        )];
        assert_eq!(
            eval(&windows, "prod", "2026-03-28T12:00:00Z"),
            eval(&[weekend_freeze()], "prod", "2026-03-28T12:00:00Z")
        );
        assert_eq!(
            eval(&windows, "prod", "2026-03-25T12:00:00Z"),
            eval(&[weekend_freeze()], "prod", "2026-03-25T12:00:00Z")
        );
    }

    #[test]
    fn rrule_floating_times_are_read_in_the_time_zone() {
        let mut window = rrule(
            "berlin-morning",
            WindowKind::Deny,
            "DTSTART:20260101T090000\nRRULE:FREQ=DAILY",
            "1h",
        );
        window.time_zone = Some("Europe/Berlin".into());
        let windows = [window];
        assert_eq!(
            eval(&windows, "prod", "2026-01-15T07:30:00Z").next_change,
            Some(ts("2026-01-15T08:00:00Z"))
        );
        assert_eq!(
            eval(&windows, "prod", "2026-07-15T06:30:00Z").next_change,
            Some(ts("2026-07-15T07:00:00Z"))
        );
        // A TZID equal to timeZone is fine too.
        let mut window = windows[0].clone();
        window.rrule = Some("DTSTART;TZID=Europe/Berlin:20260101T090000\nRRULE:FREQ=DAILY".into());
        assert_eq!(
            eval(&[window], "prod", "2026-07-15T06:30:00Z").next_change,
            Some(ts("2026-07-15T07:00:00Z"))
        );
    }

    #[test]
    fn invalid_windows_name_the_window_and_field() {
        let bad_cron = cron("freeze", WindowKind::Deny, "0 22 * *", "1h");
        let error = validate(&bad_cron).unwrap_err();
        assert!(matches!(error, WindowError::BadCron { .. }), "{error}");
        assert_eq!(error.window(), "freeze");
        assert_eq!(error.field(), "schedule");
        assert!(error.to_string().contains("`freeze`"), "{error}");
        assert!(error.to_string().contains("0 22 * *"), "{error}");
        assert!(error.hint().contains("five fields"));
        // Seconds are not standard cron.
        assert!(validate(&cron("s", WindowKind::Deny, "0 0 22 * * 5", "1h")).is_err());
        // A day that never comes.
        let never = validate(&cron("never", WindowKind::Allow, "0 0 30 2 *", "1h")).unwrap_err();
        assert!(never.to_string().contains("never occurs"), "{never}");

        let bad_rrule = rrule("xmas", WindowKind::Deny, "FREQ=SOMETIMES", "1h");
        let error = validate(&bad_rrule).unwrap_err();
        assert!(matches!(error, WindowError::BadRrule { .. }), "{error}");
        assert_eq!((error.window(), error.field()), ("xmas", "rrule"));
        assert!(error.to_string().contains("`xmas`"), "{error}");

        let mut bad_zone = weekend_freeze();
        bad_zone.time_zone = Some("Europe/Atlantis".into());
        let error = validate(&bad_zone).unwrap_err();
        assert_eq!(
            error,
            WindowError::UnknownTimeZone {
                window: "weekend-freeze".into(),
                zone: "Europe/Atlantis".into()
            }
        );
        assert_eq!(error.field(), "timeZone");
        assert!(error.hint().contains("Europe/Berlin"));
        // The same error from evaluate, when the window applies.
        assert_eq!(
            evaluate(
                &[bad_zone.clone()],
                "prod",
                &no_labels(),
                ts("2026-03-25T12:00:00Z")
            ),
            Err(error)
        );
        // A broken window for another Stage does not stop this one.
        bad_zone.stage_selector.name = Some("other".into());
        assert!(
            evaluate(
                &[bad_zone],
                "prod",
                &no_labels(),
                ts("2026-03-25T12:00:00Z")
            )
            .is_ok()
        );

        let mut bad_duration = weekend_freeze();
        bad_duration.duration = Some("soon".into());
        let error = validate(&bad_duration).unwrap_err();
        assert_eq!(
            (error.window(), error.field()),
            ("weekend-freeze", "duration")
        );
        bad_duration.duration = Some("0s".into());
        assert!(validate(&bad_duration).is_err());
        bad_duration.duration = None;
        assert_eq!(
            validate(&bad_duration),
            Err(WindowError::MissingDuration {
                window: "weekend-freeze".into()
            })
        );

        let mut both = weekend_freeze();
        both.rrule = Some("FREQ=DAILY".into());
        assert_eq!(
            validate(&both),
            Err(WindowError::ScheduleOrRrule {
                window: "weekend-freeze".into(),
                both: true
            })
        );
        both.schedule = None;
        both.rrule = None;
        assert!(
            validate(&both)
                .unwrap_err()
                .to_string()
                .contains("exactly one of `schedule` and `rrule`")
        );

        let mut bad_glob = weekend_freeze();
        bad_glob.stage_selector.name = Some("glob:prod-[".into());
        let error = validate(&bad_glob).unwrap_err();
        assert_eq!(error.field(), "stageSelector.name");
    }

    #[test]
    fn rrule_rules_that_need_a_dtstart_or_are_ambiguous_are_rejected() {
        let reject = |rule: &str, zone: Option<&str>, needle: &str| {
            let mut window = rrule("w", WindowKind::Deny, rule, "1h");
            window.time_zone = zone.map(str::to_owned);
            let error = validate(&window).unwrap_err();
            assert_eq!(error.field(), "rrule", "{rule}");
            assert!(error.to_string().contains(needle), "{rule}: {error}");
        };
        reject("FREQ=YEARLY;COUNT=3", None, "COUNT");
        reject("FREQ=DAILY;INTERVAL=2", None, "INTERVAL");
        reject("FREQ=WEEKLY", None, "BYDAY");
        reject("FREQ=MINUTELY", None, "too frequent");
        reject(
            "DTSTART:20261224T000000Z\nRRULE:FREQ=YEARLY",
            Some("Europe/Berlin"),
            "is in UTC",
        );
        reject(
            "DTSTART;TZID=America/New_York:20261224T000000\nRRULE:FREQ=YEARLY",
            Some("Europe/Berlin"),
            "differs",
        );
        reject("EXRULE:FREQ=DAILY\nRRULE:FREQ=DAILY", None, "not supported");
        reject("DTSTART:20261224T000000Z", None, "no RRULE");
        // With a DTSTART they are fine.
        for ok in [
            "DTSTART:20261224T000000Z\nRRULE:FREQ=YEARLY;COUNT=3",
            "DTSTART:20260102T000000\nRRULE:FREQ=DAILY;INTERVAL=2",
            "DTSTART:20260102T000000\nRRULE:FREQ=WEEKLY\nEXDATE:20260109T000000",
        ] {
            validate(&rrule("w", WindowKind::Deny, ok, "1h")).unwrap();
        }
    }

    #[test]
    fn rrule_exdate_skips_an_occurrence() {
        // Fridays from 2026-01-02 (a Friday), except 2026-01-09.
        let windows = [rrule(
            "fridays",
            WindowKind::Deny,
            "DTSTART:20260102T000000\nRRULE:FREQ=WEEKLY\nEXDATE:20260109T000000",
            "24h",
        )];
        assert!(!eval(&windows, "prod", "2026-01-02T12:00:00Z").open);
        assert!(eval(&windows, "prod", "2026-01-09T12:00:00Z").open);
        assert!(!eval(&windows, "prod", "2026-01-16T12:00:00Z").open);
    }

    #[test]
    fn state_serialises_in_camel_case() {
        let state = eval(&[weekend_freeze()], "prod", "2026-03-28T12:00:00Z");
        assert_eq!(
            serde_json::to_value(&state).unwrap(),
            serde_json::json!({
                "open": false,
                "blockedBy": {
                    "window": "weekend-freeze",
                    "kind": "Deny",
                    "until": "2026-03-30T10:00:00Z"
                },
                "nextChange": "2026-03-30T10:00:00Z"
            })
        );
    }

    #[test]
    fn zones_work_without_a_system_time_zone_database() {
        // `jiff`'s `tzdb-bundle-always`: containers without /usr/share/zoneinfo still work.
        let bundled = jiff::tz::TimeZoneDatabase::bundled();
        assert!(bundled.get("Europe/Berlin").is_ok());
    }

    #[test]
    fn rrule_until_without_z_is_read_in_the_time_zone() {
        for rule in [
            "DTSTART:20260101T090000\nRRULE:FREQ=DAILY;UNTIL=20260110T090000",
            // A date alone: up to the end of that day.
            "FREQ=DAILY;BYHOUR=9;UNTIL=20260110",
        ] {
            let mut window = rrule("until", WindowKind::Deny, rule, "1h");
            window.time_zone = Some("Europe/Berlin".into());
            let windows = [window];
            // 2026-01-10 09:30 Berlin is the last occurrence.
            let state = eval(&windows, "prod", "2026-01-10T08:30:00Z");
            assert!(!state.open, "{rule}");
            assert_eq!(
                state.next_change,
                Some(ts("2026-01-10T09:00:00Z")),
                "{rule}"
            );
            let state = eval(&windows, "prod", "2026-01-10T12:00:00Z");
            assert!(state.open, "{rule}");
            assert_eq!(state.next_change, None, "{rule}");
        }
    }

    #[test]
    fn a_schedule_in_the_spring_forward_gap_starts_when_the_gap_ends() {
        // 02:30 does not exist in Berlin on 2026-03-29; like cron, it runs at 03:00 CEST.
        let mut window = cron("night", WindowKind::Deny, "30 2 * * *", "1h");
        window.time_zone = Some("Europe/Berlin".into());
        let state = eval(&[window], "prod", "2026-03-28T12:00:00Z");
        assert_eq!(state.next_change, Some(ts("2026-03-29T01:00:00Z")));
    }

    #[test]
    fn config_loader_reports_each_bad_window_at_its_field() {
        use crate::config::{SourceFile, load};
        let yaml = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionWindows:
  - name: weekend-freeze
    kind: Deny
    schedule: 0 22 * * 5
    duration: 60h
    timeZone: Europe/Berlin
    stageSelector: {name: glob:prod-*}
    description: CHG-1234
  - name: xmas
    kind: Deny
    rrule: |-
      DTSTART:20261224T000000Z
      RRULE:FREQ=YEARLY;COUNT=3
    duration: 24h
  - name: bad
    kind: Allow
    schedule: 0 22 * *
    duration: 1h
    timeZone: Mars/Olympus
  - name: xmas
    kind: Deny
    schedule: 0 0 24 12 *
";
        let files = [SourceFile {
            path: "c.yaml".into(),
            content: yaml.into(),
        }];
        let errors = load(&files, None, &BTreeMap::new()).unwrap_err().0;
        let found: Vec<_> = errors
            .iter()
            .map(|e| (e.field.clone().unwrap_or_default(), e.message.clone()))
            .collect();
        let fields: Vec<_> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.promotionWindows[2].schedule",
                "spec.promotionWindows[2].timeZone",
                "spec.promotionWindows[3].name",
                "spec.promotionWindows[3].duration",
            ],
            "{found:#?}"
        );
        assert!(found[1].1.contains("`bad`"), "{found:#?}");
        assert!(errors.iter().all(|e| e.hint.is_some()));
        // Valid windows load, and read back as written.
        let valid = yaml.split("  - name: bad").next().unwrap();
        let files = [SourceFile {
            path: "c.yaml".into(),
            content: valid.into(),
        }];
        let manifests = load(&files, None, &BTreeMap::new()).unwrap();
        let config: crate::api::ProjectConfig =
            serde_json::from_value(manifests[1].object.clone()).unwrap();
        let windows = &config.spec.promotion_windows;
        assert_eq!(windows.len(), 2);
        assert_eq!(windows[0].kind, WindowKind::Deny);
        assert_eq!(windows[0].description.as_deref(), Some("CHG-1234"));
        assert!(
            !evaluate(windows, "prod-eu", &no_labels(), ts("2026-12-24T12:00:00Z"))
                .unwrap()
                .open
        );
    }
}
