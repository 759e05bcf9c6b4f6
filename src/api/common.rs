//! Types shared by several kinds: conditions, references, durations and the
//! free-form schema helper for step configuration.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A status condition, as in Kubernetes (`type`, `status`, `reason`, `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's name, e.g. `Ready` or `Healthy`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason in CamelCase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The generation of the resource that this condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A name-value pair used for promotion variables.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Var {
    /// The variable's name, as used in `${{ vars.<name> }}`.
    pub name: String,
    /// The value; may itself contain `${{ }}` expressions. A task variable without a value
    /// must be supplied by every step that uses the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The kind of a Freight origin. Only Warehouses mint Freight today.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FreightOriginKind {
    /// A [`crate::api::Warehouse`].
    #[default]
    Warehouse,
}

/// Where a piece of Freight comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightOrigin {
    /// The kind of the origin: `Warehouse`.
    pub kind: FreightOriginKind,
    /// The origin's name, in the same project.
    pub name: String,
}

/// Schema for a free-form JSON object: kept as written (structural CRDs need
/// `x-kubernetes-preserve-unknown-fields`, never `items: {}`).
pub fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for an optional free-form JSON object.
pub fn optional_free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for a duration written the Go way (`30s`, `5m`, `1h30m`).
pub fn duration_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$"
    })
}

/// Schema for an optional duration string.
pub fn optional_duration_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "nullable": true,
        "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d))+$"
    })
}

/// Parses a Go-style duration (`30s`, `5m`, `1h30m`, `2d`) into a [`std::time::Duration`],
/// with the same parser as the steps and the CRDs' pattern ([`dray_steps::duration`]).
///
/// Errors name the offending text and show the accepted form.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    parse_duration_in(text, dray_steps::duration::Units::Go)
}

fn parse_duration_in(
    text: &str,
    units: dray_steps::duration::Units,
) -> Result<std::time::Duration, String> {
    let hint = "write a duration such as `30s`, `5m` or `1h30m` (no spaces)";
    if text.trim().is_empty() {
        return Err(format!("empty duration; {hint}"));
    }
    dray_steps::duration::parse_with(text, units).map_err(|e| format!("{e}; {hint}"))
}

/// What one duration flag or field accepts beyond the grammar of [`parse_duration`]: its
/// bounds, and the two documented extensions — a bare number meaning seconds (only where
/// the docs always said seconds, e.g. `dray refresh --timeout 60`) and weeks (`2w`, only
/// for token lifetimes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationRule {
    /// The shortest allowed.
    pub min: std::time::Duration,
    /// The longest allowed.
    pub max: std::time::Duration,
    /// Whether a bare number is read as seconds.
    pub bare_seconds: bool,
    /// Whether `w` (seven days) is a unit.
    pub weeks: bool,
}

impl DurationRule {
    /// A Go-form duration from `min` to `max`.
    pub const fn between(min: std::time::Duration, max: std::time::Duration) -> Self {
        DurationRule {
            min,
            max,
            bare_seconds: false,
            weeks: false,
        }
    }

    /// Reads `text` by [`parse_duration`]'s grammar (with this rule's extensions) and
    /// checks the bounds; the error names the bound broken, e.g. `at most 2m (120s)`.
    pub fn parse(&self, text: &str) -> Result<std::time::Duration, String> {
        let trimmed = text.trim();
        let duration = match trimmed.parse::<u64>() {
            Ok(seconds) if self.bare_seconds => std::time::Duration::from_secs(seconds),
            Ok(_) => {
                return Err(format!(
                    "`{trimmed}` has no unit; write e.g. `{trimmed}s` or `{trimmed}m`"
                ));
            }
            Err(_) => {
                let units = if self.weeks {
                    dray_steps::duration::Units::WithWeeks
                } else {
                    dray_steps::duration::Units::Go
                };
                parse_duration_in(trimmed, units)?
            }
        };
        if duration > self.max {
            return Err(format!(
                "at most {} ({}s)",
                format_duration(self.max),
                self.max.as_secs()
            ));
        }
        if duration < self.min {
            return Err(format!("at least {}", format_duration(self.min)));
        }
        Ok(duration)
    }
}

/// A duration written the way [`parse_duration`] reads it, largest units first (`2m`,
/// `1h30m`, `500ms`, `0s`); days are written as hours, as Go does.
pub fn format_duration(duration: std::time::Duration) -> String {
    let mut secs = duration.as_secs();
    let millis = duration.subsec_millis();
    let mut out = String::new();
    for (unit, size) in [("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if millis > 0 {
        out.push_str(&format!("{millis}ms"));
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

#[cfg(test)]
mod duration_tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn one_grammar_with_bounds_named_in_the_error() {
        let rule = DurationRule::between(Duration::from_secs(1), Duration::from_secs(120));
        assert_eq!(rule.parse("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(rule.parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(rule.parse("500s"), Err("at most 2m (120s)".to_owned()));
        assert_eq!(rule.parse("500ms"), Err("at least 1s".to_owned()));
        assert!(rule.parse("60").unwrap_err().contains("has no unit"));
        assert!(
            rule.parse("soon")
                .unwrap_err()
                .contains("is not a duration")
        );
        assert!(
            rule.parse("2w").is_err(),
            "weeks only where the rule says so"
        );
        let seconds = DurationRule {
            bare_seconds: true,
            ..rule
        };
        assert_eq!(seconds.parse("60"), Ok(Duration::from_secs(60)));
        assert_eq!(seconds.parse("500"), Err("at most 2m (120s)".to_owned()));
        let weeks = DurationRule {
            weeks: true,
            ..DurationRule::between(Duration::from_secs(1), Duration::from_secs(86_400 * 30))
        };
        assert_eq!(weeks.parse("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(weeks.parse("1h30m"), Ok(Duration::from_secs(5400)));
    }

    #[test]
    fn durations_are_written_as_they_are_read() {
        for (secs, millis, text) in [
            (120, 0, "2m"),
            (5400, 0, "1h30m"),
            (9910, 0, "2h45m10s"),
            (0, 500, "500ms"),
            (0, 0, "0s"),
        ] {
            let d = Duration::from_secs(secs) + Duration::from_millis(millis);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }
}
