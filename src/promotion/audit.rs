//! The audit trail of a Stage, read from its branch in git (not from Dray's database):
//! each commit with the Freight, images, config commits, actor and promotion its trailers
//! name, and every commit Dray did not make flagged as such. An auditor gets the same
//! answer from `git log stage/<stage>` without Dray.

use serde::{Deserialize, Serialize};

use crate::discovery::git::{LoggedCommit, is_dray_commit};

/// One commit of a stage branch.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// The commit id.
    pub commit: String,
    /// When it was committed (RFC 3339).
    pub time: String,
    /// Its author.
    pub author: String,
    /// Its subject line.
    pub subject: String,
    /// Whether Dray made it (it carries a `Dray-Promotion` trailer).
    pub by_dray: bool,
    /// `Dray-Freight`: the Freight id and alias.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freight: Option<String>,
    /// `Dray-Promotion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<String>,
    /// `Dray-Actor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// `Dray-Approved-By`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// `Dray-Signed-Off-By` trailers: the sign-offs that counted, one per person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed_off_by: Vec<String>,
    /// `Dray-Window-Override`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_override: Option<String>,
    /// `Dray-Override`: a freeze promoted through by a person with `override`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_override: Option<String>,
    /// `Dray-Image` trailers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// `Dray-Config-Commit` trailers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_commits: Vec<String>,
}

/// `Key: value` trailers of a commit message (its last paragraph).
pub fn trailers(message: &str) -> Vec<(String, String)> {
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    last.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(": ")?;
            let valid =
                !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            valid.then(|| (key.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The audit entry of one commit.
pub fn entry(commit: &LoggedCommit) -> AuditEntry {
    let mut entry = AuditEntry {
        commit: commit.id.clone(),
        time: commit.committed_at.to_string(),
        author: commit.author.clone(),
        subject: commit.message.lines().next().unwrap_or_default().to_owned(),
        by_dray: is_dray_commit(&commit.message),
        ..Default::default()
    };
    for (key, value) in trailers(&commit.message) {
        match key.as_str() {
            "Dray-Freight" => entry.freight = Some(value),
            "Dray-Promotion" => entry.promotion = Some(value),
            "Dray-Actor" => entry.actor = Some(value),
            "Dray-Approved-By" => entry.approved_by = Some(value),
            "Dray-Signed-Off-By" => entry.signed_off_by.push(value),
            "Dray-Window-Override" => entry.window_override = Some(value),
            "Dray-Override" => entry.freeze_override = Some(value),
            "Dray-Image" => entry.images.push(value),
            "Dray-Config-Commit" => entry.config_commits.push(value),
            _ => {}
        }
    }
    entry
}

/// The Freight id named by a `Dray-Freight: <id> (<alias>)` trailer.
pub fn freight_id(trailer: &str) -> &str {
    trailer.split_whitespace().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_become_audit_fields() {
        let commit = LoggedCommit {
            id: "abc".into(),
            message: "Promote frosty-otter to dev\n\nRendered.\n\nDray-Freight: 1234 (frosty-otter)\nDray-Promotion: dev-1\nDray-Stage: demo/dev\nDray-Actor: ann\nDray-Signed-Off-By: bob (ok)\nDray-Signed-Off-By: cy\nDray-Image: reg/app:1.0.0@sha256:aa\nDray-Image: reg/web:2.0.0@sha256:bb\nDray-Config-Commit: http://git/config.git@c0ffee\n".into(),
            author: "Dray <dray@localhost>".into(),
            committed_at: jiff::Timestamp::UNIX_EPOCH,
        };
        let entry = entry(&commit);
        assert!(entry.by_dray);
        assert_eq!(entry.freight.as_deref(), Some("1234 (frosty-otter)"));
        assert_eq!(freight_id(entry.freight.as_deref().unwrap()), "1234");
        assert_eq!(entry.actor.as_deref(), Some("ann"));
        assert_eq!(entry.signed_off_by, ["bob (ok)", "cy"]);
        assert_eq!(entry.images.len(), 2);
        assert_eq!(entry.config_commits, ["http://git/config.git@c0ffee"]);
        assert_eq!(entry.subject, "Promote frosty-otter to dev");
    }

    #[test]
    fn a_hand_made_commit_is_flagged() {
        let commit = LoggedCommit {
            id: "def".into(),
            message: "hotfix by hand\n".into(),
            author: "Eve <eve@example.com>".into(),
            committed_at: jiff::Timestamp::UNIX_EPOCH,
        };
        let entry = entry(&commit);
        assert!(!entry.by_dray);
        assert!(entry.freight.is_none());
    }
}
