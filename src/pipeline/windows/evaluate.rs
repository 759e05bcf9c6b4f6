//! Whether a Stage may be promoted now under its project's windows, which window blocks it
//! and until when, and when that next changes: the periods of every window that applies,
//! walked forwards in time from `now`.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::api::{PromotionWindow, WindowKind};

use super::HORIZON;
use super::duration::window_duration;
use super::error::WindowError;
use super::recurrence::Recurrence;
use super::selector::matches;

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
