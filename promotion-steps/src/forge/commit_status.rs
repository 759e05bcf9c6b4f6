//! Commit statuses: what a promotion orchestrator tells CI about a commit it deployed.
//!
//! - GitHub: `POST /repos/{owner}/{repo}/statuses/{sha}` with `{state, target_url,
//!   description, context}`, `state` one of `pending`, `success`, `failure`, `error`
//!   (octocrab, through [`super::github::GitHub`]);
//! - GitLab: `POST /projects/:id/statuses/:sha` with `state` one of `pending`, `running`,
//!   `success`, `failed`, `canceled` and `name`, `target_url`, `description` (the `gitlab`
//!   crate's `CreateCommitStatus`, through [`super::gitlab::GitLab`]).
//!
//! Only GitHub and GitLab are spoken here; another provider is an error saying so. Every
//! request gives up after the forge clients' 30 s.

use super::{ForgeError, ForgeTarget, Provider, REQUEST_TIMEOUT};

/// A commit status' state, in words both forges have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    /// Running or waiting.
    Pending,
    /// It worked.
    Success,
    /// It did not.
    Failure,
}

impl StatusState {
    /// GitHub's word.
    pub fn github(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
        }
    }

    /// GitLab's word.
    pub fn gitlab(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failed",
        }
    }
}

/// A status to post on a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// The state.
    pub state: StatusState,
    /// The status' name (GitHub `context`, GitLab `name`), e.g. `dray/demo/prod`.
    pub context: String,
    /// Where "Details" links to.
    pub target_url: String,
    /// A short description (cut to the forges' 140 / 255 characters).
    pub description: String,
}

/// Posts `status` on commit `sha` of the repository `target` names, with `token`.
pub async fn post(
    target: &ForgeTarget,
    token: Option<String>,
    sha: &str,
    status: &CommitStatus,
) -> Result<(), ForgeError> {
    let description: String = status.description.chars().take(140).collect();
    let work = async {
        match target.provider {
            Provider::Github => {
                let github = super::github::GitHub::new(&target.api_url, &target.repo_path, token)?;
                github
                    .post_status(sha, status.state.github(), status, &description)
                    .await
            }
            Provider::Gitlab => {
                let gitlab =
                    super::gitlab::GitLab::new(&target.api_url, &target.repo_path, token).await?;
                gitlab.post_status(sha, status, &description).await
            }
            other => Err(ForgeError::Other(format!(
                "Dray posts commit statuses to GitHub and GitLab only, not {}",
                other.name()
            ))),
        }
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, work).await {
        Ok(answer) => answer,
        Err(_) => Err(ForgeError::Unavailable(format!(
            "{} did not answer a commit status within {}s",
            target.provider.name(),
            REQUEST_TIMEOUT.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_forge_gets_its_own_words() {
        assert_eq!(StatusState::Failure.github(), "failure");
        assert_eq!(StatusState::Failure.gitlab(), "failed");
        assert_eq!(StatusState::Pending.gitlab(), "pending");
    }
}
