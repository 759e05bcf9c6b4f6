//! `http`: a gate that calls an HTTP endpoint and decides on its response with CEL.
//!
//! The expressions see `response.status` (an `int`), `response.headers` and
//! `response.body` (parsed when the response says it is JSON, or says nothing and parses;
//! otherwise the text). Header names are case-insensitive: each is there in lower case
//! (`content-type`) and in canonical form (`Content-Type`); repeated headers are joined
//! with `, `. On each run the step sends one request and then:
//!
//! 1. `failureExpression` true → `Failed` at once, never retried;
//! 2. `errorExpression` true → `Errored`: the engine retries it and counts it against the
//!    step's `retry.errorThreshold`; the message names the expression and the response;
//! 3. `successExpression` true (default: a 2xx status) → `Succeeded`, with `outputs[]`
//!    evaluated over the response;
//! 4. otherwise `Running`: asked again after `pollInterval`, until the step's
//!    `retry.timeout` (default 10m) — the engine then fails it, and `waiting_for` carries
//!    the last response (status and the first 200 bytes of the body). Never waits forever.
//!
//! An expression that cannot be evaluated on a response (e.g. `response.body.ready` on an
//! HTML error page) counts as "not yet" and its error is what the step reports while it
//! waits. A request that gets no answer at all (refused, or no complete answer within
//! `timeout`) is `Errored`; an abort stops the request at once.
//!
//! Secrets stay out of messages and logs: the values of `Authorization`-like headers
//! (see [`is_secret_name`]), of query parameters with secret-like names, the URL's
//! password and the token of a project Credential matching the URL are replaced by
//! `<redacted>` wherever they would appear (the response body may echo them).
//!
//! Owns nothing but the request; the CEL evaluator is the engine's
//! ([`crate::ExprEvaluator`]).

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, json};

use super::typed::TypedStep;
use request::{NameValue, Parts, Request, bounded, read, reqwest_error};

pub(crate) mod request;
use crate::{StepContext, StepOutcome, Writes};

/// How a true `failureExpression` or `errorExpression` ends an attempt.
type Ending = fn(String) -> StepOutcome;

/// The name used in `uses:`.
pub(crate) const KIND: &str = "http";

/// How long one request may take when `timeout` says nothing.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait between two requests when `pollInterval` says nothing.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The shortest `pollInterval`: a gate must not hammer the service it asks.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How much of an expression's evaluation error a message shows.
const ERROR_BYTES: usize = 300;
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
    /// Request headers. Values of `Authorization`-like headers never appear in messages.
    #[serde(default)]
    headers: Vec<NameValue>,
    /// Query parameters, appended to the URL.
    #[serde(default)]
    query_params: Vec<NameValue>,
    /// The request body.
    #[serde(default)]
    body: Option<String>,
    /// How long one request may take, answer included (default `10s`).
    #[serde(default)]
    timeout: Option<String>,
    /// CEL over `response`: true means the gate is passed (default: a 2xx status).
    #[serde(default)]
    success_expression: Option<String>,
    /// CEL over `response`: true fails the step at once.
    #[serde(default)]
    failure_expression: Option<String>,
    /// CEL over `response`: true makes this attempt an error (retried, `retry.errorThreshold`).
    #[serde(default)]
    error_expression: Option<String>,
    /// Outputs computed from the response when it succeeds.
    #[serde(default)]
    outputs: Vec<Output>,
    /// How long to wait before asking again when nothing decides (default `5s`, min `100ms`).
    #[serde(default)]
    poll_interval: Option<String>,
}

/// The `http` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Http;

#[async_trait]
impl TypedStep for Http {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    /// `GET`, `HEAD` and `OPTIONS` read; any other method may change the service.
    fn writes_with(&self, config: &Config) -> Writes {
        let method = config
            .method
            .as_deref()
            .unwrap_or("GET")
            .to_ascii_uppercase();
        match method.as_str() {
            "GET" | "HEAD" | "OPTIONS" => Writes::Nothing,
            _ => Writes::Service,
        }
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let prepared = poll_interval(&config).and_then(|poll| {
            let parts = Parts {
                method: config.method.as_deref(),
                url: &config.url,
                headers: &config.headers,
                query_params: &config.query_params,
                timeout: config.timeout.as_deref(),
                default_timeout: DEFAULT_TIMEOUT,
            };
            Ok((Request::prepare(ctx, &parts)?, poll))
        });
        let (request, poll) = match prepared {
            Ok(prepared) => prepared,
            Err(reason) => {
                return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
            }
        };
        let outcome = attempt(ctx, &config, &request, poll).await;
        request.secrets.scrub_outcome(outcome)
    }
}

/// One request and the decision on its response.
/// `pollInterval`, checked: at least [`MIN_POLL_INTERVAL`].
fn poll_interval(config: &Config) -> Result<Duration, String> {
    let poll = duration_or(
        config.poll_interval.as_deref(),
        DEFAULT_POLL_INTERVAL,
        "pollInterval",
    )?;
    if poll < MIN_POLL_INTERVAL {
        return Err(format!(
            "`pollInterval` must be at least 100ms, not `{}`; hint: leave it out for 5s",
            config.poll_interval.as_deref().unwrap_or_default()
        ));
    }
    Ok(poll)
}

async fn attempt(
    ctx: &StepContext,
    config: &Config,
    request: &Request,
    poll: Duration,
) -> StepOutcome {
    let shown = &request.shown;
    let call = async {
        let mut builder = ctx
            .http
            .request(request.method.clone(), request.url.clone())
            .timeout(request.timeout)
            .headers(request.headers.clone());
        if let Some(body) = &config.body {
            builder = builder.body(body.clone());
        }
        let response = builder
            .send()
            .await
            .map_err(|e| format!("`{shown}` got no answer: {}", reqwest_error(e)))?;
        read(response, &request.secrets)
            .await
            .map_err(|e| format!("cannot read the answer of `{shown}`: {e}"))
    };
    let response = tokio::select! {
        read = call => match read {
            Ok(response) => response,
            Err(reason) => return StepOutcome::errored(reason),
        },
        () = ctx.cancel.cancelled() => {
            return StepOutcome::failed(format!("aborted while calling `{shown}`"));
        }
    };
    let summary = response.summary;
    let status = response.status;
    let mut vars = Map::new();
    vars.insert("response".into(), response.value);
    let eval = |expr: &str| {
        ctx.exprs
            .condition(expr, &vars)
            .map_err(|e| bounded(&e, ERROR_BYTES))
    };
    let wanted = match &config.success_expression {
        Some(expr) => format!("`{expr}`"),
        None => "a 2xx status".to_owned(),
    };
    let waiting = |why: Option<String>| StepOutcome::Running {
        retry_after: poll,
        waiting_for: match why {
            None => format!("`{shown}` to satisfy {wanted} (last response: {summary})"),
            Some(why) => {
                format!("`{shown}` to satisfy {wanted} (last response: {summary}; {why})")
            }
        },
        state: Some(json!({"lastResponse": summary})),
    };
    // `failureExpression` ends the step at once; `errorExpression` makes the attempt an
    // error (retried, counted against `retry.errorThreshold`).
    let endings: [(&str, &Option<String>, Ending); 2] = [
        ("failureExpression", &config.failure_expression, |m| {
            StepOutcome::failed(m)
        }),
        ("errorExpression", &config.error_expression, |m| {
            StepOutcome::errored(m)
        }),
    ];
    for (field, expr, end) in endings {
        let Some(expr) = expr else { continue };
        match eval(expr) {
            Ok(true) => {
                return end(format!(
                    "`{shown}`: `{field}` `{expr}` is true; response: {summary}"
                ));
            }
            Ok(false) => {}
            Err(e) => {
                return waiting(Some(format!("`{field}` cannot be evaluated on it: {e}")));
            }
        }
    }
    let passed = match &config.success_expression {
        None => (200..300).contains(&status),
        Some(expr) => match eval(expr) {
            Ok(passed) => passed,
            Err(e) => {
                return waiting(Some(format!(
                    "`successExpression` cannot be evaluated on it: {e}"
                )));
            }
        },
    };
    if !passed {
        return waiting(None);
    }
    let mut outputs = Map::new();
    for output in &config.outputs {
        match ctx.exprs.evaluate(&output.from_expression, &vars) {
            Ok(value) => {
                outputs.insert(output.name.clone(), value);
            }
            Err(e) => {
                return StepOutcome::failed(format!(
                    "output `{}` of `{shown}`: {}; response: {summary}",
                    output.name,
                    bounded(&e, ERROR_BYTES)
                ));
            }
        }
    }
    ctx.log(
        &request
            .secrets
            .scrub(&format!("`{shown}` passed: {summary}")),
    );
    StepOutcome::succeeded(outputs)
}

/// Parses `90s`, `1m30s`, `500ms`, `2h` (see [`crate::duration`]), or nothing: `default`.
pub(crate) fn duration_or(
    text: Option<&str>,
    default: Duration,
    field: &str,
) -> Result<Duration, String> {
    match text {
        None => Ok(default),
        Some(text) => crate::duration::parse(text)
            .map_err(|e| format!("`{field}` {e}; hint: write e.g. `10s`, `1m30s`, `500ms`")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, post};

    use super::request::*;
    use super::*;
    use crate::testing::{context, context_with_log, errored, failed, outputs};
    use crate::{CredentialProvider, GitCredentials, Step};
    use serde_json::Value;

    #[test]
    fn only_a_request_with_an_unsafe_method_may_write() {
        let writes = |config: Value| Step::writes_with(&Http, &config);
        assert_eq!(writes(json!({"url": "http://x/"})), Writes::Nothing);
        assert_eq!(
            writes(json!({"url": "http://x/", "method": "head"})),
            Writes::Nothing
        );
        assert_eq!(
            writes(json!({"url": "http://x/", "method": "POST"})),
            Writes::Service
        );
        assert_eq!(
            writes(json!({"url": "http://x/", "method": "delete"})),
            Writes::Service
        );
        assert_eq!(Step::writes(&Http), Writes::Nothing);
    }

    /// What `/leak` echoes besides the request: the token of the Credential in
    /// [`ProjectToken`].
    const CREDENTIAL_TOKEN: &str = "cred-7f3a9e";

    /// [`serve`]'s base URL and a context over a fresh work directory (removed when the
    /// returned directory is dropped).
    async fn served() -> (String, tempfile::TempDir, StepContext) {
        let base = serve().await;
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        (base, work, ctx)
    }

    /// A server on 127.0.0.1:0 whose `/ready` answers 503 twice, then 200 with JSON; also
    /// `/broken` (a failure body), `/html` (text), `/echo` (method, header, query, body),
    /// `/text`, `/bad-json`, `/untyped` (bodies by content type), `/multi` (a repeated
    /// header), `/leak` (a 503 echoing every secret it got, over many lines) and
    /// `/big` (a 503 with a 10 kB body).
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
                "/text",
                get(|| async { ([("content-type", "text/plain")], r#"{"a":1}"#) }),
            )
            .route(
                "/bad-json",
                get(|| async { ([("content-type", "application/json")], "not json {") }),
            )
            .route(
                "/untyped",
                get(|| async {
                    axum::http::Response::builder()
                        .body(axum::body::Body::from(r#"{"a":1}"#))
                        .unwrap()
                }),
            )
            .route(
                "/multi",
                get(|| async {
                    axum::http::Response::builder()
                        .header("Content-Type", "Application/JSON; charset=utf-8")
                        .header("x-multi", "one")
                        .header("X-Multi", "two")
                        .body(axum::body::Body::from(r#"{"ok":true}"#))
                        .unwrap()
                }),
            )
            .route(
                "/leak",
                get(
                    |headers: HeaderMap, query: axum::extract::RawQuery| async move {
                        let header = |name: &str| {
                            headers
                                .get(name)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_owned()
                        };
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [("content-type", "text/plain")],
                            format!(
                                "you sent\n\tauthorization={}\n\tx-api-key={}\n\tquery={}\nmy token is {CREDENTIAL_TOKEN}",
                                header("authorization"),
                                header("x-api-key"),
                                query.0.unwrap_or_default()
                            ),
                        )
                    },
                ),
            )
            .route(
                "/big",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "line\n".repeat(2000)) }),
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

    /// A server whose `/slow` never answers; the receiver hears of each request that
    /// arrived.
    async fn slow_server() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>) {
        let (arrived, rx) = tokio::sync::mpsc::unbounded_channel();
        let app = Router::new().route(
            "/slow",
            get(move || {
                let arrived = arrived.clone();
                async move {
                    let _ = arrived.send(());
                    std::future::pending::<()>().await;
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}"), rx)
    }

    /// A project with one Credential whose token matches every URL.
    struct ProjectToken;

    impl CredentialProvider for ProjectToken {
        fn git(&self, _: &str) -> Option<GitCredentials> {
            None
        }
        fn token(&self, _: &str) -> Option<String> {
            Some(CREDENTIAL_TOKEN.to_owned())
        }
    }

    fn waiting_for(outcome: StepOutcome) -> String {
        match outcome {
            StepOutcome::Running { waiting_for, .. } => waiting_for,
            other => panic!("expected Running, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn waits_until_the_success_expression_holds_then_outputs() {
        let (base, _work, ctx) = served().await;
        let config = json!({
            "url": format!("{base}/ready"),
            "successExpression": "response.status == 200 && response.body.ready",
            "failureExpression": "response.status == 200 && response.body.replicas + 1 < 2",
            "outputs": [{"name": "version", "fromExpression": "response.body.version"},
                        {"name": "replicas", "fromExpression": "response.body.replicas * 2"}],
            "pollInterval": "1s",
        });
        let first = Http.run(&ctx, config.clone()).await;
        let StepOutcome::Running {
            retry_after, state, ..
        } = &first
        else {
            panic!("{first:?}")
        };
        assert_eq!(*retry_after, Duration::from_secs(1));
        assert_eq!(
            state.as_ref().unwrap()["lastResponse"],
            json!(r#"status 503, body `{"ready":false,"replicas":1}`"#)
        );
        let waiting = waiting_for(first);
        assert!(
            waiting.contains(&format!(
                "`GET {base}/ready` to satisfy `response.status == 200 && response.body.ready`"
            )),
            "{waiting}"
        );
        assert!(
            waiting.contains(r#"last response: status 503, body `{"ready":false,"replicas":1}`"#),
            "{waiting}"
        );
        waiting_for(Http.run(&ctx, config.clone()).await);
        let out = outputs(Http.run(&ctx, config).await);
        assert_eq!(out["version"], json!("1.2.0"));
        assert_eq!(out["replicas"], json!(6));
    }

    #[tokio::test]
    async fn a_true_failure_expression_fails_at_once_and_an_error_expression_errors() {
        let (base, _work, ctx) = served().await;
        let reason = failed(
            Http.run(
                &ctx,
                json!({
                    "url": format!("{base}/broken"),
                    "successExpression": "response.body.state == 'done'",
                    "failureExpression": "response.body.state == 'rollback'",
                    "errorExpression": "true",
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
        // errorExpression is looked at before successExpression: true is an error even
        // when the response would pass, and the message carries the response.
        let reason = errored(
            Http.run(
                &ctx,
                json!({
                    "url": format!("{base}/broken"),
                    "errorExpression": "response.body.state != 'ok'",
                    "successExpression": "true",
                }),
            )
            .await,
        );
        assert!(
            reason.contains(&format!(
                "`GET {base}/broken`: `errorExpression` `response.body.state != 'ok'` is true"
            )),
            "{reason}"
        );
        assert!(
            reason.contains(r#"response: status 200, body `{"state":"rollback"}`"#),
            "{reason}"
        );
        // A false errorExpression lets the success expression decide.
        outputs(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/broken"), "errorExpression": "response.status >= 500"}),
            )
            .await,
        );
    }

    #[tokio::test]
    async fn an_expression_that_does_not_fit_the_body_waits_and_says_why() {
        let (base, _work, ctx) = served().await;
        let waiting = waiting_for(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/html"), "successExpression": "response.body.ready"}),
            )
            .await,
        );
        assert!(
            waiting.contains(&format!(
                "`GET {base}/html` to satisfy `response.body.ready`"
            )),
            "{waiting}"
        );
        assert!(
            waiting.contains("`successExpression` cannot be evaluated on it"),
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
    async fn the_body_is_parsed_only_when_it_is_json() {
        let (base, _work, ctx) = served().await;
        let body = |path: &str| {
            let ctx = ctx.clone();
            let url = format!("{base}{path}");
            async move {
                outputs(
                    Http.run(
                        &ctx,
                        json!({"url": url, "outputs": [{"name": "body", "fromExpression": "response.body"}]}),
                    )
                    .await,
                )["body"]
                    .clone()
            }
        };
        // Text that happens to be JSON stays text when the server says it is text.
        assert_eq!(body("/text").await, json!(r#"{"a":1}"#));
        // A JSON content type with a body that does not parse: the text.
        assert_eq!(body("/bad-json").await, json!("not json {"));
        // No content type at all: parsed when it parses.
        assert_eq!(body("/untyped").await, json!({"a": 1}));
        // `Application/JSON; charset=utf-8` is JSON too.
        assert_eq!(body("/multi").await, json!({"ok": true}));
    }

    #[tokio::test]
    async fn header_names_are_case_insensitive() {
        let (base, _work, ctx) = served().await;
        let out = outputs(
            Http.run(
                &ctx,
                json!({
                    "url": format!("{base}/multi"),
                    "successExpression": "response.headers['x-multi'] == response.headers['X-Multi']",
                    "outputs": [
                        {"name": "lower", "fromExpression": "response.headers['content-type']"},
                        {"name": "canonical", "fromExpression": "response.headers['Content-Type']"},
                        {"name": "multi", "fromExpression": "response.headers['X-Multi']"},
                    ],
                }),
            )
            .await,
        );
        assert_eq!(out["lower"], json!("Application/JSON; charset=utf-8"));
        assert_eq!(out["canonical"], out["lower"]);
        assert_eq!(out["multi"], json!("one, two"));
        // Request headers: the server sees `x-token` whatever the config's spelling.
        let out = outputs(
            Http.run(
                &ctx,
                json!({
                    "method": "POST",
                    "url": format!("{base}/echo"),
                    "headers": [{"name": "X-TOKEN", "value": "t0k"}],
                    "outputs": [{"name": "token", "fromExpression": "response.body.token"}],
                }),
            )
            .await,
        );
        assert_eq!(out["token"], json!("t0k"));
        assert_eq!(canonical_header("www-authenticate"), "Www-Authenticate");
    }

    #[tokio::test]
    async fn sends_method_headers_query_and_body() {
        let (base, _work, ctx) = served().await;
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
    async fn secrets_never_reach_messages_or_logs() {
        let base = serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (mut ctx, log) = context_with_log(dir.path());
        ctx.credentials = Arc::new(ProjectToken);
        let secrets = [
            "Bearer s3cr3t-bearer",
            "s3cr3t-bearer",
            "k3y-value",
            "q-t0ken/+",
            CREDENTIAL_TOKEN,
        ];
        let config = |success: &str| {
            json!({
                "url": format!("{base}/leak?access_token=q-t0ken/%2B&plain=visible"),
                "headers": [{"name": "authorization", "value": "Bearer s3cr3t-bearer"},
                            {"name": "X-Api-Key", "value": "k3y-value"}],
                "successExpression": success,
                "failureExpression": "response.body.contains('never')",
            })
        };
        let outcome = Http.run(&ctx, config("response.status == 200")).await;
        let StepOutcome::Running { state, .. } = &outcome else {
            panic!("{outcome:?}")
        };
        let state = state.clone().unwrap().to_string();
        let waiting = waiting_for(outcome);
        for secret in secrets {
            assert!(!waiting.contains(secret), "`{secret}` in {waiting}");
            assert!(!state.contains(secret), "`{secret}` in {state}");
        }
        // The request did carry them (the server echoed them, redacted here), and what is
        // not secret stays readable.
        assert!(
            waiting.contains("authorization=<redacted> x-api-key=<redacted>"),
            "{waiting}"
        );
        assert!(waiting.contains("plain=visible"), "{waiting}");
        assert!(waiting.contains("access_token=<redacted>"), "{waiting}");
        assert!(waiting.contains("my token is <redacted>"), "{waiting}");
        // A failure and a success (its log line) are scrubbed too.
        let reason = failed(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/leak"),
                       "headers": [{"name": "Authorization", "value": "Bearer s3cr3t-bearer"}],
                       "failureExpression": "response.status == 503"}),
            )
            .await,
        );
        assert!(!reason.contains("s3cr3t-bearer"), "{reason}");
        assert!(reason.contains("authorization=<redacted>"), "{reason}");
        outputs(Http.run(&ctx, config("response.status == 503")).await);
        let lines = log.lock().unwrap().join("\n");
        assert!(lines.contains("passed"), "{lines}");
        for secret in secrets {
            assert!(!lines.contains(secret), "`{secret}` in {lines}");
        }
        // A password in the URL never shows, even when the URL does not parse.
        let reason = failed(
            Http.run(&ctx, json!({"url": "http://ann:hunter22@exa mple/"}))
                .await,
        );
        assert!(
            reason.contains("`http://exa mple/` is not a URL"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn the_last_response_summary_is_one_bounded_line() {
        let (base, _work, ctx) = served().await;
        let waiting = waiting_for(Http.run(&ctx, json!({"url": format!("{base}/big")})).await);
        assert!(!waiting.contains('\n'), "{waiting}");
        assert!(waiting.contains("body `line line line"), "{waiting}");
        assert!(waiting.contains("…`"), "{waiting}");
        assert!(waiting.len() < 400, "{} bytes: {waiting}", waiting.len());
        let long = "é".repeat(150);
        let summary = summarise(500, &long);
        assert!(summary.ends_with("…`") && summary.len() < 230, "{summary}");
        assert_eq!(summarise(204, " \n"), "status 204, empty body");
    }

    #[tokio::test]
    async fn a_request_without_an_answer_in_time_errors_and_an_abort_stops_it() {
        let (base, mut arrived) = slow_server().await;
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let reason = errored(
            Http.run(
                &ctx,
                json!({"url": format!("{base}/slow"), "timeout": "200ms"}),
            )
            .await,
        );
        assert!(
            reason.contains(&format!("`GET {base}/slow` got no answer"))
                && reason.contains("the request's `timeout` passed"),
            "{reason}"
        );
        arrived.recv().await.unwrap();
        // With the default timeout (10s), an abort ends the call once it is in flight.
        let cancel = ctx.cancel.clone();
        let url = format!("{base}/slow");
        let running = tokio::spawn(async move { Http.run(&ctx, json!({"url": url})).await });
        arrived.recv().await.unwrap();
        cancel.cancel();
        let reason = failed(running.await.unwrap());
        assert!(
            reason.contains(&format!("aborted while calling `GET {base}/slow`")),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn bad_configs_and_unreachable_servers() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let bad = |config: Value| {
            let ctx = ctx.clone();
            async move { failed(Http.run(&ctx, config).await) }
        };
        let reason = bad(json!({"url": "http://127.0.0.1:1/", "timeout": "soon"})).await;
        assert!(
            reason.contains("`timeout` `soon` is not a duration"),
            "{reason}"
        );
        let reason = bad(json!({"url": "http://127.0.0.1:1/", "timeout": "0s"})).await;
        assert!(
            reason.contains("`timeout` must be longer than 0s"),
            "{reason}"
        );
        let reason = bad(json!({"url": "http://127.0.0.1:1/", "pollInterval": "10ms"})).await;
        assert!(
            reason.contains("`pollInterval` must be at least 100ms, not `10ms`"),
            "{reason}"
        );
        let reason = bad(json!({"url": "http://127.0.0.1:1/", "method": "GE T"})).await;
        assert!(
            reason.contains("`method` `GE T` is not an HTTP method"),
            "{reason}"
        );
        let reason = bad(json!({"url": "ftp://x/"})).await;
        assert!(reason.contains("not http(s)"), "{reason}");
        let reason = bad(json!({"url": "http://x/", "sucessExpression": "true"})).await;
        assert!(
            reason.contains("unknown field `sucessExpression`"),
            "{reason}"
        );
        let reason =
            bad(json!({"url": "http://x/", "headers": [{"name": "X Bad", "value": "v"}]})).await;
        assert!(
            reason.contains("`headers[0].name` `X Bad` is not a header name"),
            "{reason}"
        );
        // A bad value is named by its header, never shown.
        let reason = bad(json!({"url": "http://x/",
            "headers": [{"name": "Authorization", "value": "Bearer a\nb-s3cr3t"}]}))
        .await;
        assert!(
            reason.contains(
                "`headers[0].value` (header `authorization`) is not a valid header value"
            ),
            "{reason}"
        );
        assert!(!reason.contains("s3cr3t"), "{reason}");
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
    fn durations_and_names() {
        let d = |t| duration_or(Some(t), Duration::ZERO, "f");
        assert_eq!(d("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(d("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(d("2h").unwrap(), Duration::from_secs(7200));
        assert!(d("10").is_err() && d("").is_err() && d("s").is_err());
        // Too large is an error, not an overflow.
        assert!(d("18446744073709551615h").is_err());
        assert_eq!(
            duration_or(None, DEFAULT_TIMEOUT, "f").unwrap(),
            DEFAULT_TIMEOUT
        );
        for name in [
            "Authorization",
            "proxy-authorization",
            "X-Api-Key",
            "access_token",
            "Cookie",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["Accept", "Content-Type", "stage", "X-Request-Id"] {
            assert!(!is_secret_name(name), "{name}");
        }
        assert_eq!(
            without_userinfo("https://u:p@h:1/a@b?c=@"),
            "https://h:1/a@b?c=@"
        );
        assert_eq!(without_userinfo("no url"), "no url");
    }
}
