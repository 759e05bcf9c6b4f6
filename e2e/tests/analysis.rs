//! The analysis engine end to end against the Prometheus double, over real HTTP: the
//! query goes out with the Stage's args substituted, an empty vector is Inconclusive
//! (never a success, KARGO-LESSONS 20), failures beyond `failureLimit` fail the run with
//! Argo Rollouts' message, and a `bad_data` error is an Error naming Prometheus' cause.
//! Time is driven by the test (each call at the time the engine asked for), so nothing
//! here waits for a real minute.

use std::collections::BTreeMap;

use anyhow::Result;
use dray::api::{AnalysisTemplate, Time, VerificationInfo, VerificationPhase};
use dray::verification::analysis::{Analyzer, MetricSpec, prepare};
use dray_e2e::TestWorld;
use dray_e2e::prometheus::{Answer, Prometheus};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

const QUERY: &str = r#"sum(rate(http_requests_total{service="web",code!~"5.."}[2m])) / sum(rate(http_requests_total{service="web"}[2m]))"#;

/// The template a user would write, with the Stage's args.
fn metrics(prometheus: &Prometheus, extra: serde_json::Value) -> Result<Vec<MetricSpec>> {
    let mut metric = json!({
        "name": "success-rate",
        "successCondition": "result[0] >= 0.95",
        "provider": {"prometheus": {
            "address": "{{args.prometheus}}",
            "query": "sum(rate(http_requests_total{service=\"{{args.service}}\",code!~\"5..\"}[2m])) / sum(rate(http_requests_total{service=\"{{args.service}}\"}[2m]))"
        }}
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        metric[k] = v.clone();
    }
    let template: AnalysisTemplate = serde_json::from_value(json!({
        "apiVersion": "dray.dev/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "success-rate", "namespace": "demo"},
        "spec": {"args": [{"name": "service"}, {"name": "prometheus"}], "metrics": [metric]}
    }))?;
    let args = BTreeMap::from([
        ("service".to_owned(), "web".to_owned()),
        ("prometheus".to_owned(), prometheus.url()),
    ]);
    Ok(prepare(&[template], &args)?)
}

/// Runs the analysis to its end, each call at the time the previous one asked for, with
/// the run going through JSON in between (as through the store). Returns the run and how
/// many calls it took.
async fn run(metrics: &[MetricSpec]) -> Result<(VerificationInfo, usize)> {
    let start: Timestamp = "2026-03-01T10:00:00Z".parse()?;
    let deadline = start.checked_add(SignedDuration::from_mins(30))?;
    let analyzer = Analyzer::new(dray_e2e::http_client()?);
    let mut info = VerificationInfo {
        id: "e2e".into(),
        freight: "f".into(),
        analysis_start_time: Some(Time(start)),
        ..VerificationInfo::default()
    };
    let mut now = start;
    let mut calls = 1;
    while let Some(next) = analyzer.advance(metrics, &mut info, now, deadline).await {
        anyhow::ensure!(
            next > now && calls < 50,
            "the run does not move on: {info:#?}"
        );
        info = serde_json::from_value(serde_json::to_value(&info)?)?;
        now = next;
        calls += 1;
    }
    Ok((info, calls))
}

#[tokio::test]
async fn an_empty_result_is_inconclusive_never_successful() -> Result<()> {
    let world = TestWorld::new()?;
    let prometheus = Prometheus::start(&world)?;
    // Nothing scripted: Prometheus has no such series yet and answers an empty vector.
    let (info, calls) = run(&metrics(&prometheus, json!({}))?).await?;
    assert_eq!(prometheus.all_queries(), vec![QUERY.to_owned()]);
    assert_eq!(calls, 1);
    assert_eq!(info.phase, VerificationPhase::Inconclusive, "{info:#?}");
    let metric = &info.metrics[0];
    assert_eq!(metric.measurements[0].message, "query returned no data");
    assert_eq!(
        info.message,
        "metric `success-rate`: inconclusive (1) > inconclusiveLimit (0)"
    );

    prometheus.set_value(QUERY, f64::NAN);
    let (info, _) = run(&metrics(&prometheus, json!({}))?).await?;
    assert_eq!(info.phase, VerificationPhase::Inconclusive);
    assert_eq!(info.metrics[0].measurements[0].message, "result is NaN");
    assert_eq!(info.metrics[0].measurements[0].value, "[NaN]");
    Ok(())
}

#[tokio::test]
async fn failures_beyond_the_limit_fail_the_run() -> Result<()> {
    let world = TestWorld::new()?;
    let prometheus = Prometheus::start(&world)?;
    prometheus.set_sequence(
        QUERY,
        vec![
            Answer::Value(0.99),
            Answer::Value(0.90),
            Answer::Value(0.80),
        ],
    );
    let limits = json!({"interval": "1m", "count": 5, "failureLimit": 1});
    let (info, calls) = run(&metrics(&prometheus, limits.clone())?).await?;
    assert_eq!(info.phase, VerificationPhase::Failed, "{info:#?}");
    assert_eq!(
        info.message,
        "metric `success-rate`: failed (2) > failureLimit (1)"
    );
    let metric = &info.metrics[0];
    assert_eq!((metric.count, metric.successful, metric.failed), (3, 1, 2));
    let values: Vec<&str> = metric
        .measurements
        .iter()
        .map(|m| m.value.as_str())
        .collect();
    assert_eq!(values, vec!["[0.99]", "[0.9]", "[0.8]"]);
    assert_eq!(calls, 3);
    assert!(info.finish_time.is_some());

    // One failure is within the limit: five measurements, and the run succeeds.
    prometheus.set_sequence(QUERY, vec![Answer::Value(0.5), Answer::Value(0.97)]);
    let (info, _) = run(&metrics(&prometheus, limits)?).await?;
    assert_eq!(info.phase, VerificationPhase::Successful, "{info:#?}");
    assert_eq!(info.metrics[0].count, 5);
    Ok(())
}

#[tokio::test]
async fn a_prometheus_error_is_an_error_with_its_type() -> Result<()> {
    let world = TestWorld::new()?;
    let prometheus = Prometheus::start(&world)?;
    prometheus.set(
        QUERY,
        Answer::bad_data("1:5: parse error: unexpected character: '~'"),
    );
    let (info, calls) = run(&metrics(
        &prometheus,
        json!({"interval": "1m", "consecutiveErrorLimit": 1}),
    )?)
    .await?;
    assert_eq!(info.phase, VerificationPhase::Error, "{info:#?}");
    assert_eq!(calls, 2);
    let metric = &info.metrics[0];
    assert_eq!((metric.error, metric.consecutive_error), (2, 2));
    let message = &metric.measurements[0].message;
    assert_eq!(
        message,
        &format!(
            "Prometheus at {}: query failed (bad_data): 1:5: parse error: unexpected character: '~'",
            prometheus.url()
        )
    );
    assert!(
        info.message.starts_with(
            "metric `success-rate`: consecutiveErrors (2) > consecutiveErrorLimit (1)"
        ),
        "{}",
        info.message
    );
    Ok(())
}

#[tokio::test]
async fn the_double_answers_as_prometheus_does() -> Result<()> {
    let world = TestWorld::new()?;
    let prometheus = Prometheus::start(&world)?;
    prometheus.set("up", Answer::Values(vec![1.0, f64::INFINITY]));
    let http = dray_e2e::http_client()?;
    let url = format!("{}/api/v1/query", prometheus.url());
    let answer: serde_json::Value = http
        .get(&url)
        .query(&[("query", "up"), ("time", "1700000000.5")])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(answer["status"], "success");
    assert_eq!(answer["data"]["resultType"], "vector");
    assert_eq!(
        answer["data"]["result"][1]["value"],
        json!([1700000000.5, "+Inf"])
    );
    let response = http.post(&url).form(&[("time", "soon")]).send().await?;
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await?;
    assert_eq!(body["status"], "error");
    assert_eq!(body["errorType"], "bad_data");
    let response = http.post(&url).form(&[("query", "")]).send().await?;
    assert_eq!(response.status(), 400);
    Ok(())
}
