//! The steps' view of the shared git mirrors: [`dray_steps::RepoCache`] over the
//! Warehouses' [`MirrorCache`], so promotions check out worktrees from the same warm
//! mirror discovery keeps up to date.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use dray_steps::{GitCredentials, RepoCache};

use crate::discovery::git::{self, MirrorCache};

/// The mirrors, as steps see them.
pub struct SharedMirrors(pub Arc<MirrorCache>);

#[async_trait]
impl RepoCache for SharedMirrors {
    async fn fetch(
        &self,
        repo_url: &str,
        credentials: Option<&GitCredentials>,
    ) -> Result<PathBuf, String> {
        self.fetch_for_all(repo_url, credentials, None).await
    }

    async fn fetch_for(
        &self,
        repo_url: &str,
        credentials: Option<&GitCredentials>,
        refs: &[String],
        commits: &[String],
    ) -> Result<PathBuf, String> {
        let needs = (refs.to_vec(), commits.to_vec());
        self.fetch_for_all(repo_url, credentials, Some(needs)).await
    }
}

impl SharedMirrors {
    /// The fetch (of what `needs` names, or of everything) in its own task: a promotion
    /// aborted meanwhile must not kill git mid-fetch (leaving lock files in the mirror);
    /// the fetch has its own deadline.
    async fn fetch_for_all(
        &self,
        repo_url: &str,
        credentials: Option<&GitCredentials>,
        needs: Option<(Vec<String>, Vec<String>)>,
    ) -> Result<PathBuf, String> {
        let creds =
            credentials.map(|c| git::GitCredentials::new(c.username.clone(), c.password.clone()));
        let (cache, url) = (self.0.clone(), repo_url.to_owned());
        tokio::spawn(async move {
            match needs {
                Some((refs, commits)) => {
                    cache.fetch_for(&url, creds.as_ref(), &refs, &commits).await
                }
                None => cache.fetch(&url, creds.as_ref()).await,
            }
        })
        .await
        .map_err(|e| format!("the mirror fetch ended abnormally: {e}"))?
        .map_err(|e| e.to_string())
    }
}
