//! Pulling a chart archive out of an OCI registry: the manifest (checked to be a Helm
//! chart), then its chart layer, both checked against their digests, through the steps'
//! OCI client (`crate::oci`, shared with `oci-download` and `oci-push`), its errors worded
//! as [`ChartRepoError`]s. Discovery, which lists tags, paginates, rate-limits and caches,
//! uses the `dray` crate's registry client; this crate cannot import it
//! (docs/decisions.md).

use serde::Deserialize;

use super::{
    CHART_CONFIG_MEDIA_TYPE, CHART_LAYER_MEDIA_TYPE, ChartRepoError, MAX_DOWNLOAD, version_to_tag,
};
use crate::GitCredentials;
use crate::oci::{Access, Descriptor, OciError, Reference, Repository};

/// The layer media type of charts pushed by Helm before 3.8 (`helm chart save`).
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/tar+gzip";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    config: Layer,
    #[serde(default)]
    layers: Vec<Layer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layer {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
}

/// The chart archive of `repo_url` (`oci://host/path/chart`) at `version`, or at
/// `digest` when given (then the version's tag is not read). `insecure`: plain HTTP.
pub(super) async fn pull(
    http: &reqwest::Client,
    repo_url: &str,
    version: &str,
    digest: Option<&str>,
    credentials: Option<&GitCredentials>,
    insecure: bool,
) -> Result<Vec<u8>, ChartRepoError> {
    let invalid = |reason: String| ChartRepoError::InvalidUrl {
        url: repo_url.to_owned(),
        reason,
    };
    let rest = repo_url
        .trim()
        .trim_start_matches("oci://")
        .trim_end_matches('/');
    if !rest
        .split_once('/')
        .is_some_and(|(h, p)| !h.is_empty() && !p.is_empty())
    {
        return Err(invalid(
            "an OCI chart is `oci://host[:port]/path/chart`".into(),
        ));
    }
    let mut reference = Reference::parse("repoURL", &format!("oci://{rest}"))
        .map_err(|e| invalid(e.to_string()))?;
    reference.plain_http = Some(insecure);
    let tag = version_to_tag(version);
    let shown = format!("{repo_url}:{tag}");
    let wording = |error: OciError| chart_error(repo_url, error);
    let mut repo = Repository::new(http, &reference, credentials.cloned(), "helm", Access::Pull)
        .map_err(wording)?;
    let manifest = repo
        .manifest(digest.unwrap_or(&tag))
        .await
        .map_err(wording)?;
    let layer = chart_layer_of(&manifest.body, &shown)?;
    let mut blob = repo
        .blob(&layer, MAX_DOWNLOAD as u64, "a chart download")
        .await
        .map_err(wording)?;
    let mut archive = Vec::new();
    while let Some(chunk) = blob.next_chunk().await.map_err(wording)? {
        archive.extend_from_slice(&chunk);
    }
    Ok(archive)
}

/// An [`OciError`] of the chart pull of `repo_url` as a [`ChartRepoError`].
fn chart_error(repo_url: &str, error: OciError) -> ChartRepoError {
    match error {
        OciError::Unreachable { url, reason, .. } => ChartRepoError::Unreachable { url, reason },
        OciError::AuthFailed { detail, .. } => ChartRepoError::AuthFailed {
            repo: repo_url.to_owned(),
            detail,
        },
        OciError::Status {
            operation,
            repo,
            status,
            ..
        } => ChartRepoError::Status {
            operation: format!("{operation} the chart"),
            url: repo,
            status,
            hint: if status == 404 {
                "; hint: check `repoURL` (and the chart's name)".into()
            } else {
                String::new()
            },
        },
        OciError::InvalidReference { reason, .. } => ChartRepoError::InvalidUrl {
            url: repo_url.to_owned(),
            reason,
        },
        other => ChartRepoError::InvalidResponse {
            operation: "download the chart".into(),
            url: repo_url.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// The digest of the chart archive layer of the manifest `body` of `reference`
/// (`oci://…:tag`), after checking the manifest is a Helm chart's.
pub fn chart_layer(body: &[u8], reference: &str) -> Result<String, ChartRepoError> {
    chart_layer_of(body, reference).map(|layer| layer.digest)
}

fn chart_layer_of(body: &[u8], reference: &str) -> Result<Descriptor, ChartRepoError> {
    let manifest: Manifest =
        serde_json::from_slice(body).map_err(|err| ChartRepoError::InvalidResponse {
            operation: "fetch the chart manifest".into(),
            url: reference.to_owned(),
            reason: format!("not an OCI image manifest: {err}"),
        })?;
    if manifest.config.media_type != CHART_CONFIG_MEDIA_TYPE {
        return Err(ChartRepoError::NotAChart {
            reference: reference.to_owned(),
            media_type: manifest.config.media_type,
        });
    }
    manifest
        .layers
        .into_iter()
        .find(|l| l.media_type == CHART_LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE)
        .map(|l| Descriptor {
            media_type: l.media_type,
            digest: l.digest,
            size: l.size,
            platform: None,
        })
        .ok_or_else(|| ChartRepoError::InvalidResponse {
            operation: "fetch the chart manifest".into(),
            url: reference.to_owned(),
            reason: format!("no `{CHART_LAYER_MEDIA_TYPE}` layer"),
        })
}
