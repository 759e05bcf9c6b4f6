//! Manifests as bytes that keep their digest: the media types Dray reads (OCI and Docker
//! image manifests and indexes), the descriptors they point at, and annotating a manifest
//! (which makes a new one, with a new digest).

use serde::Deserialize;
use serde_json::{Map, Value};

/// The manifest media types asked for, most wanted first.
pub(crate) const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// What a manifest is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MediaKind {
    /// An image (or artifact) manifest: a config and layers.
    Image,
    /// An index (manifest list) of manifests, e.g. one per platform.
    Index,
}

impl MediaKind {
    /// The kind of `media_type`, if Dray reads it.
    pub(crate) fn of(media_type: &str) -> Option<Self> {
        match media_type {
            "application/vnd.oci.image.manifest.v1+json"
            | "application/vnd.docker.distribution.manifest.v2+json" => Some(Self::Image),
            "application/vnd.oci.image.index.v1+json"
            | "application/vnd.docker.distribution.manifest.list.v2+json" => Some(Self::Index),
            _ => None,
        }
    }
}

/// A descriptor: what a manifest points at.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    /// Its media type.
    #[serde(default)]
    pub(crate) media_type: String,
    /// `sha256:…`.
    pub(crate) digest: String,
    /// Its size in bytes.
    #[serde(default)]
    pub(crate) size: u64,
    /// An index entry's platform.
    #[serde(default)]
    pub(crate) platform: Option<Platform>,
}

/// An index entry's platform.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Platform {
    /// `linux`.
    #[serde(default)]
    pub(crate) os: String,
    /// `amd64`.
    #[serde(default)]
    pub(crate) architecture: String,
}

#[derive(Deserialize)]
struct Parts {
    #[serde(default, rename = "mediaType")]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

/// A manifest as the registry serves it: its exact bytes, their digest and media type.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    /// The media type (the `Content-Type` answered, else the `mediaType` field).
    pub(crate) media_type: String,
    /// What it is.
    pub(crate) kind: MediaKind,
    /// The exact bytes.
    pub(crate) body: Vec<u8>,
    /// `sha256:` of the bytes.
    pub(crate) digest: String,
    /// An image's config.
    pub(crate) config: Option<Descriptor>,
    /// An image's layers.
    pub(crate) layers: Vec<Descriptor>,
    /// An index's manifests.
    pub(crate) manifests: Vec<Descriptor>,
}

impl Manifest {
    /// Reads `body`; `content_type` is the answer's `Content-Type`, if any. `Err` says
    /// what is wrong with it.
    pub(crate) fn parse(body: Vec<u8>, content_type: Option<&str>) -> Result<Self, String> {
        let parts: Parts = serde_json::from_slice(&body)
            .map_err(|err| format!("the manifest is not OCI manifest JSON: {err}"))?;
        let content_type = content_type
            .map(|c| c.split(';').next().unwrap_or_default().trim().to_owned())
            .filter(|c| MediaKind::of(c).is_some());
        let media_type = content_type
            .or(parts.media_type)
            .unwrap_or_else(|| match parts.config {
                // An OCI manifest may leave `mediaType` out.
                Some(_) => "application/vnd.oci.image.manifest.v1+json".to_owned(),
                None => "application/vnd.oci.image.index.v1+json".to_owned(),
            });
        let kind = MediaKind::of(&media_type).ok_or_else(|| {
            format!(
                "its media type `{media_type}` is neither an image manifest nor an index \
                 (OCI or Docker v2)"
            )
        })?;
        if kind == MediaKind::Image && parts.config.is_none() {
            return Err("the image manifest has no `config`".into());
        }
        Ok(Manifest {
            digest: super::sha256(&body),
            media_type,
            kind,
            body,
            config: parts.config,
            layers: parts.layers,
            manifests: parts.manifests,
        })
    }

    /// The blobs of an image: its config, then its layers.
    pub(crate) fn blobs(&self) -> impl Iterator<Item = &Descriptor> {
        self.config.iter().chain(&self.layers)
    }

    /// This manifest with `annotations` added (or replaced), as new bytes; itself when
    /// there are none to add.
    pub(crate) fn annotated(self, annotations: &Map<String, Value>) -> Result<Self, String> {
        self.edited(|object| {
            if annotations.is_empty() {
                return false;
            }
            let entry = object
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Some(existing) = entry.as_object_mut() {
                existing.extend(annotations.clone());
            }
            true
        })
    }

    /// This index with the entry for `old` now pointing at `new` (same media type).
    pub(crate) fn replacing(self, old: &str, new: &Manifest) -> Result<Self, String> {
        self.edited(|object| {
            let mut changed = false;
            if let Some(Value::Array(entries)) = object.get_mut("manifests") {
                for entry in entries {
                    if entry.get("digest").and_then(Value::as_str) == Some(old) {
                        entry["digest"] = Value::String(new.digest.clone());
                        entry["size"] = Value::from(new.body.len());
                        changed = true;
                    }
                }
            }
            changed
        })
    }

    fn edited(self, edit: impl FnOnce(&mut Map<String, Value>) -> bool) -> Result<Self, String> {
        let mut value: Value = serde_json::from_slice(&self.body)
            .map_err(|err| format!("the manifest is not JSON: {err}"))?;
        let Some(object) = value.as_object_mut() else {
            return Err("the manifest is not a JSON object".into());
        };
        if !edit(object) {
            return Ok(self);
        }
        let body = serde_json::to_vec(&value).map_err(|err| err.to_string())?;
        let media_type = self.media_type.clone();
        Manifest::parse(body, Some(&media_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifests_keep_their_bytes_and_annotating_makes_a_new_one() {
        let body = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:c","size":2},"layers":[{"mediaType":"text/plain","digest":"sha256:l","size":5}],"annotations":{"a":"1"}}"#.to_vec();
        let manifest = Manifest::parse(body.clone(), None).unwrap();
        assert_eq!(manifest.kind, MediaKind::Image);
        assert_eq!(manifest.digest, super::super::sha256(&body));
        assert_eq!(manifest.blobs().count(), 2);
        let same = manifest.clone().annotated(&Map::new()).unwrap();
        assert_eq!(same.body, body, "no annotations, no new bytes");
        let extra = json!({"b": "2", "a": "x"});
        let annotated = manifest.annotated(extra.as_object().unwrap()).unwrap();
        let value: Value = serde_json::from_slice(&annotated.body).unwrap();
        assert_eq!(value["annotations"], json!({"a": "x", "b": "2"}));
        assert_ne!(annotated.digest, super::super::sha256(&body));
    }

    #[test]
    fn unknown_media_types_are_refused() {
        let err = Manifest::parse(
            br#"{"mediaType":"application/vnd.docker.distribution.manifest.v1+prettyjws"}"#
                .to_vec(),
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("neither an image manifest nor an index"),
            "{err}"
        );
        assert!(Manifest::parse(b"not json".to_vec(), None).is_err());
    }
}
