//! The errors of git discovery and of the mirror cache: one variant per failed operation,
//! the user's values in backticks, each message ending with what to do next.
//!
//! URLs in messages are redacted ([`redact_url`]): a password embedded in a `repoURL`
//! never reaches an error, a log line or a condition.

use std::path::PathBuf;

/// Something git discovery or the mirror cache could not do.
#[derive(Debug, thiserror::Error)]
pub enum GitDiscoveryError {
    /// The repository could not be reached or listed (DNS, refused connection, not a
    /// repository, server error).
    #[error(
        "cannot reach the repository `{url}`: {reason}; hint: check `repoURL` and that the \
         server is up"
    )]
    Unreachable {
        /// The repository URL (redacted).
        url: String,
        /// What the transport said.
        reason: String,
    },

    /// The server refused the credentials, or asked for some and none were given.
    #[error("authentication failed for `{url}`: {}", if *had_credentials {
        "check the Credential for this repository"
    } else {
        "the repository requires credentials; hint: add a Credential for this repository"
    })]
    AuthenticationFailed {
        /// The repository URL (redacted).
        url: String,
        /// Whether credentials were offered (and refused).
        had_credentials: bool,
    },

    /// Fetching into the bare mirror failed after the remote was listed.
    #[error(
        "failed to fetch `{url}` into the mirror `{}`: {reason}; hint: try again; if it \
         persists, delete the mirror directory (it is only a cache)",
        mirror.display()
    )]
    Fetch {
        /// The repository URL (redacted).
        url: String,
        /// The mirror's directory.
        mirror: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// The mirror directory could not be created or opened.
    #[error(
        "cannot open the git mirror `{}`: {reason}; hint: check that the data directory is \
         writable",
        path.display()
    )]
    Mirror {
        /// The mirror's directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// The followed branch does not exist on the remote.
    #[error(
        "branch `{branch}` not found in `{url}` (branches: {}); hint: fix `branch` in the \
         Warehouse's git subscription",
        list(available)
    )]
    BranchNotFound {
        /// The repository URL (redacted).
        url: String,
        /// The branch asked for.
        branch: String,
        /// The branches the remote has (without `stage/*`).
        available: Vec<String>,
    },

    /// No `branch` was given and the remote advertises no default branch.
    #[error(
        "`{url}` has no default branch (branches: {}); hint: set `branch` in the Warehouse's \
         git subscription",
        list(available)
    )]
    NoDefaultBranch {
        /// The repository URL (redacted).
        url: String,
        /// The branches the remote has (without `stage/*`).
        available: Vec<String>,
    },

    /// The subscription names a `stage/*` branch, which only holds Dray's own commits.
    #[error(
        "refusing to follow `{branch}` of `{url}`: `stage/*` branches hold Dray's own \
         promotions; hint: follow the branch people commit configuration to"
    )]
    StageBranch {
        /// The repository URL (redacted).
        url: String,
        /// The branch asked for.
        branch: String,
    },

    /// A tag strategy found no acceptable tag.
    #[error(
        "{filter} matched 0 of {total} tags{} in `{url}`; hint: push a matching tag or \
         widen the subscription's tag settings",
        newest.as_ref().map(|t| format!(" (newest: `{t}`)")).unwrap_or_default()
    )]
    NoTagMatched {
        /// The repository URL (redacted).
        url: String,
        /// What did the filtering, e.g. ``constraint `^2.0.0` ``.
        filter: String,
        /// How many tags the remote has.
        total: usize,
        /// The newest tag by the strategy's own order, ignoring the filter.
        newest: Option<String>,
    },

    /// `semverConstraint` does not parse.
    #[error(
        "invalid semverConstraint `{constraint}`: {reason}; hint: use a range such as \
         `^1.2.0` or `>=1.0.0 <2.0.0`"
    )]
    InvalidConstraint {
        /// The constraint as written.
        constraint: String,
        /// Why it does not parse.
        reason: String,
    },

    /// A path or tag pattern does not compile.
    #[error(
        "invalid {field} pattern `{pattern}`: {reason}; hint: use a plain path prefix, \
         `glob:PATTERN` or `regex:PATTERN`"
    )]
    InvalidPattern {
        /// The field it came from: `includePaths`, `excludePaths`, `allowTags`, `ignoreTags`.
        field: &'static str,
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },

    /// `expressionFilter` does not compile, or `since` is not an RFC 3339 time.
    #[error("invalid {field} `{value}`: {reason}; hint: {hint}")]
    InvalidFilter {
        /// `expressionFilter` or `since`.
        field: &'static str,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: String,
        /// What to write instead.
        hint: &'static str,
    },

    /// `expressionFilter` failed on a commit (rather than being true or false).
    #[error(
        "expressionFilter failed on commit `{commit}` of `{url}`: {reason}; hint: guard the \
         expression (e.g. with `tag != ''`) so it is a bool for every commit"
    )]
    FilterFailed {
        /// The repository URL (redacted).
        url: String,
        /// The commit it failed on.
        commit: String,
        /// The expression's error.
        reason: String,
    },

    /// No commit of the branch (back to `since`, when set) passed the path filters (or all
    /// were Dray's own).
    #[error(
        "no commit of `{branch}` in `{url}` ({}) touches includePaths (and not only \
         excludePaths) and passes expressionFilter and since without being Dray's own ({scanned} \
         candidate commits read); hint: check `includePaths`/`excludePaths`, `expressionFilter` \
         and `since`",
        match since { Some(since) => format!("back to since `{since}`"), None => "its whole history".to_owned() }
    )]
    NoCommitInPaths {
        /// The repository URL (redacted).
        url: String,
        /// The branch searched.
        branch: String,
        /// How many commits the search read (after pathspec narrowing).
        scanned: usize,
        /// The `since` bound, when one stopped the search.
        since: Option<String>,
    },

    /// A fetch into the mirror ran past its deadline; git was stopped, the mirror unlocked.
    #[error(
        "fetching `{url}` did not finish in {}; the fetch was stopped and the mirror `{}` \
         unlocked (the next discovery retries); hint: check that the git server answers, or \
         that the network to it is not stalled",
        humantime(*timeout),
        mirror.display()
    )]
    FetchTimedOut {
        /// The repository URL (redacted).
        url: String,
        /// The mirror's directory.
        mirror: PathBuf,
        /// The deadline that passed.
        timeout: std::time::Duration,
    },

    /// Waiting for another fetch of the same mirror (or a promotion's worktree) took too long.
    #[error(
        "waited {} for the mirror of `{url}` held by another fetch or promotion; hint: retry; \
         if it persists, look for a stalled fetch of this repository in the log",
        humantime(*waited)
    )]
    MirrorBusy {
        /// The repository URL (redacted).
        url: String,
        /// How long it waited.
        waited: std::time::Duration,
    },

    /// Reading commits, trees or tags from the mirror failed.
    #[error(
        "cannot read history of `{url}` from its mirror: {reason}; hint: delete the mirror \
         directory (it is only a cache) and retry"
    )]
    History {
        /// The repository URL (redacted).
        url: String,
        /// What went wrong.
        reason: String,
    },

    /// A blocking git task panicked or was cancelled.
    #[error(
        "a git task for `{url}` did not finish: {reason}; hint: this is a bug, please report it"
    )]
    Task {
        /// The repository URL (redacted).
        url: String,
        /// The join error.
        reason: String,
    },
}

/// `2m`, `90s`: a duration as the messages write it.
fn humantime(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs % 60 == 0 {
        format!("{}m", secs / 60)
    } else if secs > 0 {
        format!("{secs}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    let mut shown: Vec<String> = items.iter().take(10).map(|b| format!("`{b}`")).collect();
    if items.len() > 10 {
        shown.push(format!("and {} more", items.len() - 10));
    }
    shown.join(", ")
}

/// `url` without a password (and without user info at all): safe for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://{}{path}", &authority[at + 1..]),
        None => url.to_owned(),
    }
}

/// The message and its sources, joined, for errors from gix.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_drops_user_info() {
        assert_eq!(
            redact_url("https://u:secret@h.io/a/b.git"),
            "https://h.io/a/b.git"
        );
        assert_eq!(redact_url("https://h.io/a@b.git"), "https://h.io/a@b.git");
        assert_eq!(redact_url("file:///tmp/x"), "file:///tmp/x");
    }

    #[test]
    fn auth_message_matches_the_documented_text() {
        let err = GitDiscoveryError::AuthenticationFailed {
            url: "http://h/config.git".into(),
            had_credentials: true,
        };
        assert_eq!(
            err.to_string(),
            "authentication failed for `http://h/config.git`: check the Credential for this \
             repository"
        );
    }

    #[test]
    fn no_tag_message_names_constraint_count_and_newest() {
        let err = GitDiscoveryError::NoTagMatched {
            url: "u".into(),
            filter: "constraint `^2.0.0`".into(),
            total: 5,
            newest: Some("v1.4.0".into()),
        };
        assert!(
            err.to_string()
                .starts_with("constraint `^2.0.0` matched 0 of 5 tags (newest: `v1.4.0`)"),
            "{err}"
        );
    }
}
