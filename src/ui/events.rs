//! `GET /ui/events?project=p`: server-sent events that tell a page to re-fetch what it
//! shows. An event `change` (data: the store revision) is sent whenever the store's
//! change feed moves for a resource in the project (or the Project itself), at most
//! about four times a second. Comments keep the connection alive every 15 s, and the
//! stream ends after 10 minutes (the browser's `EventSource` reconnects), so no request
//! lives forever and a logged-out session stops receiving; it ends at once when the server
//! begins to stop, so an open tab never holds a shutdown up.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use tokio::time::Instant;

use crate::api::{Kind, Verb};
use crate::server::AppState;
use crate::store::{ChangeFeed, Store};

use super::{UiError, Viewer};

/// How long one stream lasts before the browser reconnects.
const STREAM_LIFETIME: Duration = Duration::from_secs(600);
/// How long one wait on the change feed lasts before the lifetime is checked again.
const FEED_WAIT: Duration = Duration::from_secs(15);
/// The pause after an event, which coalesces a burst of writes into one re-fetch.
const COALESCE: Duration = Duration::from_millis(250);
/// How many changes are read per wake-up; more than this counts as relevant.
const CHANGES_READ: usize = 500;

/// The query of the stream.
#[derive(Deserialize, Debug)]
pub(crate) struct EventsQuery {
    project: String,
}

struct Cursor {
    feed: ChangeFeed,
    revision: u64,
    store: Arc<dyn Store>,
    project: String,
    deadline: Instant,
    sent: bool,
    shutdown: tokio_util::sync::CancellationToken,
}

/// Whether any of the changes after `from` concern `project`.
async fn relevant(store: &dyn Store, project: &str, from: u64) -> bool {
    match store.changes_since(from, CHANGES_READ).await {
        Ok(changes) => {
            changes.len() >= CHANGES_READ
                || changes.iter().any(|c| {
                    c.key.namespace.as_deref() == Some(project)
                        || (c.key.kind == Kind::Project && c.key.name == project)
                })
        }
        // Unknown: let the page re-fetch; it shows any real error itself.
        Err(_) => true,
    }
}

async fn next(mut cursor: Cursor) -> Option<(Result<Event, Infallible>, Cursor)> {
    if cursor.sent {
        tokio::time::sleep(COALESCE).await;
        cursor.sent = false;
    }
    loop {
        let now = Instant::now();
        if now >= cursor.deadline {
            return None;
        }
        let wait = FEED_WAIT.min(cursor.deadline - now);
        let waited = tokio::select! {
            waited = cursor.feed.wait_past(cursor.revision, wait) => waited,
            // The server is stopping: end the stream (the browser reconnects elsewhere).
            () = cursor.shutdown.cancelled() => return None,
        };
        let latest = match waited {
            Some(latest) => latest,
            // A timeout (loop to check the lifetime), or the store closed (end).
            None if Instant::now() >= now + wait => continue,
            None => return None,
        };
        let from = cursor.revision;
        cursor.revision = latest;
        if relevant(cursor.store.as_ref(), &cursor.project, from).await {
            cursor.sent = true;
            let event = Event::default().event("change").data(latest.to_string());
            return Some((Ok(event), cursor));
        }
    }
}

/// `GET /ui/events?project=p`.
pub(crate) async fn stream(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, UiError> {
    viewer
        .caller
        .authorize(
            state.store.as_ref(),
            Verb::List,
            "stages",
            Some(&query.project),
            None,
        )
        .await?;
    let feed = state.store.changes();
    let cursor = Cursor {
        revision: feed.latest(),
        feed,
        store: state.store.clone(),
        project: query.project,
        deadline: Instant::now() + STREAM_LIFETIME,
        sent: false,
        shutdown: state.shutdown.clone(),
    };
    let events = futures::stream::unfold(cursor, next);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
