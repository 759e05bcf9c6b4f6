//! ProjectConfig `spec.notifications`: unique, valid names; exactly one of `webhook` and
//! `slack`; at least one event; URLs that are `https://`, or `http://` only to a
//! loopback address (a test receiver on the same machine); for `slack`, exactly one of
//! `url` and `urlSecretRef`. That each `secretRef` names a Credential is checked with the
//! other references (`references.rs`).

use crate::api::{Notification, ProjectConfig};

use super::error::Issue;
use super::names::{self, MAX_LABEL};
use super::path::FieldPath;

/// Every problem with `spec.notifications` of `config`.
pub(crate) fn check(config: &ProjectConfig) -> Vec<Issue> {
    let at = FieldPath::of(&["spec", "notifications"]);
    let mut issues = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, notification) in config.spec.notifications.iter().enumerate() {
        let at = at.index(i);
        issues.extend(names::check(
            &notification.name,
            MAX_LABEL,
            "notification name",
            at.key("name"),
        ));
        if !seen.insert(notification.name.as_str()) {
            issues.push(
                Issue::new(
                    at.key("name"),
                    format!("notification `{}` is defined twice", notification.name),
                )
                .hint("give every notification its own name; its status is kept under it"),
            );
        }
        issues.extend(target(notification, &at));
        if notification.events.is_empty() {
            issues.push(
                Issue::new(at.key("events"), "a notification needs at least one event").hint(
                    "list what to send, e.g. `events: [PromotionSucceeded, PromotionFailed, \
                     VerificationFailed]`",
                ),
            );
        }
    }
    issues
}

fn target(notification: &Notification, at: &FieldPath) -> Vec<Issue> {
    let mut issues = Vec::new();
    match (&notification.webhook, &notification.slack) {
        (Some(webhook), None) => {
            issues.extend(url_issue(&webhook.url, at.key("webhook").key("url")));
        }
        (None, Some(slack)) => match (&slack.url, &slack.url_secret_ref) {
            (Some(url), None) => issues.extend(url_issue(url, at.key("slack").key("url"))),
            (None, Some(_)) => {}
            _ => issues.push(
                Issue::new(
                    at.key("slack"),
                    "a Slack notification must set exactly one of `url` and `urlSecretRef`",
                )
                .hint(
                    "keep the incoming webhook's URL in a Credential of type `webhook` (its \
                     `token`) and name it: `slack: {urlSecretRef: slack-webhook}`",
                ),
            ),
        },
        _ => issues.push(
            Issue::new(
                at.clone(),
                format!(
                    "notification `{}` must set exactly one of `webhook` and `slack`",
                    notification.name
                ),
            )
            .hint(
                "write `webhook: {url: https://ci.example.com/dray, secretRef: dray-hook}` for \
                 Dray's JSON payload, or `slack: {urlSecretRef: slack-webhook}`; add another \
                 notification for another receiver",
            ),
        ),
    }
    issues
}

/// Whether `url` is one Dray may POST to.
fn url_issue(url: &str, at: FieldPath) -> Option<Issue> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => {
            return Some(
                Issue::new(at, format!("`{url}` is not a URL: {e}"))
                    .hint("write the receiver's full URL, e.g. `https://ci.example.com/dray`"),
            );
        }
    };
    let host = parsed.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => None,
        "http" if loopback => None,
        scheme => Some(
            Issue::new(
                at,
                format!(
                    "Dray sends notifications over `https://` only (`http://` only to a loopback \
                     address), not `{scheme}://`"
                ),
            )
            .hint("use the receiver's `https://` URL"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_for_loopback_only() {
        let at = || FieldPath::of(&["url"]);
        assert!(url_issue("https://ci.example.com/hook", at()).is_none());
        assert!(url_issue("http://127.0.0.1:8080/hook", at()).is_none());
        assert!(url_issue("http://[::1]:8080/hook", at()).is_none());
        assert!(url_issue("http://localhost/hook", at()).is_none());
        let refused = url_issue("http://ci.example.com/hook", at()).unwrap();
        assert!(
            refused.message.contains("not `http://`"),
            "{}",
            refused.message
        );
        assert!(url_issue("ftp://127.0.0.1/x", at()).is_some());
        assert!(url_issue("not a url", at()).is_some());
    }
}
