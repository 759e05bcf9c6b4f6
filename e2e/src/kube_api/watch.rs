//! Watch streams as the API server sends them: newline-delimited
//! `{"type":…,"object":…}` events in resourceVersion order, filtered by namespace and
//! selectors; `resourceVersion` unset/`0` (initial ADDED events first), `N` (events after N,
//! or an `ERROR` event with a 410 `Expired` Status when compaction forgot N),
//! `sendInitialEvents=true` (initial events, then a bookmark annotated
//! `k8s.io/initial-events-end: "true"`), periodic bookmarks, and `timeoutSeconds`.
//!
//! It owns the streaming; ordering and fan-out are [`super::store`]'s.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::objects;
use super::resources::ResourceType;
use super::routes::Call;
use super::selector::{FieldSelector, LabelSelector};
use super::state::Shared;
use super::status::ApiError;
use super::store::{EventType, WatchFilter, WatchMsg};

/// The longest a watch stays open when the client names no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

fn line(kind: &str, object: &Value) -> bytes::Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    bytes::Bytes::from(text)
}

fn bookmark(ty: &ResourceType, rv: u64, initial_end: bool) -> Value {
    let mut object = json!({
        "kind": ty.kind,
        "apiVersion": ty.api_version(),
        "metadata": {"resourceVersion": rv.to_string(), "creationTimestamp": null},
    });
    if initial_end {
        object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    object
}

fn streaming(body: Body) -> Response {
    let mut response = (axum::http::StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Serves `GET …?watch=true`.
pub(crate) fn watch(shared: &Arc<Shared>, call: &Call) -> Response {
    match open(shared, call) {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

fn open(shared: &Arc<Shared>, call: &Call) -> Result<Response, ApiError> {
    let ty = call.target.ty.clone();
    // `kubectl get -w` asks for Tables: each event then carries a one-row Table.
    let tables = super::table::wants_table(call.header(header::ACCEPT));
    let labels = LabelSelector::parse(call.param("labelSelector").unwrap_or_default())?;
    let fields = FieldSelector::parse(call.param("fieldSelector").unwrap_or_default())?;
    let timeout = call
        .param("timeoutSeconds")
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = call.flag("allowWatchBookmarks");
    let send_initial = call.flag("sendInitialEvents");
    let requested = call.param("resourceVersion").unwrap_or_default();
    let filter = WatchFilter {
        group: ty.group.clone(),
        plural: ty.plural.clone(),
        namespace: (!call.target.namespace.is_empty()).then(|| call.target.namespace.clone()),
        matches: Arc::new(move |object: &Value| {
            labels.matches(&object["metadata"]["labels"]) && fields.matches(object)
        }),
    };
    let mut inner = shared.lock();
    let current = inner.store.revision();
    let snapshot = |inner: &super::state::Inner| -> Vec<WatchMsg> {
        let namespace = filter.namespace.as_deref();
        inner
            .store
            .list(&ty.group, &ty.plural, namespace)
            .into_iter()
            .filter(|object| (filter.matches)(object))
            .map(|object| WatchMsg::Event(EventType::Added, object.clone()))
            .collect()
    };
    let (initial, from) = if send_initial {
        let mut initial = snapshot(&inner);
        initial.push(WatchMsg::Bookmark {
            rv: current,
            initial_end: true,
        });
        (initial, current)
    } else if requested.is_empty() || requested == "0" {
        (snapshot(&inner), current)
    } else {
        let Ok(from) = requested.parse::<u64>() else {
            return Err(ApiError::bad_request(format!(
                "invalid resource version: {requested:?}"
            )));
        };
        (Vec::new(), from)
    };
    let rx = match inner
        .store
        .watch(filter.clone(), Some(from), bookmarks, initial)
    {
        Ok(rx) => rx,
        Err(gone) => {
            let status = ApiError::expired(gone.0, gone.1).body;
            return Ok(streaming(Body::from(line("ERROR", &status))));
        }
    };
    drop(inner);
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = futures_util::stream::unfold(rx, move |mut rx| {
        let ty = ty.clone();
        async move {
            let msg = tokio::time::timeout_at(deadline, rx.recv()).await.ok()??;
            let bytes = match msg {
                WatchMsg::Event(kind, object) if tables => {
                    let rv = object["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|rv| rv.parse().ok())
                        .unwrap_or_default();
                    line(
                        kind.as_str(),
                        &super::table::table(&ty, &[objects::typed(&ty, object)], rv),
                    )
                }
                WatchMsg::Event(kind, object) => line(kind.as_str(), &objects::typed(&ty, object)),
                WatchMsg::Bookmark { rv, initial_end } => {
                    line("BOOKMARK", &bookmark(&ty, rv, initial_end))
                }
            };
            Some((Ok::<_, std::convert::Infallible>(bytes), rx))
        }
    })
    .boxed();
    Ok(streaming(Body::from_stream(stream)))
}

/// Sends bookmarks to every open watch that asked for them, every `interval`, forever.
pub(crate) async fn bookmark_ticker(shared: Arc<Shared>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        shared.lock().store.bookmark_all();
    }
}
