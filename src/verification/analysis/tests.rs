//! Tests of the analysis engine against a local HTTP server that answers as scripted:
//! measurement rules, limits, precedence, empty and NaN results, errors, the schedule and
//! the deadline, and `prepare`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::api::{AnalysisTemplate, AnalysisTemplateSpec, VerificationInfo, VerificationPhase};

/// Answers every request with the next scripted `(status, body)`; the last one repeats.
/// Keeps the request bodies.
struct Scripted {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct Script {
    answers: Arc<Vec<(u16, String)>>,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn answer(State(script): State<Script>, body: String) -> (StatusCode, String) {
    let mut requests = script
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let n = requests.len().min(script.answers.len() - 1);
    requests.push(body);
    let (status, body) = &script.answers[n];
    (StatusCode::from_u16(*status).unwrap(), body.clone())
}

async fn serve(answers: Vec<(u16, String)>) -> Scripted {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let script = Script {
        answers: Arc::new(answers),
        requests: Arc::clone(&requests),
    };
    let app = Router::new().fallback(answer).with_state(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Scripted { url, requests }
}

impl Scripted {
    fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A Prometheus answer with one sample per value (`"NaN"` allowed).
fn vector(values: &[&str]) -> (u16, String) {
    let result: Vec<Value> = values
        .iter()
        .map(|v| json!({"metric": {"pod": "web-1"}, "value": [1767225600.0, v]}))
        .collect();
    let body = json!({"status": "success", "data": {"resultType": "vector", "result": result}});
    (200, body.to_string())
}

fn prometheus_error() -> (u16, String) {
    let body = json!({"status": "error", "errorType": "bad_data",
                      "error": "1:5: parse error: unexpected end of input"});
    (400, body.to_string())
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn minutes(n: i64) -> Timestamp {
    t0().checked_add(jiff::SignedDuration::from_mins(n))
        .unwrap()
}

/// A template named `checks` from a YAML `spec`.
fn template(spec: Value) -> AnalysisTemplate {
    let spec: AnalysisTemplateSpec = serde_json::from_value(spec).unwrap();
    AnalysisTemplate::new("checks", spec)
}

fn prometheus_metric(address: &str, extra: Value) -> Value {
    let mut metric = json!({
        "name": "success-rate",
        "provider": {"prometheus": {"address": address, "query": "sum(rate(ok[5m]))"}},
    });
    for (k, v) in extra.as_object().unwrap() {
        metric[k] = v.clone();
    }
    metric
}

fn specs(metrics: Vec<Value>) -> Vec<MetricSpec> {
    prepare(&[template(json!({"metrics": metrics}))], &BTreeMap::new()).unwrap()
}

fn analyzer() -> Analyzer {
    Analyzer::new(reqwest::Client::new())
}

fn fresh_run() -> VerificationInfo {
    VerificationInfo {
        id: "run-1".into(),
        freight: "abc".into(),
        phase: VerificationPhase::Pending,
        analysis_start_time: Some(crate::api::Time(t0())),
        ..VerificationInfo::default()
    }
}

/// Drives a run to its end from `t0`, calling again at each returned time; the run goes
/// through JSON between calls, as it does through the store. Returns the run and the
/// times of the calls.
async fn run_to_end(
    metrics: &[MetricSpec],
    deadline: Timestamp,
) -> (VerificationInfo, Vec<Timestamp>) {
    let analyzer = analyzer();
    let mut info = fresh_run();
    let mut now = t0();
    let mut calls = vec![now];
    while let Some(next) = analyzer.advance(metrics, &mut info, now, deadline).await {
        assert!(next > now, "the next time {next} must be after {now}");
        info = serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap();
        now = next;
        calls.push(now);
        assert!(calls.len() < 100, "the run does not end: {info:#?}");
    }
    (info, calls)
}

fn far() -> Timestamp {
    minutes(600)
}

#[tokio::test]
async fn failure_limit_is_strict() {
    let server = serve(vec![vector(&["0.2"])]).await;
    let metrics = specs(vec![prometheus_metric(
        &server.url,
        json!({"interval": "1m", "count": 5, "failureLimit": 1, "failureCondition": "result[0] > 0.05"}),
    )]);
    let (info, _) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(metric.phase, VerificationPhase::Failed);
    assert_eq!(metric.message, "failed (2) > failureLimit (1)");
    assert_eq!((metric.count, metric.failed), (2, 2));
    assert_eq!(info.phase, VerificationPhase::Failed);
    assert_eq!(
        info.message,
        "metric `success-rate`: failed (2) > failureLimit (1)"
    );
    assert!(info.finish_time.is_some());
    assert_eq!(server.requests().len(), 2);
    assert_eq!(metric.measurements[0].value, "[0.2]");
    assert_eq!(
        metric.measurements[0].message,
        "failureCondition `result[0] > 0.05` is true"
    );
}

#[tokio::test]
async fn failures_within_the_limit_still_succeed_after_count() {
    let server = serve(vec![vector(&["0.2"]), vector(&["0.01"])]).await;
    let metrics = specs(vec![prometheus_metric(
        &server.url,
        json!({"interval": "1m", "count": 3, "failureLimit": 1, "failureCondition": "result[0] > 0.05"}),
    )]);
    let (info, calls) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(metric.phase, VerificationPhase::Successful, "{metric:#?}");
    assert_eq!((metric.count, metric.failed, metric.successful), (3, 1, 2));
    assert_eq!(info.phase, VerificationPhase::Successful);
    // Measured at t0, then a minute after each measurement finished.
    assert_eq!(calls.len(), 3);
    assert!(calls[1] >= minutes(1) && calls[1] < minutes(2), "{calls:?}");
}

#[test]
fn conditions_combine_as_in_argo_rollouts() {
    use VerificationPhase::*;
    let cache = ExprCache::new();
    let metric = |success: Option<&str>, failure: Option<&str>| {
        let mut m = specs(vec![prometheus_metric("http://127.0.0.1:1", json!({}))]).remove(0);
        m.success_condition = success.map(str::to_owned);
        m.failure_condition = failure.map(str::to_owned);
        m
    };
    let judge =
        |s, f, v: f64| condition::judge(&cache, &metric(s, f), &Observed::Samples(vec![v])).phase;
    let (ok, bad) = (Some("result[0] >= 0.95"), Some("result[0] < 0.5"));
    // The failure condition wins over the success condition.
    assert_eq!(judge(Some("true"), Some("true"), 1.0), Failed);
    assert_eq!(judge(ok, bad, 0.99), Successful);
    assert_eq!(judge(ok, bad, 0.1), Failed);
    // Both set, neither true.
    assert_eq!(judge(ok, bad, 0.7), Inconclusive);
    // A lone success condition that is false fails; a lone failure condition that is
    // false succeeds.
    assert_eq!(judge(ok, None, 0.7), Failed);
    assert_eq!(judge(None, bad, 0.7), Successful);
    assert_eq!(judge(None, None, 0.7), Successful);
    // Ints and doubles compare.
    assert_eq!(judge(Some("result[0] >= 1"), None, 1.0), Successful);
    // Evaluation errors and non-bool conditions are Errors.
    let verdict = condition::judge(
        &cache,
        &metric(Some("result[3] > 0"), None),
        &Observed::Samples(vec![1.0]),
    );
    assert_eq!(verdict.phase, Error);
    assert!(verdict.message.contains("result[3] > 0"), "{verdict:?}");
    assert_eq!(judge(Some("result[0]"), None, 1.0), Error);
    // Empty and NaN are never Successful, whatever the conditions say.
    let empty = condition::judge(&cache, &metric(None, None), &Observed::Samples(vec![]));
    assert_eq!(empty.phase, Inconclusive);
    assert_eq!(empty.message, "query returned no data");
    let nan = condition::judge(
        &cache,
        &metric(Some("true"), None),
        &Observed::Samples(vec![0.99, f64::NAN]),
    );
    assert_eq!(
        (nan.phase, nan.message.as_str()),
        (Inconclusive, "result is NaN")
    );
    let null = condition::judge(&cache, &metric(None, None), &Observed::Json(Value::Null));
    assert_eq!(null.phase, Inconclusive);
}

#[tokio::test]
async fn an_empty_vector_is_inconclusive() {
    let server = serve(vec![vector(&[])]).await;
    // Without conditions any real value would succeed.
    let metrics = specs(vec![prometheus_metric(&server.url, json!({}))]);
    let (info, _) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(metric.phase, VerificationPhase::Inconclusive);
    assert_eq!(metric.message, "inconclusive (1) > inconclusiveLimit (0)");
    assert_eq!(metric.measurements[0].message, "query returned no data");
    assert_eq!(info.phase, VerificationPhase::Inconclusive);
}

#[tokio::test]
async fn nan_is_inconclusive_up_to_the_limit() {
    let server = serve(vec![vector(&["NaN"]), vector(&["0.99"])]).await;
    let metrics = specs(vec![prometheus_metric(
        &server.url,
        json!({"interval": "30s", "count": 2, "inconclusiveLimit": 1,
               "successCondition": "result[0] >= 0.95"}),
    )]);
    let (info, _) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(
        metric.measurements[0].phase,
        VerificationPhase::Inconclusive
    );
    assert_eq!(metric.measurements[0].message, "result is NaN");
    assert_eq!(metric.measurements[0].value, "[NaN]");
    assert_eq!((metric.inconclusive, metric.successful), (1, 1));
    assert_eq!(metric.phase, VerificationPhase::Successful);
}

#[tokio::test]
async fn consecutive_errors_are_reset_by_any_other_measurement() {
    let server = serve(vec![
        prometheus_error(),
        prometheus_error(),
        vector(&["0.99"]),
        prometheus_error(),
        prometheus_error(),
        prometheus_error(),
    ])
    .await;
    let metrics = specs(vec![prometheus_metric(
        &server.url,
        json!({"interval": "1m", "count": 10, "consecutiveErrorLimit": 2,
               "successCondition": "result[0] >= 0.95"}),
    )]);
    let (info, calls) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(metric.phase, VerificationPhase::Error, "{metric:#?}");
    assert!(
        metric
            .message
            .starts_with("consecutiveErrors (3) > consecutiveErrorLimit (2); last error: "),
        "{}",
        metric.message
    );
    // Two errors, a success (reset), three errors: errors do not count as measurements.
    assert_eq!(
        (metric.error, metric.count, metric.consecutive_error),
        (5, 1, 3)
    );
    assert_eq!(calls.len(), 6);
    let error = &metric.measurements[0];
    assert_eq!(error.phase, VerificationPhase::Error);
    assert!(
        error
            .message
            .contains("query failed (bad_data): 1:5: parse error"),
        "{}",
        error.message
    );
    // Errors are retried after ERROR_RETRY rather than the interval.
    let retried = calls[1].duration_since(calls[0]);
    assert!(
        retried >= jiff::SignedDuration::from_secs(10),
        "{retried:?}"
    );
    assert!(retried < jiff::SignedDuration::from_secs(60), "{retried:?}");
    assert_eq!(info.phase, VerificationPhase::Error);
}

#[tokio::test]
async fn the_worst_metric_decides_the_run() {
    let failing = serve(vec![vector(&["0.1"])]).await;
    let erroring = serve(vec![(503, "overloaded".to_owned())]).await;
    let empty = serve(vec![vector(&[])]).await;
    let metric = |name: &str, url: &str, extra: Value| {
        let mut m = prometheus_metric(url, extra);
        m["name"] = json!(name);
        m
    };
    let all = vec![
        metric("empty", &empty.url, json!({})),
        metric(
            "erroring",
            &erroring.url,
            json!({"consecutiveErrorLimit": 0}),
        ),
        metric(
            "failing",
            &failing.url,
            json!({"successCondition": "result[0] > 0.5"}),
        ),
    ];
    let (info, calls) = run_to_end(&specs(all.clone()), far()).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(info.phase, VerificationPhase::Failed);
    assert_eq!(
        info.message,
        "metric `failing`: failed (1) > failureLimit (0)"
    );
    let (info, _) = run_to_end(&specs(all[..2].to_vec()), far()).await;
    assert_eq!(info.phase, VerificationPhase::Error);
    assert!(
        info.message
            .starts_with("metric `erroring`: consecutiveErrors (1) > consecutiveErrorLimit (0)")
    );
    assert!(info.message.contains("HTTP 503"), "{}", info.message);
    let (info, _) = run_to_end(&specs(all[..1].to_vec()), far()).await;
    assert_eq!(info.phase, VerificationPhase::Inconclusive);
}

#[tokio::test]
async fn a_metric_that_ends_badly_stops_the_others() {
    let failing = serve(vec![vector(&["0.1"])]).await;
    let fine = serve(vec![vector(&["0.99"])]).await;
    let mut slow = prometheus_metric(&fine.url, json!({"interval": "1m", "count": 5}));
    slow["name"] = json!("slow");
    let metrics = specs(vec![
        slow,
        prometheus_metric(
            &failing.url,
            json!({"initialDelay": "2m", "successCondition": "result[0] > 0.5"}),
        ),
    ]);
    let (info, calls) = run_to_end(&metrics, far()).await;
    assert_eq!(info.phase, VerificationPhase::Failed);
    assert_eq!(info.metrics[0].phase, VerificationPhase::Aborted);
    assert_eq!(
        info.metrics[0].message,
        "not measured further: metric `success-rate` ended Failed"
    );
    assert!(info.metrics[0].count < 5);
    assert_eq!(calls.last(), Some(&minutes(2)));
}

#[tokio::test]
async fn the_deadline_ends_unfinished_metrics() {
    let server = serve(vec![vector(&["0.99"])]).await;
    let mut counted = prometheus_metric(&server.url, json!({"interval": "10m", "count": 3}));
    counted["name"] = json!("counted");
    let endless = prometheus_metric(&server.url, json!({"interval": "10m"}));
    let deadline = minutes(15);
    let (info, calls) = run_to_end(&specs(vec![endless.clone()]), deadline).await;
    assert_eq!(info.phase, VerificationPhase::Successful);
    assert_eq!(info.metrics[0].count, 2);
    assert_eq!(
        info.metrics[0].message,
        "deadline reached after 2 measurements within the limits"
    );
    assert_eq!(calls.last(), Some(&deadline));

    let (info, _) = run_to_end(&specs(vec![counted, endless]), deadline).await;
    assert_eq!(info.phase, VerificationPhase::Error);
    assert_eq!(
        info.metrics[0].message,
        "deadline passed after 2 of 3 measurements"
    );
    assert_eq!(
        info.message,
        "metric `counted`: deadline passed after 2 of 3 measurements"
    );
}

#[tokio::test]
async fn measurements_wait_for_the_initial_delay_and_keep_the_newest() {
    let server = serve(vec![vector(&["0.99"])]).await;
    let metrics = specs(vec![prometheus_metric(
        &server.url,
        json!({"initialDelay": "5m", "interval": "1m", "count": 12}),
    )]);
    let analyzer = analyzer();
    let mut info = fresh_run();
    let next = analyzer.advance(&metrics, &mut info, t0(), far()).await;
    assert_eq!(next, Some(minutes(5)));
    assert!(server.requests().is_empty());
    assert_eq!(info.phase, VerificationPhase::Running);
    assert_eq!(info.metrics[0].phase, VerificationPhase::Running);
    // Called early (e.g. after a restart): nothing is due yet.
    let again = analyzer
        .advance(&metrics, &mut info, minutes(3), far())
        .await;
    assert_eq!(again, Some(minutes(5)));
    assert!(server.requests().is_empty());
    let (info, _) = run_to_end(&metrics, far()).await;
    let metric = &info.metrics[0];
    assert_eq!(metric.count, 12);
    assert_eq!(metric.measurements.len(), MAX_MEASUREMENTS);
    let first = metric.measurements[0].started_at.as_ref().unwrap().0;
    // Times go through the store at whole seconds: the third measurement started at 7m.
    assert_eq!(first, minutes(7), "{:#?}", metric.measurements);
    // A run that ended is left alone.
    let mut ended = info.clone();
    assert_eq!(
        analyzer.advance(&metrics, &mut ended, far(), far()).await,
        None
    );
    assert_eq!(ended, info);
}

#[tokio::test]
async fn prometheus_gets_the_query_with_args_substituted() {
    let server = serve(vec![vector(&["0.99"])]).await;
    let template = template(json!({
        "args": [{"name": "service"}, {"name": "window", "value": "5m"}],
        "metrics": [{
            "name": "ok",
            "successCondition": "result[0] >= 0.95",
            "provider": {"prometheus": {"address": "{{args.prom}}",
                "query": "sum(rate(ok{service=\"{{args.service}}\"}[{{ args.window }}]))"}}
        }]
    }));
    let mut with_address = template.clone();
    with_address
        .spec
        .args
        .push(crate::api::AnalysisTemplateArg {
            name: "prom".into(),
            value: Some(server.url.clone()),
        });
    let args = BTreeMap::from([("service".to_owned(), "web".to_owned())]);
    let metrics = prepare(&[with_address], &args).unwrap();
    let (info, _) = run_to_end(&metrics, far()).await;
    assert_eq!(info.phase, VerificationPhase::Successful);
    let form = &server.requests()[0];
    let pairs: BTreeMap<String, String> = url_pairs(form);
    assert_eq!(pairs["query"], "sum(rate(ok{service=\"web\"}[5m]))");
    assert!(pairs["time"].parse::<f64>().is_ok(), "{form}");

    let err = prepare(&[template], &args).unwrap_err();
    assert!(matches!(err, AnalysisError::UndeclaredArg { ref arg, .. } if arg == "prom"));
    assert!(err.to_string().starts_with(
        "AnalysisTemplate `checks`, metric `ok`: `provider.prometheus.address` uses `{{args.prom}}`"
    ), "{err}");
}

fn url_pairs(form: &str) -> BTreeMap<String, String> {
    form.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            let decode = |s: &str| {
                let s = s.replace('+', " ");
                let bytes = s.as_bytes();
                let mut out = Vec::new();
                let mut i = 0;
                while i < bytes.len() {
                    if bytes[i] == b'%' && i + 2 < bytes.len() + 1 {
                        let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                        out.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 3;
                    } else {
                        out.push(bytes[i]);
                        i += 1;
                    }
                }
                String::from_utf8(out).unwrap()
            };
            (decode(k), decode(v))
        })
        .collect()
}

#[test]
fn prepare_names_the_missing_arg_and_resolves_defaults() {
    let template = template(json!({
        "args": [{"name": "service"}, {"name": "threshold", "value": "0.9"}],
        "metrics": [{
            "name": "ok",
            "provider": {"web": {"url": "http://x/{{args.service}}?t={{args.threshold}}",
                                 "headers": [{"key": "Authorization", "value": "Bearer {{args.token}}"}]}}
        }]
    }));
    let err = prepare(std::slice::from_ref(&template), &BTreeMap::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "AnalysisTemplate `checks`, metric `ok`: `provider.web.url` uses `{{args.service}}`, \
         which has no value; hint: add `{name: service, value: …}` to the Stage's \
         `verification.args`, or a default `value` to the template's arg `service`"
    );
    let mut with_token = template.clone();
    with_token.spec.args.push(crate::api::AnalysisTemplateArg {
        name: "token".into(),
        value: None,
    });
    let args = BTreeMap::from([
        ("service".to_owned(), "web".to_owned()),
        ("threshold".to_owned(), "0.5".to_owned()),
        ("token".to_owned(), "s3cret".to_owned()),
    ]);
    let metrics = prepare(std::slice::from_ref(&with_token), &args).unwrap();
    let Provider::Web(web) = &metrics[0].provider else {
        panic!("a web metric")
    };
    assert_eq!(web.url, "http://x/web?t=0.5");
    assert_eq!(web.headers[0].1, "Bearer s3cret");
    assert_eq!(web.timeout, Duration::from_secs(10));
    assert!(!format!("{metrics:?}").contains("s3cret"));
    // Two templates with the same metric name.
    let mut other = with_token.clone();
    other.metadata.name = Some("more".into());
    let err = prepare(&[with_token, other], &args).unwrap_err();
    assert!(
        matches!(err, AnalysisError::DuplicateMetric { .. }),
        "{err}"
    );
    // Count without interval, and bad CEL.
    let bad = |metric: Value| {
        prepare(
            &[super::tests::template(json!({"metrics": [metric]}))],
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string()
    };
    let web = json!({"web": {"url": "http://x"}});
    assert!(
        bad(json!({"name": "m", "count": 3, "provider": web}))
            .contains("`count`: more than one measurement needs an `interval`")
    );
    assert!(
        bad(json!({"name": "m", "successCondition": "result >", "provider": web}))
            .contains("`successCondition`: not valid CEL")
    );
    assert!(
        bad(json!({"name": "m", "provider": {}})).contains("exactly one of `web` and `prometheus`")
    );
}

#[test]
fn args_are_substituted_in_conditions_before_they_compile() {
    let template = template(json!({
        "args": [{"name": "min", "value": "0.9"}, {"name": "bad"}],
        "metrics": [{
            "name": "ok",
            "successCondition": "result[0] >= {{args.min}}",
            "failureCondition": "result[0] < {{ args.min }} / 2.0",
            "provider": {"web": {"url": "http://x"}}
        }]
    }));
    let args = BTreeMap::from([("min".to_owned(), "0.5".to_owned())]);
    let metrics = prepare(std::slice::from_ref(&template), &args).unwrap();
    assert_eq!(
        metrics[0].success_condition.as_deref(),
        Some("result[0] >= 0.5")
    );
    assert_eq!(
        metrics[0].failure_condition.as_deref(),
        Some("result[0] < 0.5 / 2.0")
    );
    // The template's default when the Stage gives none.
    let metrics = prepare(std::slice::from_ref(&template), &BTreeMap::new()).unwrap();
    assert_eq!(
        metrics[0].success_condition.as_deref(),
        Some("result[0] >= 0.9")
    );
    // A value that makes the condition no CEL is named with the condition as run.
    let mut words = template.clone();
    words.spec.metrics[0].success_condition = Some("result[0] >= {{args.bad}}".into());
    words.spec.metrics[0].failure_condition = None;
    let args = BTreeMap::from([("bad".to_owned(), "high )".to_owned())]);
    let err = prepare(std::slice::from_ref(&words), &args)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not valid CEL with its args substituted (`result[0] >= high )`)"),
        "{err}"
    );
}

#[tokio::test]
async fn web_metrics_read_the_json_path() {
    let server = serve(vec![
        (200, json!({"data": {"ok": true, "rate": 0.97}}).to_string()),
        (200, json!({"data": {}}).to_string()),
        (502, "bad gateway".to_owned()),
        (200, "not json".to_owned()),
    ])
    .await;
    let metric = |path: &str, condition: &str| {
        json!({"name": "web", "successCondition": condition, "consecutiveErrorLimit": 0,
               "provider": {"web": {"url": format!("{}/status", server.url),
                                    "jsonPath": path,
                                    "headers": [{"key": "X-Token", "value": "t"}]}}})
    };
    let (info, _) = run_to_end(&specs(vec![metric("{$.data.ok}", "result == true")]), far()).await;
    assert_eq!(info.phase, VerificationPhase::Successful);
    assert_eq!(info.metrics[0].measurements[0].value, "true");
    let (info, _) = run_to_end(&specs(vec![metric("{$.data.ok}", "result == true")]), far()).await;
    assert_eq!(info.phase, VerificationPhase::Error);
    assert!(
        info.metrics[0].measurements[0]
            .message
            .starts_with("jsonPath `{$.data.ok}` matched nothing in the answer of GET "),
        "{:?}",
        info.metrics[0].measurements[0]
    );
    let (info, _) = run_to_end(&specs(vec![metric("{$.data.ok}", "result")]), far()).await;
    let message = &info.metrics[0].measurements[0].message;
    assert!(
        message.contains("answered HTTP 502 Bad Gateway: bad gateway"),
        "{message}"
    );
    let (info, _) = run_to_end(&specs(vec![metric("{$.data.ok}", "result")]), far()).await;
    let message = &info.metrics[0].measurements[0].message;
    assert!(message.contains("not JSON"), "{message}");
}

#[tokio::test]
async fn an_unreachable_provider_is_an_error_naming_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let metrics = specs(vec![prometheus_metric(
        &address,
        json!({"consecutiveErrorLimit": 0}),
    )]);
    let (info, _) = run_to_end(&metrics, far()).await;
    assert_eq!(info.phase, VerificationPhase::Error);
    let message = &info.metrics[0].measurements[0].message;
    assert!(
        message.starts_with(&format!("Prometheus at {address}")),
        "{message}"
    );
}

#[test]
fn prometheus_answers_are_read_as_samples() {
    use providers::prometheus::parse;
    let scalar =
        json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "+Inf"]}});
    assert_eq!(parse(&scalar), Ok(Observed::Samples(vec![f64::INFINITY])));
    let matrix = json!({"status": "success", "data": {"resultType": "matrix", "result": []}});
    assert!(parse(&matrix).unwrap_err().contains("returned a matrix"));
    let two = json!({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [1.0, "1"]}, {"metric": {}, "value": [1.0, "0.5"]}]}});
    assert_eq!(parse(&two), Ok(Observed::Samples(vec![1.0, 0.5])));
    let error = json!({"status": "error", "errorType": "timeout", "error": "query timed out"});
    assert_eq!(
        parse(&error),
        Err("query failed (timeout): query timed out".to_owned())
    );
}

/// The seed's Argo Rollouts condition, in expr-lang.
const SEED_CONDITION: &str = "len(result) > 0 && result[0] < 0.05";

/// A template written as Argo Rollouts' (`argoproj.io`): its conditions are expr-lang.
fn argo_template(metrics: Vec<Value>) -> AnalysisTemplate {
    use crate::expr::exprlang::ExprLanguage;
    let mut template = template(json!({"metrics": metrics}));
    template.metadata.annotations = Some(BTreeMap::from([(
        ExprLanguage::ANNOTATION.to_owned(),
        ExprLanguage::ExprLang.as_str().to_owned(),
    )]));
    template
}

#[tokio::test]
async fn argo_rollouts_templates_evaluate_expr_lang_conditions() {
    use crate::expr::exprlang::ExprLanguage;
    for (sample, phase) in [
        ("0.01", VerificationPhase::Successful),
        ("0.2", VerificationPhase::Failed),
    ] {
        let server = serve(vec![vector(&[sample])]).await;
        let metric = prometheus_metric(&server.url, json!({"successCondition": SEED_CONDITION}));
        let metrics = prepare(&[argo_template(vec![metric])], &BTreeMap::new()).unwrap();
        assert_eq!(metrics[0].language, ExprLanguage::ExprLang);
        let (info, _) = run_to_end(&metrics, far()).await;
        let measurement = &info.metrics[0].measurements[0];
        assert_eq!(measurement.phase, phase, "{measurement:?}");
        let verb = if phase == VerificationPhase::Successful {
            "true"
        } else {
            "false"
        };
        assert_eq!(
            measurement.message,
            format!("successCondition `{SEED_CONDITION}` is {verb}")
        );
        assert_eq!(info.phase, phase);
    }
    // A result that is not a list is an Error naming the condition.
    let server = serve(vec![(200, json!({"rate": 0.01}).to_string())]).await;
    let metric = json!({"name": "web", "successCondition": SEED_CONDITION,
                        "consecutiveErrorLimit": 0,
                        "provider": {"web": {"url": server.url}}});
    let metrics = prepare(&[argo_template(vec![metric])], &BTreeMap::new()).unwrap();
    let (info, _) = run_to_end(&metrics, far()).await;
    let measurement = &info.metrics[0].measurements[0];
    assert_eq!(measurement.phase, VerificationPhase::Error);
    assert!(
        measurement
            .message
            .starts_with(&format!("expr-lang expression `{SEED_CONDITION}` failed: ")),
        "{measurement:?}"
    );
    // The same condition in a Dray template is CEL, which has no `len()`.
    let server = serve(vec![vector(&["0.01"])]).await;
    let metric = prometheus_metric(&server.url, json!({"successCondition": SEED_CONDITION}));
    let metrics = specs(vec![metric]);
    assert_eq!(metrics[0].language, ExprLanguage::Cel);
    let (info, _) = run_to_end(&metrics, far()).await;
    assert_eq!(
        info.metrics[0].measurements[0].phase,
        VerificationPhase::Error
    );
}

#[test]
fn prepare_refuses_an_expr_lang_condition_that_does_not_parse() {
    let metric = prometheus_metric(
        "http://127.0.0.1:1",
        json!({"failureCondition": "result[0] >"}),
    );
    let err = prepare(&[argo_template(vec![metric])], &BTreeMap::new()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("not valid expr-lang with its args substituted (`result[0] >`)"),
        "{message}"
    );
}
