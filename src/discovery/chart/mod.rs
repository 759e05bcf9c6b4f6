//! Chart discovery: which versions of a Helm chart a Warehouse may turn into Freight.
//!
//! [`ChartDiscoverer::discover`] takes a [`ChartSubscription`] and returns the accepted
//! versions, highest first (at most `discoveryLimit`):
//!
//! - a **classic repository** (`https://…` or `http://…` with `name`): one `GET` of
//!   `<repoURL>/index.yaml` (Basic credentials from a `helm` Credential), the chart's
//!   versions from it (`dray_steps::helm::ChartIndex`, the parser the steps download
//!   with). No digest: a classic repository has no content address the Freight could pin.
//! - an **OCI repository** (`oci://host/path/chart`): through image discovery's registry
//!   client (`image::artifact`: same limits, auth and tag cache). Tags are versions, with
//!   Helm's `_` for `+` read back; the accepted tags are pinned to manifest digests like
//!   images (the highest with a fresh `HEAD`), and the highest version's manifest is read
//!   once per digest to check that it is a Helm chart
//!   (`application/vnd.cncf.helm.config.v1+json`), with a clear error when it is not.
//!
//! Versions follow `versions`: semantic versions, `semverConstraint` with image
//! discovery's grammar, pre-releases only when the constraint names one. Where a chart is
//! is `source`. This module does not mint Freight or store anything.

mod error;
pub mod source;
mod versions;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dray_steps::GitCredentials;
use dray_steps::helm::{self, tag_to_version};

pub use self::error::ChartDiscoveryError;
use self::source::ChartSource;
use self::versions::VersionRule;
use super::image::{ImageDiscoverer, MovedTag, RegistryCredentials};
use crate::api::{ChartSubscription, FreightChart};

type Result<T> = std::result::Result<T, ChartDiscoveryError>;

/// The most digests remembered as "is a Helm chart" before the set is cleared.
const MAX_KNOWN_CHARTS: usize = 50_000;

/// Finds chart versions for chart subscriptions; cheap to clone, meant to be shared.
#[derive(Clone, Debug)]
pub struct ChartDiscoverer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    images: ImageDiscoverer,
    /// The client for classic repositories (it follows redirects, as Helm does).
    http: std::result::Result<reqwest::Client, String>,
    /// `repository@digest` of manifests already checked to be Helm charts.
    known_charts: Mutex<HashSet<String>>,
}

/// The result of one discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChartDiscovery {
    /// The accepted versions, highest first.
    pub charts: Vec<DiscoveredChart>,
    /// OCI tags found pointing at another digest than when last seen.
    pub moved: Vec<MovedTag>,
}

/// A chart version found by discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredChart {
    /// The subscription's `repoURL`, as written.
    pub repo_url: String,
    /// The chart's name.
    pub name: String,
    /// The version.
    pub version: String,
    /// The manifest digest, for OCI charts.
    pub digest: Option<String>,
}

impl DiscoveredChart {
    /// The Freight entry for this chart.
    pub fn to_freight_chart(&self) -> FreightChart {
        FreightChart {
            repo_url: self.repo_url.clone(),
            name: self.name.clone(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}

impl ChartDiscoverer {
    /// A discoverer reading OCI registries through `images`.
    pub fn new(images: ImageDiscoverer) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("dray/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| err.to_string());
        Self {
            inner: Arc::new(Inner {
                images,
                http,
                known_charts: Mutex::default(),
            }),
        }
    }

    /// Discover the versions `sub` accepts, highest first, reading the repository with
    /// `auth`.
    pub async fn discover(
        &self,
        sub: &ChartSubscription,
        auth: Option<&RegistryCredentials>,
    ) -> Result<ChartDiscovery> {
        let source = ChartSource::of(sub).map_err(|issue| {
            let value = match issue.field {
                "name" => sub.name.clone().unwrap_or_default(),
                _ => sub.repo_url.clone(),
            };
            ChartDiscoveryError::invalid(issue.field, value, issue.reason, issue.hint)
        })?;
        let rule = VersionRule::new(sub)?;
        match &source {
            ChartSource::Classic { repo_url, name } => {
                self.classic(sub, repo_url, name, &rule, auth).await
            }
            ChartSource::Oci { repository, name } => {
                self.oci(sub, repository, name, &rule, auth).await
            }
        }
    }

    async fn classic(
        &self,
        sub: &ChartSubscription,
        repo_url: &str,
        name: &str,
        rule: &VersionRule,
        auth: Option<&RegistryCredentials>,
    ) -> Result<ChartDiscovery> {
        let http = self
            .inner
            .http
            .as_ref()
            .map_err(|reason| ChartDiscoveryError::ClientSetup {
                reason: reason.clone(),
            })?;
        let credentials = auth.map(|a| GitCredentials {
            username: a.username.clone(),
            password: a.password.clone(),
        });
        let index = helm::fetch_index(http, repo_url, credentials.as_ref()).await?;
        let listed: Vec<(String, String)> = index
            .versions(repo_url, name)?
            .iter()
            .map(|e| (e.version.clone(), e.version.clone()))
            .collect();
        let accepted = rule.accept(repo_url, name, &listed)?;
        let charts = accepted
            .versions
            .into_iter()
            .map(|version| DiscoveredChart {
                repo_url: sub.repo_url.clone(),
                name: name.to_owned(),
                version,
                digest: None,
            })
            .collect();
        Ok(ChartDiscovery {
            charts,
            moved: Vec::new(),
        })
    }

    async fn oci(
        &self,
        sub: &ChartSubscription,
        repository: &str,
        name: &str,
        rule: &VersionRule,
        auth: Option<&RegistryCredentials>,
    ) -> Result<ChartDiscovery> {
        let images = &self.inner.images;
        let tags = images.artifact_tags(repository, sub.insecure, auth).await?;
        let listed: Vec<(String, String)> = tags
            .iter()
            .map(|t| (t.clone(), tag_to_version(t)))
            .collect();
        let accepted = rule.accept(&sub.repo_url, name, &listed)?;
        let pinned = images
            .pin_artifact_tags(
                repository,
                sub.insecure,
                auth,
                &accepted.versions,
                rule.limit,
                &tags,
            )
            .await?;
        if let Some((tag, digest)) = pinned.pinned.first() {
            self.check_is_chart(sub, repository, tag, digest, auth)
                .await?;
        }
        let charts = pinned
            .pinned
            .into_iter()
            .map(|(tag, digest)| DiscoveredChart {
                repo_url: sub.repo_url.clone(),
                name: name.to_owned(),
                version: tag_to_version(&tag),
                digest: Some(digest),
            })
            .collect();
        Ok(ChartDiscovery {
            charts,
            moved: pinned.moved,
        })
    }

    /// Reads the manifest `digest` (once per digest) and checks it is a Helm chart's, with
    /// the check the steps' download makes (`dray_steps::helm::chart_layer`).
    async fn check_is_chart(
        &self,
        sub: &ChartSubscription,
        repository: &str,
        tag: &str,
        digest: &str,
        auth: Option<&RegistryCredentials>,
    ) -> Result<()> {
        let key = format!("{repository}@{digest}");
        if lock(&self.inner.known_charts).contains(&key) {
            return Ok(());
        }
        let body = self
            .inner
            .images
            .artifact_manifest(repository, sub.insecure, auth, digest)
            .await?;
        helm::chart_layer(&body, &format!("{}:{tag}", sub.repo_url))?;
        let mut known = lock(&self.inner.known_charts);
        if known.len() >= MAX_KNOWN_CHARTS {
            known.clear();
        }
        known.insert(key);
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::image::ImageDiscovererOptions;

    #[tokio::test]
    async fn invalid_subscriptions_fail_before_any_request() {
        let images = ImageDiscoverer::new(ImageDiscovererOptions::default()).unwrap();
        let discoverer = ChartDiscoverer::new(images);
        let sub = ChartSubscription {
            repo_url: "https://127.0.0.1:1".into(),
            discovery_limit: 20,
            ..ChartSubscription::default()
        };
        let err = discoverer
            .discover(&sub, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid `name` ``"), "{err}");
        let sub = ChartSubscription {
            repo_url: "oci://127.0.0.1:1/charts/app".into(),
            semver_constraint: Some("^1 ^2".into()),
            discovery_limit: 20,
            ..ChartSubscription::default()
        };
        let err = discoverer
            .discover(&sub, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid `semverConstraint` `^1 ^2`"),
            "{err}"
        );
    }
}
