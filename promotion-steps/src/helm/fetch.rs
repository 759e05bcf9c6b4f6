//! Downloading one chart archive (`.tgz`) at an exact version, from a classic repository
//! (the archive URL its `index.yaml` lists, checked against the index's digest) or from an
//! OCI registry (see `oci`).

use reqwest::StatusCode;

use super::http::{self, Auth};
use super::index::{archive_url, base_url, fetch_index};
use super::{ChartRepoError, is_oci, oci};
use crate::GitCredentials;

/// A chart at an exact version.
#[derive(Clone, Copy, Debug)]
pub struct ChartRef<'a> {
    /// `https://…` (classic) or `oci://host/path/chart`.
    pub repo_url: &'a str,
    /// The chart's name (classic repositories; ignored for `oci://`).
    pub name: &'a str,
    /// The version.
    pub version: &'a str,
    /// For `oci://`: the manifest digest to pull instead of the version's tag.
    pub digest: Option<&'a str>,
    /// For `oci://`: talk plain HTTP to the registry.
    pub insecure: bool,
}

/// The archive of `chart`, read with `credentials` (sent only to the repository's own
/// origin and to the token service an OCI registry names).
pub async fn fetch_chart(
    http: &reqwest::Client,
    chart: &ChartRef<'_>,
    credentials: Option<&GitCredentials>,
) -> Result<Vec<u8>, ChartRepoError> {
    if is_oci(chart.repo_url) {
        return oci::pull(
            http,
            chart.repo_url,
            chart.version,
            chart.digest,
            credentials,
            chart.insecure,
        )
        .await;
    }
    let index = fetch_index(http, chart.repo_url, credentials).await?;
    let entry = index.entry(chart.repo_url, chart.name, chart.version)?;
    let url = archive_url(chart.repo_url, entry)?;
    let own = http::same_origin(&base_url(chart.repo_url)?, &url);
    let auth = match credentials {
        Some(c) if own => Auth::Basic(c),
        _ => Auth::None,
    };
    let op = "download the chart";
    let answer = http::get(http, op, &url, None, auth).await?;
    if answer.status != StatusCode::OK {
        let sent = if own { credentials } else { None };
        return Err(http::status_error(
            op,
            chart.repo_url,
            &url,
            answer.status,
            sent,
        ));
    }
    let expected = entry.digest.trim().to_ascii_lowercase();
    if !expected.is_empty() {
        let got = http::sha256(&answer.body);
        if got[7..] != *expected {
            return Err(ChartRepoError::InvalidResponse {
                operation: op.into(),
                url: url.to_string(),
                reason: format!(
                    "the archive hashes to `{got}`, the index says `sha256:{expected}`"
                ),
            });
        }
    }
    Ok(answer.body)
}
