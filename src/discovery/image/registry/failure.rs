//! Turning what went wrong on the wire into [`ImageDiscoveryError`]s: unexpected statuses
//! (with the registry's error envelope), refused credentials, unreadable answers and
//! unreachable hosts (worded by their innermost cause, e.g. `connection refused`).
//!
//! Owns the wording of registry failures. Does not decide what to retry.

use reqwest::StatusCode;
use serde::Deserialize;

use super::{Answer, Session};
use crate::discovery::image::error::ImageDiscoveryError;

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Vec<EnvelopeError>,
}

#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

impl Session<'_> {
    pub(super) fn auth_failed(
        &self,
        status: StatusCode,
        registry_says: &str,
    ) -> ImageDiscoveryError {
        let mut detail = match (status, self.credentials) {
            (StatusCode::FORBIDDEN, _) => "access denied (HTTP 403)".to_owned(),
            (_, None) => "the registry wants credentials and none were given".to_owned(),
            (_, Some(c)) => format!("the registry refused the credentials of `{}`", c.username),
        };
        if !registry_says.is_empty() {
            detail = format!("{detail} ({registry_says})");
        }
        ImageDiscoveryError::AuthFailed {
            repo: self.repo.display.clone(),
            detail,
        }
    }

    /// The error for an unexpected status.
    pub(super) fn failure(&self, op: &str, answer: &Answer) -> ImageDiscoveryError {
        let detail = envelope_detail(&answer.body);
        match answer.status {
            s @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => self.auth_failed(s, &detail),
            status => ImageDiscoveryError::RegistryResponse {
                operation: op.to_owned(),
                url: answer.url.to_string(),
                status: status.as_u16(),
                detail,
            },
        }
    }

    pub(super) fn invalid(&self, op: &str, answer: &Answer, reason: String) -> ImageDiscoveryError {
        ImageDiscoveryError::InvalidResponse {
            operation: op.to_owned(),
            url: answer.url.to_string(),
            reason,
        }
    }
}

/// `CODE: message` of the registry's error envelope, a token service's `details`, or the
/// start of a non-JSON body.
pub(super) fn envelope_detail(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Ok(envelope) = serde_json::from_value::<Envelope>(value.clone()) {
            if !envelope.errors.is_empty() {
                let parts: Vec<String> = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{}: {}", e.code, e.message))
                    .collect();
                return parts.join("; ");
            }
        }
        let field = ["details", "message", "error"]
            .iter()
            .find_map(|k| value.get(*k)?.as_str());
        return field.unwrap_or_default().chars().take(200).collect();
    }
    let text = String::from_utf8_lossy(body);
    text.trim().chars().take(200).collect()
}

pub(super) fn unreachable(host: &str, err: &reqwest::Error) -> ImageDiscoveryError {
    let reason = if err.is_timeout() {
        "timed out".to_owned()
    } else {
        root_cause(err)
    };
    ImageDiscoveryError::Unreachable {
        registry: host.to_owned(),
        reason,
    }
}

/// The innermost cause, worded plainly (`connection refused`).
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        match io.kind() {
            std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
            std::io::ErrorKind::ConnectionReset => return "connection reset".into(),
            std::io::ErrorKind::TimedOut => return "timed out".into(),
            _ => {}
        }
    }
    cause.to_string()
}

pub(super) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_details_and_root_causes() {
        let body = br#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}"#;
        assert_eq!(
            envelope_detail(body),
            "NAME_UNKNOWN: repository name not known to registry"
        );
        assert_eq!(envelope_detail(b" plain text "), "plain text");
        assert_eq!(
            envelope_detail(br#"{"details":"incorrect username or password"}"#),
            "incorrect username or password"
        );
        assert_eq!(envelope_detail(b"{}"), "");
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(root_cause(&io), "connection refused");
    }
}
