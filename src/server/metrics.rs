//! `GET /metrics`: Dray's numbers in the Prometheus text exposition format (version
//! 0.0.4), for a Prometheus scraper and for the controller benchmark.
//!
//! Owns the format and the list of what is exported ([`families`]); the numbers belong to
//! the modules that count them: the store's [`crate::store::stats`], the runtime's
//! reconciles ([`crate::runtime::metrics`]), promotions, steps and discovery
//! ([`crate::runtime::instruments`]), and, read from the store at each scrape, the queues
//! and the DORA numbers of every Stage ([`crate::pipeline::dora`], over
//! [`DORA_DAYS`] days). To export another number, add a [`Family`] to [`families`].
//!
//! Who may read it: anyone who can reach the address it is served on, like `/healthz`
//! (door [`super::Door::Open`]), because that is what Prometheus scrapers expect and what a
//! Kubernetes `ServiceMonitor` can do without a token; `dray serve --metrics-listen ADDR`
//! serves it on its own address instead (and the main listener answers 404 for it), to
//! keep it off a public listener. The trade-off (docs/threat-model.md, "Metrics"): the
//! labels name projects, Stages, Warehouses and step kinds — names become visible to
//! whoever reaches `/metrics` — but never users, Credentials, messages or secrets.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::{ApiError, AppState};
use crate::api::Kind;
use crate::pipeline::dora;
use crate::runtime::instruments::{self, DURATION_BUCKETS, HistogramSnapshot, LabelValues};
use crate::store::{Store, stats};

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The window, in days, of the DORA gauges.
pub const DORA_DAYS: u32 = 30;

/// What a family is, as its `# TYPE` line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    /// Only grows (its name ends in `_total`).
    Counter,
    /// A value now.
    Gauge,
    /// Observations in buckets, with `_bucket`, `_sum` and `_count` samples.
    Histogram,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// One family: `name`, its help line, its type, and its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The metric name (`dray_store_reads_total`).
    pub name: &'static str,
    /// What it measures, one line.
    pub help: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricType,
    /// The samples; an unlabelled counter has one sample with no labels.
    pub samples: Vec<Sample>,
}

/// One value, with its labels (`controller="warehouse"`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Added to the family's name (`_bucket`, `_sum`, `_count` of a histogram; else empty).
    pub suffix: &'static str,
    /// Label names and values, in the order they are written.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

impl Family {
    /// A counter without labels.
    pub fn single(name: &'static str, help: &'static str, value: u64) -> Self {
        Family::counter(name, help, vec![(Vec::new(), value)])
    }

    /// A counter with one sample per label set.
    pub fn counter(
        name: &'static str,
        help: &'static str,
        samples: Vec<(Vec<(&'static str, String)>, u64)>,
    ) -> Self {
        Family {
            name,
            help,
            kind: MetricType::Counter,
            samples: samples
                .into_iter()
                .map(|(labels, value)| Sample {
                    suffix: "",
                    labels,
                    value: value as f64,
                })
                .collect(),
        }
    }

    /// A gauge with one sample per label set.
    pub fn gauge(
        name: &'static str,
        help: &'static str,
        samples: Vec<(Vec<(&'static str, String)>, f64)>,
    ) -> Self {
        Family {
            name,
            help,
            kind: MetricType::Gauge,
            samples: samples
                .into_iter()
                .map(|(labels, value)| Sample {
                    suffix: "",
                    labels,
                    value,
                })
                .collect(),
        }
    }

    /// A histogram with one set of buckets per label set.
    pub fn histogram(
        name: &'static str,
        help: &'static str,
        series: Vec<(Vec<(&'static str, String)>, HistogramSnapshot)>,
    ) -> Self {
        let mut samples = Vec::new();
        for (labels, histogram) in series {
            let bucket = |le: String, value: u64| {
                let mut labels = labels.clone();
                labels.push(("le", le));
                Sample {
                    suffix: "_bucket",
                    labels,
                    value: value as f64,
                }
            };
            for (bound, count) in DURATION_BUCKETS.iter().zip(&histogram.buckets) {
                samples.push(bucket(bound.to_string(), *count));
            }
            samples.push(bucket("+Inf".to_owned(), histogram.count));
            samples.push(Sample {
                suffix: "_sum",
                labels: labels.clone(),
                value: histogram.sum,
            });
            samples.push(Sample {
                suffix: "_count",
                labels,
                value: histogram.count as f64,
            });
        }
        Family {
            name,
            help,
            kind: MetricType::Histogram,
            samples,
        }
    }
}

/// `names` zipped with `values`: a sample's labels.
fn labelled(names: &[&'static str], values: &LabelValues) -> Vec<(&'static str, String)> {
    names.iter().copied().zip(values.iter().cloned()).collect()
}

/// The process's counters and histograms, read now.
pub fn process_families() -> Vec<Family> {
    let store = stats::counts();
    let recorded = instruments::snapshot();
    let counter = |map: std::collections::BTreeMap<LabelValues, u64>, names: &[&'static str]| {
        map.into_iter()
            .map(|(values, count)| (labelled(names, &values), count))
            .collect()
    };
    let histogram = |map: std::collections::BTreeMap<LabelValues, HistogramSnapshot>,
                     names: &[&'static str]| {
        map.into_iter()
            .map(|(values, h)| (labelled(names, &values), h))
            .collect()
    };
    vec![
        Family::single(
            "dray_store_reads_total",
            "Read calls to the store (get, list, get_many, list_newest, changes_since).",
            store.reads,
        ),
        Family::single(
            "dray_store_objects_read_total",
            "Objects (or changes) returned by the store's read calls.",
            store.objects_read,
        ),
        Family::single(
            "dray_store_writes_total",
            "Objects written by the store's successful commits.",
            store.writes,
        ),
        Family::counter(
            "dray_reconciles_total",
            "Reconciles ended (their writes made), per controller of the runtime.",
            crate::runtime::metrics::reconcile_counts()
                .into_iter()
                .map(|(controller, value)| (vec![("controller", controller.to_owned())], value))
                .collect(),
        ),
        Family::counter(
            "dray_promotions_total",
            "Promotions that ended in this process, per project, Stage and phase.",
            counter(recorded.promotions, &["project", "stage", "phase"]),
        ),
        Family::histogram(
            "dray_promotion_duration_seconds",
            "How long promotions ran, start to end, per project and Stage.",
            histogram(recorded.promotion_seconds, &["project", "stage"]),
        ),
        Family::histogram(
            "dray_step_duration_seconds",
            "How long promotion steps ran, per step kind.",
            histogram(recorded.step_seconds, &["step"]),
        ),
        Family::histogram(
            "dray_discovery_duration_seconds",
            "How long a Warehouse's discovery took, per project and Warehouse.",
            histogram(recorded.discovery_seconds, &["project", "warehouse"]),
        ),
        Family::counter(
            "dray_discovery_errors_total",
            "Discoveries that left the Warehouse not Ready, per project and Warehouse.",
            counter(recorded.discovery_errors, &["project", "warehouse"]),
        ),
    ]
}

/// The queues and DORA numbers of every Stage of every project, read from `store` now.
pub async fn stored_families(store: &dyn Store) -> Result<Vec<Family>, ApiError> {
    let now = jiff::Timestamp::now();
    let mut queued = Vec::new();
    let mut frequency = Vec::new();
    let mut lead = Vec::new();
    let mut failure = Vec::new();
    let mut restore = Vec::new();
    for project in store.list(Kind::Project, None).await? {
        let project = project.key.name;
        let numbers = dora::read::project_numbers(store, &project, now, DORA_DAYS).await?;
        let labels = |stage: &str| vec![("project", project.clone()), ("stage", stage.to_owned())];
        for (stage, count) in &numbers.queued {
            queued.push((labels(stage), f64::from(*count)));
        }
        for stage in &numbers.stages {
            frequency.push((labels(&stage.stage), stage.deployment_frequency));
            if let Some(value) = stage.lead_time_seconds {
                lead.push((labels(&stage.stage), value));
            }
            if let Some(value) = stage.change_failure_ratio {
                failure.push((labels(&stage.stage), value));
            }
            if let Some(value) = stage.time_to_restore_seconds {
                restore.push((labels(&stage.stage), value));
            }
        }
    }
    Ok(vec![
        Family::gauge(
            "dray_promotion_queue_length",
            "Promotions pending in each Stage's queue.",
            queued,
        ),
        Family::gauge(
            "dray_dora_deployment_frequency",
            "Succeeded promotions into the Stage per day, over the last 30 days.",
            frequency,
        ),
        Family::gauge(
            "dray_dora_lead_time_seconds",
            "Median time from the Freight's newest image build to its promotion into the Stage, last 30 days.",
            lead,
        ),
        Family::gauge(
            "dray_dora_change_failure_ratio",
            "Share of the Stage's promotions whose Freight then failed verification there, last 30 days.",
            failure,
        ),
        Family::gauge(
            "dray_dora_time_to_restore_seconds",
            "Median time from a failed verification in the Stage to the next successful one, last 30 days.",
            restore,
        ),
    ])
}

/// The text exposition of `families`: per family a `# HELP` and a `# TYPE` line, then
/// one line per sample.
pub fn render(families: &[Family]) -> String {
    let mut text = String::new();
    for family in families {
        let _ = writeln!(text, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind.as_str());
        for sample in &family.samples {
            text.push_str(family.name);
            text.push_str(sample.suffix);
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
pub async fn serve(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let mut families = process_families();
    // The scrape's own reads are not counted: it must not move what it reports.
    families.extend(stats::uncounted(stored_families(state.store.as_ref())).await?);
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], render(&families)))
}

/// `GET /metrics` of `dray controller`'s health listener: the process's counters and
/// histograms only (the queues and DORA numbers are `dray serve`'s, which reads the store).
pub async fn serve_process() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        render(&process_families()),
    )
}

/// The router of `dray serve --metrics-listen`: `GET /metrics` and nothing else.
pub fn own_router(state: AppState) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(serve))
        .with_state(state)
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
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use jiff::{SignedDuration, Timestamp};
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::*;
    use crate::api::ObjectKey;
    use crate::server::{AppState, AuthMode};
    use crate::store::SqliteStore;

    #[test]
    fn renders_families_with_help_type_and_escaped_labels() {
        let families = vec![
            Family::single("dray_store_writes_total", "Objects written.", 7),
            Family::counter(
                "dray_reconciles_total",
                "Reconciles, per controller.",
                vec![
                    (vec![("controller", "warehouse".into())], 3),
                    (vec![("controller", "odd \"name\"\\\n".into())], 0),
                ],
            ),
            Family::gauge(
                "dray_dora_change_failure_ratio",
                "Share.",
                vec![(
                    vec![("project", "demo".into()), ("stage", "prod".into())],
                    0.25,
                )],
            ),
        ];
        assert_eq!(
            render(&families),
            "# HELP dray_store_writes_total Objects written.\n\
             # TYPE dray_store_writes_total counter\n\
             dray_store_writes_total 7\n\
             # HELP dray_reconciles_total Reconciles, per controller.\n\
             # TYPE dray_reconciles_total counter\n\
             dray_reconciles_total{controller=\"warehouse\"} 3\n\
             dray_reconciles_total{controller=\"odd \\\"name\\\"\\\\\\n\"} 0\n\
             # HELP dray_dora_change_failure_ratio Share.\n\
             # TYPE dray_dora_change_failure_ratio gauge\n\
             dray_dora_change_failure_ratio{project=\"demo\",stage=\"prod\"} 0.25\n"
        );
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_an_inf_bucket_a_sum_and_a_count() {
        let mut buckets = vec![0; DURATION_BUCKETS.len()];
        for (bound, count) in DURATION_BUCKETS.iter().zip(buckets.iter_mut()) {
            *count = u64::from(*bound >= 1.0);
        }
        let family = Family::histogram(
            "dray_step_duration_seconds",
            "Steps.",
            vec![(
                vec![("step", "git-clone".into())],
                HistogramSnapshot {
                    buckets,
                    count: 2,
                    sum: 7200.5,
                },
            )],
        );
        let text = render(&[family]);
        assert!(
            text.contains("# TYPE dray_step_duration_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("dray_step_duration_seconds_bucket{step=\"git-clone\",le=\"0.5\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("dray_step_duration_seconds_bucket{step=\"git-clone\",le=\"1\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dray_step_duration_seconds_bucket{step=\"git-clone\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("dray_step_duration_seconds_sum{step=\"git-clone\"} 7200.5\n"),
            "{text}"
        );
        assert!(
            text.contains("dray_step_duration_seconds_count{step=\"git-clone\"} 2\n"),
            "{text}"
        );
    }

    /// One sample of a scraped page.
    #[derive(Debug)]
    pub(crate) struct Scraped {
        pub(crate) name: String,
        pub(crate) labels: BTreeMap<String, String>,
        pub(crate) value: f64,
    }

    /// Parses a page of the text format: every sample must belong to a family declared by
    /// `# HELP` and `# TYPE` before it (a histogram's by its `_bucket`/`_sum`/`_count`
    /// names), with well-formed labels and a number. Returns family → type and the samples.
    pub(crate) fn parse(page: &str) -> (BTreeMap<String, String>, Vec<Scraped>) {
        let mut types = BTreeMap::new();
        let mut helped = std::collections::BTreeSet::new();
        let mut samples = Vec::new();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').expect("a help text");
                helped.insert(name.to_owned());
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("a type");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert!(helped.contains(name), "TYPE before HELP: {line}");
                types.insert(name.to_owned(), kind.to_owned());
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("not a number: {line}"));
            let (name, labels) = match series.split_once('{') {
                None => (series.to_owned(), BTreeMap::new()),
                Some((name, rest)) => {
                    let body = rest.strip_suffix('}').expect("labels end with }");
                    let mut labels = BTreeMap::new();
                    let mut chars = body.chars().peekable();
                    while chars.peek().is_some() {
                        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                        assert_eq!(chars.next(), Some('"'), "{line}");
                        let mut value = String::new();
                        while let Some(c) = chars.next() {
                            match c {
                                '\\' => match chars.next() {
                                    Some('n') => value.push('\n'),
                                    Some(other) => value.push(other),
                                    None => panic!("{line}"),
                                },
                                '"' => break,
                                c => value.push(c),
                            }
                        }
                        if chars.peek() == Some(&',') {
                            chars.next();
                        }
                        labels.insert(key, value);
                    }
                    (name.to_owned(), labels)
                }
            };
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    let base = name.strip_suffix(suffix)?;
                    (types.get(base).map(String::as_str) == Some("histogram"))
                        .then(|| base.to_owned())
                })
                .unwrap_or_else(|| name.clone());
            assert!(
                types.contains_key(&family),
                "a sample of no declared family: {line}"
            );
            samples.push(Scraped {
                name,
                labels,
                value,
            });
        }
        (types, samples)
    }

    /// The value of the sample `name` with exactly these labels.
    pub(crate) fn sample(samples: &[Scraped], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
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
        let body = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        (status, kind, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn put(store: &dyn Store, object: Value, status: Option<Value>) {
        let stored = store.create(object).await.unwrap();
        if let Some(status) = status {
            store
                .update_status(&stored.key, status, None)
                .await
                .unwrap();
        }
    }

    /// Plants in `project` a Stage `prod` with two Succeeded promotions (Freight `f1`,
    /// built 5h before its promotion 30h ago, and `f2`, promoted 10h ago), one pending,
    /// and a verification of `f1` that failed 29h ago, restored by `f2`'s 9h ago.
    pub(crate) async fn plant_history(store: &dyn Store, project: &str) {
        let now = Timestamp::now();
        let at = |hours_ago: i64| (now - SignedDuration::from_hours(hours_ago)).to_string();
        let meta = |name: &str| json!({"name": name, "namespace": project});
        put(
            store,
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                          "metadata": {"name": project}, "spec": {}}),
            None,
        )
        .await;
        put(
            store,
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage", "metadata": meta("prod"),
            "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                           "sources": {"direct": true}}]}}),
            Some(json!({"verificationHistory": [
                {"id": "v2", "freight": "f2", "phase": "Successful", "finishTime": at(9)},
                {"id": "v1", "freight": "f1", "phase": "Failed", "finishTime": at(29)},
            ]})),
        )
        .await;
        for (name, built) in [("f1", Some(at(35))), ("f2", None)] {
            let mut image =
                json!({"repoURL": "reg/app", "tag": name, "digest": format!("sha256:{name}")});
            if let Some(built) = built {
                image["createdAt"] = json!(built);
            }
            put(
                store,
                json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight", "metadata": meta(name),
                "alias": name, "origin": {"kind": "Warehouse", "name": "app"}, "images": [image]}),
                None,
            )
            .await;
        }
        for (name, freight, status) in [
            (
                "p1",
                "f1",
                json!({"phase": "Succeeded", "startedAt": at(31), "finishedAt": at(30)}),
            ),
            (
                "p2",
                "f2",
                json!({"phase": "Succeeded", "startedAt": at(11), "finishedAt": at(10)}),
            ),
            ("p3", "f2", json!({"phase": "Pending"})),
        ] {
            put(store, json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion", "metadata": meta(name),
                "spec": {"stage": "prod", "freight": freight}}), Some(status)).await;
        }
    }

    /// With tokens on, a caller without a token scrapes the page; every family parses; a
    /// write through the store moves the store's counters; a project's history shows as
    /// its queue and DORA gauges, labelled by project and Stage; a promotion that ends
    /// moves `dray_promotions_total`; and no secret nor user name is on the page.
    #[tokio::test]
    async fn anyone_scrapes_parseable_families_that_move_and_name_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let state = AppState::for_tests(store.clone(), dir.path(), AuthMode::Token);

        let (status, kind, before) = scrape(&state).await;
        assert_eq!(status, StatusCode::OK, "{before}");
        assert_eq!(kind.as_deref(), Some(CONTENT_TYPE));
        let (types, samples_before) = parse(&before);
        for (name, kind) in [
            ("dray_store_reads_total", "counter"),
            ("dray_store_writes_total", "counter"),
            ("dray_reconciles_total", "counter"),
            ("dray_promotions_total", "counter"),
            ("dray_promotion_duration_seconds", "histogram"),
            ("dray_step_duration_seconds", "histogram"),
            ("dray_discovery_duration_seconds", "histogram"),
            ("dray_discovery_errors_total", "counter"),
            ("dray_promotion_queue_length", "gauge"),
            ("dray_dora_deployment_frequency", "gauge"),
            ("dray_dora_lead_time_seconds", "gauge"),
            ("dray_dora_change_failure_ratio", "gauge"),
            ("dray_dora_time_to_restore_seconds", "gauge"),
        ] {
            assert_eq!(
                types.get(name).map(String::as_str),
                Some(kind),
                "{name} in:\n{before}"
            );
        }

        let project = "metrics-test-project";
        plant_history(store.as_ref(), project).await;
        put(
            store.as_ref(),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
            "metadata": {"name": "registry", "namespace": project},
            "spec": {"type": "image", "repoURL": "reg/app", "username": "robot-user-planted",
                     "password": "planted-secret-value"}}),
            None,
        )
        .await;
        // What the engine records when a promotion of `prod` ends.
        crate::runtime::instruments::record_promotion(
            project,
            "prod",
            "Succeeded",
            Some(std::time::Duration::from_secs(3)),
        );
        let (_, _, after) = scrape(&state).await;
        let (_, samples) = parse(&after);
        let value = |s: &[Scraped], name| sample(s, name, &[]).unwrap_or_else(|| panic!("{name}"));
        assert!(
            value(&samples, "dray_store_writes_total")
                > value(&samples_before, "dray_store_writes_total"),
            "{before}\n→\n{after}"
        );
        let prod = [("project", project), ("stage", "prod")];
        assert_eq!(
            sample(&samples, "dray_promotion_queue_length", &prod),
            Some(1.0),
            "{after}"
        );
        assert_eq!(
            sample(&samples, "dray_dora_deployment_frequency", &prod),
            Some(2.0 / f64::from(DORA_DAYS)),
            "{after}"
        );
        assert_eq!(
            sample(&samples, "dray_dora_lead_time_seconds", &prod),
            Some(5.0 * 3600.0)
        );
        assert_eq!(
            sample(&samples, "dray_dora_change_failure_ratio", &prod),
            Some(0.5)
        );
        let restore = sample(&samples, "dray_dora_time_to_restore_seconds", &prod).unwrap();
        assert!((restore - 20.0 * 3600.0).abs() < 1.0, "{restore}");
        let succeeded = [
            ("project", project),
            ("stage", "prod"),
            ("phase", "Succeeded"),
        ];
        assert_eq!(
            sample(&samples, "dray_promotions_total", &succeeded),
            Some(1.0),
            "{after}"
        );
        assert_eq!(
            sample(&samples, "dray_promotion_duration_seconds_count", &prod),
            Some(1.0),
            "{after}"
        );
        for hidden in ["planted-secret-value", "robot-user-planted", "admin"] {
            assert!(
                !after.contains(hidden),
                "`{hidden}` is on the page:\n{after}"
            );
        }
        assert!(
            store
                .get(&ObjectKey::cluster(Kind::Project, project))
                .await
                .unwrap()
                .is_some()
        );
    }
}
