//! The request side of the HTTP steps (`http`, `http-download`): a request prepared once
//! from a step's configuration (method, URL, headers, query parameters, timeout), the
//! secrets it carries and their scrubbing from every message, and reading a response into
//! what expressions see (`response.status`, `.headers`, `.body`).
//!
//! Not a step.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::duration_or;
use crate::{StepContext, StepOutcome};

/// The largest body read from a response.
pub(crate) const MAX_BODY: usize = 4 << 20;
/// How much of the body a summary shows.
const SUMMARY_BYTES: usize = 200;
/// What a secret is replaced with.
const REDACTED: &str = "<redacted>";
/// Secrets shorter than this are not looked for in messages (they would mangle them).
const MIN_SECRET_LEN: usize = 4;
/// Parts of header and query parameter names whose values are secrets.
const SECRET_NAME_PARTS: &[&str] = &[
    "auth",
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "cookie",
    "session",
    "signature",
    "credential",
];

/// A header or a query parameter.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct NameValue {
    /// The name (header names are case-insensitive).
    pub(crate) name: String,
    /// The value.
    pub(crate) value: String,
}

/// What a request is made of, as a step's configuration gives it.
pub(crate) struct Parts<'a> {
    /// The method (default `GET`).
    pub(crate) method: Option<&'a str>,
    /// The URL, `http://` or `https://`.
    pub(crate) url: &'a str,
    /// Request headers.
    pub(crate) headers: &'a [NameValue],
    /// Query parameters, appended to the URL.
    pub(crate) query_params: &'a [NameValue],
    /// How long the request may take (`timeout`), answer included.
    pub(crate) timeout: Option<&'a str>,
    /// The timeout when `timeout` says nothing.
    pub(crate) default_timeout: Duration,
}

/// Everything about the request, checked once before it is sent.
pub(crate) struct Request {
    pub(crate) method: reqwest::Method,
    pub(crate) url: reqwest::Url,
    pub(crate) headers: HeaderMap,
    pub(crate) timeout: Duration,
    /// `GET http://host/path?…` for messages: no user info, no secrets.
    pub(crate) shown: String,
    pub(crate) secrets: Secrets,
}

impl Request {
    pub(crate) fn prepare(ctx: &StepContext, config: &Parts<'_>) -> Result<Self, String> {
        let timeout = duration_or(config.timeout, config.default_timeout, "timeout")?;
        if timeout.is_zero() {
            return Err(format!(
                "`timeout` must be longer than 0s; hint: leave it out for {}",
                humane(config.default_timeout)
            ));
        }
        let method = config.method.unwrap_or("GET").trim().to_ascii_uppercase();
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| format!("`method` `{method}` is not an HTTP method"))?;
        let mut secrets = Secrets::default();
        let mut url = reqwest::Url::parse(config.url)
            .map_err(|e| format!("`url` `{}` is not a URL: {e}", without_userinfo(config.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "`url` `{}` is not http(s)",
                without_userinfo(config.url)
            ));
        }
        if let Some(password) = url.password() {
            secrets.add_encoded(password);
        }
        if !config.query_params.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for param in config.query_params {
                pairs.append_pair(&param.name, &param.value);
            }
        }
        // Every spelling of a secret parameter's value: as written in the URL, decoded,
        // and encoded the way `queryParams` are.
        for raw in url.query().unwrap_or_default().split('&') {
            let (name, value) = raw.split_once('=').unwrap_or((raw, ""));
            let decoded = reqwest::Url::parse(&format!("http://x/?{raw}"))
                .ok()
                .and_then(|u| {
                    u.query_pairs()
                        .next()
                        .map(|(n, v)| (n.into_owned(), v.into_owned()))
                });
            let (decoded_name, decoded_value) =
                decoded.unwrap_or_else(|| (name.to_owned(), value.to_owned()));
            if is_secret_name(&decoded_name) {
                secrets.add(value);
                secrets.add_encoded(&decoded_value);
            }
        }
        let mut headers = HeaderMap::new();
        for (i, header) in config.headers.iter().enumerate() {
            let name = HeaderName::from_bytes(header.name.trim().as_bytes()).map_err(|_| {
                format!(
                    "`headers[{i}].name` `{}` is not a header name; hint: use letters, digits and `-`",
                    header.name
                )
            })?;
            let mut value = HeaderValue::from_str(header.value.trim()).map_err(|_| {
                format!(
                    "`headers[{i}].value` (header `{name}`) is not a valid header value; hint: \
                     remove line breaks and control characters"
                )
            })?;
            if is_secret_name(name.as_str()) {
                secrets.add(&header.value);
                // `Bearer <token>`, `Basic <base64>`: the credentials alone, too.
                if let Some((_, credentials)) = header.value.trim().split_once(' ') {
                    secrets.add(credentials);
                }
                value.set_sensitive(true);
            }
            headers.append(name, value);
        }
        if let Some(token) = ctx.credentials.token(config.url) {
            secrets.add(&token);
        }
        let mut visible = url.clone();
        let _ = visible.set_username("");
        let _ = visible.set_password(None);
        let shown = secrets.scrub(&format!("{method} {visible}"));
        Ok(Request {
            method,
            url,
            headers,
            timeout,
            shown,
            secrets,
        })
    }
}

/// A response as the expressions see it, and its summary for messages.
pub(crate) struct Read {
    pub(crate) status: u16,
    pub(crate) value: Value,
    pub(crate) summary: String,
}

pub(crate) async fn read(
    mut response: reqwest::Response,
    secrets: &Secrets,
) -> Result<Read, String> {
    let status = response.status().as_u16();
    let headers = headers_of(response.headers());
    let is_json = headers
        .get("content-type")
        .and_then(Value::as_str)
        .is_none_or(|t| t.to_ascii_lowercase().contains("json"));
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(reqwest_error)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_BODY {
            return Err(format!("the body is larger than {} MiB", MAX_BODY >> 20));
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    // Scrubbed before it is cut, so that no part of a secret survives the cut.
    let summary = summarise(status, &secrets.scrub(&text));
    let body = if is_json {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    } else {
        Value::String(text)
    };
    Ok(Read {
        status,
        value: json!({"status": status, "headers": headers, "body": body}),
        summary,
    })
}

/// The response headers: lower-case names, and the canonical form (`Content-Type`) too,
/// so that an expression may spell a name either way; repeated headers joined with `, `.
pub(crate) fn headers_of(headers: &HeaderMap) -> Map<String, Value> {
    let mut lower = Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match lower.get_mut(name.as_str()) {
            Some(Value::String(joined)) => {
                joined.push_str(", ");
                joined.push_str(&value);
            }
            _ => {
                lower.insert(name.as_str().to_ascii_lowercase(), Value::String(value));
            }
        }
    }
    let mut all = lower.clone();
    for (name, value) in lower {
        let canonical = canonical_header(&name);
        if canonical != name {
            all.insert(canonical, value);
        }
    }
    all
}

/// `content-type` → `Content-Type` (as Go's `http.CanonicalHeaderKey`).
pub(crate) fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// `status 503, body `{"ready":false}``: the status and the first [`SUMMARY_BYTES`] of the
/// body on one line (control characters and runs of white space become one space).
pub(crate) fn summarise(status: u16, body: &str) -> String {
    let flat = body
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if flat.is_empty() {
        return format!("status {status}, empty body");
    }
    format!("status {status}, body `{}`", bounded(&flat, SUMMARY_BYTES))
}

/// At most `limit` bytes of `text` (cut at a character boundary), `…` when cut.
pub(crate) fn bounded(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let cut = (0..=limit)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &text[..cut])
}

/// Whether a header or query parameter of this name carries a secret
/// (`Authorization`, `X-Api-Key`, `access_token`, `Cookie`, …). Case-insensitive.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| name.contains(part))
}

/// `https://user:pass@host/` → `https://host/`, for text that is not a valid URL.
pub(crate) fn without_userinfo(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..start], &url[start + at + 1..]),
        None => url.to_owned(),
    }
}

/// The secret strings of one request, replaced by `<redacted>` in every message and log
/// line the step writes.
#[derive(Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    pub(crate) fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.len() >= MIN_SECRET_LEN && !self.0.iter().any(|s| s == secret) {
            self.0.push(secret.to_owned());
            // Longest first, so that a secret containing another is replaced whole.
            self.0.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// The secret as given and as it appears in a URL.
    pub(crate) fn add_encoded(&mut self, secret: &str) {
        self.add(secret);
        let encoded: String = reqwest::Url::parse_with_params("http://x/", [("v", secret)])
            .ok()
            .and_then(|u| u.query().map(|q| q.trim_start_matches("v=").to_owned()))
            .unwrap_or_default();
        self.add(&encoded);
    }

    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.0 {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    pub(crate) fn scrub_json(&self, value: Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.scrub(&text)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.scrub_json(v)).collect())
            }
            Value::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, self.scrub_json(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    /// The outcome with every message scrubbed (outputs are the user's to choose).
    pub(crate) fn scrub_outcome(&self, outcome: StepOutcome) -> StepOutcome {
        if self.0.is_empty() {
            return outcome;
        }
        match outcome {
            StepOutcome::Running {
                retry_after,
                waiting_for,
                state,
            } => StepOutcome::Running {
                retry_after,
                waiting_for: self.scrub(&waiting_for),
                state: state.map(|s| self.scrub_json(s)),
            },
            StepOutcome::Failed { reason } => StepOutcome::Failed {
                reason: self.scrub(&reason),
            },
            StepOutcome::Errored { reason } => StepOutcome::Errored {
                reason: self.scrub(&reason),
            },
            StepOutcome::Skipped { reason } => StepOutcome::Skipped {
                reason: self.scrub(&reason),
            },
            succeeded @ StepOutcome::Succeeded { .. } => succeeded,
        }
    }
}

/// A reqwest error with its causes, without the URL (which may hold a secret; messages
/// name the request themselves).
pub(crate) fn reqwest_error(error: reqwest::Error) -> String {
    let timed_out = error.is_timeout();
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if timed_out {
        text.push_str(" (the request's `timeout` passed)");
    }
    text
}

/// `10s`: a default duration as a hint shows it.
fn humane(duration: Duration) -> String {
    format!("{}s", duration.as_secs())
}
