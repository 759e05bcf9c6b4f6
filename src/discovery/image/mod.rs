//! Image discovery: which images of an OCI repository a Warehouse may turn into Freight.
//!
//! [`ImageDiscoverer::discover`] takes an [`ImageSubscription`] and returns the selected
//! tags, newest first and pinned by digest. One discoverer is shared by every warehouse: it
//! holds the HTTP client, the per-registry rate limit and concurrency bound, and the caches.
//! This module does not mint Freight, store anything or schedule refreshes; the caller
//! compares the result with the Freight it already has (see [`MovedTag`]).
//!
//! # Selection
//!
//! `allowTags`/`ignoreTags` (unanchored regexes) apply first, then the strategy: `SemVer`
//! (default; Masterminds/npm-style `constraint`, pre-releases only when the constraint
//! names one, `strictSemvers` for full `x.y.z`), `Lexical` (greatest tag), `NewestBuild`
//! (image config `created`) or `Digest` (the one tag named in `constraint`). See `select`.
//!
//! # What a refresh costs
//!
//! Every HTTP request is counted in [`DiscoveryStats::http_requests`]: tag-list pages,
//! `HEAD`s, manifest and config fetches, `401` challenges, token requests and redirects.
//!
//! - `SemVer`/`Lexical`, nothing changed: **2 requests**, whatever `discoveryLimit` and the
//!   number of tags: one tag-list request (when the tags fit one page of 1,000, or the
//!   registry ignores paging) and one `HEAD` of the newest selected candidate. That `HEAD`
//!   is how a moved tag (a rebuilt `1.4.2`) is noticed; it is cheap and Docker Hub does
//!   not count `HEAD`s against its pull limit.
//! - New tags: the tag list, one `HEAD` per new tag that ranks within `discoveryLimit`,
//!   and the `HEAD` of the newest candidate unless it is one of the new tags (a single new
//!   newest tag: still 2 requests).
//! - First refresh (cold caches): the tag list plus one `HEAD` per returned candidate
//!   (at most `discoveryLimit`), plus, with `platform`, one manifest fetch per distinct
//!   image index (or manifest and config for a single-platform image, to check its
//!   platform). Against a registry that requires credentials, add a `401` on first
//!   contact (Basic), or a `401` and a token request per token lifetime (Bearer).
//! - `NewestBuild` must know every tag's build time: on a cold cache, a `HEAD`, a
//!   manifest and a config fetch per tag that passes the filters (bounded and rate
//!   limited); afterwards the tag list, three requests per new tag, and a `HEAD` of the
//!   newest build unless it is new (2 requests when nothing changed). It only notices a
//!   moved tag when it is the newest; follow a mutable tag with `Digest` instead.
//! - `Digest`: **1 request**, a `HEAD` of the followed tag (no tag list).
//!
//! The trade-off: digests of candidates other than the newest are served from the cache
//! until their tag disappears from the listing or [`ImageDiscoverer::forget_tag`] drops
//! them (a registry webhook can call it), so a rebuilt *older* tag is not noticed by
//! polling. The newest candidate, which is what auto-promotion takes, is always checked.
//!
//! # Platforms
//!
//! Without `platform`, a tag's own digest is pinned: for a multi-platform tag that is the
//! image index digest. With `platform: linux/arm64`, an index (OCI index or Docker manifest
//! list) is fetched and the matching manifest's digest is pinned, so the Freight records
//! the platform-specific manifest ([`DiscoveredImage::digest`]; the index digest stays in
//! [`DiscoveredImage::index_digest`]). A single-platform image is checked against
//! `platform`. If the newest candidate lacks the platform, discovery fails with the
//! platforms it has; older candidates lacking it are left out. (`NewestBuild` reads the
//! build time through the platform's manifest, so it leaves out every image lacking the
//! platform and fails only when none has it.)
//!
//! # Layout
//!
//! `select` and `constraint` (pure tag rules), `repo` (`repoURL`), `registry` (HTTP and
//! request counting, with `auth` and `failure` below it), `limit` (rate limit), `cache`,
//! `resolve` (tag → pinned digest), `manifest` (the JSON it reads), `error`, and
//! `artifact`: the same client for other OCI artifacts (Helm charts, `discovery::chart`).

mod artifact;
mod cache;
pub(crate) mod constraint;
mod error;
#[cfg(test)]
mod kargo_parity;
mod limit;
mod manifest;
mod registry;
#[cfg(test)]
mod registry_double;
pub(crate) mod repo;
mod resolve;
mod select;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, StreamExt as _};
use jiff::Timestamp;

use self::cache::Caches;
pub use self::error::ImageDiscoveryError;
use crate::expr::exprlang::ExprLanguage;

/// Compiles `sub`'s selection rules (constraint, `Digest`'s tag, tag regexes, platform,
/// limit) as discovery will, so `dray apply` refuses what discovery could not honour.
pub(crate) fn check_subscription(
    sub: &ImageSubscription,
    language: ExprLanguage,
) -> std::result::Result<(), ImageDiscoveryError> {
    select::Selector::new(sub, language).map(|_| ())
}
use self::registry::RegistryHttp;
use self::repo::Repo;
use self::resolve::{BuildFacts, Pinned, Resolver};
pub(crate) use self::select::tag_filter_hint;
use self::select::{Selector, newest_build_first};
use crate::api::{FreightImage, ImageSelectionStrategy, ImageSubscription};

type Result<T> = std::result::Result<T, ImageDiscoveryError>;

/// Credentials for a registry (HTTP Basic, or exchanged for a Bearer token).
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryCredentials {
    /// The user name.
    pub username: String,
    /// The password or access token.
    pub password: String,
}

impl fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How a discoverer treats registries.
#[derive(Clone, Debug)]
pub struct ImageDiscovererOptions {
    /// Requests per second to one registry (default 20).
    pub requests_per_second: u32,
    /// Requests in flight to one registry (default 8).
    pub max_concurrent_requests: usize,
    /// Tags asked for per tag-list page (default 1,000).
    pub tag_page_size: usize,
    /// Time to establish a connection (default 10 s).
    pub connect_timeout: Duration,
    /// Time for a whole request (default 30 s).
    pub request_timeout: Duration,
}

impl Default for ImageDiscovererOptions {
    fn default() -> Self {
        Self {
            requests_per_second: 20,
            max_concurrent_requests: 8,
            tag_page_size: 1000,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Finds images for image subscriptions; cheap to clone, meant to be shared.
#[derive(Clone, Debug)]
pub struct ImageDiscoverer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: RegistryHttp,
    caches: Caches,
    concurrency: usize,
}

/// The result of one discovery.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageDiscovery {
    /// The selected images, newest first, at most `discoveryLimit`.
    pub images: Vec<DiscoveredImage>,
    /// Tags found pointing at another digest than when this discoverer last looked.
    pub moved: Vec<MovedTag>,
    /// What it cost.
    pub stats: DiscoveryStats,
}

/// An image found by discovery, pinned by digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredImage {
    /// The subscription's `repoURL`, as written.
    pub repo_url: String,
    /// The tag.
    pub tag: String,
    /// The digest a Freight pins: the platform's manifest when `platform` picked it from an
    /// image index, otherwise the tag's own digest (an index digest for a multi-platform
    /// tag without `platform`).
    pub digest: String,
    /// The image config's `created`, when discovery read it (always for the newest image,
    /// and for every image with `NewestBuild`).
    pub created: Option<Timestamp>,
    /// The repository the image was built from (`org.opencontainers.image.source`, from
    /// the config's labels or else the manifest's annotations), when read (as `created`).
    pub source: Option<String>,
    /// The commit the image was built from (`org.opencontainers.image.revision`), when
    /// read (as `source`).
    pub revision: Option<String>,
    /// `Some(digest)` when `digest` was picked from an image index for `platform`
    /// (then equal to `digest`).
    pub platform_digest_from_index: Option<String>,
    /// The tag's image index digest, when `digest` was picked from it.
    pub index_digest: Option<String>,
}

impl DiscoveredImage {
    /// The Freight entry for this image.
    pub fn to_freight_image(&self) -> FreightImage {
        FreightImage {
            repo_url: self.repo_url.clone(),
            tag: self.tag.clone(),
            digest: self.digest.clone(),
            created_at: self.created.map(crate::api::Time),
            source: self.source.clone(),
            revision: self.revision.clone(),
        }
    }
}

/// A tag that now points at another digest than when last seen by this discoverer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedTag {
    /// The tag.
    pub tag: String,
    /// Its digest before.
    pub previous_digest: String,
    /// Its digest now.
    pub digest: String,
}

/// What one discovery cost and saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryStats {
    /// Tags the registry listed (0 for `Digest`, which lists none).
    pub tags_seen: usize,
    /// Tags that passed the filters and the constraint.
    pub tags_matched: usize,
    /// Every HTTP request sent, of any kind.
    pub http_requests: u32,
    /// Tag-list pages requested.
    pub tag_list_requests: u32,
}

impl ImageDiscoverer {
    /// A discoverer with `options`. Fails only if the TLS client cannot be set up.
    pub fn new(options: ImageDiscovererOptions) -> Result<Self> {
        let concurrency = options.max_concurrent_requests.max(1);
        let http = RegistryHttp::new(
            options.requests_per_second,
            concurrency,
            options.tag_page_size,
            options.connect_timeout,
            options.request_timeout,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                caches: Caches::default(),
                concurrency,
            }),
        })
    }

    /// Discover the images `sub` selects, newest first, reading the registry with `auth`;
    /// its `expressionFilter` is CEL, as in Dray's own documents.
    pub async fn discover(
        &self,
        sub: &ImageSubscription,
        auth: Option<&RegistryCredentials>,
    ) -> Result<ImageDiscovery> {
        self.discover_in(sub, auth, ExprLanguage::Cel).await
    }

    /// [`Self::discover`] for a subscription of a Warehouse whose expressions are in
    /// `language` (expr-lang for Kargo's documents).
    pub async fn discover_in(
        &self,
        sub: &ImageSubscription,
        auth: Option<&RegistryCredentials>,
        language: ExprLanguage,
    ) -> Result<ImageDiscovery> {
        let selector = Selector::new(sub, language)?;
        let repo = Repo::parse(&sub.repo_url, sub.insecure)?;
        let session = self.inner.http.session(&repo, auth);
        let resolver = Resolver {
            session: &session,
            caches: &self.inner.caches,
            repo: &repo,
            platform: selector.platform.as_ref(),
            moved: Mutex::default(),
        };
        let mut stats = DiscoveryStats::default();
        let found = match selector.strategy {
            ImageSelectionStrategy::Digest => self.follow_tag(&selector, &resolver).await?,
            strategy => {
                let tags = session.list_tags().await?;
                self.inner.caches.retain_tags(&repo.key(), &tags);
                stats.tags_seen = tags.len();
                if strategy == ImageSelectionStrategy::NewestBuild {
                    self.newest_builds(&selector, &resolver, &tags, &mut stats)
                        .await?
                } else {
                    self.ranked(&selector, &resolver, &tags, &mut stats).await?
                }
            }
        };
        let mut found = found;
        // The newest image is what Freight is minted from: its build facts are read (one
        // manifest and one config, then cached by digest) for every strategy, so lead
        // time and the commit it was built from are known. Not reading them never fails
        // discovery.
        if let Some((pinned, build)) = found.first_mut()
            && build.is_none()
        {
            *build = resolver.cached_build(pinned);
            if build.is_none() {
                match resolver.build(pinned).await {
                    Ok(read) => *build = Some(read),
                    Err(error) => tracing::debug!(
                        image = %sub.repo_url, tag = %pinned.tag, %error,
                        "cannot read the image's config; its lead time and commit stay unknown"
                    ),
                }
            }
        }
        let images = found
            .into_iter()
            .map(|(pinned, build)| {
                let build = build
                    .or_else(|| resolver.cached_build(&pinned))
                    .unwrap_or_default();
                (pinned, build)
            })
            .map(|(pinned, build)| DiscoveredImage {
                repo_url: sub.repo_url.clone(),
                created: build.created,
                source: build.origin.source,
                revision: build.origin.revision,
                platform_digest_from_index: pinned.from_index.then(|| pinned.digest.clone()),
                index_digest: pinned.from_index.then(|| pinned.tag_digest.clone()),
                tag: pinned.tag,
                digest: pinned.digest,
            })
            .collect();
        stats.http_requests = session.requests();
        stats.tag_list_requests = session.tag_list_requests();
        let moved = resolver
            .moved
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        Ok(ImageDiscovery {
            images,
            moved,
            stats,
        })
    }

    /// Whether `repo_url@digest` exists (a `HEAD` of the manifest), e.g. to check a
    /// hand-assembled Freight. `insecure` selects plain HTTP as for a subscription.
    pub async fn digest_exists(
        &self,
        repo_url: &str,
        insecure: bool,
        digest: &str,
        auth: Option<&RegistryCredentials>,
    ) -> Result<bool> {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let hint = Some("a digest is `sha256:` and 64 hexadecimal digits");
            return Err(ImageDiscoveryError::invalid(
                "digest",
                digest,
                "not a digest",
                hint,
            ));
        }
        let repo = Repo::parse(repo_url, insecure)?;
        let session = self.inner.http.session(&repo, auth);
        Ok(session.head(digest).await?.is_some())
    }

    /// The digest `repo_url:tag` points at now (a `HEAD` of the manifest; an index's own
    /// digest for a multi-platform tag), or `None` when there is no such tag, e.g. to check
    /// that a hand-assembled Freight's tag and digest agree.
    pub async fn tag_digest(
        &self,
        repo_url: &str,
        insecure: bool,
        tag: &str,
        auth: Option<&RegistryCredentials>,
    ) -> Result<Option<String>> {
        let repo = Repo::parse(repo_url, insecure)?;
        let session = self.inner.http.session(&repo, auth);
        session.head(tag).await
    }

    /// Drop what this discoverer remembers about `repo_url:tag` (e.g. on a push webhook),
    /// so the next discovery reads its digest again.
    pub fn forget_tag(&self, repo_url: &str, tag: &str) {
        if let Ok(repo) = Repo::parse(repo_url, false) {
            self.inner.caches.forget_tag(&repo.key(), tag);
        }
    }

    /// `Digest`: the one tag, always read from the registry.
    async fn follow_tag(&self, selector: &Selector, resolver: &Resolver<'_>) -> Result<Found> {
        let tag = selector.digest_tag.clone().unwrap_or_default();
        if !selector.passes_filters(&tag)? {
            return Err(ImageDiscoveryError::NoTagMatched {
                repo: resolver.repo.display.clone(),
                criteria: "`allowTags`/`ignoreTags`/`expressionFilter`".into(),
                total: 1,
                newest: Some(tag),
            });
        }
        match resolver.pin(&tag, true).await? {
            Some(pinned) => Ok(vec![(pinned, None)]),
            None => Err(ImageDiscoveryError::TagNotFound {
                repo: resolver.repo.display.clone(),
                tag,
            }),
        }
    }

    /// `SemVer` and `Lexical`: the newest candidate read fresh, the others from the cache.
    async fn ranked(
        &self,
        selector: &Selector,
        resolver: &Resolver<'_>,
        tags: &[String],
        stats: &mut DiscoveryStats,
    ) -> Result<Found> {
        let ranked = selector.rank(&resolver.repo.display, tags)?;
        stats.tags_matched = ranked.len();
        self.pin_ranked(resolver, &ranked, selector.limit, tags)
            .await
    }

    /// Pins the first `limit` of `ranked` (newest first, taken from the listing `tags`):
    /// the newest that still exists read fresh, the others from the cache.
    async fn pin_ranked(
        &self,
        resolver: &Resolver<'_>,
        ranked: &[String],
        limit: usize,
        tags: &[String],
    ) -> Result<Found> {
        let mut rest = ranked.iter();
        let mut found = Vec::new();
        for tag in rest.by_ref() {
            // A tag deleted since the listing is skipped; the next one is the newest.
            if let Some(pinned) = resolver.pin(tag, true).await? {
                found.push((pinned, None));
                break;
            }
        }
        if found.is_empty() {
            return Err(vanished(resolver, tags));
        }
        // The futures are built before the stream: a closure in the stream's type would
        // make the discovery future not `Send` (rust-lang/rust#102211).
        let lookups: Vec<_> = rest
            .take(limit.saturating_sub(1))
            .map(|t| pin_cached(resolver, t))
            .collect();
        let pinned: Vec<_> = stream::iter(lookups)
            .buffered(self.inner.concurrency)
            .collect()
            .await;
        for (tag, result) in pinned {
            if let Some(pinned) = skip_platformless(tag, result)? {
                found.push((pinned, None));
            }
        }
        Ok(found)
    }

    /// `NewestBuild`: every filtered tag's build time (cached by digest), newest first; the
    /// newest is re-read until its digest is fresh.
    async fn newest_builds(
        &self,
        selector: &Selector,
        resolver: &Resolver<'_>,
        tags: &[String],
        stats: &mut DiscoveryStats,
    ) -> Result<Found> {
        let filtered = selector.filter(&resolver.repo.display, tags)?;
        stats.tags_matched = filtered.len();
        let lookups: Vec<_> = filtered.iter().map(|t| built_cached(resolver, t)).collect();
        let results: Vec<_> = stream::iter(lookups)
            .buffered(self.inner.concurrency)
            .collect()
            .await;
        let mut found = Vec::new();
        let mut first_platform_error = None;
        for (tag, result) in results {
            match result {
                Err(err @ ImageDiscoveryError::PlatformNotFound { .. }) => {
                    tracing::warn!(tag = %tag, error = %err, "skipping image without the platform");
                    first_platform_error.get_or_insert(err);
                }
                Err(err) => return Err(err),
                Ok(Some(entry)) => found.push(entry),
                Ok(None) => {}
            }
        }
        loop {
            sort_by_created(&mut found);
            let Some((top, _)) = found.first() else {
                return Err(first_platform_error.unwrap_or_else(|| vanished(resolver, tags)));
            };
            if top.fresh {
                break;
            }
            let tag = top.tag.clone();
            match built(resolver, &tag, true).await? {
                Some(entry) => found[0] = entry,
                None => {
                    found.remove(0);
                }
            }
        }
        found.truncate(selector.limit);
        Ok(found)
    }
}

/// A pinned image with its build facts, when read.
type Built = (Pinned, Option<BuildFacts>);

/// Pinned images with their build facts, when read.
type Found = Vec<Built>;

/// `tag` pinned, from the cache when possible.
async fn pin_cached<'t>(
    resolver: &Resolver<'_>,
    tag: &'t str,
) -> (&'t str, Result<Option<Pinned>>) {
    (tag, resolver.pin(tag, false).await)
}

/// `tag` pinned with its build facts, from the caches when possible.
async fn built_cached<'t>(
    resolver: &Resolver<'_>,
    tag: &'t str,
) -> (&'t str, Result<Option<Built>>) {
    (tag, built(resolver, tag, false).await)
}

/// Pin `tag` and read its build facts.
async fn built(resolver: &Resolver<'_>, tag: &str, fresh: bool) -> Result<Option<Built>> {
    let Some(pinned) = resolver.pin(tag, fresh).await? else {
        return Ok(None);
    };
    let build = resolver.build(&pinned).await?;
    Ok(Some((pinned, Some(build))))
}

fn sort_by_created(found: &mut Found) {
    let created = |b: &Option<BuildFacts>| b.as_ref().and_then(|b| b.created);
    found.sort_by(|(a, ba), (b, bb)| {
        newest_build_first((&a.tag, created(ba)), (&b.tag, created(bb)))
    });
}

/// An older candidate without the platform is left out; other errors fail discovery.
fn skip_platformless(tag: &str, result: Result<Option<Pinned>>) -> Result<Option<Pinned>> {
    match result {
        Err(err @ ImageDiscoveryError::PlatformNotFound { .. }) => {
            tracing::warn!(tag, error = %err, "leaving out an older image without the platform");
            Ok(None)
        }
        other => other,
    }
}

/// Every candidate was deleted between the listing and the `HEAD`s.
fn vanished(resolver: &Resolver<'_>, tags: &[String]) -> ImageDiscoveryError {
    ImageDiscoveryError::NoTagMatched {
        repo: resolver.repo.display.clone(),
        criteria: "tags that still exist when read (all candidates were deleted meanwhile)".into(),
        total: tags.len(),
        newest: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_debug_hides_the_password() {
        let creds = RegistryCredentials {
            username: "bot".into(),
            password: "s3cret".into(),
        };
        let text = format!("{creds:?}");
        assert!(text.contains("bot") && !text.contains("s3cret"), "{text}");
    }

    #[test]
    fn discovered_image_becomes_a_freight_image() {
        let image = DiscoveredImage {
            repo_url: "r/app".into(),
            tag: "1.0.0".into(),
            digest: "sha256:aa".into(),
            created: None,
            source: Some("https://github.com/acme/app".into()),
            revision: Some("0123abc".into()),
            platform_digest_from_index: Some("sha256:aa".into()),
            index_digest: Some("sha256:ii".into()),
        };
        let freight = image.to_freight_image();
        assert_eq!(
            (freight.tag.as_str(), freight.digest.as_str()),
            ("1.0.0", "sha256:aa")
        );
        assert_eq!(
            (freight.source.as_deref(), freight.revision.as_deref()),
            (Some("https://github.com/acme/app"), Some("0123abc"))
        );
    }

    /// Controllers spawn discoveries on the runtime: the future must be `Send + 'static`
    /// once it owns its inputs.
    #[test]
    fn discovery_futures_can_be_spawned() {
        fn spawnable<F: std::future::Future + Send + 'static>(_: F) {}
        let discoverer = ImageDiscoverer::new(ImageDiscovererOptions::default()).unwrap();
        let sub = ImageSubscription::default();
        spawnable(async move { discoverer.discover(&sub, None).await.map(|d| d.stats) });
    }

    #[tokio::test]
    async fn invalid_subscriptions_fail_before_any_request() {
        let discoverer = ImageDiscoverer::new(ImageDiscovererOptions::default()).unwrap();
        let sub = ImageSubscription {
            repo_url: "https://127.0.0.1:1/app".into(),
            discovery_limit: 20,
            ..ImageSubscription::default()
        };
        let err = discoverer.discover(&sub, None).await.unwrap_err();
        assert!(err.is_config_error(), "{err}");
        let sub = ImageSubscription {
            repo_url: "127.0.0.1:1/app".into(),
            constraint: Some(">=1.0.0 <2.x.y".into()),
            discovery_limit: 20,
            ..ImageSubscription::default()
        };
        let err = discoverer.discover(&sub, None).await.unwrap_err();
        assert!(err.to_string().starts_with("invalid `constraint`"), "{err}");
    }
}
