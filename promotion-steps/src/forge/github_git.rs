//! GitHub's Git database and compare API, for `github-push`: read a ref
//! (`GET /repos/{o}/{r}/git/ref/{ref}`), compare two commits
//! (`GET /repos/{o}/{r}/compare/{base}...{head}`), create a commit
//! (`POST /repos/{o}/{r}/git/commits`), and create, move and delete a ref
//! (`POST /repos/{o}/{r}/git/refs`, `PATCH|DELETE /repos/{o}/{r}/git/refs/{ref}`).
//!
//! A commit created without `author` and `committer` is attributed by GitHub to the
//! authenticated identity (a GitHub App) and signed with GitHub's key: it shows as verified.
//! A 422 to a ref update is "Update is not a fast forward" ([`RefUpdate::NotFastForward`]);
//! a 422 to a ref create is "Reference already exists" ([`RefUpdate::Exists`]).

use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ForgeError;
use super::github::GitHub;
use super::rest::encode;

/// One commit of a comparison, as far as replaying it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComparedCommit {
    /// Its id.
    pub sha: String,
    /// Its tree.
    pub tree: String,
    /// Its message.
    pub message: String,
    /// Its parents' ids.
    pub parents: Vec<String>,
    /// `author` as GitHub gives it (`name`, `email`, `date`).
    pub author: Value,
    /// `committer` as GitHub gives it.
    pub committer: Value,
}

/// `GET /compare/{base}...{head}`: how `head` relates to `base`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// `ahead`, `behind`, `diverged` or `identical`.
    pub status: String,
    /// The merge base of the two.
    pub merge_base: String,
    /// The commits of `head` not in `base`, oldest first.
    pub commits: Vec<ComparedCommit>,
}

/// What came of creating or moving a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefUpdate {
    /// Done.
    Done,
    /// 422 to a move: the new commit does not descend from the ref's (someone pushed).
    NotFastForward(String),
    /// 422 to a create: the ref exists (someone created it).
    Exists(String),
}

#[derive(Deserialize)]
struct GitRef {
    object: GitObject,
}

#[derive(Deserialize)]
struct GitObject {
    sha: String,
}

#[derive(Deserialize)]
struct Compared {
    status: String,
    merge_base_commit: Sha,
    #[serde(default)]
    commits: Vec<RepoCommit>,
}

#[derive(Deserialize)]
struct Sha {
    sha: String,
}

#[derive(Deserialize)]
struct RepoCommit {
    sha: String,
    commit: CommitData,
    #[serde(default)]
    parents: Vec<Sha>,
}

#[derive(Deserialize)]
struct CommitData {
    message: String,
    tree: Sha,
    #[serde(default)]
    author: Value,
    #[serde(default)]
    committer: Value,
}

fn unexpected(what: &str, e: serde_json::Error) -> ForgeError {
    ForgeError::Other(format!("unexpected {what} from GitHub: {e}"))
}

impl GitHub {
    /// The commit `ref` (`heads/main`) points at; `None` when there is no such ref.
    pub async fn git_ref(&self, git_ref: &str) -> Result<Option<String>, ForgeError> {
        let path = format!("/git/ref/{}", encode_ref(git_ref));
        match self.send_with_status(http::Method::GET, &path, None).await {
            Ok(text) => {
                let r: GitRef = serde_json::from_str(&text).map_err(|e| unexpected("ref", e))?;
                Ok(Some(r.object.sha))
            }
            Err((Some(StatusCode::NOT_FOUND), _)) => Ok(None),
            Err((_, e)) => Err(e),
        }
    }

    /// How `head` relates to `base`, with up to 250 of the commits of `head` not in `base`.
    pub async fn compare(&self, base: &str, head: &str) -> Result<Comparison, ForgeError> {
        let path = format!("/compare/{}...{}?per_page=250", encode(base), encode(head));
        let text = self
            .send_with_status(http::Method::GET, &path, None)
            .await
            .map_err(|(_, e)| e)?;
        let c: Compared = serde_json::from_str(&text).map_err(|e| unexpected("comparison", e))?;
        Ok(Comparison {
            status: c.status,
            merge_base: c.merge_base_commit.sha,
            commits: c
                .commits
                .into_iter()
                .map(|rc| ComparedCommit {
                    sha: rc.sha,
                    tree: rc.commit.tree.sha,
                    message: rc.commit.message,
                    parents: rc.parents.into_iter().map(|p| p.sha).collect(),
                    author: rc.commit.author,
                    committer: rc.commit.committer,
                })
                .collect(),
        })
    }

    /// Creates a commit of `tree` with `parents`; without `author`/`committer` GitHub
    /// attributes and signs it. Returns its id.
    pub async fn create_commit(
        &self,
        message: &str,
        tree: &str,
        parents: &[String],
        identity: Option<(&Value, &Value)>,
    ) -> Result<String, ForgeError> {
        let mut body = json!({"message": message, "tree": tree, "parents": parents});
        if let Some((author, committer)) = identity {
            body["author"] = author.clone();
            body["committer"] = committer.clone();
        }
        let text = self
            .send_with_status(http::Method::POST, "/git/commits", Some(&body))
            .await
            .map_err(|(_, e)| e)?;
        let made: Sha = serde_json::from_str(&text).map_err(|e| unexpected("commit", e))?;
        Ok(made.sha)
    }

    /// Creates `refs/<git_ref>` at `sha`.
    pub async fn create_ref(&self, git_ref: &str, sha: &str) -> Result<RefUpdate, ForgeError> {
        let body = json!({"ref": format!("refs/{git_ref}"), "sha": sha});
        match self
            .send_with_status(http::Method::POST, "/git/refs", Some(&body))
            .await
        {
            Ok(_) => Ok(RefUpdate::Done),
            Err((Some(StatusCode::UNPROCESSABLE_ENTITY), ForgeError::Refused(m))) => {
                Ok(RefUpdate::Exists(m))
            }
            Err((_, e)) => Err(e),
        }
    }

    /// Moves `git_ref` (`heads/main`) to `sha`; only fast-forward unless `force`.
    pub async fn update_ref(
        &self,
        git_ref: &str,
        sha: &str,
        force: bool,
    ) -> Result<RefUpdate, ForgeError> {
        let path = format!("/git/refs/{}", encode_ref(git_ref));
        let body = json!({"sha": sha, "force": force});
        match self
            .send_with_status(http::Method::PATCH, &path, Some(&body))
            .await
        {
            Ok(_) => Ok(RefUpdate::Done),
            Err((Some(StatusCode::UNPROCESSABLE_ENTITY), ForgeError::Refused(m))) => {
                Ok(RefUpdate::NotFastForward(m))
            }
            Err((_, e)) => Err(e),
        }
    }

    /// Deletes `git_ref`; one that is not there (422 `Reference does not exist`) is fine.
    pub async fn delete_ref(&self, git_ref: &str) -> Result<(), ForgeError> {
        let path = format!("/git/refs/{}", encode_ref(git_ref));
        match self
            .send_with_status(http::Method::DELETE, &path, None)
            .await
        {
            Ok(_) | Err((Some(StatusCode::UNPROCESSABLE_ENTITY | StatusCode::NOT_FOUND), _)) => {
                Ok(())
            }
            Err((_, e)) => Err(e),
        }
    }
}

/// A ref name in a path: each segment encoded, the slashes kept (`heads/stage/prod`).
fn encode_ref(git_ref: &str) -> String {
    git_ref.split('/').map(encode).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_keep_their_slashes_in_paths() {
        assert_eq!(encode_ref("heads/stage/prod"), "heads/stage/prod");
        assert_eq!(encode_ref("heads/a b"), "heads/a%20b");
    }
}
