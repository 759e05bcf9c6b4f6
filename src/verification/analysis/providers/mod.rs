//! The providers a metric can measure with: `web` (an HTTP request with a JSON answer) and
//! `prometheus` (an instant query). Each takes one measurement and returns what it
//! observed, or an error message naming the endpoint and the cause (never a header value).

pub(super) mod prometheus;
pub(super) mod web;

use super::condition::Observed;
use super::spec::Provider;

/// Takes one measurement with `provider`.
pub(crate) async fn measure(
    http: &reqwest::Client,
    provider: &Provider,
) -> Result<Observed, String> {
    match provider {
        Provider::Web(request) => web::measure(http, request).await,
        Provider::Prometheus(query) => prometheus::measure(http, query).await,
    }
}

/// At most the first 200 characters of a response body, on one line, for messages.
fn snippet(body: &str) -> String {
    let line = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 200 {
        let mut out: String = line.chars().take(199).collect();
        out.push('…');
        out
    } else {
        line
    }
}

/// A request error in words: a timeout says how long was allowed. reqwest's text is used
/// without its URL: `what` already names the endpoint, and without credentials
/// ([`endpoint`]).
fn request_error(what: &str, error: &reqwest::Error, timeout: std::time::Duration) -> String {
    if error.is_timeout() {
        return format!("{what} did not answer within {}s", timeout.as_secs());
    }
    let text = error.to_string();
    let cause = match text.find(" for url (") {
        Some(at) => &text[..at],
        None => text.as_str(),
    };
    if error.is_connect() {
        format!("{what} could not be reached: {cause}")
    } else {
        format!("{what} failed: {cause}")
    }
}

/// How a URL is shown in messages, logs and the Stage's status: without user info.
fn endpoint(url: &str) -> String {
    crate::discovery::git::redact_url(url)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::spec::WebRequest;

    #[tokio::test]
    async fn a_failed_request_names_the_endpoint_without_its_credentials() {
        // Nothing listens on port 1 of loopback: the connection is refused.
        let request = WebRequest {
            url: "http://ops:s3cret@127.0.0.1:1/health?x=1".to_owned(),
            method: "GET".to_owned(),
            headers: vec![("Authorization".to_owned(), "Bearer t0ken".to_owned())],
            body: None,
            timeout: Duration::from_secs(5),
            json_path: None,
        };
        let error = super::web::measure(&reqwest::Client::new(), &request)
            .await
            .expect_err("nothing answers on port 1");
        assert!(
            error.starts_with("GET http://127.0.0.1:1/health?x=1 could not be reached"),
            "{error}"
        );
        assert!(
            !error.contains("s3cret") && !error.contains("t0ken"),
            "{error}"
        );
    }
}
