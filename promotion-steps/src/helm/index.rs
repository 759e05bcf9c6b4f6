//! A classic chart repository's `index.yaml`: which charts and versions it has and where
//! each archive is, and [`fetch_index`], which reads it.
//!
//! Tolerant as Helm is: unknown fields are ignored, a version written as a YAML number
//! (`version: 1.0`) is read as text, and entries without a version are skipped.

use std::collections::BTreeMap;

use reqwest::{StatusCode, Url};
use serde::{Deserialize, Deserializer};

use super::ChartRepoError;
use super::error::listed;
use super::http::{self, Auth};
use crate::GitCredentials;

/// A parsed `index.yaml`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ChartIndex {
    /// Chart name → its versions, as listed.
    #[serde(default)]
    entries: BTreeMap<String, Vec<IndexEntry>>,
}

/// One version of one chart in an index.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct IndexEntry {
    /// The version, as written.
    #[serde(default, deserialize_with = "scalar")]
    pub version: String,
    /// Where the archive is: absolute, or relative to the repository URL.
    #[serde(default)]
    pub urls: Vec<String>,
    /// The archive's SHA-256, hex, when the index says.
    #[serde(default, deserialize_with = "scalar")]
    pub digest: String,
}

impl ChartIndex {
    /// Parse the bytes of an `index.yaml` read from `url`.
    pub fn parse(bytes: &[u8], url: &str) -> Result<Self, ChartRepoError> {
        let mut index: ChartIndex =
            serde_yaml_ng::from_slice(bytes).map_err(|err| ChartRepoError::InvalidResponse {
                operation: "read the chart index".into(),
                url: url.to_owned(),
                reason: format!("not a Helm repository index: {err}"),
            })?;
        for versions in index.entries.values_mut() {
            versions.retain(|v| !v.version.trim().is_empty());
        }
        Ok(index)
    }

    /// The versions of chart `name` in the index of `repo`, as listed.
    pub fn versions(&self, repo: &str, name: &str) -> Result<&[IndexEntry], ChartRepoError> {
        self.entries
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| ChartRepoError::ChartNotFound {
                repo: repo.to_owned(),
                name: name.to_owned(),
                available: listed(self.entries.keys().map(String::as_str).take(20)),
            })
    }

    /// Version `version` of chart `name` in the index of `repo`.
    pub fn entry(
        &self,
        repo: &str,
        name: &str,
        version: &str,
    ) -> Result<&IndexEntry, ChartRepoError> {
        let versions = self.versions(repo, name)?;
        let wanted = version.trim_start_matches('v');
        versions
            .iter()
            .find(|e| e.version.trim_start_matches('v') == wanted)
            .ok_or_else(|| ChartRepoError::VersionNotFound {
                repo: repo.to_owned(),
                name: name.to_owned(),
                version: version.to_owned(),
                newest: listed(versions.iter().map(|e| e.version.as_str()).take(5)),
            })
    }
}

/// Where the index of the repository `repo_url` is: `<repoURL>/index.yaml`.
pub(super) fn index_url(repo_url: &str) -> Result<Url, ChartRepoError> {
    let base = base_url(repo_url)?;
    base.join("index.yaml")
        .map_err(|err| invalid(repo_url, err.to_string()))
}

/// The repository URL with a trailing `/`, so relative archive URLs resolve below it.
pub(super) fn base_url(repo_url: &str) -> Result<Url, ChartRepoError> {
    let text = format!("{}/", repo_url.trim().trim_end_matches('/'));
    let url = Url::parse(&text).map_err(|err| invalid(repo_url, err.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(
            repo_url,
            "a classic chart repository is `https://` or `http://`".into(),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        return Err(invalid(
            shown.as_str(),
            "it carries credentials; put them in a Credential of type `helm`".into(),
        ));
    }
    Ok(url)
}

/// The archive URL of `entry`: its first URL, resolved against the repository.
pub(super) fn archive_url(repo_url: &str, entry: &IndexEntry) -> Result<Url, ChartRepoError> {
    let Some(first) = entry.urls.first() else {
        return Err(invalid(
            repo_url,
            format!("the index lists no URL for version `{}`", entry.version),
        ));
    };
    base_url(repo_url)?
        .join(first)
        .map_err(|err| invalid(first, err.to_string()))
}

fn invalid(url: &str, reason: String) -> ChartRepoError {
    ChartRepoError::InvalidUrl {
        url: url.to_owned(),
        reason,
    }
}

/// Reads the `index.yaml` of the classic repository `repo_url`, with Basic credentials
/// when given (sent at once, as Helm does).
pub async fn fetch_index(
    http: &reqwest::Client,
    repo_url: &str,
    credentials: Option<&GitCredentials>,
) -> Result<ChartIndex, ChartRepoError> {
    let url = index_url(repo_url)?;
    let op = "read the chart index";
    let auth = credentials.map_or(Auth::None, Auth::Basic);
    let answer = http::get(http, op, &url, None, auth).await?;
    if answer.status != StatusCode::OK {
        return Err(http::status_error(
            op,
            repo_url,
            &url,
            answer.status,
            credentials,
        ));
    }
    ChartIndex::parse(&answer.body, url.as_str())
}

/// A YAML scalar (string, number or bool) as text; anything else as empty.
fn scalar<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let value = serde_yaml_ng::Value::deserialize(deserializer)?;
    Ok(match value {
        serde_yaml_ng::Value::String(s) => s,
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        serde_yaml_ng::Value::Bool(b) => b.to_string(),
        _ => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like `helm repo index` writes it.
    const INDEX: &str = r#"apiVersion: v1
entries:
  app:
  - apiVersion: v2
    created: "2026-01-02T03:04:05.000000006Z"
    digest: 5f1c0ffee
    name: app
    urls:
    - app-1.1.0.tgz
    version: 1.1.0
  - apiVersion: v2
    name: app
    urls:
    - https://cdn.example.com/charts/app-1.0.tgz
    version: 1.0
  - name: app
    urls: []
  other:
  - name: other
    version: 0.1.0
    urls: [other-0.1.0.tgz]
generated: "2026-01-02T03:04:05Z"
"#;

    #[test]
    fn reads_helm_s_index_tolerantly() {
        let index = ChartIndex::parse(INDEX.as_bytes(), "x").unwrap();
        let versions = index.versions("r", "app").unwrap();
        let listed: Vec<&str> = versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(
            listed,
            ["1.1.0", "1.0"],
            "a number is text; no version, no entry"
        );
        assert_eq!(versions[0].digest, "5f1c0ffee");
        let err = index.versions("https://r", "nope").unwrap_err().to_string();
        assert!(err.contains("charts there: `app`, `other`"), "{err}");
        let err = index
            .entry("https://r", "app", "9.9.9")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no version `9.9.9`") && err.contains("`1.1.0`, `1.0`"),
            "{err}"
        );
        assert!(
            index.entry("r", "app", "v1.1.0").is_ok(),
            "a leading v is the same version"
        );
        let err = ChartIndex::parse(b"entries: [1, 2]", "u")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a Helm repository index"), "{err}");
    }

    #[test]
    fn archive_urls_resolve_against_the_repository() {
        let index = ChartIndex::parse(INDEX.as_bytes(), "x").unwrap();
        let entry = index.entry("r", "app", "1.1.0").unwrap();
        let url = archive_url("http://127.0.0.1:9/team/charts", entry).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/team/charts/app-1.1.0.tgz");
        let entry = index.entry("r", "app", "1.0").unwrap();
        let url = archive_url("http://127.0.0.1:9/team/charts/", entry).unwrap();
        assert_eq!(url.as_str(), "https://cdn.example.com/charts/app-1.0.tgz");
        assert_eq!(
            index_url("https://charts.example.com").unwrap().as_str(),
            "https://charts.example.com/index.yaml"
        );
        assert!(base_url("oci://r/x").is_err());
        let err = base_url("https://bot:pw@charts.example.com")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("carries credentials") && !err.contains("pw@"),
            "{err}"
        );
    }
}
