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
//!
//! The parts, one job each:
//! - `selector`: which Stages a window's `stageSelector` picks ([`matches`]);
//! - `error`: what can be wrong with a window ([`WindowError`], with field and hint);
//! - `validate`: checking a window at apply time ([`validate`], [`problems`]);
//! - `duration`: a window's `duration` and `timeZone`, read;
//! - `recurrence`: when a window's occurrences start (cron `schedule` or `rrule`);
//! - `rrule`: an `rrule` rewritten so that every time in it is read in the window's zone;
//! - `evaluate`: open now or not, which window blocks, the next change ([`evaluate`],
//!   [`WindowState`]);
//! - `tests`: the tests of all of the above.

mod duration;
mod error;
mod evaluate;
mod recurrence;
mod rrule;
mod selector;
#[cfg(test)]
mod tests;
mod validate;

use jiff::SignedDuration;

pub use error::WindowError;
pub use evaluate::{Blocked, WindowState, evaluate};
pub use selector::matches;
pub use validate::{problems, validate};

/// How far ahead [`evaluate`] looks for the next change of state (and for a blocking
/// window's end): 366 days.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(366 * 24);
