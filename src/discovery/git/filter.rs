//! A git subscription's `expressionFilter` and `since`, compiled: whether one commit counts.
//!
//! `expressionFilter` is CEL over the commit's fields ([`crate::expr::COMMIT_FIELDS`]): `id`,
//! `subject` (the first line), `message` (all of it), `author` and `committer`
//! (`Name <email>`), `commitDate` (RFC 3339, compare with `timestamp(commitDate)`),
//! `branch` and `tag` (`""` when not found that way). `since` is an RFC 3339 time; commits
//! made (committer time) before it never count. Owns no I/O and picks no winner: the
//! strategies in [`super`] ask it about each candidate, so `discoveryLimit` counts only
//! commits it accepts.

use serde_json::{Map, Value, json};

use super::error::{GitDiscoveryError, redact_url};
use super::history::CommitInfo;
use crate::api::GitSubscription;
use crate::expr::{COMMIT_FIELDS, ExprCache, FreightView, Verdict, check_filter};

/// How `since` is written, for hints.
const SINCE_HINT: &str = "write an RFC 3339 time such as `2026-01-31T00:00:00Z`";

/// `expressionFilter` and `since`, checked.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommitFilter {
    expression: Option<String>,
    since: Option<jiff::Timestamp>,
    cache: ExprCache,
}

impl CommitFilter {
    /// Compiles the subscription's `expressionFilter` and parses its `since`.
    pub(crate) fn new(sub: &GitSubscription) -> Result<Self, GitDiscoveryError> {
        let expression = sub
            .expression_filter
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty());
        if let Some(text) = expression {
            check_filter(text, COMMIT_FIELDS).map_err(|e| GitDiscoveryError::InvalidFilter {
                field: "expressionFilter",
                value: text.to_owned(),
                reason: e.to_string(),
                hint: "use CEL over id, subject, message, author, committer, commitDate, branch \
                       and tag, e.g. `!subject.startsWith('wip')`",
            })?;
        }
        let since = sub
            .since_time()
            .map_err(|reason| GitDiscoveryError::InvalidFilter {
                field: "since",
                value: sub.since.clone().unwrap_or_default(),
                reason,
                hint: SINCE_HINT,
            })?;
        Ok(Self {
            expression: expression.map(str::to_owned),
            since,
            cache: ExprCache::new(),
        })
    }

    /// The `since` bound, if any.
    pub(crate) fn since(&self) -> Option<jiff::Timestamp> {
        self.since
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

    fn filter(
        expression: Option<&str>,
        since: Option<&str>,
    ) -> Result<CommitFilter, GitDiscoveryError> {
        CommitFilter::new(&GitSubscription {
            expression_filter: expression.map(str::to_owned),
            since: since.map(str::to_owned),
            ..GitSubscription::default()
        })
    }

    #[test]
    fn the_expression_sees_the_commit_fields() {
        let found = filter(
            Some("!subject.startsWith('wip') && author.contains('ann@') && branch == 'main'"),
            None,
        )
        .unwrap();
        let ok = commit("feat: x\n\nbody", "2026-01-02T00:00:00Z");
        assert!(found.accepts("u", &ok, Some("main"), None).unwrap());
        let wip = commit("wip: x", "2026-01-02T00:00:00Z");
        assert!(!found.accepts("u", &wip, Some("main"), None).unwrap());
        let found = filter(
            Some("timestamp(commitDate) > timestamp('2026-01-01T00:00:00Z') && tag == 'v1'"),
            None,
        )
        .unwrap();
        assert!(found.accepts("u", &ok, None, Some("v1")).unwrap());
    }

    #[test]
    fn since_drops_older_commits() {
        let found = filter(None, Some("2026-01-01T00:00:00Z")).unwrap();
        assert!(
            found
                .accepts("u", &commit("a", "2026-01-01T00:00:00Z"), None, None)
                .unwrap()
        );
        assert!(
            !found
                .accepts("u", &commit("a", "2025-12-31T23:59:59Z"), None, None)
                .unwrap()
        );
    }

    #[test]
    fn bad_filters_are_named() {
        let err = filter(None, Some("yesterday")).unwrap_err().to_string();
        assert!(err.starts_with("invalid since `yesterday`"), "{err}");
        assert!(err.contains("RFC 3339"), "{err}");
        let err = filter(Some("msg == ''"), None).unwrap_err().to_string();
        assert!(err.contains("no variable `msg`"), "{err}");
        let found = filter(Some("int(tag) > 1"), None).unwrap();
        let err = found
            .accepts("u", &commit("a", "2026-01-01T00:00:00Z"), None, Some("v1"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("expressionFilter failed on commit `0123456"),
            "{err}"
        );
    }
}
