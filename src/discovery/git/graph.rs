//! The mirrors' commit-graphs: a split commit-graph with changed-path Bloom filters,
//! written after each fetch so that the branch search ([`super::search`]) skips the
//! commits that cannot touch its paths.
//!
//! Writing the first graph of a large repository costs more than the fetch did (the
//! Bloom filters diff every commit: about 110 s at 200,000 commits, docs/benchmarks.md),
//! so it is written in the background, outside the mirror's lock: that first discovery
//! answers with a plain `git log -- PATH` walk, as a user's own `git clone` + `git log`
//! would, and later searches use the filters. After later fetches the graph is only
//! extended (the new commits), which is cheap, also in the background, so a promotion
//! waiting for its fetch does not wait for the graph; a fetch while a write still runs
//! leaves its commits to the next fetch's write. Answers never depend on the graph: with
//! or without it, `git log` gives the same commits (tests check both).
//!
//! A write is bounded ([`GRAPH_TIMEOUT`]); one stopped or killed mid-way may leave git's
//! `commit-graph-chain.lock` behind, which [`write`] removes once it is older than that
//! bound (no write of this process can still hold it then).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use super::cli;
use super::error::redact_url;

/// How long writing a mirror's commit-graph may take (a slow write is stopped; the mirror
/// stays usable, searches only lose the Bloom filters' help).
pub(super) const GRAPH_TIMEOUT: Duration = Duration::from_secs(300);

/// The graphs being written in the background, by mirror; each `true` until done.
#[derive(Debug, Default)]
pub(super) struct BackgroundGraphs {
    running: Arc<Mutex<HashMap<PathBuf, watch::Receiver<bool>>>>,
}

impl BackgroundGraphs {
    /// Starts writing `mirror`'s graph in the background (nothing when one is running).
    pub(super) fn start(&self, mirror: &Path, url: &str) {
        let (tx, rx) = watch::channel(true);
        {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            if running.get(mirror).is_some_and(|w| *w.borrow()) {
                return;
            }
            running.insert(mirror.to_owned(), rx);
        }
        let (mirror, url, running) = (mirror.to_owned(), url.to_owned(), self.running.clone());
        tokio::spawn(async move {
            write(&mirror, &url).await;
            running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&mirror);
            let _ = tx.send(false);
        });
    }

    /// Waits (at most `timeout`) until no background write of `mirror`'s graph runs;
    /// whether none does.
    pub(super) async fn settled(&self, mirror: &Path, timeout: Duration) -> bool {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(mirror)
            .cloned();
        let Some(mut running) = running else {
            return true;
        };
        // A dropped sender (the task ended) counts as done.
        tokio::time::timeout(timeout, running.wait_for(|writing| !writing))
            .await
            .is_ok()
    }
}

/// Write (or extend) `mirror`'s split commit-graph with changed-path Bloom filters. A
/// failure only costs speed: it is logged, never returned.
pub(super) async fn write(mirror: &Path, url: &str) {
    remove_stale_lock(mirror).await;
    let args = [
        "commit-graph",
        "write",
        "--reachable",
        "--changed-paths",
        "--split",
        "--no-progress",
    ];
    let outcome = match cli::command(mirror, &args, None) {
        Ok(cmd) => cli::run(cmd, GRAPH_TIMEOUT).await,
        Err(e) => Err(cli::RunError::Spawn(e)),
    };
    let problem = match outcome {
        Ok(ran) if ran.success => return,
        Ok(ran) => ran.stderr,
        Err(cli::RunError::Spawn(e)) => e,
        Err(cli::RunError::TimedOut) => format!("stopped after {}s", GRAPH_TIMEOUT.as_secs()),
    };
    tracing::warn!(url = %redact_url(url), %problem, "could not write the mirror's commit-graph; history searches are slower");
}

/// Removes git's lock on the graph chain when it outlived every write's bound.
async fn remove_stale_lock(mirror: &Path) {
    let lock = mirror.join("objects/info/commit-graphs/commit-graph-chain.lock");
    let Ok(meta) = tokio::fs::metadata(&lock).await else {
        return;
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .unwrap_or_default();
    if age > GRAPH_TIMEOUT {
        tracing::info!(lock = %lock.display(), "removing a commit-graph lock left by a stopped write");
        let _ = tokio::fs::remove_file(&lock).await;
    }
}
