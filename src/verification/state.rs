//! The two writes a Stage's verification leads to: the Stage's status (with conflict
//! retries) and the Freight's `verifiedIn` (set on success, revoked when a
//! re-verification fails). The transitions themselves are pure functions over the
//! status in `api::verification_run`, re-exported here.

use jiff::Timestamp;

use crate::api::{
    Freight, FreightStatus, Kind, ObjectKey, Stage, StageStatus, Time, VerificationInfo,
    VerificationPhase,
};
use crate::store::{Store, StoreError};

pub use crate::api::verification_run::{DRAY_ACTOR, begin, end, file, verifies};

/// Reads a Stage's status, lets `change` edit it, and writes it back, retrying on
/// conflicts. `change` returns `Ok(None)` when there is nothing to write.
pub async fn modify_stage<T>(
    store: &dyn Store,
    key: &ObjectKey,
    change: impl FnMut(&Stage, &mut StageStatus) -> Result<Option<T>, StoreError>,
) -> Result<Option<T>, StoreError> {
    crate::store::modify_typed_status(store, key, change).await
}

/// Records the end of a verification on its Freight: `Successful` makes it verified in the
/// Stage; `Failed`, `Error` and `Inconclusive` revoke an earlier `verifiedIn` there (a
/// failed re-verification counts); `Aborted` changes nothing.
pub async fn record_on_freight(
    store: &dyn Store,
    project: &str,
    stage: &str,
    run: &VerificationInfo,
) -> Result<(), StoreError> {
    if matches!(
        run.phase,
        VerificationPhase::Aborted | VerificationPhase::Pending | VerificationPhase::Running
    ) {
        return Ok(());
    }
    let key = ObjectKey::namespaced(Kind::Freight, project, &run.freight);
    let recorded = crate::store::modify_typed_status(
        store,
        &key,
        |_: &Freight, status: &mut FreightStatus| {
            if run.phase == VerificationPhase::Successful {
                let entry = status.verified_in.entry(stage.to_owned()).or_default();
                entry.verified_at = run
                    .finish_time
                    .clone()
                    .or_else(|| Some(Time(Timestamp::now())));
                return Ok(Some(()));
            }
            if status.verified_in.remove(stage).is_none() {
                return Ok(None);
            }
            tracing::info!(freight = %run.freight, %stage, phase = ?run.phase, "verifiedIn revoked");
            Ok(Some(()))
        },
    )
    .await;
    match recorded {
        // The Freight was deleted meanwhile: nothing to record on.
        Err(StoreError::NotFound(_)) => Ok(()),
        other => other.map(|_| ()),
    }
}
