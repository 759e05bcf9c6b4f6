//! Image discovery against a real registry (Debian's `docker-registry`, distribution 2.8):
//! semver selection pinned by the registry's digest, the cost of a refresh, moved tags,
//! multi-platform indexes, basic auth, a stopped registry and tag-list pagination.

use anyhow::{Context, Result};
use dray::api::{ImageSelectionStrategy, ImageSubscription};
use dray::discovery::image::{
    ImageDiscoverer, ImageDiscovererOptions, ImageDiscoveryError, RegistryCredentials,
};
use dray_e2e::oci::{self, ImageOptions};
use dray_e2e::{Credentials, Registry, RegistryOptions, TestWorld};

fn discoverer() -> ImageDiscoverer {
    ImageDiscoverer::new(ImageDiscovererOptions::default()).expect("HTTP client")
}

fn subscription(registry: &Registry, repo: &str, constraint: Option<&str>) -> ImageSubscription {
    ImageSubscription {
        repo_url: format!("{}/{repo}", registry.host()),
        constraint: constraint.map(str::to_owned),
        strict_semvers: true,
        discovery_limit: 20,
        insecure: true,
        ..ImageSubscription::default()
    }
}

fn tags(discovery: &dray::discovery::image::ImageDiscovery) -> Vec<&str> {
    discovery.images.iter().map(|i| i.tag.as_str()).collect()
}

#[tokio::test]
async fn semver_picks_the_newest_release_in_range_pinned_by_the_registry_digest() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let mut digests = Vec::new();
    for tag in ["1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"] {
        digests.push(oci::push_image(&registry, "team/app", tag).await?);
    }
    let discoverer = discoverer();
    let sub = subscription(&registry, "team/app", Some("^1.0.0"));

    let first = discoverer.discover(&sub, None).await?;
    assert_eq!(tags(&first), ["1.1.0", "1.0.0"]);
    assert_eq!(first.images[0].digest, digests[1]);
    assert_eq!(first.images[1].digest, digests[0]);
    assert_eq!(first.images[0].repo_url, sub.repo_url);
    assert_eq!(first.stats.tags_seen, 4);
    assert_eq!(first.stats.tags_matched, 2);
    // One tag list, one HEAD per candidate, and the newest's manifest and config: its
    // build time (for lead time), which Freight is minted from.
    assert_eq!(
        (first.stats.tag_list_requests, first.stats.http_requests),
        (1, 5)
    );
    assert!(first.images[0].created.is_some(), "{:?}", first.images[0]);

    // Nothing changed: one tag-list request and one HEAD of the newest candidate.
    let second = discoverer.discover(&sub, None).await?;
    assert_eq!(second.images, first.images);
    assert!(second.moved.is_empty());
    assert_eq!(second.stats.tag_list_requests, 1);
    assert_eq!(second.stats.http_requests, 2);

    // Hand-assembled Freight checks a digest with one `HEAD`.
    assert!(
        discoverer
            .digest_exists(&sub.repo_url, true, &digests[3], None)
            .await?
    );
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert!(
        !discoverer
            .digest_exists(&sub.repo_url, true, &unknown, None)
            .await?
    );
    Ok(())
}

#[tokio::test]
async fn a_moved_newest_tag_is_noticed_and_reported() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    oci::push_image(&registry, "app", "1.0.0").await?;
    let old = oci::push_image(&registry, "app", "1.1.0").await?;
    let discoverer = discoverer();
    let sub = subscription(&registry, "app", None);
    assert_eq!(discoverer.discover(&sub, None).await?.images[0].digest, old);

    let rebuilt = oci::push_image(&registry, "app", "1.1.0").await?;
    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(found.images[0].tag, "1.1.0");
    assert_eq!(found.images[0].digest, rebuilt);
    assert_eq!(found.moved.len(), 1);
    assert_eq!(
        (
            found.moved[0].previous_digest.as_str(),
            found.moved[0].digest.as_str()
        ),
        (old.as_str(), rebuilt.as_str())
    );
    // The refresh, and the rebuilt image's manifest and config for its build time.
    assert_eq!(found.stats.http_requests, 4);

    // A new tag costs its HEAD on top of the refresh (and, being the newest, its build
    // time).
    let newer = oci::push_image(&registry, "app", "1.2.0").await?;
    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(tags(&found), ["1.2.0", "1.1.0", "1.0.0"]);
    assert_eq!(found.images[0].digest, newer);
    assert_eq!(
        found.stats.http_requests, 4,
        "the new tag is the newest: its HEAD is the check, then its build time"
    );
    // Nothing changed: the build time is cached by digest.
    assert_eq!(
        discoverer.discover(&sub, None).await?.stats.http_requests,
        2
    );
    Ok(())
}

#[tokio::test]
async fn platform_picks_the_manifest_from_a_multi_arch_index() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let platforms = [("linux", "amd64"), ("linux", "arm64")];
    let (index, manifests) = oci::push_index(&registry, "team/multi", "2.0.0", &platforms).await?;
    let arm64 = manifests
        .iter()
        .find(|(p, _)| p.architecture == "arm64")
        .map(|(_, d)| d.clone())
        .context("arm64 pushed")?;
    let discoverer = discoverer();

    let mut sub = subscription(&registry, "team/multi", None);
    let plain = discoverer.discover(&sub, None).await?;
    assert_eq!(
        plain.images[0].digest, index,
        "without platform the index digest is pinned"
    );
    assert_eq!(plain.images[0].index_digest, None);

    sub.platform = Some("linux/arm64".into());
    let found = discoverer.discover(&sub, None).await?;
    let image = &found.images[0];
    assert_eq!(image.digest, arm64);
    assert_eq!(
        image.platform_digest_from_index.as_deref(),
        Some(arm64.as_str())
    );
    assert_eq!(image.index_digest.as_deref(), Some(index.as_str()));
    // The index is fetched once; then the refresh is the usual two requests.
    assert_eq!(
        discoverer.discover(&sub, None).await?.stats.http_requests,
        2
    );

    sub.platform = Some("linux/s390x".into());
    let err = discoverer.discover(&sub, None).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ImageDiscoveryError::PlatformNotFound { .. }),
        "{text}"
    );
    assert!(text.contains("`linux/amd64`, `linux/arm64`"), "{text}");
    Ok(())
}

#[tokio::test]
async fn basic_auth_works_with_credentials_and_fails_clearly_without() -> Result<()> {
    let world = TestWorld::new()?;
    let auth = Credentials::new("alice", "s3cret-pass");
    let options = RegistryOptions {
        auth: Some(auth.clone()),
        ..RegistryOptions::default()
    };
    let registry = Registry::start(&world, options)?;
    let digest = oci::push_image(&registry, "private/app", "1.0.0").await?;
    let discoverer = discoverer();
    let sub = subscription(&registry, "private/app", None);
    let repo = format!("{}/private/app", registry.host());

    let creds = RegistryCredentials {
        username: auth.username.clone(),
        password: auth.password,
    };
    let found = discoverer.discover(&sub, Some(&creds)).await?;
    assert_eq!(found.images[0].digest, digest);
    // Once the registry has asked for Basic, the credentials go with every request.
    assert_eq!(
        discoverer
            .discover(&sub, Some(&creds))
            .await?
            .stats
            .http_requests,
        2
    );

    let err = discoverer.discover(&sub, None).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ImageDiscoveryError::AuthFailed { .. }),
        "{text}"
    );
    assert!(
        text.starts_with(&format!("authentication failed for `{repo}`")),
        "{text}"
    );
    assert!(
        text.contains("check the Credential for this repository"),
        "{text}"
    );

    let wrong = RegistryCredentials {
        username: "alice".into(),
        password: "wrong".into(),
    };
    let text = discoverer
        .discover(&sub, Some(&wrong))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("refused the credentials of `alice`"),
        "{text}"
    );
    assert!(!text.contains("wrong"), "no password in messages: {text}");
    Ok(())
}

#[tokio::test]
async fn a_stopped_registry_is_reported_unreachable() -> Result<()> {
    let world = TestWorld::new()?;
    let mut registry = Registry::start(&world, RegistryOptions::default())?;
    oci::push_image(&registry, "app", "1.0.0").await?;
    let sub = subscription(&registry, "app", None);
    registry.stop()?;

    let err = discoverer().discover(&sub, None).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "registry `{}` unreachable: connection refused",
            registry.host()
        )),
        "{text}"
    );
    assert!(err.is_retryable());
    Ok(())
}

#[tokio::test]
async fn unknown_repository_and_unmatched_constraint_say_so() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    for tag in ["1.0.0", "1.2.0", "2.0.0"] {
        oci::push_image(&registry, "app", tag).await?;
    }
    let discoverer = discoverer();

    let err = discoverer
        .discover(&subscription(&registry, "nope", None), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ImageDiscoveryError::RepositoryNotFound { .. }),
        "{err}"
    );

    let sub = subscription(&registry, "app", Some("^1.3.0"));
    let text = discoverer
        .discover(&sub, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.starts_with("constraint `^1.3.0` matched 0 of 3 tags"),
        "{text}"
    );
    assert!(text.contains("(newest: `2.0.0`)"), "{text}");
    Ok(())
}

#[tokio::test]
async fn digest_strategy_follows_one_tag_with_one_request_once_its_build_time_is_known()
-> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let first = oci::push_image(&registry, "app", "latest").await?;
    let discoverer = discoverer();
    let mut sub = subscription(&registry, "app", Some("latest"));
    sub.image_selection_strategy = ImageSelectionStrategy::Digest;

    let found = discoverer.discover(&sub, None).await?;
    // The HEAD, then the manifest and config once for the build time.
    assert_eq!(
        (found.images[0].digest.as_str(), found.stats.http_requests),
        (first.as_str(), 3)
    );
    assert!(found.images[0].created.is_some());
    assert_eq!(
        discoverer.discover(&sub, None).await?.stats.http_requests,
        1
    );
    let second = oci::push_image(&registry, "app", "latest").await?;
    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(found.images[0].digest, second);
    assert_eq!(found.moved.len(), 1);

    sub.constraint = Some("missing".into());
    let err = discoverer.discover(&sub, None).await.unwrap_err();
    assert!(
        matches!(err, ImageDiscoveryError::TagNotFound { .. }),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn newest_build_orders_by_image_creation_time() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    for (tag, created) in [
        ("main-aaa", "2024-03-01T00:00:00Z"),
        ("main-bbb", "2024-01-01T00:00:00Z"),
        ("main-ccc", "2024-02-01T00:00:00Z"),
    ] {
        let options = ImageOptions {
            created: Some(created.into()),
            ..ImageOptions::default()
        };
        oci::push_image_with(&registry, "app", tag, &options).await?;
    }
    let discoverer = discoverer();
    let mut sub = subscription(&registry, "app", None);
    sub.image_selection_strategy = ImageSelectionStrategy::NewestBuild;

    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(tags(&found), ["main-aaa", "main-ccc", "main-bbb"]);
    let created = found.images[0].created.context("created is read")?;
    assert_eq!(created.to_string(), "2024-03-01T00:00:00Z");
    // Cold: list + (HEAD, manifest, config) per tag. Warm: list + HEAD of the newest.
    assert_eq!(found.stats.http_requests, 1 + 3 * 3);
    assert_eq!(
        discoverer.discover(&sub, None).await?.stats.http_requests,
        2
    );
    Ok(())
}

/// `org.opencontainers.image.source` and `.revision` are read with the build time, from
/// the config's labels first and the manifest's annotations else, at no extra request.
#[tokio::test]
async fn the_source_commit_comes_from_labels_then_annotations() -> Result<()> {
    const SOURCE: &str = "org.opencontainers.image.source";
    const REVISION: &str = "org.opencontainers.image.revision";
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let pairs = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let labelled = ImageOptions {
        labels: pairs(&[
            (SOURCE, "https://github.com/acme/app"),
            (REVISION, "aaa111"),
        ]),
        annotations: pairs(&[(SOURCE, "https://elsewhere/x"), (REVISION, "bbb222")]),
        ..ImageOptions::default()
    };
    oci::push_image_with(&registry, "app", "1.0.0", &labelled).await?;
    let discoverer = discoverer();
    let sub = subscription(&registry, "app", None);
    let found = discoverer.discover(&sub, None).await?;
    let newest = &found.images[0];
    assert_eq!(
        (newest.source.as_deref(), newest.revision.as_deref()),
        (Some("https://github.com/acme/app"), Some("aaa111")),
        "the config's labels come first"
    );
    // The tag list, a HEAD, and the manifest and config the build time needs anyway.
    assert_eq!(found.stats.http_requests, 4);
    let warm = discoverer.discover(&sub, None).await?;
    assert_eq!(warm.images, found.images, "the cache keeps them");
    assert_eq!(warm.stats.http_requests, 2);

    let annotated = ImageOptions {
        labels: pairs(&[(SOURCE, "https://github.com/acme/app")]),
        annotations: pairs(&[(REVISION, "ccc333")]),
        ..ImageOptions::default()
    };
    oci::push_image_with(&registry, "app", "1.1.0", &annotated).await?;
    oci::push_image(&registry, "app", "0.9.0").await?;
    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(tags(&found), ["1.1.0", "1.0.0", "0.9.0"]);
    let (newest, older, bare) = (&found.images[0], &found.images[1], &found.images[2]);
    assert_eq!(
        (newest.source.as_deref(), newest.revision.as_deref()),
        (Some("https://github.com/acme/app"), Some("ccc333")),
        "a part the labels lack comes from the annotations"
    );
    assert_eq!(older.revision.as_deref(), Some("aaa111"), "from the cache");
    assert_eq!(
        (bare.source.as_deref(), bare.revision.as_deref()),
        (None, None)
    );
    Ok(())
}

#[tokio::test]
async fn pagination_of_300_tags_terminates() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    oci::push_image(&registry, "many", "0.0.0").await?;
    retag(
        &registry,
        "many",
        "0.0.0",
        (1..300).map(|i| format!("1.0.{i}")),
    )
    .await?;

    // A page size below the tag count: whether the registry pages or ignores `n`, the
    // listing ends with every tag exactly once.
    let options = ImageDiscovererOptions {
        tag_page_size: 100,
        ..ImageDiscovererOptions::default()
    };
    let discoverer = ImageDiscoverer::new(options)?;
    let mut sub = subscription(&registry, "many", None);
    sub.discovery_limit = 5;
    let found = discoverer.discover(&sub, None).await?;
    assert_eq!(found.stats.tags_seen, 300);
    assert_eq!(
        tags(&found),
        ["1.0.299", "1.0.298", "1.0.297", "1.0.296", "1.0.295"]
    );
    assert!(found.stats.tag_list_requests <= 4, "{:?}", found.stats);
    Ok(())
}

/// Tag the manifest of `repo:from` under each of `tags` (a manifest `PUT` per tag).
async fn retag(
    registry: &Registry,
    repo: &str,
    from: &str,
    tags: impl Iterator<Item = String>,
) -> Result<()> {
    let http = dray_e2e::http_client()?;
    let media_type = "application/vnd.oci.image.manifest.v1+json";
    let manifest = http
        .get(format!("{}/v2/{repo}/manifests/{from}", registry.url()))
        .header("accept", media_type)
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    for tag in tags {
        http.put(format!("{}/v2/{repo}/manifests/{tag}", registry.url()))
            .header("content-type", media_type)
            .body(manifest.clone())
            .send()
            .await?
            .error_for_status()
            .with_context(|| format!("Failed to tag `{repo}:{tag}`"))?;
    }
    Ok(())
}
