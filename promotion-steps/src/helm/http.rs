//! The one HTTP read of a classic chart repository: a bounded `GET` with optional Basic
//! authentication, worded into [`ChartRepoError`]s.

use reqwest::{StatusCode, Url};

use super::{ChartRepoError, MAX_DOWNLOAD};
use crate::GitCredentials;

/// How a request authenticates.
#[derive(Clone, Copy, Debug)]
pub(super) enum Auth<'a> {
    None,
    Basic(&'a GitCredentials),
}

/// An answer: status and the body (at most [`MAX_DOWNLOAD`] bytes).
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Vec<u8>,
}

/// `GET url`; `operation` names it in errors.
pub(super) async fn get(
    http: &reqwest::Client,
    operation: &str,
    url: &Url,
    accept: Option<&str>,
    auth: Auth<'_>,
) -> Result<Answer, ChartRepoError> {
    let mut request = http.get(url.clone());
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request = match auth {
        Auth::None => request,
        Auth::Basic(c) => request.basic_auth(&c.username, Some(&c.password)),
    };
    let unreachable = |err: reqwest::Error| ChartRepoError::Unreachable {
        url: url.to_string(),
        reason: if err.is_timeout() {
            "timed out".into()
        } else {
            crate::oci::root_cause(&err)
        },
    };
    let mut response = request.send().await.map_err(unreachable)?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > MAX_DOWNLOAD {
            return Err(ChartRepoError::InvalidResponse {
                operation: operation.to_owned(),
                url: url.to_string(),
                reason: format!("it is larger than {} MiB", MAX_DOWNLOAD / 1024 / 1024),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer { status, body })
}

/// The error for an answer that is not `200`.
pub(super) fn status_error(
    operation: &str,
    repo: &str,
    url: &Url,
    status: StatusCode,
    credentials: Option<&GitCredentials>,
) -> ChartRepoError {
    match (status, credentials) {
        (StatusCode::UNAUTHORIZED, None) => ChartRepoError::AuthFailed {
            repo: repo.to_owned(),
            detail: "the repository wants credentials and none were given (HTTP 401)".into(),
        },
        (StatusCode::UNAUTHORIZED, Some(c)) => ChartRepoError::AuthFailed {
            repo: repo.to_owned(),
            detail: format!(
                "the repository refused the credentials of `{}` (HTTP 401)",
                c.username
            ),
        },
        (StatusCode::FORBIDDEN, _) => ChartRepoError::AuthFailed {
            repo: repo.to_owned(),
            detail: "access denied (HTTP 403)".into(),
        },
        (status, _) => ChartRepoError::Status {
            operation: operation.to_owned(),
            url: url.to_string(),
            status: status.as_u16(),
            hint: if status == StatusCode::NOT_FOUND {
                "; hint: check `repoURL` (and the chart's name)".into()
            } else {
                String::new()
            },
        },
    }
}

/// Whether `url` is on the same scheme, host and port as `base`: only then does it get
/// the repository's credentials.
pub(super) fn same_origin(base: &Url, url: &Url) -> bool {
    base.scheme() == url.scheme()
        && base.host_str() == url.host_str()
        && base.port_or_known_default() == url.port_or_known_default()
}

/// `sha256:<hex>` of `data`.
pub(super) fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(data);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
