//! From a tag to what a Freight pins: the tag's digest (cached, or `HEAD`ed when asked
//! for a fresh one), the platform's manifest inside an image index, and the build time.
//!
//! Owns the use of the caches and the detection of moved tags. Does not choose which tags
//! to resolve or how fresh they must be: `discover` (in `mod.rs`) decides.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use super::MovedTag;
use super::cache::{Caches, ConfigFacts, ManifestFacts};
use super::error::ImageDiscoveryError;
use super::manifest::{Descriptor, ImageConfig, Origin, Platform, RawManifest, is_index};
use super::registry::Session;
use super::repo::Repo;

type Result<T> = std::result::Result<T, ImageDiscoveryError>;

/// A tag resolved to what a Freight pins.
#[derive(Clone, Debug)]
pub(crate) struct Pinned {
    pub(crate) tag: String,
    /// The tag's own digest (an index digest for a multi-platform tag).
    pub(crate) tag_digest: String,
    /// The digest to pin: the platform's manifest when picked from an index, else the tag's.
    pub(crate) digest: String,
    /// Whether `digest` was picked from an index for the subscription's platform.
    pub(crate) from_index: bool,
    /// Whether the tag's digest was read from the registry in this discovery.
    pub(crate) fresh: bool,
}

/// What an image's config and manifests say about its build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BuildFacts {
    /// The config's `created`.
    pub(crate) created: Option<Timestamp>,
    /// The source and revision: config labels first, then the image manifest's
    /// annotations, then the index's.
    pub(crate) origin: Origin,
}

/// Resolution for one discovery.
pub(crate) struct Resolver<'a> {
    pub(crate) session: &'a Session<'a>,
    pub(crate) caches: &'a Caches,
    pub(crate) repo: &'a Repo,
    pub(crate) platform: Option<&'a Platform>,
    pub(crate) moved: Mutex<Vec<MovedTag>>,
}

impl Resolver<'_> {
    /// Resolve `tag`: from the cache unless `fresh` (or not cached), then the platform.
    /// `None` when the registry no longer knows the tag.
    pub(crate) async fn pin(&self, tag: &str, fresh: bool) -> Result<Option<Pinned>> {
        let key = self.repo.key();
        let cached = if fresh {
            None
        } else {
            self.caches.tag(&key, tag)
        };
        let (tag_digest, fresh) = match cached {
            Some(cached) => (cached, false),
            None => {
                let Some(digest) = self.session.head(tag).await? else {
                    self.caches.forget_tag(&key, tag);
                    return Ok(None);
                };
                if let Some(previous) = self.caches.set_tag(&key, tag, &digest) {
                    self.record_move(tag, previous, &digest);
                }
                (digest, true)
            }
        };
        let (digest, from_index) = self.platform_digest(tag, &tag_digest).await?;
        let tag = tag.to_owned();
        Ok(Some(Pinned {
            tag,
            tag_digest,
            digest,
            from_index,
            fresh,
        }))
    }

    fn record_move(&self, tag: &str, previous_digest: String, digest: &str) {
        tracing::warn!(repo = %self.repo.display, tag, %previous_digest, digest, "image tag moved");
        let moved = MovedTag {
            tag: tag.to_owned(),
            previous_digest,
            digest: digest.to_owned(),
        };
        self.moved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(moved);
    }

    /// The digest to pin for `tag` (whose own digest is `tag_digest`) and whether it was
    /// picked from an index.
    async fn platform_digest(&self, tag: &str, tag_digest: &str) -> Result<(String, bool)> {
        let Some(wanted) = self.platform else {
            return Ok((tag_digest.to_owned(), false));
        };
        match &*self.manifest(tag_digest).await? {
            ManifestFacts::Index { entries, .. } => {
                let found = entries
                    .iter()
                    .find(|e| e.platform.as_ref().is_some_and(|p| p.serves(wanted)));
                match found {
                    Some(entry) => Ok((entry.digest.clone(), true)),
                    None => {
                        let present = entries
                            .iter()
                            .filter_map(|e| e.platform.as_ref())
                            .filter(|p| !p.is_unknown())
                            .map(ToString::to_string)
                            .collect();
                        Err(self.platform_not_found(tag, wanted, present))
                    }
                }
            }
            ManifestFacts::Image { config, .. } => {
                let facts = self.config(config).await?;
                if facts.platform.serves(wanted) {
                    Ok((tag_digest.to_owned(), false))
                } else {
                    let present = vec![facts.platform.to_string()];
                    Err(self.platform_not_found(tag, wanted, present))
                }
            }
        }
    }

    /// The build facts of a pinned image (its config's `created`, its origin). For an
    /// index pinned without a platform, the first entry with a known platform stands for
    /// the image. Reads nothing [`Self::pin`] and the caches do not already hold beyond
    /// that image's manifest and config.
    pub(crate) async fn build(&self, pinned: &Pinned) -> Result<BuildFacts> {
        // An index a platform was picked from was read by `pin`: its annotations cost
        // nothing more.
        let mut index_origin = match pinned.from_index {
            true => self.index_origin(&pinned.tag_digest),
            false => Origin::default(),
        };
        let mut digest = pinned.digest.clone();
        for _ in 0..2 {
            match &*self.manifest(&digest).await? {
                ManifestFacts::Image { config, origin } => {
                    let facts = self.config(config).await?;
                    return Ok(built_from(facts, origin, &index_origin));
                }
                ManifestFacts::Index { entries, origin } => {
                    let Some(entry) = stand_in(entries) else {
                        return Ok(BuildFacts::default());
                    };
                    index_origin = origin.clone();
                    digest = entry.digest.clone();
                }
            }
        }
        Ok(BuildFacts::default())
    }

    /// The build facts if they are known without a request.
    pub(crate) fn cached_build(&self, pinned: &Pinned) -> Option<BuildFacts> {
        let mut index_origin = match pinned.from_index {
            true => self.index_origin(&pinned.tag_digest),
            false => Origin::default(),
        };
        let mut digest = pinned.digest.clone();
        for _ in 0..2 {
            match &*self.caches.manifest(&self.digest_key(&digest))? {
                ManifestFacts::Image { config, origin } => {
                    let facts = self.caches.config(&self.digest_key(config))?;
                    return Some(built_from(facts, origin, &index_origin));
                }
                ManifestFacts::Index { entries, origin } => {
                    index_origin = origin.clone();
                    digest = stand_in(entries)?.digest.clone();
                }
            }
        }
        None
    }

    /// The origin the cached index `digest` names in its annotations.
    fn index_origin(&self, digest: &str) -> Origin {
        match self.caches.manifest(&self.digest_key(digest)).as_deref() {
            Some(ManifestFacts::Index { origin, .. }) => origin.clone(),
            _ => Origin::default(),
        }
    }

    /// What the manifest `digest` says; immutable, so cached for good.
    async fn manifest(&self, digest: &str) -> Result<Arc<ManifestFacts>> {
        let key = self.digest_key(digest);
        if let Some(facts) = self.caches.manifest(&key) {
            return Ok(facts);
        }
        let body = self.session.manifest(digest).await?;
        let op = format!("fetch manifest `{digest}`");
        let raw: RawManifest = self.session.parse(&op, &body)?;
        let index = raw.manifests.is_some() || raw.media_type.as_deref().is_some_and(is_index);
        let origin = Origin::from_labels(&raw.annotations);
        let facts = match (index, raw.manifests, raw.config) {
            (true, Some(entries), _) => ManifestFacts::Index { entries, origin },
            (false, _, Some(config)) => ManifestFacts::Image {
                config: config.digest,
                origin,
            },
            _ => {
                return Err(ImageDiscoveryError::InvalidResponse {
                    operation: op,
                    url: self.repo.display.clone(),
                    reason: "neither an image manifest nor an image index".into(),
                });
            }
        };
        let facts = Arc::new(facts);
        self.caches.set_manifest(&key, facts.clone());
        Ok(facts)
    }

    /// What the config blob `digest` says; immutable, so cached for good.
    async fn config(&self, digest: &str) -> Result<ConfigFacts> {
        let key = self.digest_key(digest);
        if let Some(facts) = self.caches.config(&key) {
            return Ok(facts);
        }
        let body = self.session.blob(digest).await?;
        let config: ImageConfig = self
            .session
            .parse(&format!("fetch config `{digest}`"), &body)?;
        let created = config
            .created
            .as_deref()
            .and_then(|c| c.parse::<Timestamp>().ok());
        let facts = ConfigFacts {
            created,
            platform: Platform::from(&config),
            origin: Origin::from_labels(&config.config.labels),
        };
        self.caches.set_config(&key, facts.clone());
        Ok(facts)
    }

    /// The cache key of a manifest or config blob: content-addressed, but per repository
    /// (see `cache`: entries are only read after this repository's own request).
    fn digest_key(&self, digest: &str) -> String {
        format!("{}@{digest}", self.repo.key())
    }

    fn platform_not_found(
        &self,
        tag: &str,
        wanted: &Platform,
        present: Vec<String>,
    ) -> ImageDiscoveryError {
        ImageDiscoveryError::PlatformNotFound {
            image: format!("{}:{tag}", self.repo.display),
            platform: wanted.to_string(),
            present,
        }
    }
}

/// The index entry that stands for a multi-platform image: the first with a known
/// platform, else the first.
fn stand_in(entries: &[Descriptor]) -> Option<&Descriptor> {
    entries
        .iter()
        .find(|e| e.platform.as_ref().is_some_and(|p| !p.is_unknown()))
        .or(entries.first())
}

/// The build facts of an image whose config says `config` and whose manifest's and
/// index's annotations name `manifest` and `index`.
fn built_from(config: ConfigFacts, manifest: &Origin, index: &Origin) -> BuildFacts {
    BuildFacts {
        created: config.created,
        origin: config.origin.or(manifest).or(index),
    }
}
