//! A git subscription's `expressionFilter` and `since`, compiled: whether one commit counts.
//!
//! `expressionFilter` is CEL over the commit's fields ([`COMMIT_FIELDS`]): `id`,
//! `subject` (the first line), `message` (all of it), `author` and `committer`
//! (`Name <email>`), `commitDate` (RFC 3339, compare with `timestamp(commitDate)`),
//! `branch` and `tag` (`""` when not found that way). `since` is an RFC 3339 time; commits
//! made (committer time) before it never count. Owns no I/O and picks no winner: the
//! strategies in [`super`] ask it about each candidate, so `discoveryLimit` counts only
//! commits it accepts.

use serde_json::{Map, Value, json};

use super::error::{GitDiscoveryError, redact_url};
use super::history::CommitInfo;
use crate::expr::{ExprCache, ExprError, FreightView, PredicateScope, Verdict, check_predicate};

/// The variables an `expressionFilter` sees.
pub const COMMIT_FIELDS: &[&str] = &[
    "id",
    "subject",
    "message",
    "author",
    "committer",
    "commitDate",
    "branch",
    "tag",
];

/// How `since` is written, for hints.
const SINCE_HINT: &str = "write an RFC 3339 time such as `2026-01-31T00:00:00Z`";

/// `expressionFilter` and `since`, checked.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommitFilter {
    expression: Option<String>,
    since: Option<jiff::Timestamp>,
    cache: ExprCache,
}

/// Checks `expressionFilter` for `dray apply`: syntax, and only [`COMMIT_FIELDS`].
pub fn check_expression(expression: &str) -> Result<(), ExprError> {
    check_predicate(
        expression,
        &PredicateScope {
            variables: COMMIT_FIELDS,
            ..PredicateScope::default()
        },
    )
}

/// Parses `since`: an RFC 3339 time with an offset (`2026-01-31T00:00:00Z`).
pub fn parse_since(text: &str) -> Result<jiff::Timestamp, String> {
    text.trim()
        .parse::<jiff::Timestamp>()
        .map_err(|e| e.to_string())
}

impl CommitFilter {
    /// Compiles the subscription's `expressionFilter` and parses its `since`.
    pub(crate) fn new(
        expression: Option<&str>,
        since: Option<&str>,
    ) -> Result<Self, GitDiscoveryError> {
        let expression = expression.map(str::trim).filter(|e| !e.is_empty());
        if let Some(text) = expression {
            check_expression(text).map_err(|e| GitDiscoveryError::InvalidFilter {
                field: "expressionFilter",
                value: text.to_owned(),
                reason: e.to_string(),
                hint: "use CEL over id, subject, message, author, committer, commitDate, branch \
                       and tag, e.g. `!subject.startsWith('wip')`",
            })?;
        }
        let since = match since.map(str::trim).filter(|s| !s.is_empty()) {
            Some(text) => Some(parse_since(text).map_err(|reason| {
                GitDiscoveryError::InvalidFilter {
                    field: "since",
                    value: text.to_owned(),
                    reason,
                    hint: SINCE_HINT,
                }
            })?),
            None => None,
        };
        Ok(Self {
            expression: expression.map(str::to_owned),
            since,
            cache: ExprCache::new(),
        })
    }

    /// Whether `commit`, found on `branch` or under `tag`, counts.
    pub(crate) fn accepts(
        &self,
        url: &str,
        commit: &CommitInfo,
        branch: Option<&str>,
        tag: Option<&str>,
    ) -> Result<bool, GitDiscoveryError> {
        if self.since.is_some_and(|since| commit.committed_at < since) {
            return Ok(false);
        }
        let Some(expression) = &self.expression else {
            return Ok(true);
        };
        let verdict = self
            .cache
            .evaluate_predicate(
                expression,
                &variables(commit, branch, tag),
                &FreightView::default(),
            )
            .map_err(|e| GitDiscoveryError::FilterFailed {
                url: redact_url(url),
                commit: commit.id.clone(),
                reason: e.to_string(),
            })?;
        Ok(verdict == Verdict::Accepted)
    }
}

fn variables(commit: &CommitInfo, branch: Option<&str>, tag: Option<&str>) -> Map<String, Value> {
    let Value::Object(fields) = json!({
        "id": commit.id,
        "subject": commit.subject(),
        "message": commit.message.trim_end(),
        "author": commit.author,
        "committer": commit.committer,
        "commitDate": commit.committed_at.to_string(),
        "branch": branch.unwrap_or_default(),
        "tag": tag.unwrap_or_default(),
    }) else {
        unreachable!("a JSON object literal")
    };
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(message: &str, at: &str) -> CommitInfo {
        CommitInfo {
            id: "0123456789abcdef0123456789abcdef01234567".into(),
            message: message.into(),
            author: "Ann <ann@example.com>".into(),
            committer: "Bob <bob@example.com>".into(),
            committed_at: at.parse().unwrap(),
        }
    }

    #[test]
    fn the_expression_sees_the_commit_fields() {
        let filter = CommitFilter::new(
            Some("!subject.startsWith('wip') && author.contains('ann@') && branch == 'main'"),
            None,
        )
        .unwrap();
        let ok = commit("feat: x\n\nbody", "2026-01-02T00:00:00Z");
        assert!(filter.accepts("u", &ok, Some("main"), None).unwrap());
        let wip = commit("wip: x", "2026-01-02T00:00:00Z");
        assert!(!filter.accepts("u", &wip, Some("main"), None).unwrap());
        let filter = CommitFilter::new(
            Some("timestamp(commitDate) > timestamp('2026-01-01T00:00:00Z') && tag == 'v1'"),
            None,
        )
        .unwrap();
        assert!(filter.accepts("u", &ok, None, Some("v1")).unwrap());
    }

    #[test]
    fn since_drops_older_commits() {
        let filter = CommitFilter::new(None, Some("2026-01-01T00:00:00Z")).unwrap();
        assert!(
            filter
                .accepts("u", &commit("a", "2026-01-01T00:00:00Z"), None, None)
                .unwrap()
        );
        assert!(
            !filter
                .accepts("u", &commit("a", "2025-12-31T23:59:59Z"), None, None)
                .unwrap()
        );
    }

    #[test]
    fn bad_filters_are_named() {
        let err = CommitFilter::new(None, Some("yesterday"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid since `yesterday`"), "{err}");
        assert!(err.contains("RFC 3339"), "{err}");
        let err = CommitFilter::new(Some("msg == ''"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no variable `msg`"), "{err}");
        let filter = CommitFilter::new(Some("int(tag) > 1"), None).unwrap();
        let err = filter
            .accepts("u", &commit("a", "2026-01-01T00:00:00Z"), None, Some("v1"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("expressionFilter failed on commit `0123456"), "{err}");
    }
}
