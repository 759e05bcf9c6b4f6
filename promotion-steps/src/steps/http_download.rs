//! `http-download`: downloads a file over HTTP(S) into the work directory (Kargo's
//! `http-download`), e.g. a chart archive for `untar` or a rendered artifact from a CDN.
//!
//! The request is prepared as the `http` step prepares its own (`http/request.rs`: headers,
//! query parameters, a `timeout` for the whole download, default 5 minutes, secrets kept out
//! of every message). The body streams to `<outPath>.partial` and is renamed into place only
//! when complete, so a failed or aborted download leaves no half file; more than
//! [`MAX_DOWNLOAD`] bytes fails the step. A 4xx answer fails the step (with
//! `errorExpression`'s text when it gives one); a 5xx or 429 answer, or no answer, is an
//! error the engine may retry (`retry.errorThreshold`).

use std::io::Write;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::files::resolve;
use super::http::request::{NameValue, Parts, Request, bounded, read, reqwest_error};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "http-download";

/// The largest file downloaded.
const MAX_DOWNLOAD: u64 = 100 << 20;
/// How long a download may take when `timeout` says nothing.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Configuration of `http-download`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The URL, `http://` or `https://`.
    url: String,
    /// Where to save the file, relative to the work directory (directories are made).
    out_path: String,
    /// Replace a file that exists at `outPath` (default false: the step fails).
    #[serde(default)]
    allow_overwrite: bool,
    /// Request headers. Values of `Authorization`-like headers never appear in messages.
    #[serde(default)]
    headers: Vec<NameValue>,
    /// Query parameters, appended to the URL.
    #[serde(default)]
    query_params: Vec<NameValue>,
    /// Skip TLS certificate verification. Discouraged: anyone on the path can answer.
    #[serde(default, rename = "insecureSkipTLSVerify")]
    insecure_skip_tls_verify: bool,
    /// How long the whole download may take (default `5m`).
    #[serde(default)]
    timeout: Option<String>,
    /// An expression (without `${{ }}`) over `response` (`status`, `headers`, `body`) of a
    /// refused download, giving the failure's text, e.g. `response.body.message`.
    #[serde(default)]
    error_expression: Option<String>,
}

/// The `http-download` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HttpDownload;

#[async_trait]
impl TypedStep for HttpDownload {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let parts = Parts {
            method: None,
            url: &config.url,
            headers: &config.headers,
            query_params: &config.query_params,
            timeout: config.timeout.as_deref(),
            default_timeout: DEFAULT_TIMEOUT,
        };
        let request = match Request::prepare(ctx, &parts) {
            Ok(request) => request,
            Err(reason) => {
                return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
            }
        };
        let outcome = match download(ctx, &config, &request).await {
            Ok(outcome) | Err(outcome) => outcome,
        };
        request.secrets.scrub_outcome(outcome)
    }
}

async fn download(
    ctx: &StepContext,
    config: &Config,
    request: &Request,
) -> Result<StepOutcome, StepOutcome> {
    let shown = &request.shown;
    let out = resolve(ctx, &config.out_path, true)?;
    if out.is_dir() {
        return Err(StepOutcome::failed(format!(
            "`outPath` `{}` is a directory; name the file to save",
            config.out_path
        )));
    }
    if out.exists() && !config.allow_overwrite {
        return Err(StepOutcome::failed(format!(
            "`{}` exists already; set `allowOverwrite: true` to replace it",
            config.out_path
        )));
    }
    let client = if config.insecure_skip_tls_verify {
        ctx.log(&format!(
            "`{shown}`: TLS certificates are not verified (insecureSkipTLSVerify)"
        ));
        reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .map_err(|e| StepOutcome::errored(format!("cannot build an HTTP client: {e}")))?
    } else {
        ctx.http.clone()
    };
    let partial = out.with_extension("partial");
    let fetch = async {
        let mut response = client
            .get(request.url.clone())
            .timeout(request.timeout)
            .headers(request.headers.clone())
            .send()
            .await
            .map_err(|e| {
                StepOutcome::errored(format!("`{shown}` got no answer: {}", reqwest_error(e)))
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(refused(ctx, config, request, response).await);
        }
        if response.content_length().is_some_and(|n| n > MAX_DOWNLOAD) {
            return Err(too_big(shown));
        }
        if let Some(parent) = partial.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                StepOutcome::errored(format!("cannot create `{}`: {e}", parent.display()))
            })?;
        }
        let mut file = std::fs::File::create(&partial).map_err(|e| {
            StepOutcome::errored(format!("cannot write `{}`: {e}", config.out_path))
        })?;
        let mut written = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            StepOutcome::errored(format!(
                "the download of `{shown}` broke off: {}",
                reqwest_error(e)
            ))
        })? {
            written += chunk.len() as u64;
            if written > MAX_DOWNLOAD {
                return Err(too_big(shown));
            }
            file.write_all(&chunk).map_err(|e| {
                StepOutcome::errored(format!("cannot write `{}`: {e}", config.out_path))
            })?;
        }
        file.sync_all().map_err(|e| {
            StepOutcome::errored(format!("cannot write `{}`: {e}", config.out_path))
        })?;
        Ok(written)
    };
    let result = tokio::select! {
        result = fetch => result,
        () = ctx.cancel.cancelled() => Err(StepOutcome::failed(format!("aborted while downloading `{shown}`"))),
    };
    let written = match result {
        Ok(written) => written,
        Err(outcome) => {
            let _ = std::fs::remove_file(&partial);
            return Err(outcome);
        }
    };
    std::fs::rename(&partial, &out).map_err(|e| {
        StepOutcome::errored(format!(
            "cannot move the download into `{}`: {e}",
            config.out_path
        ))
    })?;
    ctx.log(&format!(
        "downloaded `{shown}` ({written} bytes) to `{}`",
        config.out_path
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// The outcome of a non-2xx answer: 4xx fails, 5xx and 429 are errors (retryable).
async fn refused(
    ctx: &StepContext,
    config: &Config,
    request: &Request,
    response: reqwest::Response,
) -> StepOutcome {
    let status = response.status();
    let shown = &request.shown;
    let why = match read(response, &request.secrets).await {
        Ok(read) => {
            let detail = config.error_expression.as_deref().and_then(|expr| {
                let mut vars = Map::new();
                vars.insert("response".into(), read.value);
                match ctx.exprs.evaluate(expr, &vars) {
                    Ok(Value::String(text)) if !text.trim().is_empty() => Some(text),
                    _ => None,
                }
            });
            match detail {
                Some(text) => format!(": {}", bounded(&request.secrets.scrub(&text), 300)),
                None => format!(" ({})", read.summary),
            }
        }
        Err(_) => String::new(),
    };
    let message = format!(
        "`{shown}` refused the download with status {}{why}",
        status.as_u16()
    );
    if status.is_server_error() || status.as_u16() == 429 {
        StepOutcome::errored(message)
    } else {
        StepOutcome::failed(message)
    }
}

fn too_big(shown: &str) -> StepOutcome {
    StepOutcome::failed(format!(
        "`{shown}` is larger than {} MiB, the most `http-download` saves",
        MAX_DOWNLOAD >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, errored, failed, outputs};
    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    use serde_json::json;

    /// `/chart.tgz` (needs `Authorization: Bearer sekret-token`), `/quota` (a 403 with a
    /// JSON message), `/down` (503).
    async fn serve() -> String {
        let app = Router::new()
            .route(
                "/chart.tgz",
                get(|headers: HeaderMap| async move {
                    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                        Some("Bearer sekret-token") => (StatusCode::OK, "chart bytes".to_owned()),
                        other => (
                            StatusCode::UNAUTHORIZED,
                            format!("bad credentials {other:?}"),
                        ),
                    }
                }),
            )
            .route(
                "/quota",
                get(|| async {
                    (
                        StatusCode::FORBIDDEN,
                        [("content-type", "application/json")],
                        r#"{"error": "quota exceeded for this tenant"}"#,
                    )
                }),
            )
            .route(
                "/down",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "later") }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn downloads_with_headers_and_refuses_to_overwrite_unless_allowed() {
        let base = serve().await;
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let ctx = context(w);
        let config = json!({"url": format!("{base}/chart.tgz"), "outPath": "charts/app.tgz",
                            "headers": [{"name": "Authorization", "value": "Bearer sekret-token"}]});
        outputs(HttpDownload.run(&ctx, config.clone()).await);
        assert_eq!(
            std::fs::read_to_string(w.join("charts/app.tgz")).unwrap(),
            "chart bytes"
        );
        let reason = failed(HttpDownload.run(&ctx, config.clone()).await);
        assert!(reason.contains("set `allowOverwrite: true`"), "{reason}");
        let mut again = config.clone();
        again["allowOverwrite"] = json!(true);
        outputs(HttpDownload.run(&ctx, again).await);
        // A refused download names the status and never shows the token it sent.
        let wrong = json!({"url": format!("{base}/chart.tgz"), "outPath": "x.tgz",
                           "headers": [{"name": "Authorization", "value": "Bearer wrong-token-x"}]});
        let reason = failed(HttpDownload.run(&ctx, wrong).await);
        assert!(
            reason.contains("refused the download with status 401"),
            "{reason}"
        );
        assert!(!reason.contains("wrong-token-x"), "{reason}");
        assert!(!w.join("x.tgz").exists() && !w.join("x.partial").exists());
    }

    /// A server whose every answer says it is 200 MiB long, then ends.
    async fn serve_huge() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 209715200\r\n\r\npartial")
                    .await;
            }
        });
        format!("http://{addr}/huge")
    }

    #[tokio::test]
    async fn refusals_fail_or_error_by_status_and_size_is_bounded() {
        let base = serve().await;
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let quota = json!({"url": format!("{base}/quota"), "outPath": "a",
                           "errorExpression": "response.body.error"});
        let reason = failed(HttpDownload.run(&ctx, quota).await);
        assert!(
            reason
                .ends_with("refused the download with status 403: quota exceeded for this tenant"),
            "{reason}"
        );
        let reason = errored(
            HttpDownload
                .run(&ctx, json!({"url": format!("{base}/down"), "outPath": "b"}))
                .await,
        );
        assert!(reason.contains("status 503"), "{reason}");
        let reason = failed(
            HttpDownload
                .run(&ctx, json!({"url": serve_huge().await, "outPath": "c"}))
                .await,
        );
        assert!(reason.contains("larger than 100 MiB"), "{reason}");
        let reason = failed(
            HttpDownload
                .run(&ctx, json!({"url": "ftp://x/y", "outPath": "d"}))
                .await,
        );
        assert!(reason.contains("is not http(s)"), "{reason}");
        assert!(
            std::fs::read_dir(work.path()).unwrap().next().is_none(),
            "nothing left behind"
        );
    }
}
