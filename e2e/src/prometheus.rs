//! A Prometheus HTTP API double: the instant-query endpoint analysis metrics use, with
//! Prometheus' paths, parameters, status codes and JSON shapes.
//!
//! - `GET|POST /api/v1/query` with `query` and optional `time` (unix seconds or RFC 3339)
//!   in the URL or, for POST, an `application/x-www-form-urlencoded` body; answers
//!   `{"status":"success","data":{"resultType":"vector","result":[{"metric":{…},
//!   "value":[<unix time>,"<value>"]}]}}` (values as strings: `"0.97"`, `"NaN"`, `"+Inf"`),
//!   or `{"status":"success","data":{"resultType":"scalar","result":[<time>,"<value>"]}}`;
//! - errors as Prometheus sends them: `{"status":"error","errorType":"bad_data",
//!   "error":"…"}` with 400 (`execution` 422, `timeout` and `unavailable` 503, `internal`
//!   500); a missing `query` or an unreadable `time` are `bad_data`.
//!
//! Answers are scripted per query string ([`Prometheus::set`], [`Prometheus::set_sequence`]:
//! a sequence is answered in order, then its last answer repeats). A query nobody scripted
//! returns an empty vector, as a real Prometheus does for a series it does not have.
//! Not modelled: PromQL itself, range queries, `limit`, `stats`, warnings. Test tooling only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::double_server::{Server, bind};
use crate::world::TestWorld;

/// One scripted answer to a query.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A vector with one sample of this value (`f64::NAN` is written `"NaN"`).
    Value(f64),
    /// A vector with one sample per value, labelled `instance="i<n>"`.
    Values(Vec<f64>),
    /// A scalar.
    Scalar(f64),
    /// An empty vector: the series does not exist (yet).
    Empty,
    /// One sample of `value`, but only once the query `other` has been asked too: the
    /// answer is held (at most `wait`) until then, and is an empty vector if it never is.
    /// Two metrics answered so only pass when Dray measures them at the same time.
    AfterQuery {
        /// The query that must be asked before this one is answered.
        other: String,
        /// The value then answered.
        value: f64,
        /// How long the answer is held at most.
        wait: std::time::Duration,
    },
    /// An error of `error_type` (`bad_data`, `execution`, `timeout`, `internal`,
    /// `unavailable`) with Prometheus' status code for it.
    Error {
        /// Prometheus' `errorType`.
        error_type: String,
        /// Prometheus' `error`.
        message: String,
    },
}

impl Answer {
    /// A `bad_data` error, as for a query that does not parse.
    pub fn bad_data(message: &str) -> Self {
        Answer::Error {
            error_type: "bad_data".to_owned(),
            message: message.to_owned(),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    scripts: BTreeMap<String, Vec<Answer>>,
    asked: BTreeMap<String, usize>,
    queries: Vec<String>,
}

type Shared = Arc<Mutex<Inner>>;

/// A running Prometheus double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct Prometheus {
    addr: SocketAddr,
    inner: Shared,
    _server: Server,
    _world: TestWorld,
}

impl Prometheus {
    /// Starts the double on a random loopback port; it keeps `world` alive.
    pub fn start(world: &TestWorld) -> Result<Self> {
        let (listener, addr) = bind("Prometheus double")?;
        let inner: Shared = Arc::default();
        let app = Router::new()
            .route("/api/v1/query", get(query).post(query))
            .fallback(|| async { (StatusCode::NOT_FOUND, "404 page not found\n").into_response() })
            .with_state(Arc::clone(&inner));
        let server = Server::spawn("Prometheus double", listener, addr, app)?;
        Ok(Self {
            addr,
            inner,
            _server: server,
            _world: world.clone(),
        })
    }

    /// `http://127.0.0.1:PORT`, what a metric's `prometheus.address` is set to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers `query` (exactly as sent) with `answer` from now on.
    pub fn set(&self, query: &str, answer: Answer) {
        self.set_sequence(query, vec![answer]);
    }

    /// Answers `query` with `answers` in order, then repeats the last one.
    pub fn set_sequence(&self, query: &str, answers: Vec<Answer>) {
        let mut inner = lock(&self.inner);
        inner.scripts.insert(query.to_owned(), answers);
        inner.asked.remove(query);
    }

    /// Answers `query` with one sample of `value` from now on.
    pub fn set_value(&self, query: &str, value: f64) {
        self.set(query, Answer::Value(value));
    }

    /// Answers `query` with an empty vector from now on.
    pub fn set_empty(&self, query: &str) {
        self.set(query, Answer::Empty);
    }

    /// How many times `query` was asked.
    pub fn queries(&self, query: &str) -> usize {
        lock(&self.inner)
            .queries
            .iter()
            .filter(|q| *q == query)
            .count()
    }

    /// Every query received, oldest first.
    pub fn all_queries(&self) -> Vec<String> {
        lock(&self.inner).queries.clone()
    }
}

fn lock(inner: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn query(
    State(inner): State<Shared>,
    Query(url): Query<Vec<(String, String)>>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Response {
    // Like Go's `r.FormValue`: the body of a POST first, then the URL.
    let mut params = form.map(|Form(f)| f).unwrap_or_default();
    params.extend(url);
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let time = match param("time").filter(|t| !t.is_empty()) {
        None => now(),
        Some(text) => match parse_time(&text) {
            Some(t) => t,
            None => {
                return error(
                    "bad_data",
                    &format!(
                        "invalid parameter \"time\": cannot parse \"{text}\" to a valid timestamp"
                    ),
                );
            }
        },
    };
    let Some(query) = param("query").filter(|q| !q.trim().is_empty()) else {
        return error(
            "bad_data",
            "invalid parameter \"query\": 1:1: parse error: no expression found in input",
        );
    };
    let answer = {
        let mut inner = lock(&inner);
        inner.queries.push(query.clone());
        let n = *inner
            .asked
            .entry(query.clone())
            .and_modify(|n| *n += 1)
            .or_insert(0);
        inner
            .scripts
            .get(&query)
            .map(|answers| answers[n.min(answers.len().saturating_sub(1))].clone())
            .unwrap_or(Answer::Empty)
    };
    let answer = match answer {
        Answer::AfterQuery { other, value, wait } => {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                if lock(&inner).queries.contains(&other) {
                    break Answer::Value(value);
                }
                if tokio::time::Instant::now() >= deadline {
                    break Answer::Empty;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
        answer => answer,
    };
    let sample = |labels: Value, v: f64| json!({"metric": labels, "value": [time, text(v)]});
    let data = match answer {
        Answer::Value(v) => json!({"resultType": "vector", "result": [sample(json!({}), v)]}),
        Answer::Values(values) => {
            let result: Vec<Value> = values
                .iter()
                .enumerate()
                .map(|(i, v)| sample(json!({"instance": format!("i{i}")}), *v))
                .collect();
            json!({"resultType": "vector", "result": result})
        }
        Answer::Scalar(v) => json!({"resultType": "scalar", "result": [time, text(v)]}),
        Answer::Empty | Answer::AfterQuery { .. } => {
            json!({"resultType": "vector", "result": []})
        }
        Answer::Error {
            error_type,
            message,
        } => return error(&error_type, &message),
    };
    axum::Json(json!({"status": "success", "data": data})).into_response()
}

/// Prometheus' status code for an `errorType`.
fn error(error_type: &str, message: &str) -> Response {
    let status = match error_type {
        "bad_data" => StatusCode::BAD_REQUEST,
        "execution" => StatusCode::UNPROCESSABLE_ENTITY,
        "timeout" | "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "canceled" => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        "not_found" => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = json!({"status": "error", "errorType": error_type, "error": message});
    (status, axum::Json(body)).into_response()
}

/// A sample value as Prometheus formats it.
fn text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        v.to_string()
    }
}

fn now() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// Unix seconds (with a fraction) or RFC 3339.
fn parse_time(text: &str) -> Option<f64> {
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds.is_finite().then_some(seconds);
    }
    text.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond() as f64 / 1000.0)
}
