//! When a window's occurrences start: a 5-field cron `schedule` or an `rrule`, read in the
//! window's time zone.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::api::PromotionWindow;

use super::duration::{window_zone, zone_name};
use super::error::WindowError;
use super::rrule::RruleText;

/// When a window's occurrences start.
pub(super) enum Recurrence {
    Cron { cron: Box<Cron>, tz: TimeZone },
    Rrule(RruleText),
}

impl Recurrence {
    pub(super) fn compile(window: &PromotionWindow) -> Result<Self, WindowError> {
        Self::compile_in(window, zone_name(window), window_zone(window)?)
    }

    /// Compiles the window as read in `zone`, which is `tz`.
    pub(super) fn compile_in(
        window: &PromotionWindow,
        zone: &str,
        tz: TimeZone,
    ) -> Result<Self, WindowError> {
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
    pub(super) fn check_occurs(&self, window: &PromotionWindow) -> Result<(), WindowError> {
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
    pub(super) fn starts(
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
