//! The registry client for OCI artifacts that are not images (Helm charts): their tags,
//! their tags pinned to manifest digests, and the manifests themselves, through the same
//! HTTP client, per-registry limits, authentication and tag cache as image discovery.
//!
//! Owns nothing but this door: which tags are versions, and what a manifest must say, is
//! the caller's (`discovery::chart`).

use std::sync::Mutex;

use super::repo::Repo;
use super::resolve::Resolver;
use super::{ImageDiscoverer, MovedTag, RegistryCredentials, Result};

/// Tags pinned to manifest digests, newest first, and tags seen moving.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PinnedTags {
    /// `(tag, digest)`, in the order asked for; tags deleted meanwhile are left out.
    pub(crate) pinned: Vec<(String, String)>,
    /// Tags found pointing at another digest than when last seen.
    pub(crate) moved: Vec<MovedTag>,
}

impl ImageDiscoverer {
    /// Every tag of the repository `repo_url` (`host[:port]/path`).
    pub(crate) async fn artifact_tags(
        &self,
        repo_url: &str,
        insecure: bool,
        auth: Option<&RegistryCredentials>,
    ) -> Result<Vec<String>> {
        let repo = Repo::parse(repo_url, insecure)?;
        let session = self.inner.http.session(&repo, auth);
        let tags = session.list_tags().await?;
        self.inner.caches.retain_tags(&repo.key(), &tags);
        Ok(tags)
    }

    /// The first `limit` of `ranked` (tags of `repo_url` listed as `tags`, newest first)
    /// pinned to their manifest digests: the newest read fresh, the others from the cache,
    /// as image discovery pins images.
    pub(crate) async fn pin_artifact_tags(
        &self,
        repo_url: &str,
        insecure: bool,
        auth: Option<&RegistryCredentials>,
        ranked: &[String],
        limit: usize,
        tags: &[String],
    ) -> Result<PinnedTags> {
        let repo = Repo::parse(repo_url, insecure)?;
        let session = self.inner.http.session(&repo, auth);
        let resolver = Resolver {
            session: &session,
            caches: &self.inner.caches,
            repo: &repo,
            platform: None,
            moved: Mutex::default(),
        };
        let found = self.pin_ranked(&resolver, ranked, limit, tags).await?;
        let moved = resolver
            .moved
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        Ok(PinnedTags {
            pinned: found
                .into_iter()
                .map(|(pinned, _)| (pinned.tag, pinned.tag_digest))
                .collect(),
            moved,
        })
    }

    /// The bytes of the manifest `digest` of `repo_url`, checked against the digest.
    pub(crate) async fn artifact_manifest(
        &self,
        repo_url: &str,
        insecure: bool,
        auth: Option<&RegistryCredentials>,
        digest: &str,
    ) -> Result<Vec<u8>> {
        let repo = Repo::parse(repo_url, insecure)?;
        let session = self.inner.http.session(&repo, auth);
        session.manifest(digest).await
    }
}
