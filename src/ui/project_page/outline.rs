//! The outline of a project's Stages: the few fields of every Stage that the project page
//! and its minimap need to choose and place what they draw (the name, where its Freight
//! comes from, the health mark), read in one query ([`Store::list_fields`]) instead of
//! reading and typing thousands of whole Stages. The page then reads whole only the Stages
//! it draws.

use std::sync::Arc;

use serde::Deserialize;

use crate::api::{FreightRequest, HealthState, Kind};
use crate::store::{KeptBy, ObjectFields, Store, StoreError};

/// What [`read`] asks the store for.
const FIELDS: [&str; 3] = [
    "/spec/requestedFreight",
    "/status/health/status",
    "/status/currentFreight/name",
];

/// The outline of one Stage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StageOutline {
    pub name: String,
    /// `spec.requestedFreight`: which Warehouses, and which upstream Stages.
    pub requested_freight: Vec<FreightRequest>,
    /// `status.health.status`, when known.
    pub health: Option<HealthState>,
    /// Whether the Stage holds Freight (`status.currentFreight`).
    pub holds_freight: bool,
}

impl StageOutline {
    /// The Warehouses the Stage takes Freight from.
    pub(crate) fn origins(&self) -> impl Iterator<Item = &str> {
        self.requested_freight
            .iter()
            .map(|r| r.origin.name.as_str())
    }
}

/// The shape of [`FIELDS`] in a Stage.
#[derive(Deserialize, Default)]
struct Picked {
    #[serde(default)]
    spec: PickedSpec,
    #[serde(default)]
    status: PickedStatus,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PickedSpec {
    #[serde(default)]
    requested_freight: Vec<FreightRequest>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PickedStatus {
    health: Option<PickedHealth>,
    current_freight: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct PickedHealth {
    status: Option<HealthState>,
}

/// The outlines worked out of the store's answers, kept while the store gives the same.
static OUTLINES: KeptBy<Vec<ObjectFields>, Vec<StageOutline>> = KeptBy::new();

/// The outline of every Stage of `project`, by name. A Stage whose fields do not parse
/// is left out, as whole reads leave out a Stage that does not match its kind. Shared:
/// while no Stage of the project changed, every request gets the same outline.
pub(crate) async fn read(
    store: &dyn Store,
    project: &str,
) -> Result<Arc<Vec<StageOutline>>, StoreError> {
    let answer = store.list_fields(Kind::Stage, project, &FIELDS).await?;
    Ok(OUTLINES.get_or_derive(&answer, |a| outlines(a)))
}

fn outlines(answer: &[ObjectFields]) -> Vec<StageOutline> {
    answer
        .iter()
        .filter_map(|fields| {
            let picked: Picked = fields.to_typed().ok()?;
            Some(StageOutline {
                name: fields.key.name.clone(),
                requested_freight: picked.spec.requested_freight,
                health: picked.status.health.and_then(|h| h.status),
                holds_freight: picked.status.current_freight.is_some(),
            })
        })
        .collect()
}
