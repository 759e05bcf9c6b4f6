//! The two levers a person pulls to stop Freight by hand: a [`Freeze`] ("stop the line",
//! on a Stage's or a Project's status) and a [`Rejection`] (on a Freight's status, for one
//! Stage or everywhere). Both are written by Dray's routes only, never by a client, and
//! both read as the refusal they cause: `frozen by <user>: <reason>`,
//! `rejected by <user>: <reason>`. Deciding what they gate is `pipeline`'s.

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Project, Stage, Time};

/// A stop of the line: promotions into the Stage (or the whole Project) are refused until
/// it is lifted or its `until` passes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Freeze {
    /// Who froze it.
    pub by: String,
    /// Why, in words.
    pub reason: String,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// When it lifts by itself, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
}

impl Freeze {
    /// Whether it still gates at `now` (an expired freeze does not).
    pub fn is_active_at(&self, now: Timestamp) -> bool {
        self.until.as_ref().is_none_or(|until| now < until.0)
    }

    /// `frozen by <user>: <reason>`, the words of every refusal it causes.
    pub fn words(&self) -> String {
        format!("frozen by {}: {}", self.by, self.reason)
    }
}

/// Freight taken out of circulation by a person: unavailable to one Stage, or everywhere.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// Who rejected it.
    pub by: String,
    /// Why, in words.
    pub reason: String,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_at: Option<Time>,
}

impl Rejection {
    /// `rejected by <user>: <reason>`, the words of every refusal it causes.
    pub fn words(&self) -> String {
        format!("rejected by {}: {}", self.by, self.reason)
    }
}

/// Where a [`Freeze`] or a [`Rejection`] applies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// One Stage.
    Stage(String),
    /// The whole project (every Stage; for a rejection, everywhere).
    Project(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Stage(stage) => write!(f, "Stage `{stage}`"),
            Scope::Project(project) => write!(f, "project `{project}`"),
        }
    }
}

/// The freezes that gate promotions into `stage` at `now`: its project's, then its own
/// (expired ones left out). The promote path, auto-promotion and the engine all read this.
pub fn active_freezes(
    project: Option<&Project>,
    stage: &Stage,
    now: Timestamp,
) -> Vec<(Scope, Freeze)> {
    let project_name = stage.metadata.namespace.clone().unwrap_or_default();
    let stage_name = stage.metadata.name.clone().unwrap_or_default();
    let of_project = project
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.freeze.clone())
        .map(|f| (Scope::Project(project_name), f));
    let of_stage = stage
        .status
        .as_ref()
        .and_then(|s| s.freeze.clone())
        .map(|f| (Scope::Stage(stage_name), f));
    of_project
        .into_iter()
        .chain(of_stage)
        .filter(|(_, f)| f.is_active_at(now))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_gates_until_it_expires() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let freeze = Freeze {
            by: "ann".into(),
            reason: "incident 42".into(),
            since: None,
            until: Some(Time(at("2026-12-02T10:00:00Z"))),
        };
        assert!(freeze.is_active_at(at("2026-12-02T09:59:59Z")));
        assert!(!freeze.is_active_at(at("2026-12-02T10:00:00Z")));
        assert_eq!(freeze.words(), "frozen by ann: incident 42");
        let forever = Freeze {
            until: None,
            ..freeze
        };
        assert!(forever.is_active_at(at("2099-01-01T00:00:00Z")));
    }
}
