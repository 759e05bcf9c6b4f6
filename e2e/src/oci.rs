//! Pushing small, real OCI images to a test registry with `oci-client`.
//!
//! Owns image construction (a config with a settable `created` time and platform, one
//! small uncompressed tar layer with random content so every push gets a new digest),
//! multi-arch image indexes, and reading digests back with `HEAD`. Does not run the
//! registry: see `registry`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, IMAGE_LAYER_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::credentials::Credentials;
use crate::registry::Registry;

/// Manifest media types accepted when reading digests back.
const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// How to build an image; `Default` is linux/amd64, created now, no labels.
#[derive(Clone, Debug)]
pub struct ImageOptions {
    /// The config's `created` time (RFC 3339); `None` means now.
    pub created: Option<String>,
    /// The config's `os`.
    pub os: String,
    /// The config's `architecture`.
    pub architecture: String,
    /// The config's `config.Labels`.
    pub labels: BTreeMap<String, String>,
    /// The image manifest's `annotations` (none when empty).
    pub annotations: BTreeMap<String, String>,
    /// Push with these credentials instead of the registry's own.
    pub credentials: Option<Credentials>,
}

impl Default for ImageOptions {
    fn default() -> Self {
        Self {
            created: None,
            os: "linux".into(),
            architecture: "amd64".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            credentials: None,
        }
    }
}

/// An OS/architecture pair, shown as `linux/amd64`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Platform {
    /// GOOS-style OS, e.g. `linux`.
    pub os: String,
    /// GOARCH-style architecture, e.g. `arm64`.
    pub architecture: String,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

/// What a `HEAD` on a manifest answered.
#[derive(Clone, Debug)]
pub struct ManifestHead {
    /// The HTTP status.
    pub status: u16,
    /// `Docker-Content-Digest`, when present.
    pub digest: Option<String>,
}

/// Push a new single-platform image (linux/amd64) as `repo:tag`; returns its manifest
/// digest, checked with a `HEAD`.
pub async fn push_image(registry: &Registry, repo: &str, tag: &str) -> Result<String> {
    push_image_with(registry, repo, tag, &ImageOptions::default()).await
}

/// Push a new single-platform image built from `options` as `repo:tag`.
pub async fn push_image_with(
    registry: &Registry,
    repo: &str,
    tag: &str,
    options: &ImageOptions,
) -> Result<String> {
    let pusher = Pusher::new(registry, repo, options).await;
    let manifest = pusher.image_manifest(options).await?;
    let digest = pusher
        .push_manifest(tag, &manifest, OCI_IMAGE_MEDIA_TYPE)
        .await?;
    pusher.verify(tag, &digest).await?;
    Ok(digest)
}

/// Push a multi-arch image index as `repo:tag`, one new image per `(os, arch)`.
/// Returns the index digest and each platform's manifest digest.
pub async fn push_index(
    registry: &Registry,
    repo: &str,
    tag: &str,
    platforms: &[(&str, &str)],
) -> Result<(String, Vec<(Platform, String)>)> {
    push_index_with(registry, repo, tag, platforms, &ImageOptions::default()).await
}

/// `push_index` with `options` (its `os`/`architecture` are replaced per platform).
pub async fn push_index_with(
    registry: &Registry,
    repo: &str,
    tag: &str,
    platforms: &[(&str, &str)],
    options: &ImageOptions,
) -> Result<(String, Vec<(Platform, String)>)> {
    let pusher = Pusher::new(registry, repo, options).await;
    let mut entries = Vec::new();
    let mut pushed = Vec::new();
    for (os, architecture) in platforms {
        let platform = Platform {
            os: (*os).into(),
            architecture: (*architecture).into(),
        };
        let opts = ImageOptions {
            os: platform.os.clone(),
            architecture: platform.architecture.clone(),
            ..options.clone()
        };
        let manifest = pusher.image_manifest(&opts).await?;
        let digest = sha256(&manifest);
        pusher
            .push_manifest(&digest, &manifest, OCI_IMAGE_MEDIA_TYPE)
            .await?;
        entries.push(json!({
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "digest": digest,
            "size": manifest.len(),
            "platform": { "architecture": architecture, "os": os },
        }));
        pushed.push((platform, digest));
    }
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE,
        "manifests": entries,
    }))?;
    let digest = pusher
        .push_manifest(tag, &index, OCI_IMAGE_INDEX_MEDIA_TYPE)
        .await?;
    pusher.verify(tag, &digest).await?;
    Ok((digest, pushed))
}

/// The config media type of a Helm chart stored as an OCI artifact (Helm's `registry`
/// package, `ConfigMediaType`).
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The media type of a Helm chart's archive layer (`ChartLayerMediaType`).
pub const HELM_CHART_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// Push the chart `archive` (a `.tgz`) of chart `name` at `version` to `repo` as `helm
/// push` does: a config blob (the chart's metadata as JSON, Helm's config media type), the
/// archive as the one layer, an OCI image manifest tagged with the version (`+` written
/// `_`, as Helm does). Returns the manifest digest, checked with a `HEAD`.
pub async fn push_chart(
    registry: &Registry,
    repo: &str,
    name: &str,
    version: &str,
    archive: &[u8],
) -> Result<String> {
    let pusher = Pusher::new(registry, repo, &ImageOptions::default()).await;
    let config = serde_json::to_vec(&json!({
        "name": name,
        "version": version,
        "apiVersion": "v2",
    }))?;
    let manifest = pusher
        .artifact_manifest(
            &config,
            HELM_CONFIG_MEDIA_TYPE,
            archive,
            HELM_CHART_LAYER_MEDIA_TYPE,
        )
        .await?;
    let tag = version.replace('+', "_");
    let digest = pusher
        .push_manifest(&tag, &manifest, OCI_IMAGE_MEDIA_TYPE)
        .await?;
    pusher.verify(&tag, &digest).await?;
    Ok(digest)
}

/// The digest of `repo:reference` (tag or digest) read with a `HEAD` using the
/// registry's credentials; `None` when the registry answers 404.
pub async fn head_digest(
    registry: &Registry,
    repo: &str,
    reference: &str,
) -> Result<Option<String>> {
    let head = head_manifest(registry, repo, reference, registry.credentials()).await?;
    match head.status {
        200 => head.digest.map(Some).with_context(|| {
            format!("`HEAD {repo}:{reference}` answered 200 without `Docker-Content-Digest`")
        }),
        404 => Ok(None),
        status => bail!(
            "`HEAD {}/{repo}:{reference}` answered {status}",
            registry.host()
        ),
    }
}

/// A raw `HEAD /v2/<repo>/manifests/<reference>` with optional basic auth.
pub async fn head_manifest(
    registry: &Registry,
    repo: &str,
    reference: &str,
    credentials: Option<&Credentials>,
) -> Result<ManifestHead> {
    let url = format!("{}/v2/{repo}/manifests/{reference}", registry.url());
    let mut request = crate::world::http_client()?
        .head(&url)
        .header("Accept", ACCEPT);
    if let Some(creds) = credentials {
        request = request.header("Authorization", creds.basic_header());
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("Failed to `HEAD {url}`"))?;
    let digest = response
        .headers()
        .get("Docker-Content-Digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(ManifestHead {
        status: response.status().as_u16(),
        digest,
    })
}

/// One repository on one registry, with a client that has stored the credentials.
struct Pusher {
    client: Client,
    host: String,
    repo: String,
    registry_url: String,
    credentials: Option<Credentials>,
}

impl Pusher {
    async fn new(registry: &Registry, repo: &str, options: &ImageOptions) -> Self {
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::Http,
            ..ClientConfig::default()
        });
        let credentials = options
            .credentials
            .clone()
            .or_else(|| registry.credentials().cloned());
        let auth = match &credentials {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        client.store_auth_if_needed(&registry.host(), &auth).await;
        Self {
            client,
            host: registry.host(),
            repo: repo.to_owned(),
            registry_url: registry.url(),
            credentials,
        }
    }

    fn reference(&self, tag_or_digest: &str) -> Reference {
        if tag_or_digest.starts_with("sha256:") {
            Reference::with_digest(self.host.clone(), self.repo.clone(), tag_or_digest.into())
        } else {
            Reference::with_tag(self.host.clone(), self.repo.clone(), tag_or_digest.into())
        }
    }

    /// Upload a fresh layer and a config; returns the manifest bytes (not yet pushed).
    async fn image_manifest(&self, options: &ImageOptions) -> Result<Vec<u8>> {
        let layer = tar_layer(&format!("dray-e2e-{}.txt", nonce()), nonce().as_bytes());
        let layer_digest = sha256(&layer);
        let created = options
            .created
            .clone()
            .unwrap_or_else(|| jiff::Timestamp::now().to_string());
        let config = serde_json::to_vec(&json!({
            "created": created,
            "architecture": options.architecture,
            "os": options.os,
            "config": { "Labels": options.labels },
            "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
            "history": [{ "created": created, "created_by": "dray-e2e" }],
        }))?;
        let manifest = self
            .artifact_manifest(
                &config,
                IMAGE_CONFIG_MEDIA_TYPE,
                &layer,
                IMAGE_LAYER_MEDIA_TYPE,
            )
            .await?;
        if options.annotations.is_empty() {
            return Ok(manifest);
        }
        let mut manifest: serde_json::Value = serde_json::from_slice(&manifest)?;
        manifest["annotations"] = json!(options.annotations);
        Ok(serde_json::to_vec(&manifest)?)
    }

    /// Upload `config` and one `layer` with their media types; returns the manifest bytes
    /// (not yet pushed).
    async fn artifact_manifest(
        &self,
        config: &[u8],
        config_media_type: &str,
        layer: &[u8],
        layer_media_type: &str,
    ) -> Result<Vec<u8>> {
        let (config_digest, layer_digest) = (sha256(config), sha256(layer));
        self.push_blob(layer, &layer_digest).await?;
        self.push_blob(config, &config_digest).await?;
        Ok(serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {
                "mediaType": config_media_type,
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": [{
                "mediaType": layer_media_type,
                "digest": layer_digest,
                "size": layer.len(),
            }],
        }))?)
    }

    async fn push_blob(&self, data: &[u8], digest: &str) -> Result<()> {
        let reference = self.reference("latest");
        self.client
            .push_blob(&reference, data.to_vec(), digest)
            .await
            .with_context(|| {
                format!(
                    "Failed to push blob `{digest}` to `{}/{}`",
                    self.host, self.repo
                )
            })?;
        Ok(())
    }

    /// Push manifest bytes under a tag or digest; returns the manifest's digest.
    async fn push_manifest(&self, target: &str, body: &[u8], media_type: &str) -> Result<String> {
        let reference = self.reference(target);
        self.client
            .push_manifest_raw(&reference, body.to_vec(), media_type.parse()?)
            .await
            .with_context(|| format!("Failed to push manifest `{reference}`"))?;
        Ok(sha256(body))
    }

    /// Check with a `HEAD` that `tag` now resolves to `digest`.
    async fn verify(&self, tag: &str, digest: &str) -> Result<()> {
        let url = format!("{}/v2/{}/manifests/{tag}", self.registry_url, self.repo);
        let mut request = crate::world::http_client()?
            .head(&url)
            .header("Accept", ACCEPT);
        if let Some(creds) = &self.credentials {
            request = request.header("Authorization", creds.basic_header());
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("Failed to `HEAD {url}`"))?;
        let got = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok());
        if got != Some(digest) {
            bail!(
                "`HEAD {url}` answered {} with digest {got:?}, expected `{digest}`",
                response.status()
            );
        }
        Ok(())
    }
}

/// `sha256:<hex>` of `data`.
pub fn sha256(data: &[u8]) -> String {
    let hash = Sha256::digest(data);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A value unique to this push: hashed from the pid, the clock and a counter.
fn nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let seed = format!(
        "{}-{now}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    sha256(seed.as_bytes())[7..39].to_owned()
}

/// A valid uncompressed tar archive holding one regular file.
fn tar_layer(name: &str, content: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    let field = |header: &mut [u8; 512], at: usize, value: &[u8]| {
        header[at..at + value.len()].copy_from_slice(value);
    };
    field(&mut header, 0, name.as_bytes());
    field(&mut header, 100, b"0000644\0");
    field(&mut header, 108, b"0000000\0");
    field(&mut header, 116, b"0000000\0");
    field(
        &mut header,
        124,
        format!("{:011o}\0", content.len()).as_bytes(),
    );
    field(&mut header, 136, b"00000000000\0");
    field(&mut header, 148, b"        ");
    header[156] = b'0';
    field(&mut header, 257, b"ustar\0");
    field(&mut header, 263, b"00");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    field(&mut header, 148, format!("{sum:06o}\0 ").as_bytes());

    let mut tar = header.to_vec();
    tar.extend_from_slice(content);
    tar.resize(tar.len().next_multiple_of(512), 0);
    tar.extend_from_slice(&[0u8; 1024]);
    tar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_layer_is_block_aligned_with_a_valid_checksum() {
        let tar = tar_layer("a.txt", b"hello");
        assert_eq!(tar.len(), 512 + 512 + 1024);
        let stored = std::str::from_utf8(&tar[148..154]).unwrap();
        let mut header = tar[..512].to_vec();
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        assert_eq!(u32::from_str_radix(stored, 8).unwrap(), sum);
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
    }
}
