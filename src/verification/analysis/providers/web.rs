//! The `web` provider: one HTTP request; `result` is the JSON value at `jsonPath`, or the
//! whole answer. A non-2xx status, a body that is not JSON, or a path that matches nothing
//! is an error.

use reqwest::Method;

use super::super::condition::Observed;
use super::super::spec::WebRequest;
use super::{request_error, snippet};

/// Sends `request` and reads its answer.
pub(crate) async fn measure(
    http: &reqwest::Client,
    request: &WebRequest,
) -> Result<Observed, String> {
    let method = Method::from_bytes(request.method.as_bytes())
        .map_err(|_| format!("`{}` is not an HTTP method", request.method))?;
    let what = format!("{} {}", request.method, super::endpoint(&request.url));
    let mut builder = http
        .request(method, &request.url)
        .timeout(request.timeout)
        .header(reqwest::header::ACCEPT, "application/json");
    for (key, value) in &request.headers {
        builder = builder.header(key, value);
    }
    if let Some(body) = &request.body {
        builder = builder.body(body.clone());
    }
    let response = builder
        .send()
        .await
        .map_err(|e| request_error(&what, &e, request.timeout))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| request_error(&what, &e, request.timeout))?;
    if !status.is_success() {
        return Err(format!("{what} answered HTTP {status}: {}", snippet(&body)));
    }
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
        format!(
            "{what} answered with a body that is not JSON ({e}): {}",
            snippet(&body)
        )
    })?;
    match &request.json_path {
        None => Ok(Observed::Json(json)),
        Some(path) => path.get(&json).cloned().map(Observed::Json).ok_or_else(|| {
            format!(
                "jsonPath `{}` matched nothing in the answer of {what}: {}",
                path.as_str(),
                snippet(&body)
            )
        }),
    }
}
