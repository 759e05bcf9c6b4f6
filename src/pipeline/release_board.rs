//! The release board: what runs where across projects, and what is stuck. One row per
//! project, one column per Stage name in pipeline order (each project's own order, the
//! columns merged across projects by name), each cell the Freight in that Stage (alias,
//! image tags, short config commit, since when), its health and verification, the
//! Promotion running or last run, whether it is held or frozen, and the downstream
//! Stages that do not have its Freight yet.
//!
//! This is the one board model: `GET /api/v1/board`, the web UI's `/` and
//! `dray get board` only show what [`release_board`] says. [`BoardFilter::parse`] checks
//! the filters they all take (`name`, `warehouse`, `attention`). [`load`] reads one
//! project in a bounded number of queries (Stages, the Freight they hold, their
//! Promotions, the windows); [`release_board`] is pure and takes `now`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::api::{
    Freight, HealthState, Kind, Promotion, PromotionPhase, PromotionWindow, Stage, StageStatus,
    StepPhase, VerificationPhase,
};
use crate::store::{KeptBy, ObjectFields, Store, StoreError};

use super::board::StageWindow;

/// The longest `name` or `warehouse` filter (a Kubernetes name is at most 253).
const MAX_FILTER: usize = 253;

/// Why a cell needs someone's attention.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub enum Attention {
    /// The Promotion last run in the Stage failed or errored.
    PromotionFailed,
    /// The Stage's Applications are Degraded or Missing.
    Unhealthy,
    /// The verification of its Freight failed, errored or was inconclusive.
    VerificationFailed,
    /// Auto-promotion is paused on it (a rollback, a hold by hand).
    Held,
    /// A promotion window keeps Freight out now (or a window cannot be evaluated).
    Frozen,
    /// A Promotion is running and waiting: written to the Stage's branch and waiting for
    /// a sync, or a step that ran and waits to run again (a review, a sign-off, a check).
    Waiting,
}

impl Attention {
    /// The word shown for it.
    pub fn word(self) -> &'static str {
        match self {
            Attention::PromotionFailed => "promotion failed",
            Attention::Unhealthy => "unhealthy",
            Attention::VerificationFailed => "verification failed",
            Attention::Held => "held",
            Attention::Frozen => "frozen",
            Attention::Waiting => "waiting",
        }
    }
}

/// The filters of a board: every one must hold for a row to be shown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BoardFilter {
    /// Only projects whose name contains this (case-insensitive).
    pub name: Option<String>,
    /// Only projects with a Stage taking Freight from this Warehouse, and of those only
    /// the Stages that do.
    pub warehouse: Option<String>,
    /// Only projects with a cell needing attention.
    pub attention: bool,
}

/// A filter Dray cannot honour.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilterError {
    /// `attention` is not a boolean.
    #[error(
        "board filter `attention` is `{0}`, not true or false; use attention=true or leave it out"
    )]
    Attention(String),
    /// A filter is longer than any name.
    #[error(
        "board filter `{field}` is {len} characters, longer than any name ({MAX_FILTER}); shorten it"
    )]
    TooLong {
        /// `name` or `warehouse`.
        field: &'static str,
        /// Its length.
        len: usize,
    },
}

impl BoardFilter {
    /// The filters as given (query parameters, flags); empty strings are no filter.
    pub fn parse(
        name: Option<&str>,
        warehouse: Option<&str>,
        attention: Option<&str>,
    ) -> Result<Self, FilterError> {
        let text = |field: &'static str, value: Option<&str>| -> Result<_, FilterError> {
            let value = value.map(str::trim).filter(|v| !v.is_empty());
            match value {
                Some(v) if v.chars().count() > MAX_FILTER => Err(FilterError::TooLong {
                    field,
                    len: v.chars().count(),
                }),
                v => Ok(v.map(str::to_owned)),
            }
        };
        let attention = match attention.map(str::trim) {
            None | Some("" | "false" | "0") => false,
            Some("true" | "1" | "on") => true,
            Some(other) => {
                return Err(FilterError::Attention(
                    other.chars().take(40).collect::<String>(),
                ));
            }
        };
        Ok(BoardFilter {
            name: text("name", name)?,
            warehouse: text("warehouse", warehouse)?,
            attention,
        })
    }

    /// Whether the name filter lets the project `project` in (what to read can be decided
    /// before reading it).
    pub fn admits_project(&self, project: &str) -> bool {
        self.name
            .as_ref()
            .is_none_or(|n| project.to_lowercase().contains(&n.to_lowercase()))
    }

    /// Whether any filter is set.
    pub fn is_empty(&self) -> bool {
        self == &BoardFilter::default()
    }
}

/// The whole board.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseBoard {
    /// When it was read (ages are counted to this).
    pub now: Timestamp,
    /// The Stage names of the rows shown, in pipeline order.
    pub columns: Vec<String>,
    /// One row per project shown, by name.
    pub rows: Vec<ProjectRow>,
    /// How many projects the viewer may read, before the filters.
    pub projects: usize,
}

/// One project's row.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRow {
    /// The project.
    pub project: String,
    /// The Warehouses its Stages take Freight from.
    pub warehouses: Vec<String>,
    /// Its Stages, in its pipeline order.
    pub cells: Vec<Cell>,
}

impl ProjectRow {
    /// The cell of the Stage `name`, if the project has one.
    pub fn cell(&self, name: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.stage == name)
    }

    /// Its cells under `columns`, in their order (`None` where it has no such Stage): one
    /// lookup per column, whatever the number of Stages.
    pub fn aligned<'a>(&'a self, columns: &'a [String]) -> Vec<(&'a str, Option<&'a Cell>)> {
        let by_stage: HashMap<&str, &Cell> =
            self.cells.iter().map(|c| (c.stage.as_str(), c)).collect();
        columns
            .iter()
            .map(|c| (c.as_str(), by_stage.get(c.as_str()).copied()))
            .collect()
    }

    /// Whether a cell needs attention.
    pub fn needs_attention(&self) -> bool {
        self.cells.iter().any(|c| !c.attention.is_empty())
    }
}

/// One Stage of one project.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// The Stage.
    pub stage: String,
    /// The Freight in it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freight: Option<CellFreight>,
    /// Its health, when it is judged (registered Applications or a health policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthState>,
    /// The phase of its Freight's verification, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationPhase>,
    /// The Promotion running in it, else the last one that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<CellPromotion>,
    /// Why it needs attention (none: it does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<Attention>,
    /// The Stages taking Freight from this one that hold other Freight (or none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differs_from: Vec<String>,
}

impl Cell {
    /// How long its Freight has been there at `now` (whole seconds), when known.
    pub fn age(&self, now: Timestamp) -> Option<i64> {
        let since = self.freight.as_ref()?.since?;
        Some(now.as_second().saturating_sub(since.as_second()).max(0))
    }
}

/// The Freight in a cell.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CellFreight {
    /// Its id.
    pub id: String,
    /// Its alias (empty when it has none).
    #[serde(default)]
    pub alias: String,
    /// Its Warehouse.
    #[serde(default)]
    pub warehouse: String,
    /// Its images as `name:tag`.
    #[serde(default)]
    pub images: Vec<String>,
    /// The first config commit's id, 7 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Since when it is in the Stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
}

impl CellFreight {
    /// The alias, or the id when it has none.
    pub fn label(&self) -> &str {
        if self.alias.is_empty() {
            &self.id
        } else {
            &self.alias
        }
    }
}

/// A Promotion in a cell.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CellPromotion {
    /// Its name.
    pub name: String,
    /// Its phase.
    pub phase: PromotionPhase,
}

/// What the board reads of one project.
#[derive(Clone, Debug, Default)]
pub struct ProjectInput {
    /// The project.
    pub project: String,
    /// Its Stages, as [`load`] reads them: without the parts of the spec the board never
    /// reads (`STAGE_FIELDS`). Shared: [`load`] types a project's Stages once per change
    /// of them, and [`release_board`] orders them once per such list.
    pub stages: Arc<Vec<Stage>>,
    /// The Freight its Stages hold, by id: only what the board shows (`FREIGHT_FIELDS`).
    pub freight: HashMap<String, Freight>,
    /// The Promotions running or last run in its Stages, by name.
    pub promotions: HashMap<String, Promotion>,
    /// Its promotion windows.
    pub windows: Vec<PromotionWindow>,
}

/// What the board reads of each Stage: all but the parts of its spec it never shows (the
/// promotion template, vars, verification and sign-off policies), which are most of a
/// Stage's size.
const STAGE_FIELDS: [&str; 6] = [
    "/apiVersion",
    "/kind",
    "/metadata",
    "/spec/requestedFreight",
    "/spec/health",
    "/status",
];

/// What the board reads of each Freight a Stage holds: what it shows of it (alias, origin,
/// images, commits; Freight has them at the top, no `spec`), not its status, whose
/// `verifiedIn` and `currentlyIn` name every Stage it went through and are most of its
/// size.
const FREIGHT_FIELDS: [&str; 7] = [
    "/apiVersion",
    "/kind",
    "/metadata",
    "/alias",
    "/origin",
    "/images",
    "/commits",
];

/// What the board reads of each Promotion: its phase and whether it waits (for a merge
/// request, or retrying a step), not its steps, their state or their outputs.
const PROMOTION_FIELDS: [&str; 8] = [
    "/apiVersion",
    "/kind",
    "/metadata",
    "/spec/stage",
    "/spec/freight",
    "/status/phase",
    "/status/writtenToGit",
    "/status/stepExecutionMetadata",
];

/// A project's Stages typed, with the names of what the board reads next of them.
struct TypedStages {
    stages: Arc<Vec<Stage>>,
    /// The Freight they hold, sorted, each once.
    freight: Vec<String>,
    /// Their Promotions running and last run, sorted, each once.
    promotions: Vec<String>,
}

/// Kept per store answer: a 5,000-Stage project's Stages are typed once per change of
/// them, not on every look at the board.
static TYPED_STAGES: KeptBy<Vec<ObjectFields>, TypedStages> = KeptBy::new();

/// Kept per typed list: the pipeline order of a project's Stages.
static ORDERS: KeptBy<Vec<Stage>, Vec<StageInOrder>> = KeptBy::new();

/// A Stage in its project's pipeline order: `(name, depth, upstream names)`.
type StageInOrder = (String, usize, BTreeSet<String>);

fn typed_stages(answer: &[ObjectFields]) -> TypedStages {
    let stages: Vec<Stage> = answer.iter().filter_map(|s| s.to_typed().ok()).collect();
    let names = |pick: &dyn Fn(&StageStatus) -> Vec<String>| -> Vec<String> {
        let mut names: Vec<String> = stages
            .iter()
            .filter_map(|s| s.status.as_ref())
            .flat_map(pick)
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let freight = names(&|st| st.current_freight.iter().map(|c| c.name.clone()).collect());
    let promotions = names(&|st| {
        st.current_promotion
            .iter()
            .chain(st.last_promotion.iter())
            .cloned()
            .collect()
    });
    TypedStages {
        stages: Arc::new(stages),
        freight,
        promotions,
    }
}

/// Reads what the board shows of `project`: its Stages, then in one batched read each the
/// Freight they hold and their Promotions (running and last), and its windows.
pub async fn load(store: &dyn Store, project: &str) -> Result<ProjectInput, StoreError> {
    let answer = store
        .list_fields(Kind::Stage, project, &STAGE_FIELDS)
        .await?;
    let typed = TYPED_STAGES.get_or_derive(&answer, |a| typed_stages(a));
    let mut freight = HashMap::new();
    if !typed.freight.is_empty() {
        for picked in store
            .get_many_fields(Kind::Freight, project, &typed.freight, &FREIGHT_FIELDS)
            .await?
        {
            if let Ok(f) = picked.to_typed::<Freight>() {
                freight.insert(picked.key.name, f);
            }
        }
    }
    let mut promotions = HashMap::new();
    if !typed.promotions.is_empty() {
        for picked in store
            .get_many_fields(
                Kind::Promotion,
                project,
                &typed.promotions,
                &PROMOTION_FIELDS,
            )
            .await?
        {
            if let Ok(p) = picked.to_typed::<Promotion>() {
                promotions.insert(picked.key.name, p);
            }
        }
    }
    Ok(ProjectInput {
        project: project.to_owned(),
        windows: super::board::project_windows(store, project).await?,
        stages: typed.stages.clone(),
        freight,
        promotions,
    })
}

/// The board of `projects` (the ones the viewer may read) under `filter`, at `now`.
pub fn release_board(
    projects: &[ProjectInput],
    filter: &BoardFilter,
    now: Timestamp,
) -> ReleaseBoard {
    let mut inputs: Vec<&ProjectInput> = projects.iter().collect();
    inputs.sort_by(|a, b| a.project.cmp(&b.project));
    let mut rows = Vec::new();
    let mut orders = Vec::new();
    for input in inputs {
        if !filter.admits_project(&input.project) {
            continue;
        }
        let order = ORDERS.get_or_derive(&input.stages, |s| project_order(s));
        let mut row = project_row(input, &order, now);
        if let Some(warehouse) = &filter.warehouse {
            if !row.warehouses.contains(warehouse) {
                continue;
            }
            let takes: BTreeSet<&str> = input
                .stages
                .iter()
                .filter(|s| origins(s).contains(warehouse))
                .filter_map(|s| s.metadata.name.as_deref())
                .collect();
            row.cells.retain(|c| takes.contains(c.stage.as_str()));
        }
        if filter.attention && !row.needs_attention() {
            continue;
        }
        let shown: BTreeSet<&str> = row.cells.iter().map(|c| c.stage.as_str()).collect();
        orders.push(
            order
                .iter()
                .filter(|(name, _, _)| shown.contains(name.as_str()))
                .cloned()
                .collect::<Vec<_>>(),
        );
        rows.push(row);
    }
    ReleaseBoard {
        now,
        columns: merged_columns(&orders),
        rows,
        projects: projects.len(),
    }
}

/// The Warehouses a Stage takes Freight from.
fn origins(stage: &Stage) -> BTreeSet<String> {
    stage
        .spec
        .requested_freight
        .iter()
        .map(|r| r.origin.name.clone())
        .collect()
}

/// A project's Stages in pipeline order: `(name, depth, upstream names)`, each after the
/// Stages it takes Freight from, ties by name; Stages in a cycle (which `dray apply`
/// refuses) last, by name. The depth is the longest path from a Stage taking Freight
/// straight from a Warehouse.
fn project_order(stages: &[Stage]) -> Vec<StageInOrder> {
    let names: BTreeSet<String> = stages
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    let upstream: BTreeMap<String, BTreeSet<String>> = stages
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let from = s
                .spec
                .requested_freight
                .iter()
                .flat_map(|r| r.sources.stages.iter())
                .filter(|u| names.contains(*u) && **u != name)
                .cloned()
                .collect();
            Some((name, from))
        })
        .collect();
    let mut depth: BTreeMap<String, usize> = BTreeMap::new();
    let mut waiting = upstream.clone();
    let mut order = Vec::new();
    loop {
        let mut ready: Vec<String> = waiting
            .iter()
            .filter(|(_, from)| from.iter().all(|u| depth.contains_key(u)))
            .map(|(n, _)| n.clone())
            .collect();
        if ready.is_empty() {
            break;
        }
        for name in &ready {
            let from = waiting.remove(name).unwrap_or_default();
            let d = from
                .iter()
                .filter_map(|u| depth.get(u))
                .map(|d| d + 1)
                .max()
                .unwrap_or(0);
            depth.insert(name.clone(), d);
        }
        ready.sort_by_key(|n| (depth.get(n).copied().unwrap_or_default(), n.clone()));
        order.extend(ready);
    }
    let deepest = depth.values().max().map_or(0, |d| d + 1);
    order.extend(waiting.into_keys());
    order.sort_by_key(|n| (depth.get(n).copied().unwrap_or(deepest), n.clone()));
    order
        .into_iter()
        .map(|n| {
            let d = depth.get(&n).copied().unwrap_or(deepest);
            let from = upstream.get(&n).cloned().unwrap_or_default();
            (n, d, from)
        })
        .collect()
}

/// The columns: every Stage name of `orders`, each after the names any project's Stage of
/// that name takes Freight from; ties by the deepest depth any project gives the name,
/// then by name. Names in a cycle across projects come last, by depth then name.
fn merged_columns(orders: &[Vec<StageInOrder>]) -> Vec<String> {
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    let mut after: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for order in orders {
        let shown: BTreeSet<&str> = order.iter().map(|(n, _, _)| n.as_str()).collect();
        for (name, d, from) in order {
            let entry = depth.entry(name.as_str()).or_default();
            *entry = (*entry).max(*d);
            after.entry(name.as_str()).or_default().extend(
                from.iter()
                    .map(String::as_str)
                    .filter(|u| shown.contains(u) && *u != name.as_str()),
            );
        }
    }
    // Kahn's algorithm, the ready names ordered by (depth, name): n log n, not n².
    let key = |n: &str| (depth.get(n).copied().unwrap_or_default(), n.to_owned());
    let mut waiting: BTreeMap<&str, usize> = after.iter().map(|(n, f)| (*n, f.len())).collect();
    let mut downstream: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, from) in &after {
        for u in from {
            downstream.entry(*u).or_default().push(*name);
        }
    }
    let mut ready: BTreeSet<(usize, String)> = waiting
        .iter()
        .filter(|(_, left)| **left == 0)
        .map(|(n, _)| key(n))
        .collect();
    let mut columns = Vec::new();
    while let Some(next) = ready.pop_first() {
        let name = next.1;
        waiting.remove(name.as_str());
        for d in downstream.get(name.as_str()).into_iter().flatten() {
            if let Some(left) = waiting.get_mut(d) {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    ready.insert(key(d));
                }
            }
        }
        columns.push(name);
    }
    let mut rest: Vec<(usize, String)> = waiting.keys().map(|n| key(n)).collect();
    rest.sort();
    columns.extend(rest.into_iter().map(|(_, n)| n));
    columns
}

/// One project's row, its cells in `order`.
fn project_row(input: &ProjectInput, order: &[StageInOrder], now: Timestamp) -> ProjectRow {
    let by_name: HashMap<&str, &Stage> = input
        .stages
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    let current = |name: &str| -> Option<&str> {
        let status = by_name.get(name)?.status.as_ref()?;
        status.current_freight.as_ref().map(|c| c.name.as_str())
    };
    let mut downstream: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, _, from) in order {
        for u in from {
            downstream
                .entry(u.as_str())
                .or_default()
                .push(name.as_str());
        }
    }
    let warehouses: BTreeSet<String> = input.stages.iter().flat_map(origins).collect();
    let cells = order
        .iter()
        .filter_map(|(name, _, _)| {
            let stage = by_name.get(name.as_str())?;
            let mut cell = cell(input, stage, now);
            if let Some(mine) = current(name) {
                cell.differs_from = downstream
                    .get(name.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|d| current(d) != Some(mine))
                    .map(|d| (*d).to_owned())
                    .collect();
            }
            Some(cell)
        })
        .collect();
    ProjectRow {
        project: input.project.clone(),
        warehouses: warehouses.into_iter().collect(),
        cells,
    }
}

/// One Stage's cell (its `differs_from` aside, which needs the row).
fn cell(input: &ProjectInput, stage: &Stage, now: Timestamp) -> Cell {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let no_status = StageStatus::default();
    let status = stage.status.as_ref().unwrap_or(&no_status);
    let freight = status.current_freight.as_ref().map(|c| {
        let found = input.freight.get(&c.name);
        CellFreight {
            id: c.name.clone(),
            alias: found
                .map(|f| f.spec.alias.clone())
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| c.alias.clone()),
            warehouse: found
                .map(|f| f.spec.origin.name.clone())
                .unwrap_or_default(),
            images: found
                .map(|f| f.spec.images.iter().map(image_label).collect())
                .unwrap_or_default(),
            commit: found
                .and_then(|f| f.spec.commits.first())
                .map(|c| c.id.chars().take(7).collect()),
            since: c.since.as_ref().map(|t| t.0),
        }
    });
    let health = match &status.health {
        Some(h) => Some(h.status),
        None if stage.spec.health.is_some() || !status.applications.is_empty() => {
            Some(HealthState::Unknown)
        }
        None => None,
    };
    let verification = status.verification.as_ref().map(|v| v.phase);
    let running = status
        .current_promotion
        .as_ref()
        .and_then(|p| input.promotions.get(p).map(|found| (p, Some(found))))
        .or_else(|| status.current_promotion.as_ref().map(|p| (p, None)));
    let last = status
        .last_promotion
        .as_ref()
        .and_then(|p| input.promotions.get(p).map(|found| (p, found)));
    let promotion = match (running, last) {
        (Some((name, found)), _) => Some(CellPromotion {
            name: name.clone(),
            phase: found
                .and_then(|p| p.status.as_ref())
                .map(|s| s.phase)
                .unwrap_or_default(),
        }),
        (None, Some((name, found))) => Some(CellPromotion {
            name: name.clone(),
            phase: found.status.as_ref().map(|s| s.phase).unwrap_or_default(),
        }),
        (None, None) => None,
    };
    let mut attention = Vec::new();
    if promotion
        .as_ref()
        .is_some_and(|p| matches!(p.phase, PromotionPhase::Failed | PromotionPhase::Errored))
    {
        attention.push(Attention::PromotionFailed);
    }
    if health == Some(HealthState::Unhealthy) {
        attention.push(Attention::Unhealthy);
    }
    if matches!(
        verification,
        Some(
            VerificationPhase::Failed | VerificationPhase::Error | VerificationPhase::Inconclusive
        )
    ) {
        attention.push(Attention::VerificationFailed);
    }
    if status.hold.is_some() {
        attention.push(Attention::Held);
    }
    let labels = stage.metadata.labels.clone().unwrap_or_default();
    if !StageWindow::of(&input.windows, &name, &labels, now).is_open() {
        attention.push(Attention::Frozen);
    }
    let waits = running
        .and_then(|(_, p)| p)
        .and_then(|p| p.status.as_ref())
        .is_some_and(|s| {
            s.phase == PromotionPhase::Running
                && (s.written_to_git.is_some()
                    || s.step_execution_metadata
                        .iter()
                        .any(|step| step.status == StepPhase::Running && step.attempts > 1))
        });
    if waits {
        attention.push(Attention::Waiting);
    }
    Cell {
        stage: name,
        freight,
        health,
        verification,
        promotion,
        attention,
        differs_from: Vec::new(),
    }
}

/// `app:1.2.3` (the digest's start when there is no tag).
fn image_label(image: &crate::api::FreightImage) -> String {
    let repo = image
        .repo_url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(&image.repo_url);
    let tag = if image.tag.is_empty() {
        image.digest.get(..19).unwrap_or(&image.digest)
    } else {
        &image.tag
    };
    format!("{repo}:{tag}")
}

/// An age as people read it: `45s`, `12m`, `3h`, `2d`.
pub fn age_text(seconds: i64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests;
