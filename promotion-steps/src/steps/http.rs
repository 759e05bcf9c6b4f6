//! `http`: a gate that calls an HTTP endpoint and decides on its response with CEL.
//!
//! The expressions see `response.status` (an `int`), `response.headers` (lower-case name
//! → value, repeated headers joined with `, `) and `response.body` (parsed when it is JSON,
//! otherwise the text). On each run:
//!
//! 1. `failureExpression` true → `Failed` at once, never retried;
//! 2. `errorExpression` true → `Errored` (retried up to the step's `retry.errorThreshold`);
//! 3. `successExpression` true → `Succeeded`, with `outputs[]` evaluated over the response;
//! 4. otherwise `Running`: asked again after `pollInterval`, until the step's
//!    `retry.timeout` (default 10m) — the engine then fails it, and `waiting_for` carries
//!    the last response (status and the first 200 bytes of the body). Never waits forever.
//!
//! Without `successExpression` a 2xx response succeeds. An expression that cannot be
//! evaluated on a response (e.g. `response.body.ready` on an HTML error page) counts as
//! "not yet" and its error is what the step reports while it waits. A request that does
//! not get an answer at all (refused, timed out after `timeout`) is `Errored`.
//!
//! Owns nothing but the request; the CEL evaluator is the engine's
//! ([`crate::ExprEvaluator`]).

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{Step, StepContext, StepOutcome, parse_config};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "http";

/// How long one request may take when `timeout` says nothing.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait between two requests when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The largest body read from a response.
const MAX_BODY: usize = 4 << 20;
/// How much of the body a summary shows.
const SUMMARY_BYTES: usize = 200;

/// A header or a query parameter.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct NameValue {
    /// The name.
    name: String,
    /// The value.
    value: String,
}

/// An output computed from the response.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Output {
    /// The name: `outputs.<alias>.<name>`.
    name: String,
    /// A CEL expression over `response`, e.g. `response.body.version`.
    from_expression: String,
}

/// The configuration of `http`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The method (default `GET`).
    #[serde(default)]
    method: Option<String>,
    /// The URL, `http://` or `https://`.
    url: String,
    /// Request headers.
    #[serde(default)]
    headers: Vec<NameValue>,
    /// Query parameters, appended to the URL.
    #[serde(default)]
    query_params: Vec<NameValue>,
    /// The request body.
    #[serde(default)]
    body: Option<String>,
    /// How long one request may take (default `10s`).
    #[serde(default)]
    timeout: Option<String>,
    /// CEL over `response`: true means the gate is passed (default: a 2xx status).
    #[serde(default)]
    success_expression: Option<String>,
    /// CEL over `response`: true fails the step at once.
    #[serde(default)]
    failure_expression: Option<String>,
    /// CEL over `response`: true is an error (retried up to `retry.errorThreshold`).
    #[serde(default)]
    error_expression: Option<String>,
    /// Outputs computed from the response when it succeeds.
    #[serde(default)]
    outputs: Vec<Output>,
    /// How long to wait before asking again when neither expression holds (default `5s`).
    #[serde(default)]
    poll_interval: Option<String>,
}

/// The `http` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Http;

#[async_trait]
impl Step for Http {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn config_schema(&self) -> schemars::Schema {
        schemars::schema_for!(Config)
    }

    async fn run(&self, ctx: &StepContext, config: Value) -> StepOutcome {
        match run(ctx, config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

async fn run(ctx: &StepContext, config: Value) -> Result<StepOutcome, StepOutcome> {
    let config: Config = parse_config(KIND, config)?;
    let invalid =
        |reason: String| StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
    let timeout =
        duration_or(config.timeout.as_deref(), DEFAULT_TIMEOUT, "timeout").map_err(invalid)?;
    let poll = duration_or(
        config.poll_interval.as_deref(),
        DEFAULT_POLL_INTERVAL,
        "pollInterval",
    )
    .map_err(invalid)?;
    let method = config
        .method
        .as_deref()
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| invalid(format!("`method` `{method}` is not an HTTP method")))?;
    let mut url = reqwest::Url::parse(&config.url)
        .map_err(|e| invalid(format!("`url` `{}` is not a URL: {e}", config.url)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!("`url` `{}` is not http(s)", config.url)));
    }
    if !config.query_params.is_empty() {
        let mut pairs = url.query_pairs_mut();
        for param in &config.query_params {
            pairs.append_pair(&param.name, &param.value);
        }
    }
    let shown = format!("{method} {}", redact(&url));
    let mut request = ctx.http.request(method, url).timeout(timeout);
    for header in &config.headers {
        request = request.header(&header.name, &header.value);
    }
    if let Some(body) = &config.body {
        request = request.body(body.clone());
    }
    let response = tokio::select! {
        response = request.send() => response,
        () = ctx.cancel.cancelled() => return Ok(StepOutcome::failed(format!("aborted while calling `{shown}`"))),
    }
    .map_err(|e| StepOutcome::errored(format!("`{shown}` got no answer: {}", error_chain(&e))))?;
    let response = read(response)
        .await
        .map_err(|e| StepOutcome::errored(format!("cannot read the answer of `{shown}`: {e}")))?;
    let summary = response.summary;
    let mut vars = Map::new();
    vars.insert("response".into(), response.value);
    let check = |field: &str, expr: &Option<String>| -> Result<Option<bool>, String> {
        match expr {
            None => Ok(None),
            Some(expr) => ctx.exprs.condition(expr, &vars).map(Some).map_err(|e| {
                format!("`{field}` cannot be evaluated on the last response ({summary}): {e}")
            }),
        }
    };
    let waiting = |waiting_for: String| StepOutcome::Running {
        retry_after: poll,
        waiting_for,
        state: Some(json!({"lastResponse": summary})),
    };
    match check("failureExpression", &config.failure_expression) {
        Ok(Some(true)) => {
            return Ok(StepOutcome::failed(format!(
                "`{shown}`: `failureExpression` `{}` is true; response: {summary}",
                config.failure_expression.as_deref().unwrap_or_default()
            )));
        }
        Ok(_) => {}
        Err(reason) => return Ok(waiting(reason)),
    }
    match check("errorExpression", &config.error_expression) {
        Ok(Some(true)) => {
            return Ok(StepOutcome::errored(format!(
                "`{shown}`: `errorExpression` `{}` is true; response: {summary}",
                config.error_expression.as_deref().unwrap_or_default()
            )));
        }
        Ok(_) => {}
        Err(reason) => return Ok(waiting(reason)),
    }
    let passed = match check("successExpression", &config.success_expression) {
        Ok(Some(passed)) => passed,
        Ok(None) => (200..300).contains(&response.status),
        Err(reason) => return Ok(waiting(reason)),
    };
    if !passed {
        let wanted = match &config.success_expression {
            Some(expr) => format!("`{expr}`"),
            None => "a 2xx status".to_owned(),
        };
        return Ok(waiting(format!(
            "`{shown}` to satisfy {wanted} (last response: {summary})"
        )));
    }
    let mut outputs = Map::new();
    for output in &config.outputs {
        let value = ctx
            .exprs
            .evaluate(&output.from_expression, &vars)
            .map_err(|e| {
                StepOutcome::failed(format!(
                    "output `{}` of `{shown}`: {e}; response: {summary}",
                    output.name
                ))
            })?;
        outputs.insert(output.name.clone(), value);
    }
    ctx.log(&format!("`{shown}` passed: {summary}"));
    Ok(StepOutcome::succeeded(outputs))
}

/// A response as the expressions see it, and its summary for messages.
struct Read {
    status: u16,
    value: Value,
    summary: String,
}

async fn read(response: reqwest::Response) -> Result<Read, String> {
    let status = response.status().as_u16();
    let mut headers = Map::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(joined)) => {
                joined.push_str(", ");
                joined.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    let is_json = headers
        .get("content-type")
        .and_then(Value::as_str)
        .is_none_or(|t| t.contains("json"));
    let mut response = response;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| error_chain(&e))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_BODY {
            return Err(format!("the body is larger than {} MiB", MAX_BODY >> 20));
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = if is_json {
        serde_json::from_str(&text).unwrap_or(Value::String(text.clone()))
    } else {
        Value::String(text.clone())
    };
    let summary = summarise(status, &text);
    Ok(Read {
        status,
        value: json!({"status": status, "headers": headers, "body": body}),
        summary,
    })
}

/// `503 "{\"ready\":false}"`: the status and the first [`SUMMARY_BYTES`] of the body.
fn summarise(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return format!("status {status}, empty body");
    }
    let cut = (0..=SUMMARY_BYTES.min(body.len()))
        .rev()
        .find(|i| body.is_char_boundary(*i))
        .unwrap_or(0);
    let more = if cut < body.len() { "…" } else { "" };
    format!("status {status}, body `{}{more}`", &body[..cut])
}

/// The URL without user info, for messages.
fn redact(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.to_string()
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Parses `90s`, `1m30s`, `500ms`, `2h` (or nothing: `default`).
pub(crate) fn duration_or(
    text: Option<&str>,
    default: Duration,
    field: &str,
) -> Result<Duration, String> {
    let Some(text) = text.map(str::trim) else {
        return Ok(default);
    };
    let bad = || {
        format!("`{field}` `{text}` is not a duration; hint: write e.g. `10s`, `1m30s`, `500ms`")
    };
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(bad()),
        };
        total += unit;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, post};

    use super::*;
    use crate::testing::{context, errored, failed, outputs};

    /// A server on 127.0.0.1:0 whose `/ready` answers 503 twice, then 200 with JSON; also
    /// `/broken` (a failure body), `/html` (text) and `/echo` (method, header, query, body).
    async fn serve() -> String {
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route(
                "/ready",
                get(move || {
                    let calls = Arc::clone(&calls);
                    async move {
                        let n = calls.fetch_add(1, Ordering::SeqCst);
                        if n < 2 {
                            (
                                StatusCode::SERVICE_UNAVAILABLE,
                                [("content-type", "application/json")],
                                r#"{"ready":false,"replicas":1}"#.to_owned(),
                            )
                        } else {
                            (
                                StatusCode::OK,
                                [("content-type", "application/json")],
                                r#"{"ready":true,"replicas":3,"version":"1.2.0"}"#.to_owned(),
                            )
                        }
                    }
                }),
            )
            .route(
                "/broken",
                get(|| async {
                    (
                        StatusCode::OK,
                        [("content-type", "application/json")],
                        r#"{"state":"rollback"}"#,
                    )
                }),
            )
            .route(
                "/html",
                get(|| async {
                    (
                        StatusCode::BAD_GATEWAY,
                        [("content-type", "text/html")],
                        "<h1>bad gateway</h1>",
                    )
                }),
            )
            .route(
                "/echo",
                post(
                    |headers: HeaderMap, query: axum::extract::RawQuery, body: String| async move {
                        let token = headers
                            .get("x-token")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned();
                        axum::Json(json!({"token": token, "query": query.0, "body": body}))
                    },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    fn waiting_for(outcome: StepOutcome) -> String {
        match outcome {
            StepOutcome::Running { waiting_for, .. } => waiting_for,
            other => panic!("expected Running, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn waits_until_the_success_expression_holds_then_outputs() {
        let base = serve().await;
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let config = json!({
            "url": format!("{base}/ready"),
            "successExpression": "response.status == 200 && response.body.ready",
            "failureExpression": "response.status == 200 && response.body.replicas + 1 < 2",
            "outputs": [{"name": "version", "fromExpression": "response.body.version"},
                        {"name": "replicas", "fromExpression": "response.body.replicas * 2"}],
            "pollInterval": "1s",
        });
        let first = Http.run(&ctx, config.clone()).await;
        let StepOutcome::Running { retry_after, .. } = &first else {
            panic!("{first:?}")
        };
        assert_eq!(*retry_after, Duration::from_secs(1));
        let waiting = waiting_for(first);
        assert!(
            waiting.contains("response.status == 200 && response.body.ready"),
            "{waiting}"
        );
        assert!(
            waiting.contains(r#"status 503, body `{"ready":false,"replicas":1}`"#),
            "{waiting}"
        );
        waiting_for(Http.run(&ctx, config.clone()).await);
        let out = outputs(Http.run(&ctx, config).await);
        assert_eq!(out["version"], json!("1.2.0"));
        assert_eq!(out["replicas"], json!(6));
    }

    #[tokio::test]
    async fn a_true_failure_expression_fails_at_once_and_an_error_expression_errors() {
        let base = serve().await;
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let reason = failed(
            Http.run(
                &ctx,
                json!({
                    "url": format!("{base}/broken"),
                    "successExpression": "response.body.state == 'done'",
                    "failureExpression": "response.body.state == 'rollback'",
                }),
            )
            .await,
        );
        assert!(
            reason.contains("`failureExpression` `response.body.state == 'rollback'` is true"),
            "{reason}"
        );
        assert!(
            reason.contains(r#"status 200, body `{"state":"rollback"}`"#),
            "{reason}"
        );
        let reason = errored(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/broken"), "errorExpression": "response.body.state != 'ok'"}),
            )
            .await,
        );
        assert!(reason.contains("`errorExpression`"), "{reason}");
    }

    #[tokio::test]
    async fn an_expression_that_does_not_fit_the_body_waits_and_says_why() {
        let base = serve().await;
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let waiting = waiting_for(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/html"), "successExpression": "response.body.ready"}),
            )
            .await,
        );
        assert!(
            waiting.contains("`successExpression` cannot be evaluated"),
            "{waiting}"
        );
        assert!(
            waiting.contains("status 502, body `<h1>bad gateway</h1>`"),
            "{waiting}"
        );
        // Without `successExpression`, only a 2xx passes.
        let waiting = waiting_for(Http.run(&ctx, json!({"url": format!("{base}/html")})).await);
        assert!(waiting.contains("a 2xx status"), "{waiting}");
    }

    #[tokio::test]
    async fn sends_method_headers_query_and_body() {
        let base = serve().await;
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let out = outputs(
            Http.run(
                &ctx,
                json!({
                    "method": "post",
                    "url": format!("{base}/echo"),
                    "headers": [{"name": "X-Token", "value": "t0k"}],
                    "queryParams": [{"name": "stage", "value": "prod env"}],
                    "body": "{\"hello\":1}",
                    "outputs": [{"name": "echo", "fromExpression": "response.body"},
                                {"name": "type", "fromExpression": "response.headers['content-type']"}],
                }),
            )
            .await,
        );
        assert_eq!(
            out["echo"],
            json!({"token": "t0k", "query": "stage=prod+env", "body": "{\"hello\":1}"})
        );
        assert_eq!(out["type"], json!("application/json"));
    }

    #[tokio::test]
    async fn bad_configs_and_unreachable_servers() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let reason = failed(
            Http.run(
                &ctx,
                json!({"url": "http://127.0.0.1:1/", "timeout": "soon"}),
            )
            .await,
        );
        assert!(
            reason.contains("`timeout` `soon` is not a duration"),
            "{reason}"
        );
        let reason = failed(Http.run(&ctx, json!({"url": "ftp://x/"})).await);
        assert!(reason.contains("not http(s)"), "{reason}");
        let reason = failed(
            Http.run(
                &ctx,
                json!({"url": "http://x/", "sucessExpression": "true"}),
            )
            .await,
        );
        assert!(
            reason.contains("unknown field `sucessExpression`"),
            "{reason}"
        );
        // A port nobody listens on: no answer is an error, naming the request.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let reason = errored(
            Http.run(&ctx, json!({"url": format!("http://{addr}/x")}))
                .await,
        );
        assert!(
            reason.contains(&format!("`GET http://{addr}/x` got no answer")),
            "{reason}"
        );
    }

    #[test]
    fn durations_and_summaries() {
        let d = |t| duration_or(Some(t), Duration::ZERO, "f");
        assert_eq!(d("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(d("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(d("2h").unwrap(), Duration::from_secs(7200));
        assert!(d("10").is_err() && d("").is_err() && d("s").is_err());
        assert_eq!(
            duration_or(None, DEFAULT_TIMEOUT, "f").unwrap(),
            DEFAULT_TIMEOUT
        );
        let long = "é".repeat(150);
        let summary = summarise(500, &long);
        assert!(summary.ends_with("…`") && summary.len() < 230, "{summary}");
        assert_eq!(summarise(204, ""), "status 204, empty body");
    }
}
