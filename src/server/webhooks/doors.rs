//! The doors every receiver shares: how each provider's delivery is authenticated, and
//! the constant-time comparisons that do it. Nothing here reads a payload.
//!
//! - Tokens (a header, the `Authorization` header, a path segment) are compared as
//!   SHA-256 digests of both sides, so the comparison covers 32 bytes whatever the
//!   lengths.
//! - Signatures are HMAC-SHA256 of the body under the secret, verified by the MAC itself
//!   (constant time); a signature of the wrong length (an empty one included) fails before
//!   any byte is compared, and its length is no secret.
//! - An empty secret, token or signature never matches: an HMAC under the empty key is
//!   computable by anyone.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::WebhookProvider;

/// How a provider proves a delivery is its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Door {
    /// HMAC-SHA256 of the body, hex, in this header, after this prefix.
    Signature(&'static str, &'static str),
    /// Gitea: `X-Gitea-Signature` (hex), or the `X-Hub-Signature-256` it sends beside it.
    GiteaSignature,
    /// The secret itself in this header.
    HeaderToken(&'static str),
    /// `Authorization: Bearer <secret>`.
    Bearer,
    /// The whole `Authorization` header is the secret (Harbor's "Auth Header").
    WholeAuthorization,
    /// Artifactory: `X-JFrog-Event-Auth` is the secret, or the hex HMAC-SHA256 of the body
    /// when the webhook signs its payloads.
    JfrogEventAuth,
    /// The secret is the last segment of the URL path.
    PathToken,
}

impl Door {
    /// The door of `provider`.
    pub(super) fn of(provider: WebhookProvider) -> Self {
        match provider {
            WebhookProvider::GitHub => Door::Signature("x-hub-signature-256", "sha256="),
            WebhookProvider::Bitbucket => Door::Signature("x-hub-signature", "sha256="),
            WebhookProvider::Gitea => Door::GiteaSignature,
            WebhookProvider::GitLab => Door::HeaderToken("x-gitlab-token"),
            WebhookProvider::Registry => Door::Bearer,
            WebhookProvider::Harbor => Door::WholeAuthorization,
            WebhookProvider::Artifactory => Door::JfrogEventAuth,
            WebhookProvider::Azure
            | WebhookProvider::DockerHub
            | WebhookProvider::Quay
            | WebhookProvider::Generic => Door::PathToken,
        }
    }

    /// Whether the secret travels in the URL path (the services that sign nothing).
    pub(super) fn takes_path_token(self) -> bool {
        self == Door::PathToken
    }
}

/// A header's value, if it is text.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the delivery (`headers`, `body`, the path's token if any) passes `provider`'s
/// door under `secret`.
pub(super) fn authenticate(
    provider: WebhookProvider,
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    path_token: Option<&str>,
) -> bool {
    if secret.is_empty() {
        return false;
    }
    match Door::of(provider) {
        Door::Signature(name, prefix) => header(headers, name)
            .and_then(|s| s.strip_prefix(prefix))
            .is_some_and(|s| signature_matches(secret, body, s)),
        Door::GiteaSignature => match header(headers, "x-gitea-signature") {
            Some(hex) => signature_matches(secret, body, hex),
            None => header(headers, "x-hub-signature-256")
                .and_then(|s| s.strip_prefix("sha256="))
                .is_some_and(|s| signature_matches(secret, body, s)),
        },
        Door::HeaderToken(name) => header(headers, name).is_some_and(|t| token_matches(t, secret)),
        Door::Bearer => bearer_token(headers).is_some_and(|t| token_matches(t, secret)),
        Door::WholeAuthorization => {
            header(headers, "authorization").is_some_and(|t| token_matches(t, secret))
        }
        Door::JfrogEventAuth => header(headers, "x-jfrog-event-auth").is_some_and(|given| {
            // Both are computed, whichever matches.
            let as_token = token_matches(given, secret);
            let as_signature = signature_matches(secret, body, given);
            as_token | as_signature
        }),
        Door::PathToken => path_token.is_some_and(|t| token_matches(t, secret)),
    }
}

/// Whether a token a caller gave equals the secret, in constant time whatever either's
/// length: both are hashed first, so the comparison always covers 32 bytes. An empty
/// token never matches.
pub(super) fn token_matches(given: &str, secret: &str) -> bool {
    if given.is_empty() || secret.is_empty() {
        return false;
    }
    let given = Sha256::digest(given.as_bytes());
    let secret = Sha256::digest(secret.as_bytes());
    bool::from(given.ct_eq(&secret))
}

/// Whether `hex` is the HMAC-SHA256 of `body` under `secret`.
pub(super) fn signature_matches(secret: &str, body: &[u8], hex: &str) -> bool {
    if secret.is_empty() {
        return false;
    }
    let Some(given) = decode_hex(hex.trim()).filter(|g| !g.is_empty()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = header(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_hmac(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn github_signatures_are_checked_in_full() {
        // GitHub's documented test vector.
        let secret = "It's a Secret to Everybody";
        let body = b"Hello, World!";
        let signed = headers(&[(
            "x-hub-signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".into(),
        )]);
        let github = WebhookProvider::GitHub;
        assert!(authenticate(github, secret, &signed, body, None));
        assert!(!authenticate(github, "wrong", &signed, body, None));
        assert!(!authenticate(
            github,
            secret,
            &signed,
            b"Hello, World?",
            None
        ));
        assert!(!authenticate(github, secret, &HeaderMap::new(), body, None));
    }

    #[test]
    fn each_signing_provider_reads_its_own_header() {
        let secret = "a-secret-of-16-bytes";
        let body = br#"{"ref":"refs/heads/main"}"#;
        let hex = hex_hmac(secret, body);
        let cases = [
            (WebhookProvider::Gitea, "x-gitea-signature", hex.clone()),
            (
                WebhookProvider::Gitea,
                "x-hub-signature-256",
                format!("sha256={hex}"),
            ),
            (
                WebhookProvider::Bitbucket,
                "x-hub-signature",
                format!("sha256={hex}"),
            ),
            (
                WebhookProvider::Artifactory,
                "x-jfrog-event-auth",
                hex.clone(),
            ),
            (
                WebhookProvider::Artifactory,
                "x-jfrog-event-auth",
                secret.to_owned(),
            ),
        ];
        for (provider, name, value) in cases {
            let signed = headers(&[(name, value.clone())]);
            assert!(
                authenticate(provider, secret, &signed, body, None),
                "{provider:?} {name}"
            );
            assert!(
                !authenticate(provider, secret, &signed, b"{}", None) || value == secret,
                "{provider:?} {name}: another body"
            );
            assert!(!authenticate(
                provider,
                "another-secret-0123",
                &signed,
                body,
                None
            ));
        }
        // Bitbucket's header is `X-Hub-Signature`, not GitHub's.
        let github_style = headers(&[("x-hub-signature-256", format!("sha256={hex}"))]);
        assert!(!authenticate(
            WebhookProvider::Bitbucket,
            secret,
            &github_style,
            body,
            None
        ));
        // A wrong `X-Gitea-Signature` is not rescued by a right `X-Hub-Signature-256`.
        let both = headers(&[
            ("x-gitea-signature", hex_hmac("another-secret-0123", body)),
            ("x-hub-signature-256", format!("sha256={hex}")),
        ]);
        assert!(!authenticate(
            WebhookProvider::Gitea,
            secret,
            &both,
            body,
            None
        ));
    }

    #[test]
    fn an_empty_token_never_matches_and_lengths_do_not_shortcut() {
        assert!(token_matches("a-secret-of-16-by", "a-secret-of-16-by"));
        assert!(!token_matches("", ""));
        assert!(!token_matches("", "a-secret-of-16-by"));
        assert!(!token_matches("a-secret-of-16-b", "a-secret-of-16-by"));
        assert!(!token_matches("a-secret-of-16-byX", "a-secret-of-16-by"));
        let secret = "a-secret-of-16-by";
        let empty = headers(&[
            ("x-gitlab-token", String::new()),
            ("authorization", "Bearer ".into()),
            ("x-hub-signature-256", "sha256=".into()),
            ("x-hub-signature", "sha256=".into()),
            ("x-gitea-signature", String::new()),
            ("x-jfrog-event-auth", String::new()),
        ]);
        for provider in WebhookProvider::ALL {
            assert!(
                !authenticate(provider, secret, &empty, b"{}", Some("")),
                "{provider:?}"
            );
        }
        let bearer = headers(&[("authorization", format!("bearer {secret}"))]);
        assert!(authenticate(
            WebhookProvider::Registry,
            secret,
            &bearer,
            b"",
            None
        ));
        // Harbor compares the whole header: a `Bearer` prefix the secret lacks fails.
        assert!(!authenticate(
            WebhookProvider::Harbor,
            secret,
            &bearer,
            b"",
            None
        ));
        let whole = headers(&[("authorization", secret.to_owned())]);
        assert!(authenticate(
            WebhookProvider::Harbor,
            secret,
            &whole,
            b"",
            None
        ));
    }

    #[test]
    fn an_empty_secret_verifies_no_signature_and_takes_no_token() {
        let body = b"{}";
        let signed = headers(&[
            (
                "x-hub-signature-256",
                format!("sha256={}", hex_hmac("", body)),
            ),
            ("x-gitea-signature", hex_hmac("", body)),
            ("x-jfrog-event-auth", hex_hmac("", body)),
        ]);
        for provider in WebhookProvider::ALL {
            assert!(
                !authenticate(provider, "", &signed, body, Some("")),
                "{provider:?}"
            );
        }
    }

    #[test]
    fn the_services_that_sign_nothing_take_the_secret_in_the_path() {
        let secret = "a-secret-of-16-bytes";
        for provider in [
            WebhookProvider::Azure,
            WebhookProvider::DockerHub,
            WebhookProvider::Quay,
            WebhookProvider::Generic,
        ] {
            assert!(Door::of(provider).takes_path_token(), "{provider:?}");
            assert!(authenticate(
                provider,
                secret,
                &HeaderMap::new(),
                b"",
                Some(secret)
            ));
            assert!(!authenticate(
                provider,
                secret,
                &HeaderMap::new(),
                b"",
                None
            ));
            assert!(!authenticate(
                provider,
                secret,
                &HeaderMap::new(),
                b"",
                Some(&secret[1..])
            ));
        }
        // A header kind given the secret in the path is not authenticated by it.
        assert!(!authenticate(
            WebhookProvider::GitHub,
            secret,
            &HeaderMap::new(),
            b"",
            Some(secret)
        ));
    }
}
