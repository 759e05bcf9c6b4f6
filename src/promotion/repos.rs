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
        let creds =
            credentials.map(|c| git::GitCredentials::new(c.username.clone(), c.password.clone()));
        // Its own task: a promotion aborted meanwhile must not kill git mid-fetch (leaving
        // lock files in the mirror); the fetch has its own deadline.
        let (cache, url) = (self.0.clone(), repo_url.to_owned());
        tokio::spawn(async move { cache.fetch(&url, creds.as_ref()).await })
            .await
            .map_err(|e| format!("the mirror fetch ended abnormally: {e}"))?
            .map_err(|e| e.to_string())
    }
}
