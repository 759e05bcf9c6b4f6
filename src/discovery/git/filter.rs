//! A git subscription's `expressionFilter` and `since`, compiled: whether one commit counts.
//!
//! `expressionFilter` is an expression in its Warehouse's language over the commit's fields
//! ([`crate::expr::commit_fields`]): `id`, `subject` (the first line), `message` (all of
//! it), `author` and `committer` (`Name <email>`), `commitDate` (CEL: RFC 3339, compare with
//! `timestamp(commitDate)`; expr-lang: a time, `commitDate.Year()`), `branch` and `tag`
//! (`""` when not found that way), and in Kargo's documents `creatorDate` (the commit's
//! date). `since` is an RFC 3339 time; commits
//! made (committer time) before it never count. Owns no I/O and picks no winner: the
//! strategies in [`super`] ask it about each candidate, so `discoveryLimit` counts only
//! commits it accepts.

use serde_json::{Map, Value, json};

use super::error::{GitDiscoveryError, redact_url};
use super::history::CommitInfo;
use crate::api::GitSubscription;
use crate::expr::exprlang::ExprLanguage;
use crate::expr::{FreightView, PredicateCache, Verdict, check_filter, commit_fields};

/// How `since` is written, for hints.
const SINCE_HINT: &str = "write an RFC 3339 time such as `2026-01-31T00:00:00Z`";

/// `expressionFilter` and `since`, checked.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommitFilter {
    expression: Option<String>,
    since: Option<jiff::Timestamp>,
    cache: PredicateCache,
}

impl CommitFilter {
    /// Compiles the subscription's `expressionFilter`, written in `language`, and parses
    /// its `since`.
    pub(crate) fn new(
        sub: &GitSubscription,
        language: ExprLanguage,
    ) -> Result<Self, GitDiscoveryError> {
        let expression = sub
            .expression_filter
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty());
        if let Some(text) = expression {
            check_filter(language, text, commit_fields(language)).map_err(|e| {
                GitDiscoveryError::InvalidFilter {
                    field: "expressionFilter",
                    value: text.to_owned(),
                    reason: e.to_string(),
                    hint: filter_hint(language),
                }
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
            cache: PredicateCache::new(language),
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
            .evaluate(
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

/// How a commit filter is written in `language`, for hints.
pub(crate) fn filter_hint(language: ExprLanguage) -> &'static str {
    match language {
        ExprLanguage::Cel => {
            "use CEL over id, subject, message, author, committer, commitDate, branch and tag, \
             e.g. `!subject.startsWith('wip')`"
        }
        ExprLanguage::ExprLang => {
            "use expr-lang over id, subject, message, author, committer, commitDate, \
             creatorDate, branch and tag, e.g. `!(subject contains 'wip')`"
        }
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
        "creatorDate": commit.committed_at.to_string(),
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
        filter_in(ExprLanguage::Cel, expression, since)
    }

    fn filter_in(
        language: ExprLanguage,
        expression: Option<&str>,
        since: Option<&str>,
    ) -> Result<CommitFilter, GitDiscoveryError> {
        CommitFilter::new(
            &GitSubscription {
                expression_filter: expression.map(str::to_owned),
                since: since.map(str::to_owned),
                ..GitSubscription::default()
            },
            language,
        )
    }

    #[test]
    fn a_kargo_filter_is_expr_lang_with_times_as_times() {
        let lang = ExprLanguage::ExprLang;
        let ok = commit("feat: x\n\nbody", "2026-01-02T00:00:00Z");
        let wip = commit("chore: [skip-ci] x", "2026-01-02T00:00:00Z");
        let old = commit("feat: y", "2023-06-01T00:00:00Z");
        let found = filter_in(
            lang,
            Some("!(subject contains '[skip-ci]') && author != 'dependabot'"),
            None,
        )
        .unwrap();
        assert!(found.accepts("u", &ok, Some("main"), None).unwrap());
        assert!(!found.accepts("u", &wip, Some("main"), None).unwrap());
        let recent = filter_in(
            lang,
            Some("commitDate.After(date('2025-01-01')) && creatorDate.Year() >= 2024"),
            None,
        )
        .unwrap();
        assert!(recent.accepts("u", &ok, None, Some("v1")).unwrap());
        assert!(!recent.accepts("u", &old, None, Some("v0")).unwrap());
        let tagged = filter_in(lang, Some("tag matches '^v[0-9]+$'"), None).unwrap();
        assert!(tagged.accepts("u", &ok, None, Some("v12")).unwrap());
        assert!(!tagged.accepts("u", &ok, None, Some("v1.2-rc")).unwrap());
        // CEL's spelling is not expr-lang's, and the reverse.
        let err = filter_in(lang, Some("subject.startsWith('wip')"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no method startsWith"), "{err}");
        assert!(err.contains("`subject startsWith 'x'`"), "{err}");
        let err = filter(Some("!(subject contains 'wip')"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("CEL"), "{err}");
    }

    #[test]
    fn kargo_filter_variables_dray_does_not_have_are_refused_with_the_reason() {
        let err = filter_in(ExprLanguage::ExprLang, Some("tagger == 'ann'"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("Kargo's `tagger` is not available"), "{err}");
        let err = filter_in(ExprLanguage::ExprLang, Some("msg == ''"), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`msg`") && err.contains("known: id, subject"),
            "{err}"
        );
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
