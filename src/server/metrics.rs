//! `GET /metrics`: Dray's counters in the Prometheus text exposition format (version 0.0.4),
//! for a Prometheus scraper and for the controller benchmark.
//!
//! Owns the format and the list of what is exported ([`counters`]); the numbers belong to
//! the modules that count them (the store's [`crate::store::stats`]). To export another
//! counter, add a [`Counter`] to [`counters`]: one family with a name, a help line and one
//! sample per label set (e.g. `dray_reconciles_total{controller="warehouse"}`).
//!
//! Who may read it: anyone who can reach the server, like `/healthz` (door
//! [`super::Door::Open`]), because that is what Prometheus scrapers expect and what a
//! Kubernetes `ServiceMonitor` can do without a token. That is safe only because of what
//! the page says: process-wide counts and nothing else — no project, resource, user or
//! Credential names, no label taken from stored data, no secrets. A counter whose labels
//! would name something a viewer may not see does not belong here.

use std::fmt::Write as _;

use axum::http::header;
use axum::response::IntoResponse;

use crate::store::stats;

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One counter family: `name`, its help line, and its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    /// The metric name, ending in `_total` (`dray_store_reads_total`).
    pub name: &'static str,
    /// What it counts, one line.
    pub help: &'static str,
    /// One value per label set; an unlabelled counter has one sample with no labels.
    pub samples: Vec<Sample>,
}

/// One value of a counter, with its labels (`controller="warehouse"`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Label names and values, in the order they are written.
    pub labels: Vec<(&'static str, String)>,
    /// The count.
    pub value: u64,
}

impl Counter {
    /// A counter without labels.
    pub fn single(name: &'static str, help: &'static str, value: u64) -> Self {
        Counter {
            name,
            help,
            samples: vec![Sample {
                labels: Vec::new(),
                value,
            }],
        }
    }
}

/// Everything `GET /metrics` exports, read now.
pub fn counters() -> Vec<Counter> {
    let store = stats::counts();
    vec![
        Counter::single(
            "dray_store_reads_total",
            "Read calls to the store (get, list, get_many, list_newest, changes_since).",
            store.reads,
        ),
        Counter::single(
            "dray_store_objects_read_total",
            "Objects (or changes) returned by the store's read calls.",
            store.objects_read,
        ),
        Counter::single(
            "dray_store_writes_total",
            "Objects written by the store's successful commits.",
            store.writes,
        ),
        Counter {
            name: "dray_reconciles_total",
            help: "Reconciles started, per controller of the runtime.",
            samples: crate::runtime::metrics::reconcile_counts()
                .into_iter()
                .map(|(controller, value)| Sample {
                    labels: vec![("controller", controller.to_owned())],
                    value,
                })
                .collect(),
        },
    ]
}

/// The text exposition of `counters`: per family a `# HELP` and a `# TYPE … counter` line,
/// then one line per sample.
pub fn render(counters: &[Counter]) -> String {
    let mut text = String::new();
    for counter in counters {
        let _ = writeln!(
            text,
            "# HELP {} {}",
            counter.name,
            escape_help(counter.help)
        );
        let _ = writeln!(text, "# TYPE {} counter", counter.name);
        for sample in &counter.samples {
            text.push_str(counter.name);
            if !sample.labels.is_empty() {
                let labels: Vec<String> = sample
                    .labels
                    .iter()
                    .map(|(name, value)| format!("{name}=\"{}\"", escape_label(value)))
                    .collect();
                let _ = write!(text, "{{{}}}", labels.join(","));
            }
            let _ = writeln!(text, " {}", sample.value);
        }
    }
    text
}

/// The handler of `GET /metrics`.
pub async fn serve() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], render(&counters()))
}

/// A help text as the format wants it: `\` and line feeds escaped.
fn escape_help(text: &str) -> String {
    text.replace('\\', r"\\").replace('\n', r"\n")
}

/// A label value as the format wants it: `\`, `"` and line feeds escaped.
fn escape_label(text: &str) -> String {
    escape_help(text).replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;
    use crate::server::{AppState, AuthMode};
    use crate::store::SqliteStore;

    #[test]
    fn renders_families_with_help_type_and_escaped_labels() {
        let counters = vec![
            Counter::single("dray_store_writes_total", "Objects written.", 7),
            Counter {
                name: "dray_reconciles_total",
                help: "Reconciles, per controller.",
                samples: vec![
                    Sample {
                        labels: vec![("controller", "warehouse".into())],
                        value: 3,
                    },
                    Sample {
                        labels: vec![("controller", "odd \"name\"\\\n".into())],
                        value: 0,
                    },
                ],
            },
        ];
        assert_eq!(
            render(&counters),
            "# HELP dray_store_writes_total Objects written.\n\
             # TYPE dray_store_writes_total counter\n\
             dray_store_writes_total 7\n\
             # HELP dray_reconciles_total Reconciles, per controller.\n\
             # TYPE dray_reconciles_total counter\n\
             dray_reconciles_total{controller=\"warehouse\"} 3\n\
             dray_reconciles_total{controller=\"odd \\\"name\\\"\\\\\\n\"} 0\n"
        );
    }

    /// The value of an unlabelled counter in a scraped page.
    fn value(page: &str, name: &str) -> u64 {
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no sample of `{name}` in:\n{page}"))
            .parse()
            .unwrap()
    }

    async fn scrape(state: &AppState) -> (StatusCode, Option<String>, String) {
        let response = crate::server::test_support::app(state)
            .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let kind = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, kind, String::from_utf8(body.to_vec()).unwrap())
    }

    /// With tokens on, a caller without a token scrapes the counters; a write through the
    /// store shows in them; and the page names no stored object.
    #[tokio::test]
    async fn anyone_scrapes_the_store_counters_and_no_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let state = AppState::for_tests(store.clone(), dir.path(), AuthMode::Token);

        let (status, kind, before) = scrape(&state).await;
        assert_eq!(status, StatusCode::OK, "{before}");
        assert_eq!(kind.as_deref(), Some(CONTENT_TYPE));
        for name in [
            "dray_store_reads_total",
            "dray_store_objects_read_total",
            "dray_store_writes_total",
        ] {
            assert!(
                before.contains(&format!("# TYPE {name} counter\n")),
                "{before}"
            );
        }

        let planted = "metrics-should-not-name-this-project";
        crate::store::Store::create(
            store.as_ref(),
            serde_json::json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                               "metadata": {"name": planted}, "spec": {}}),
        )
        .await
        .unwrap();
        let (_, _, after) = scrape(&state).await;
        assert!(
            value(&after, "dray_store_writes_total") > value(&before, "dray_store_writes_total"),
            "{before}\n→\n{after}"
        );
        assert!(!after.contains(planted), "{after}");
    }
}
