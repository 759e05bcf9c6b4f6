//! Tests of promotion windows: evaluation, selectors, validation, time zones.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::*;
use crate::api::{PromotionWindow, StageSelector, WindowKind};

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
