//! The CLI's HTTP client for the server's API. It turns transport failures and error
//! responses into [`CliError`]s that name the server and carry the server's hint.

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::server::ErrorBody;

use super::CliError;

/// A client for one server.
pub struct ApiClient {
    http: reqwest::Client,
    server: String,
    token: Option<String>,
}

impl ApiClient {
    /// A client for `server` (e.g. `http://127.0.0.1:7070`), sending `token` when given as
    /// `Authorization: Bearer`; the server knows who the caller is from it alone.
    pub fn new(server: &str, token: Option<String>) -> Result<Self, CliError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| CliError::Local(format!("cannot build an HTTP client: {e}")))?;
        Ok(ApiClient {
            http,
            server: server.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Sends a request to `path` (below the server URL) and decodes the JSON answer.
    pub async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, CliError> {
        let url = format!("{}{path}", self.server);
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| CliError::Unreachable {
            server: self.server.clone(),
            cause: describe_transport_error(&e),
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| CliError::Unreachable {
            server: self.server.clone(),
            cause: format!("the answer was cut off: {e}"),
        })?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                CliError::Local(format!("the server at `{}` sent an answer this CLI cannot read ({e}); are the CLI and server the same version?", self.server))
            });
        }
        let body: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_else(|_| ErrorBody {
            error: crate::server::error::ErrorDetail {
                code: "http".into(),
                message: format!(
                    "the server answered {status}: {}",
                    String::from_utf8_lossy(&bytes)
                        .chars()
                        .take(300)
                        .collect::<String>()
                ),
                hint: None,
                details: None,
            },
        });
        Err(CliError::Api {
            status: status.as_u16(),
            body,
        })
    }

    /// `GET path`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        self.send(Method::GET, path, None::<&()>).await
    }
}

fn describe_transport_error(error: &reqwest::Error) -> String {
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    if error.is_timeout() {
        format!("timed out ({cause})")
    } else {
        cause
    }
}

/// An id as one path segment: anything but letters, digits, `-` and `_` is escaped.
pub(crate) fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
