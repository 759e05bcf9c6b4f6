//! Test hook, for crash tests only: step barriers. With [`STEP_BARRIER_ENV`]
//! (`DRAY_TEST_STEP_BARRIER_DIR`) naming a directory, the engine can be held at two points
//! of step `i` of any promotion, so that a test can SIGKILL `dray serve` at an exact step
//! boundary:
//!
//! - `ran`: step `i` has run (a push has landed) but its outcome is not yet recorded;
//! - `recorded`: step `i`'s outcome is durably saved in the Promotion's status.
//!
//! A point is armed while `<dir>/arm-<point>-<i>` exists. On reaching an armed point the
//! engine writes `<dir>/reached-<promotion>-<point>-<i>` and waits until
//! `<dir>/release-<promotion>-<point>-<i>` exists, at most [`STEP_BARRIER_TIMEOUT`] (it
//! logs what it waits for, and goes on after the timeout). Unset, nothing is checked.

use std::path::PathBuf;
use std::time::Duration;

/// Test hook: the directory of step barriers (see the module doc). Tests only.
pub const STEP_BARRIER_ENV: &str = "DRAY_TEST_STEP_BARRIER_DIR";

/// How long a step barrier holds a promotion at most before it goes on.
pub const STEP_BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a step barrier holds a promotion.
#[derive(Clone, Copy, Debug)]
pub(super) enum BarrierPoint {
    /// The step ran; its outcome is not recorded yet.
    Ran,
    /// The step's outcome is recorded.
    Recorded,
}

impl BarrierPoint {
    fn name(self) -> &'static str {
        match self {
            BarrierPoint::Ran => "ran",
            BarrierPoint::Recorded => "recorded",
        }
    }
}

/// Test hook: holds the promotion at `point` of step `index` while the test armed it
/// (see the module doc). Does nothing unless [`STEP_BARRIER_ENV`] is set.
pub(super) async fn step_barrier(promotion: &str, point: BarrierPoint, index: usize) {
    let Some(dir) = std::env::var_os(STEP_BARRIER_ENV).filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let point = point.name();
    if !dir.join(format!("arm-{point}-{index}")).exists() {
        return;
    }
    let release = dir.join(format!("release-{promotion}-{point}-{index}"));
    let reached = dir.join(format!("reached-{promotion}-{point}-{index}"));
    if let Err(error) = std::fs::write(&reached, b"") {
        tracing::warn!(%error, file = %reached.display(), "test step barrier: cannot write");
        return;
    }
    tracing::warn!(
        promotion,
        step = index,
        point,
        "test step barrier ({STEP_BARRIER_ENV}): waiting at most {}s for `{}`",
        STEP_BARRIER_TIMEOUT.as_secs(),
        release.display()
    );
    let deadline = tokio::time::Instant::now() + STEP_BARRIER_TIMEOUT;
    while !release.exists() {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                promotion,
                step = index,
                point,
                "test step barrier: timed out; going on"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
