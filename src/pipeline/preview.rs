//! Previewing a promotion (`dray promote --dry-run`, `POST …/stages/{stage}/preview`, the
//! web UI's confirmation): the same door as a promotion — `who` needs `promote` on the Stage
//! (a preview shows rendered manifests), and `override` to preview through a closed window
//! with a reason — and the same gates, whose refusals are reported beside the diff rather
//! than stopping it; then the engine runs the Stage's steps in a throwaway work directory
//! up to the first step that writes ([`Engine::preview`]). Nothing is stored: the Promotion
//! a preview runs exists in memory only, so no Promotion counts.

use serde::Serialize;

use crate::api::{Freight, Promotion};
use crate::promotion::engine::PreviewReport;
use crate::promotion::{Engine, EngineError};
use crate::store::Store;

use super::door::Authorizer;
use super::request::{PromoteError, PromoteRequest, check_gates, promotion_name, promotion_object};

/// What a preview shows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The Stage.
    pub stage: String,
    /// The Freight's id.
    pub freight: String,
    /// The Freight's alias.
    pub alias: String,
    /// Why the gates would refuse the promotion now, each with what lifts it (empty: it
    /// may go).
    pub refusals: Vec<String>,
    /// What the steps before the first writing one did, and the diff they left.
    #[serde(flatten)]
    pub report: PreviewReport,
}

/// Why there is no preview.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The door said no before any gate: no such Stage or Freight, not allowed, a plan
    /// that does not build.
    #[error(transparent)]
    Promote(#[from] PromoteError),
    /// The steps could not be run or diffed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Previews `request` as `who`: see the module doc.
pub async fn preview_promotion(
    store: &dyn Store,
    engine: &Engine,
    who: &dyn Authorizer,
    project: &str,
    request: &PromoteRequest,
) -> Result<Preview, PreviewError> {
    let checked = check_gates(store, who, project, request).await?;
    let name = format!(
        "preview-{}",
        promotion_name(&request.stage, &checked.freight.spec.alias)
    );
    let object =
        promotion_object(store, who, project, &name, &checked.stage, &checked.freight).await?;
    let promotion: Promotion = serde_json::from_value(object)
        .map_err(|e| PromoteError::Store(crate::store::StoreError::Internal(e.to_string())))?;
    let freight: &Freight = &checked.freight;
    let report = engine.preview(promotion, freight).await?;
    Ok(Preview {
        stage: request.stage.clone(),
        freight: freight.metadata.name.clone().unwrap_or_default(),
        alias: freight.spec.alias.clone(),
        refusals: checked.reasons,
        report,
    })
}
