//! The JSON-over-HTTP piece the Gitea/Forgejo and Bitbucket clients share: one request
//! with the forge's authorization header, its answer (status, headers, body), and what a
//! non-2xx answer means as a [`ForgeError`] (rate limit, "later", not found, refusal).
//!
//! Neither forge has a well-kept Rust client (see docs/decisions.md), so both speak their
//! REST API through `reqwest` with typed serde structs of their own; this module owns
//! only the transport, never a forge's paths or shapes.

use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{DEFAULT_RATE_LIMIT_WAIT, ForgeError, Provider, retry_after_from_headers};

/// One forge's HTTP API: a base URL and the authorization every request carries.
pub(crate) struct Rest {
    client: reqwest::Client,
    base: String,
    auth: Auth,
    provider: Provider,
}

/// How requests are authorized.
pub(crate) enum Auth {
    /// Anonymous.
    None,
    /// `Authorization: <scheme> <token>` (Gitea `token`, Bitbucket `Bearer`).
    Token {
        /// `token`, `Bearer`.
        scheme: &'static str,
        /// The token.
        token: String,
    },
    /// HTTP Basic (a Bitbucket username and app password or API token).
    Basic {
        /// The username (or e-mail address for an Atlassian API token).
        user: String,
        /// The app password or API token.
        password: String,
    },
}

impl std::fmt::Debug for Rest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the authorization header: it carries the token.
        f.debug_struct("Rest").field("base", &self.base).finish()
    }
}

/// A 2xx answer.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Its status (`200`, `201`, `202`, `204`).
    pub(crate) status: StatusCode,
    /// Its headers (`Location` of a `202`).
    pub(crate) headers: HeaderMap,
    /// Its body.
    pub(crate) body: String,
}

impl Answer {
    /// The body as `T`, or an error naming what was expected.
    pub(crate) fn json<T: DeserializeOwned>(
        &self,
        what: &str,
        forge: Provider,
    ) -> Result<T, ForgeError> {
        serde_json::from_str(&self.body)
            .map_err(|e| ForgeError::Other(format!("unexpected {what} from {}: {e}", forge.name())))
    }
}

/// A non-2xx answer: its status and the error it means.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The status.
    pub(crate) status: StatusCode,
    /// The forge's own message (its JSON `message`, or the body).
    pub(crate) message: String,
    /// What it means.
    pub(crate) error: ForgeError,
}

impl Rest {
    /// A client for the API at `base` (no trailing `/`), authorizing every request with
    /// `auth`.
    pub(crate) fn new(client: reqwest::Client, base: &str, auth: Auth, provider: Provider) -> Self {
        Rest {
            client,
            base: base.trim_end_matches('/').to_string(),
            auth,
            provider,
        }
    }

    /// `base` + `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request to `url` (from [`Rest::url`], or a URL the forge gave, such as a
    /// `Location`); a 2xx answer, or the refusal a non-2xx one means. `message_of` reads
    /// the forge's message from an error body.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        url: &str,
        body: Option<&Value>,
        message_of: fn(&str) -> Option<String>,
    ) -> Result<Answer, Refusal> {
        let mut request = self
            .client
            .request(method, url)
            .header(http::header::ACCEPT, "application/json");
        request = match &self.auth {
            Auth::None => request,
            Auth::Token { scheme, token } => {
                request.header(http::header::AUTHORIZATION, format!("{scheme} {token}"))
            }
            Auth::Basic { user, password } => request.basic_auth(user, Some(password)),
        };
        if let Some(body) = body {
            request = request.json(body);
        }
        let name = self.provider.name();
        let unreachable = |e: reqwest::Error| Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: e.to_string(),
            error: ForgeError::Unavailable(format!("{name} at `{url}` is unreachable: {e}")),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(unreachable)?;
        if status.is_success() {
            return Ok(Answer {
                status,
                headers,
                body: text,
            });
        }
        let message = message_of(&text);
        let error = error_for(self.provider, status, &headers, message.as_deref());
        Err(Refusal {
            status,
            message: message.unwrap_or_else(|| status.to_string()),
            error,
        })
    }
}

/// The error a non-2xx answer of `forge` means: 429 a rate limit (waiting `Retry-After`,
/// else [`DEFAULT_RATE_LIMIT_WAIT`]), 404 not found, 405/409/422 a refusal, a 5xx "later";
/// `message` is the forge's own (a proxy's HTML page is never repeated).
pub(crate) fn error_for(
    forge: Provider,
    status: StatusCode,
    headers: &HeaderMap,
    message: Option<&str>,
) -> ForgeError {
    let name = forge.name();
    if status == StatusCode::TOO_MANY_REQUESTS {
        return ForgeError::RateLimited {
            forge: name,
            retry_after: retry_after_from_headers(headers).unwrap_or(DEFAULT_RATE_LIMIT_WAIT),
        };
    }
    let said = |m: Option<&str>| match m {
        Some(m) => format!("{name} answered {status}: {m}"),
        None => format!("{name} answered {status}"),
    };
    match status {
        StatusCode::NOT_FOUND => ForgeError::NotFound(said(message)),
        StatusCode::METHOD_NOT_ALLOWED
        | StatusCode::CONFLICT
        | StatusCode::UNPROCESSABLE_ENTITY => {
            ForgeError::Refused(message.unwrap_or("no reason given").to_string())
        }
        status if super::is_transient(status) => ForgeError::Unavailable(said(message)),
        _ => ForgeError::Other(said(message)),
    }
}

/// Percent-encodes a branch name for a query string.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_waits_as_long_as_it_says_or_a_minute() {
        let mut headers = HeaderMap::new();
        let e = error_for(
            Provider::Bitbucket,
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            None,
        );
        assert_eq!(
            e,
            ForgeError::RateLimited {
                forge: "Bitbucket",
                retry_after: DEFAULT_RATE_LIMIT_WAIT
            }
        );
        headers.insert("retry-after", "12".parse().unwrap());
        let e = error_for(
            Provider::Gitea,
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            None,
        );
        assert_eq!(
            e,
            ForgeError::RateLimited {
                forge: "Gitea",
                retry_after: std::time::Duration::from_secs(12)
            }
        );
    }

    #[test]
    fn refusals_keep_the_forges_words_and_a_proxy_page_is_not_repeated() {
        let none = HeaderMap::new();
        let e = error_for(
            Provider::Gitea,
            StatusCode::CONFLICT,
            &none,
            Some("head out of date"),
        );
        assert_eq!(e, ForgeError::Refused("head out of date".into()));
        let e = error_for(Provider::Bitbucket, StatusCode::BAD_GATEWAY, &none, None);
        assert_eq!(
            e,
            ForgeError::Unavailable("Bitbucket answered 502 Bad Gateway".into())
        );
        let e = error_for(
            Provider::Gitea,
            StatusCode::UNAUTHORIZED,
            &none,
            Some("token is required"),
        );
        assert_eq!(
            e,
            ForgeError::Other("Gitea answered 401 Unauthorized: token is required".into())
        );
    }
}
