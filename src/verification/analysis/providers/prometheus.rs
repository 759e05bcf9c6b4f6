//! The `prometheus` provider: an instant query (`POST /api/v1/query`, form `query` and
//! `time`), as Prometheus' own Go client sends it. `result` is the list of the vector's
//! sample values (a scalar is a one-element list). `status: error` answers, other result
//! types and unreadable answers are errors; an empty vector is returned as an empty list
//! (the judge makes it Inconclusive).

use serde_json::Value;

use super::super::condition::Observed;
use super::super::spec::PrometheusQuery;
use super::{request_error, snippet};

/// Runs `query` now.
pub(crate) async fn measure(
    http: &reqwest::Client,
    query: &PrometheusQuery,
) -> Result<Observed, String> {
    let url = format!("{}/api/v1/query", query.address.trim_end_matches('/'));
    let what = format!("Prometheus at {}", super::endpoint(&query.address));
    let now = jiff::Timestamp::now();
    let time = format!("{:.3}", now.as_millisecond() as f64 / 1000.0);
    let response = http
        .post(&url)
        .timeout(query.timeout)
        .form(&[("query", query.query.as_str()), ("time", time.as_str())])
        .send()
        .await
        .map_err(|e| request_error(&what, &e, query.timeout))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| request_error(&what, &e, query.timeout))?;
    let Ok(answer) = serde_json::from_str::<Value>(&body) else {
        return Err(format!(
            "{what} answered HTTP {status} with a body that is not Prometheus' JSON: {}",
            snippet(&body)
        ));
    };
    parse(&answer).map_err(|e| format!("{what}: {e}"))
}

/// Reads a query answer (`{status, data: {resultType, result}}` or `{status: "error",
/// errorType, error}`).
pub(crate) fn parse(answer: &Value) -> Result<Observed, String> {
    match answer.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            let kind = answer
                .get("errorType")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let error = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(format!("query failed ({kind}): {error}"));
        }
        _ => {
            return Err(format!(
                "unexpected answer: {}",
                snippet(&answer.to_string())
            ));
        }
    }
    let data = answer.get("data").unwrap_or(&Value::Null);
    let result = data.get("result").unwrap_or(&Value::Null);
    match data.get("resultType").and_then(Value::as_str) {
        Some("vector") => {
            let samples = result
                .as_array()
                .ok_or("`data.result` of a vector is not a list")?;
            samples
                .iter()
                .map(|s| sample(s.get("value")))
                .collect::<Result<Vec<f64>, String>>()
                .map(Observed::Samples)
        }
        Some("scalar") => Ok(Observed::Samples(vec![sample(Some(result))?])),
        Some(other) => Err(format!(
            "the query returned a {other}; write a query that returns an instant vector or a scalar"
        )),
        None => Err("the answer has no `data.resultType`".to_owned()),
    }
}

/// `[<unix time>, "<value>"]` → the value (`NaN`, `+Inf` included).
fn sample(pair: Option<&Value>) -> Result<f64, String> {
    let text = pair
        .and_then(|p| p.get(1))
        .and_then(Value::as_str)
        .ok_or("a sample is not `[<time>, \"<value>\"]`")?;
    text.parse::<f64>()
        .map_err(|_| format!("sample value `{text}` is not a number"))
}
