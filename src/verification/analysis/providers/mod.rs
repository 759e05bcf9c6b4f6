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

/// A request error in words: a timeout says how long was allowed.
fn request_error(what: &str, error: &reqwest::Error, timeout: std::time::Duration) -> String {
    if error.is_timeout() {
        format!("{what} did not answer within {}s", timeout.as_secs())
    } else if error.is_connect() {
        format!("{what} could not be reached: {error}")
    } else {
        format!("{what} failed: {error}")
    }
}
