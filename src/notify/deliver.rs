//! One attempt at one delivery, over HTTP:
//!
//! - a `webhook` notification: a JSON POST of the [`EventPayload`] with `X-Dray-Event`
//!   (the event), `X-Dray-Delivery` (the delivery's id, the same on every attempt, so a
//!   receiver can drop a repeat) and, with a secret, `X-Dray-Signature-256: sha256=<hex
//!   HMAC-SHA256 of the body>` as GitHub signs its webhooks;
//! - a `slack` notification: Slack's incoming-webhook message `{text, blocks}`;
//! - a commit status, through `dray_steps::forge::commit_status`.
//!
//! A 2xx answer delivers; anything else is an error naming the status (never the URL of
//! a Slack webhook, which is itself a secret, nor a query string).

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use super::events::EVERY_STAGE;
use crate::api::{EventPayload, NotificationEvent};

/// The header naming the event.
pub const EVENT_HEADER: &str = "X-Dray-Event";
/// The header naming the delivery.
pub const DELIVERY_HEADER: &str = "X-Dray-Delivery";
/// The header with the body's signature.
pub const SIGNATURE_HEADER: &str = "X-Dray-Signature-256";

/// Why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// No answer.
    #[error("`{url}` did not answer: {cause}")]
    Unreachable {
        /// Where it was sent (no query string).
        url: String,
        /// Why.
        cause: String,
    },
    /// An answer other than 2xx.
    #[error("`{url}` answered {status}")]
    Refused {
        /// Where it was sent (no query string).
        url: String,
        /// The HTTP status.
        status: u16,
    },
}

/// `sha256=<hex HMAC-SHA256 of body with secret>`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// How a URL is shown in errors and statuses: scheme, host and path, no query.
pub fn shown(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or_default().to_owned()
}

/// The words for an event.
fn headline(event: &EventPayload) -> String {
    let freight = if event.freight.alias.is_empty() {
        event.freight.name.clone()
    } else {
        event.freight.alias.clone()
    };
    let stage = if event.stage == EVERY_STAGE {
        "every Stage".to_owned()
    } else {
        format!("`{}`", event.stage)
    };
    let project = &event.project;
    let about =
        |icon: &str, what: &str| format!("{icon} `{freight}` {what} {stage} in `{project}`");
    match event.event {
        NotificationEvent::PromotionSucceeded => about(":white_check_mark:", "promoted to"),
        NotificationEvent::PromotionFailed => about(":x:", "failed to promote to"),
        NotificationEvent::PromotionErrored => about(":warning:", "errored promoting to"),
        NotificationEvent::FreightVerified => about(":large_green_circle:", "verified in"),
        NotificationEvent::VerificationFailed => about(":red_circle:", "failed verification in"),
        NotificationEvent::FreightRejected => about(":no_entry:", "rejected for"),
        NotificationEvent::StageFrozen => format!(":snowflake: {stage} frozen in `{project}`"),
    }
}

/// Slack's incoming-webhook message for an event: `text` (the fallback) and one
/// `section` block in `mrkdwn` with a link to the Stage.
pub fn slack_message(event: &EventPayload) -> serde_json::Value {
    let mut text = headline(event);
    if !event.message.is_empty() {
        text.push_str(&format!(": {}", event.message));
    }
    json!({
        "text": text,
        "blocks": [{
            "type": "section",
            "text": {"type": "mrkdwn", "text": format!("{text}\n<{}|Open the Stage in Dray>", event.url)},
        }],
    })
}

/// POSTs `body` (JSON) to `url` with Dray's headers, signed with `secret` when given;
/// errors name the URL as `shown_as` says (a Slack webhook's URL is a secret).
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    shown_as: &str,
    delivery: &str,
    event: NotificationEvent,
    body: Vec<u8>,
    secret: Option<&str>,
) -> Result<(), DeliveryError> {
    let mut request = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_HEADER, event.as_str())
        .header(DELIVERY_HEADER, delivery);
    if let Some(secret) = secret {
        request = request.header(SIGNATURE_HEADER, signature(secret.as_bytes(), &body));
    }
    let answer = request
        .body(body)
        .send()
        .await
        .map_err(|e| DeliveryError::Unreachable {
            url: shown_as.to_owned(),
            cause: e.without_url().to_string(),
        })?;
    if answer.status().is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Refused {
            url: shown_as.to_owned(),
            status: answer.status().as_u16(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_githubs_hmac_sha256_in_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn urls_are_shown_without_their_query() {
        assert_eq!(
            shown("https://hooks.example.com/in?token=secret"),
            "https://hooks.example.com/in"
        );
    }

    #[test]
    fn slack_gets_text_and_a_block_linking_to_the_stage() {
        let event = EventPayload {
            event: NotificationEvent::PromotionFailed,
            project: "demo".into(),
            stage: "prod".into(),
            freight: crate::api::EventFreight {
                name: "f1".into(),
                alias: "frosty-otter".into(),
            },
            promotion: Some("p1".into()),
            phase: "Failed".into(),
            message: "the http gate said no".into(),
            at: crate::api::Time(jiff::Timestamp::UNIX_EPOCH),
            url: "https://dray.example.com/projects/demo/stages/prod".into(),
        };
        let message = slack_message(&event);
        assert_eq!(
            message["text"],
            ":x: `frosty-otter` failed to promote to `prod` in `demo`: the http gate said no"
        );
        let block = message["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(
            block.ends_with(
                "<https://dray.example.com/projects/demo/stages/prod|Open the Stage in Dray>"
            ),
            "{block}"
        );
    }
}
