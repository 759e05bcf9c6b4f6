//! The few parts of OCI/Docker manifests, indexes and image configs that discovery reads,
//! and `os/arch[/variant]` platforms.
//!
//! Owns media types, tolerant serde types (unknown fields ignored) and platform matching.
//! Does not fetch anything: see `registry`.

use std::collections::BTreeMap;

use serde::Deserialize;

pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The `Accept` header of manifest requests: images and indexes, OCI and Docker.
pub(crate) const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// Whether a manifest media type is an image index (OCI index or Docker manifest list).
pub(crate) fn is_index(media_type: &str) -> bool {
    let media_type = media_type.split(';').next().unwrap_or_default().trim();
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// A manifest or an index: which one is told by `mediaType` or by the fields present.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawManifest {
    #[serde(default)]
    pub(crate) media_type: Option<String>,
    /// Set for an image manifest.
    #[serde(default)]
    pub(crate) config: Option<Descriptor>,
    /// Set for an index.
    #[serde(default)]
    pub(crate) manifests: Option<Vec<Descriptor>>,
    /// The manifest's or index's annotations (`null` reads as none).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) annotations: BTreeMap<String, String>,
}

/// A content descriptor (only what discovery reads).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    pub(crate) digest: String,
    #[serde(default)]
    pub(crate) platform: Option<Platform>,
}

/// An image config (only what discovery reads).
#[derive(Debug, Deserialize)]
pub(crate) struct ImageConfig {
    #[serde(default)]
    pub(crate) created: Option<String>,
    /// The container config: only its labels are read (`null` reads as none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) config: RunConfig,
    #[serde(default)]
    pub(crate) os: String,
    #[serde(default)]
    pub(crate) architecture: String,
    #[serde(default)]
    pub(crate) variant: Option<String>,
}

/// The `config` of an image config (only what discovery reads).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunConfig {
    #[serde(default, rename = "Labels", deserialize_with = "null_as_empty")]
    pub(crate) labels: BTreeMap<String, String>,
}

/// The label (or annotation) naming the repository an image was built from.
pub(crate) const SOURCE_LABEL: &str = "org.opencontainers.image.source";
/// The label (or annotation) naming the commit an image was built from.
pub(crate) const REVISION_LABEL: &str = "org.opencontainers.image.revision";

/// Where an image was built from, as its labels or annotations say: each part `None`
/// when absent or blank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) source: Option<String>,
    pub(crate) revision: Option<String>,
}

impl Origin {
    /// The origin named in `labels` (config labels or manifest annotations).
    pub(crate) fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let read = |key: &str| {
            labels
                .get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Self {
            source: read(SOURCE_LABEL),
            revision: read(REVISION_LABEL),
        }
    }

    /// Each part of `self`, or `other`'s where `self` has none.
    pub(crate) fn or(self, other: &Origin) -> Self {
        Self {
            source: self.source.or_else(|| other.source.clone()),
            revision: self.revision.or_else(|| other.revision.clone()),
        }
    }
}

fn null_as_empty<'de, D>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    null_as_default(deserializer)
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// An OS/architecture pair with an optional variant, written `linux/arm64` or
/// `linux/arm/v7`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct Platform {
    #[serde(default)]
    pub(crate) os: String,
    #[serde(default)]
    pub(crate) architecture: String,
    #[serde(default)]
    pub(crate) variant: Option<String>,
}

impl Platform {
    /// Parse `os/arch[/variant]`; `None` when malformed. A part is letters, digits, `-` and
    /// `_` (containerd's platform grammar; Kargo takes `linux/amd64/fake-variant`).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        let valid = |s: &&str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        };
        if !(2..=3).contains(&parts.len()) || !parts.iter().all(valid) {
            return None;
        }
        Some(Self {
            os: parts[0].to_ascii_lowercase(),
            architecture: parts[1].to_ascii_lowercase(),
            variant: parts.get(2).map(|v| v.to_ascii_lowercase()),
        })
    }

    /// Whether an image built for `self` serves a request for `wanted`. A request without
    /// a variant accepts any variant; `arm64` without a variant is `arm64/v8`.
    pub(crate) fn serves(&self, wanted: &Platform) -> bool {
        let norm = |p: &Platform| match (p.architecture.as_str(), p.variant.as_deref()) {
            ("arm64", None) => Some("v8".to_owned()),
            (_, v) => v.map(str::to_owned),
        };
        self.os == wanted.os
            && self.architecture == wanted.architecture
            && (wanted.variant.is_none() || norm(self) == norm(wanted))
    }

    /// Index entries for attestations and signatures use `unknown/unknown`.
    pub(crate) fn is_unknown(&self) -> bool {
        self.os == "unknown" || self.os.is_empty()
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

impl From<&ImageConfig> for Platform {
    fn from(config: &ImageConfig) -> Self {
        Self {
            os: config.os.clone(),
            architecture: config.architecture.clone(),
            variant: config.variant.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_match_platforms() {
        let arm64 = Platform::parse("linux/arm64").unwrap();
        let v8 = Platform::parse("linux/arm64/v8").unwrap();
        let v7 = Platform::parse("linux/arm/v7").unwrap();
        assert_eq!(v7.to_string(), "linux/arm/v7");
        assert!(v8.serves(&arm64) && arm64.serves(&v8));
        assert!(!Platform::parse("linux/arm/v6").unwrap().serves(&v7));
        assert!(!Platform::parse("linux/amd64").unwrap().serves(&arm64));
        assert!(Platform::parse("linux").is_none());
        assert!(Platform::parse("linux/arm64/v8/x").is_none());
        assert!(Platform::parse("linux/").is_none());
    }

    /// The example of the OCI image-spec (`image-index.md`), trimmed.
    const INDEX_EXAMPLE: &str = r#"{
      "schemaVersion": 2,
      "mediaType": "application/vnd.oci.image.index.v1+json",
      "manifests": [
        { "mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 7143,
          "digest": "sha256:e692418e4cbaf90ca69d05a66403747baa33ee08806650b51fab815ad7fc331f",
          "platform": { "architecture": "ppc64le", "os": "linux" } },
        { "mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 7682,
          "digest": "sha256:5b0bcabd1ed22e9fb1310cf6c2dec7cdef19f0ad69efa1f392e94a4333501270",
          "platform": { "architecture": "amd64", "os": "linux" } }
      ],
      "annotations": { "com.example.key1": "value1" }
    }"#;

    #[test]
    fn origin_comes_from_labels_and_null_reads_as_none() {
        let config: ImageConfig = serde_json::from_str(
            r#"{"architecture": "amd64", "os": "linux", "config": {"Labels": {
                "org.opencontainers.image.source": "https://github.com/acme/app",
                "org.opencontainers.image.revision": "  "}}}"#,
        )
        .unwrap();
        let origin = Origin::from_labels(&config.config.labels);
        assert_eq!(
            origin.source.as_deref(),
            Some("https://github.com/acme/app")
        );
        assert_eq!(origin.revision, None, "a blank label is no revision");
        let bare: ImageConfig =
            serde_json::from_str(r#"{"os": "linux", "config": {"Labels": null}}"#).unwrap();
        assert!(bare.config.labels.is_empty());
        let none: ImageConfig = serde_json::from_str(r#"{"config": null}"#).unwrap();
        assert!(none.config.labels.is_empty());
        let from_annotations = Origin::from_labels(
            &[(REVISION_LABEL.to_owned(), "abc".to_owned())]
                .into_iter()
                .collect(),
        );
        let merged = origin.or(&from_annotations);
        assert_eq!(
            (merged.source.as_deref(), merged.revision.as_deref()),
            (Some("https://github.com/acme/app"), Some("abc"))
        );
    }

    #[test]
    fn reads_the_image_spec_index_example() {
        let index: RawManifest = serde_json::from_str(INDEX_EXAMPLE).unwrap();
        let entries = index.manifests.unwrap();
        let amd64 = Platform::parse("linux/amd64").unwrap();
        let found = entries
            .iter()
            .find(|e| e.platform.as_ref().is_some_and(|p| p.serves(&amd64)));
        assert!(found.unwrap().digest.starts_with("sha256:5b0bcabd"));
        assert!(is_index(index.media_type.as_deref().unwrap()));
        assert_eq!(index.annotations["com.example.key1"], "value1");
        assert!(is_index(
            "application/vnd.docker.distribution.manifest.list.v2+json; charset=x"
        ));
        assert!(!is_index("application/vnd.oci.image.manifest.v1+json"));
    }
}
