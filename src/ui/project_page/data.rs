//! What the project page shows, read in a bounded number of queries ([`load`]), with each
//! Stage's board (`crate::pipeline::board`) for the selected Freight.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::{
    Freight, Kind, ObjectKey, Project, Promotion, ResourceBody as _, Stage, Verb, Warehouse,
};
use crate::pipeline::board::{self, StageBoard};
use crate::server::ApiError;
use crate::server::AppState;
use crate::server::auth::Permissions;
use crate::store::KeptBy;

use super::super::graph::{self, NodeRef};
use super::super::{UiError, Viewer};
use super::heights::node_heights;
use super::outline::StageOutline;
use super::pipeline::upstreams;
use super::scope::{self, Scope};
use super::{LANE_PAGE, MAX_LANES, ProjectQuery, TIMELINE_PAGE};

/// Everything the project page shows, read in a bounded number of queries.
pub(crate) struct ProjectData {
    pub project: String,
    pub warehouses: Vec<Warehouse>,
    pub stages: Vec<Stage>,
    /// The Freight the lanes show, lane after lane.
    pub timeline: Vec<Freight>,
    /// The Freight lanes: one per Warehouse, or one lane (a project with one Warehouse,
    /// or `?lane=W`) paged with `before`.
    pub lanes: Lanes,
    /// The Freight Stages hold and the timeline, by id.
    pub freight: HashMap<String, Freight>,
    /// The Promotions Stages are running now (`status.currentPromotion`), by name.
    pub running: HashMap<String, Promotion>,
    /// The selected Freight's id.
    pub selected: Option<String>,
    /// Each Stage's board (window, hold, the gates for the selected Freight), by name.
    pub boards: HashMap<String, StageBoard>,
    pub permissions: Permissions,
    /// The Project's freeze (`dray freeze` without `--stage`), active or expired.
    pub freeze: Option<crate::api::Freeze>,
    pub before: Option<String>,
    /// Which Stages the graph draws (`stages` holds only those), and what it leaves out.
    pub scope: Scope,
    /// The pipeline's drawing; `stages` are in its order (column, then row).
    pub layout: graph::Layout,
    /// How the project's notifications and commit statuses went (the ProjectConfig's
    /// `status.notifications`), and how many deliveries wait.
    pub deliveries: (Vec<crate::api::NotificationStatus>, usize),
}

/// The Stages the page draws when nothing is searched for (most requests), worked out
/// once per outline: choosing them lays out the whole graph of a large project.
static UNFILTERED: KeptBy<Vec<StageOutline>, (Vec<String>, Scope)> = KeptBy::new();

/// The names of the Stages drawn of `all`, and what is left out.
fn drawn(
    all: &[StageOutline],
    q: Option<String>,
    warehouse: Option<String>,
) -> (Vec<String>, Scope) {
    let (drawn, scope) = scope::scope(all, q, warehouse);
    (drawn.into_iter().map(|s| s.name.clone()).collect(), scope)
}

/// Reads what the project page shows; 403 without `list` on stages, 404 for no project.
pub(crate) async fn load(
    state: &AppState,
    viewer: &Viewer,
    project: &str,
    query: &ProjectQuery,
) -> Result<ProjectData, UiError> {
    let store = state.store.as_ref();
    let permissions = viewer.caller.permissions(store, project).await?;
    if !permissions.allows(Verb::List, "stages", None) {
        return Err(UiError(ApiError::forbidden(format!(
            "{} in project `{project}`",
            viewer.caller.refusal(Verb::List, "stages", None)
        ))
        .with_hint(format!(
            "ask an admin for a RoleBinding in project `{project}` (the built-in `dray-viewer` role is enough to look)"
        ))));
    }
    if store
        .get(&ObjectKey::cluster(Kind::Project, project))
        .await?
        .and_then(|p| p.to_typed::<Project>().ok())
        .is_none()
    {
        return Err(UiError(
            ApiError::not_found(format!("project `{project}` does not exist"))
                .with_hint("see the projects at /"),
        ));
    }
    let outlines = super::outline::read(store, project).await?;
    let (q, warehouse) = (
        scope::parameter(query.q.as_deref()),
        scope::parameter(query.warehouse.as_deref()),
    );
    let drawn = if q.is_none() && warehouse.is_none() {
        UNFILTERED.get_or_derive(&outlines, |all| drawn(all, None, None))
    } else {
        Arc::new(drawn(&outlines, q, warehouse))
    };
    let (drawn, scope) = (&drawn.0, drawn.1.clone());
    let mut stages: Vec<Stage> = if drawn.is_empty() {
        Vec::new()
    } else {
        store
            .get_many(Kind::Stage, project, drawn)
            .await?
            .iter()
            .filter_map(|s| s.to_typed().ok())
            .collect()
    };
    let warehouses: Vec<Warehouse> = store
        .list(Kind::Warehouse, Some(project))
        .await?
        .iter()
        .filter_map(|s| s.to_typed().ok())
        .collect();
    let lanes = read_lanes(store, project, &warehouses, query).await?;
    let timeline: Vec<Freight> = lanes.shown.iter().flat_map(|l| l.freight.clone()).collect();
    let mut freight: HashMap<String, Freight> = timeline
        .iter()
        .filter_map(|f| Some((f.metadata.name.clone()?, f.clone())))
        .collect();
    let mut wanted: Vec<String> = stages
        .iter()
        .filter_map(|s| s.status.as_ref()?.current_freight.as_ref())
        .map(|c| c.name.clone())
        .chain(query.freight.clone())
        .filter(|n| !freight.contains_key(n))
        .collect();
    wanted.sort();
    wanted.dedup();
    if !wanted.is_empty() {
        for stored in store.get_many(Kind::Freight, project, &wanted).await? {
            if let Ok(f) = stored.to_typed::<Freight>() {
                freight.insert(stored.key.name.clone(), f);
            }
        }
    }
    let mut running_names: Vec<String> = stages
        .iter()
        .filter_map(|s| s.status.as_ref()?.current_promotion.clone())
        .collect();
    running_names.sort();
    running_names.dedup();
    let mut running = HashMap::new();
    if !running_names.is_empty() {
        for stored in store
            .get_many(Kind::Promotion, project, &running_names)
            .await?
        {
            if let Ok(p) = stored.to_typed::<Promotion>() {
                running.insert(stored.key.name.clone(), p);
            }
        }
    }
    let selected = query
        .freight
        .clone()
        .filter(|n| freight.contains_key(n))
        .or_else(|| timeline.first().and_then(|f| f.metadata.name.clone()));
    let windows = board::project_windows(store, project).await?;
    let deliveries = store
        .get(&ObjectKey::namespaced(
            Kind::ProjectConfig,
            project,
            project,
        ))
        .await?
        .and_then(|c| c.to_typed::<crate::api::ProjectConfig>().ok())
        .and_then(|c| c.status)
        .map(|s| {
            let pending = s.outbox.map_or(0, |o| o.pending.len());
            (s.notifications, pending)
        })
        .unwrap_or_default();
    let asked: Vec<&Freight> = selected.iter().filter_map(|id| freight.get(id)).collect();
    let boards = board::board(&stages, &asked, &windows, jiff::Timestamp::now())
        .into_iter()
        .map(|b| (b.stage.clone(), b))
        .collect();
    let layout = graph::layout(
        &warehouses
            .iter()
            .filter_map(|w| w.metadata.name.clone())
            .collect::<Vec<_>>(),
        &stages
            .iter()
            .map(|s| {
                let name = s.metadata.name.clone().unwrap_or_default();
                (name, upstreams(&s.spec.requested_freight))
            })
            .collect::<Vec<_>>(),
    );
    let place: HashMap<&str, (usize, usize)> = layout
        .nodes
        .iter()
        .filter_map(|n| match &n.node {
            NodeRef::Stage(name) => Some((name.as_str(), (n.layer, n.row))),
            NodeRef::Warehouse(_) => None,
        })
        .collect();
    stages.sort_by_cached_key(|s| {
        place
            .get(s.metadata.name.as_deref().unwrap_or_default())
            .copied()
            .unwrap_or_default()
    });
    let mut data = ProjectData {
        deliveries,
        running,
        layout,
        project: project.to_owned(),
        warehouses,
        stages,
        timeline,
        lanes,
        freight,
        selected,
        boards,
        permissions,
        freeze: super::super::levers::project_freeze(state, project).await?,
        before: query.before.clone(),
        scope,
    };
    let heights = node_heights(&data);
    data.layout.size(&heights);
    Ok(data)
}

/// The Freight lanes of the page.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// The lanes shown, each newest first.
    pub shown: Vec<Lane>,
    /// Warehouses beyond [`MAX_LANES`], offered as links (`?lane=W`).
    pub more: Vec<String>,
}

impl Lanes {
    /// Whether one lane is shown, paged: a project with one Warehouse, or `?lane=W`.
    pub(crate) fn is_single(&self) -> bool {
        self.shown.len() == 1
    }

    /// Whether one Warehouse's lane was asked for (`?lane=W`).
    pub(crate) fn one_asked(&self) -> bool {
        self.is_single() && self.shown[0].warehouse.is_some()
    }
}

/// One lane: a page of a Warehouse's Freight (`warehouse: None`: the project's).
#[derive(Debug)]
pub(crate) struct Lane {
    pub warehouse: Option<String>,
    pub freight: Vec<Freight>,
    /// The id to pass as `before` for this lane's next page, when there is one.
    pub older: Option<String>,
}

/// Reads the lanes: `?lane=W` or a project with at most one Warehouse gets one lane of
/// [`TIMELINE_PAGE`] from the `before` cursor; otherwise the first [`MAX_LANES`]
/// Warehouses (by name) get their newest [`LANE_PAGE`] each — one indexed read per lane.
async fn read_lanes(
    store: &dyn crate::store::Store,
    project: &str,
    warehouses: &[Warehouse],
    query: &ProjectQuery,
) -> Result<Lanes, UiError> {
    let mut names: Vec<String> = warehouses
        .iter()
        .filter_map(|w| w.metadata.name.clone())
        .collect();
    names.sort();
    let asked = query.lane.clone().filter(|l| names.contains(l));
    let page = |freight: Vec<crate::store::StoredObject>, size: usize| {
        let more = freight.len() > size;
        let freight: Vec<Freight> = freight
            .iter()
            .take(size)
            .filter_map(|f| f.to_typed().ok())
            .collect();
        let older = more
            .then(|| freight.last().and_then(|f| f.metadata.name.clone()))
            .flatten();
        (freight, older)
    };
    if asked.is_some() || names.len() <= 1 {
        let cursor = match &query.before {
            Some(name) => store
                .get(&ObjectKey::namespaced(Kind::Freight, project, name))
                .await?
                .map(|f| {
                    let created = f.object.creation_timestamp().unwrap_or_default().to_owned();
                    (created, name.clone())
                }),
            None => None,
        };
        let cursor = cursor.as_ref().map(|(t, n)| (t.as_str(), n.as_str()));
        let read = match &asked {
            Some(lane) => {
                store
                    .list_newest_of_origin(Kind::Freight, project, lane, TIMELINE_PAGE + 1, cursor)
                    .await?
            }
            None => {
                store
                    .list_newest(Kind::Freight, project, TIMELINE_PAGE + 1, cursor)
                    .await?
            }
        };
        let (freight, older) = page(read, TIMELINE_PAGE);
        return Ok(Lanes {
            shown: vec![Lane {
                warehouse: asked.clone(),
                freight,
                older,
            }],
            more: Vec::new(),
        });
    }
    let mut lanes = Lanes::default();
    for (i, name) in names.into_iter().enumerate() {
        if i >= MAX_LANES {
            lanes.more.push(name);
            continue;
        }
        let read = store
            .list_newest_of_origin(Kind::Freight, project, &name, LANE_PAGE + 1, None)
            .await?;
        let (freight, older) = page(read, LANE_PAGE);
        lanes.shown.push(Lane {
            warehouse: Some(name),
            freight,
            older,
        });
    }
    Ok(lanes)
}
