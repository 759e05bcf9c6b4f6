//! What can be wrong with a promotion window: one variant per problem, naming the window,
//! the field ([`WindowError::field`]) and what to do ([`WindowError::hint`]).

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
