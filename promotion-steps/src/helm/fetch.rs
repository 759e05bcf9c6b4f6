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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use serde_json::json;

    use super::*;
    use crate::helm::{CHART_CONFIG_MEDIA_TYPE, CHART_LAYER_MEDIA_TYPE, http::sha256};

    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn auth(headers: &HeaderMap) -> Option<String> {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    fn creds() -> GitCredentials {
        GitCredentials {
            username: "bot".into(),
            password: "pw".into(),
        }
    }

    /// `Basic bot:pw`.
    const BASIC: &str = "Basic Ym90OnB3";

    #[tokio::test]
    async fn credentials_never_go_to_an_archive_on_another_host() {
        let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let cdn_seen = seen.clone();
        let cdn = serve(Router::new().route(
            "/app-1.0.0.tgz",
            get(move |headers: HeaderMap| async move {
                cdn_seen.lock().unwrap().push(auth(&headers));
                b"archive".to_vec()
            }),
        ))
        .await;
        let index = format!(
            "entries:\n  app:\n  - version: 1.0.0\n    urls: [{cdn}/app-1.0.0.tgz]\n    digest: {}\n",
            &sha256(b"archive")[7..]
        );
        let repo = serve(Router::new().route(
            "/index.yaml",
            get(move |headers: HeaderMap| async move {
                if auth(&headers).as_deref() == Some(BASIC) {
                    index.into_response()
                } else {
                    StatusCode::UNAUTHORIZED.into_response()
                }
            }),
        ))
        .await;
        let http = reqwest::Client::new();
        let chart = ChartRef {
            repo_url: &repo,
            name: "app",
            version: "1.0.0",
            digest: None,
            insecure: false,
        };
        let archive = fetch_chart(&http, &chart, Some(&creds())).await.unwrap();
        assert_eq!(archive, b"archive");
        assert_eq!(*seen.lock().unwrap(), [None], "the CDN got no credentials");
        let err = fetch_chart(&http, &chart, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("wants credentials and none were given"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_oci_pull_answers_a_bearer_challenge_with_a_token_from_the_realm() {
        let layer = b"chart-archive".to_vec();
        let layer_digest = sha256(&layer);
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": CHART_CONFIG_MEDIA_TYPE, "digest": sha256(b"{}"), "size": 2},
            "layers": [{"mediaType": CHART_LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer.len()}],
        }))
        .unwrap();
        let manifest_digest = sha256(&manifest);
        let base: Arc<Mutex<String>> = Arc::default();
        let realm = base.clone();
        let challenge = move |headers: &HeaderMap| -> Option<Response> {
            if auth(headers).as_deref() == Some("Bearer t0ken") {
                return None;
            }
            let value = format!(
                "Bearer realm=\"{}/token\",service=\"reg\",scope=\"repository:charts/app:pull\"",
                realm.lock().unwrap()
            );
            Some((StatusCode::UNAUTHORIZED, [("www-authenticate", value)]).into_response())
        };
        let on_manifest = challenge.clone();
        let on_blob = challenge;
        let app = Router::new()
            .route(
                "/token",
                get(
                    |headers: HeaderMap, query: axum::extract::RawQuery| async move {
                        let query = query.0.unwrap_or_default();
                        if auth(&headers).as_deref() != Some(BASIC)
                            || !query.contains("scope=repository%3Acharts%2Fapp%3Apull")
                        {
                            return StatusCode::UNAUTHORIZED.into_response();
                        }
                        axum::Json(json!({"token": "t0ken", "expires_in": 300})).into_response()
                    },
                ),
            )
            .route(
                "/v2/charts/app/manifests/{reference}",
                get(move |headers: HeaderMap| async move {
                    on_manifest(&headers).unwrap_or_else(|| manifest.clone().into_response())
                }),
            )
            .route(
                "/v2/charts/app/blobs/{digest}",
                get(move |headers: HeaderMap| async move {
                    on_blob(&headers).unwrap_or_else(|| layer.clone().into_response())
                }),
            );
        let url = serve(app).await;
        *base.lock().unwrap() = url.clone();
        let repo_url = format!("oci://{}/charts/app", url.trim_start_matches("http://"));
        let http = reqwest::Client::new();
        let chart = ChartRef {
            repo_url: &repo_url,
            name: "app",
            version: "1.0.0+build.1",
            digest: Some(&manifest_digest),
            insecure: true,
        };
        let archive = fetch_chart(&http, &chart, Some(&creds())).await.unwrap();
        assert_eq!(archive, b"chart-archive");
        let err = fetch_chart(&http, &chart, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("authentication failed for `{repo_url}`")),
            "{err}"
        );
    }
}
