//! `/` (the projects) and `/projects/{p}` (one project at a glance): the pipeline as a
//! graph with each Stage's Freight, health, verification, promotion, hold, window and
//! actions; the Freight timeline, newest first, 50 at a time; and, for the selected
//! Freight, each Stage's `available` or the reasons it is not.
//!
//! Each Stage node shows its health (`status.health`, Argo CD's message when Unhealthy),
//! its verification (waiting for health, measuring with counts, or how it ended) and a
//! promotion that is written to git and waiting for Argo CD to sync, apart from failures.
//!
//! Reads are bounded whatever the project's size: one list of Stages, one of Warehouses,
//! the newest page of Freight (an index read), one batched read of the Freight Stages
//! hold, one batched read of the Promotions running in them, one ProjectConfig and one
//! RoleBinding list (the caller's permissions). Nothing is read per Stage.
//! `/projects/{p}/live` answers the part the script swaps in when the change feed moves.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::{
    Freight, FreightOriginKind, HealthState, Kind, ObjectKey, Project, ProjectConfig, Promotion,
    PromotionPhase, Stage, StageStatus, Verb, VerificationInfo, VerificationPhase, Warehouse,
};
use crate::pipeline::availability::{Reason, availability};
use crate::pipeline::windows::{self, WindowState};
use crate::server::ApiError;
use crate::server::AppState;
use crate::server::auth::Permissions;

use super::graph::{self, NodeRef, Upstream};
use super::view::{self, artifacts, freight_label};
use super::{UiError, Viewer, layout};

/// How many Freight the timeline shows per page.
pub(crate) const TIMELINE_PAGE: usize = 50;

/// The query of the project page.
#[derive(Deserialize, Debug, Default)]
pub(crate) struct ProjectQuery {
    /// The selected Freight (id).
    #[serde(default)]
    freight: Option<String>,
    /// Show Freight older than this one (id).
    #[serde(default)]
    before: Option<String>,
}

/// `GET /`: the projects the caller may see (straight to the only one).
pub(crate) async fn index(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Response, UiError> {
    let store = state.store.as_ref();
    let mut visible = Vec::new();
    for stored in store.list(Kind::Project, None).await? {
        let name = stored.key.name.clone();
        if viewer
            .caller
            .may(store, Verb::Get, "projects", None, Some(&name))
            .await?
        {
            visible.push(name);
        }
    }
    if let [only] = visible.as_slice() {
        return Ok(Redirect::to(&format!("/projects/{only}")).into_response());
    }
    Ok(layout::page(
        "Projects",
        Some(&viewer),
        None,
        html! {
            h1 { "Projects" }
            @if visible.is_empty() {
                p.empty { "No project you may see. Apply one with " code { "dray apply -f" } ", or ask an admin for a RoleBinding." }
            }
            ul.projects {
                @for name in &visible {
                    li data-project=(name) { a href={ "/projects/" (name) } { (name) } }
                }
            }
        },
    )
    .into_response())
}

/// Everything the project page shows, read in a bounded number of queries.
pub(crate) struct ProjectData {
    pub project: String,
    pub warehouses: Vec<Warehouse>,
    pub stages: Vec<Stage>,
    /// The timeline page, newest first.
    pub timeline: Vec<Freight>,
    /// The id to pass as `before` for the next page, when there is one.
    pub older: Option<String>,
    /// The Freight Stages hold and the timeline, by id.
    pub freight: HashMap<String, Freight>,
    /// The Promotions Stages are running now (`status.currentPromotion`), by name.
    pub running: HashMap<String, Promotion>,
    /// The selected Freight's id.
    pub selected: Option<String>,
    /// Each Stage's window state (or why it cannot be computed).
    pub windows: HashMap<String, Result<WindowState, String>>,
    pub permissions: Permissions,
    pub before: Option<String>,
    /// The pipeline's drawing; `stages` are in its order (column, then row).
    pub layout: graph::Layout,
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
    let mut stages: Vec<Stage> = store
        .list(Kind::Stage, Some(project))
        .await?
        .iter()
        .filter_map(|s| s.to_typed().ok())
        .collect();
    let warehouses: Vec<Warehouse> = store
        .list(Kind::Warehouse, Some(project))
        .await?
        .iter()
        .filter_map(|s| s.to_typed().ok())
        .collect();
    let cursor = match &query.before {
        Some(name) => store
            .get(&ObjectKey::namespaced(Kind::Freight, project, name))
            .await?
            .map(|f| {
                let created = f
                    .object
                    .pointer("/metadata/creationTimestamp")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (created, name.clone())
            }),
        None => None,
    };
    let mut page = store
        .list_newest(
            Kind::Freight,
            project,
            TIMELINE_PAGE + 1,
            cursor.as_ref().map(|(t, n)| (t.as_str(), n.as_str())),
        )
        .await?;
    let more = page.len() > TIMELINE_PAGE;
    page.truncate(TIMELINE_PAGE);
    let timeline: Vec<Freight> = page.iter().filter_map(|f| f.to_typed().ok()).collect();
    let older = more
        .then(|| timeline.last().and_then(|f| f.metadata.name.clone()))
        .flatten();
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
    let config: Option<ProjectConfig> = store
        .get(&ObjectKey::namespaced(
            Kind::ProjectConfig,
            project,
            project,
        ))
        .await?
        .and_then(|c| c.to_typed().ok());
    let rules = config.map(|c| c.spec.promotion_windows).unwrap_or_default();
    let now = jiff::Timestamp::now();
    let windows = stages
        .iter()
        .map(|s| {
            let name = s.metadata.name.clone().unwrap_or_default();
            let labels = s.metadata.labels.clone().unwrap_or_default();
            let state = windows::evaluate(&rules, &name, &labels, now).map_err(|e| e.to_string());
            (name, state)
        })
        .collect();
    let layout = graph::layout(
        &warehouses
            .iter()
            .filter_map(|w| w.metadata.name.clone())
            .collect::<Vec<_>>(),
        &stages
            .iter()
            .map(|s| (s.metadata.name.clone().unwrap_or_default(), upstreams(s)))
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
        running,
        layout,
        project: project.to_owned(),
        warehouses,
        stages,
        timeline,
        older,
        freight,
        selected,
        windows,
        permissions,
        before: query.before.clone(),
    };
    let heights = node_heights(&data);
    data.layout.size(&heights);
    Ok(data)
}

/// `GET /projects/{project}`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
    Query(query): Query<ProjectQuery>,
) -> Result<Markup, UiError> {
    let data = load(&state, &viewer, &project, &query).await?;
    Ok(layout::page(
        &project,
        Some(&viewer),
        Some(&project),
        html! {
            div #live data-selected=[data.selected.as_deref()] { (live_body(&data)) }
            div #promotion-slot {}
            dialog #confirm {
                div.confirm-body {}
                div #confirm-error role="alert" {}
                menu {
                    button #confirm-go type="button" disabled { "Confirm" }
                    button #confirm-cancel type="button" { "Cancel" }
                }
            }
        },
    ))
}

/// `GET /projects/{project}/live`: the part of the page that follows the change feed.
pub(crate) async fn live(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
    Query(query): Query<ProjectQuery>,
) -> Result<Markup, UiError> {
    let data = load(&state, &viewer, &project, &query).await?;
    Ok(live_body(&data))
}

fn live_body(data: &ProjectData) -> Markup {
    html! {
        h1 { "Project " (data.project) }
        (pipeline(data))
        div.columns {
            (timeline(data))
            (availability_panel(data))
        }
    }
}

fn upstreams(stage: &Stage) -> Vec<Upstream> {
    let mut ups = Vec::new();
    for request in &stage.spec.requested_freight {
        if request.sources.direct && request.origin.kind == FreightOriginKind::Warehouse {
            ups.push(Upstream::Warehouse(request.origin.name.clone()));
        }
        ups.extend(request.sources.stages.iter().cloned().map(Upstream::Stage));
    }
    ups
}

fn pipeline(data: &ProjectData) -> Markup {
    let by_name: HashMap<&str, &Stage> = data
        .stages
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    let layout = &data.layout;
    let warehouses: HashMap<&str, &Warehouse> = data
        .warehouses
        .iter()
        .filter_map(|w| Some((w.metadata.name.as_deref()?, w)))
        .collect();
    html! {
        section #pipeline {
            h2 { "Pipeline" }
            @if layout.nodes.is_empty() {
                p.empty { "No Warehouses or Stages yet." }
            }
            // `data-*` let the script re-stack the columns with the heights it measures.
            div.graph style={ "width:" (layout.width()) "px;height:" (layout.height()) "px" }
                data-margin=(graph::MARGIN) data-gap=(graph::GAP_Y) {
                svg.edges width=(layout.width()) height=(layout.height()) aria-hidden="true" {
                    @for &(from, to) in &layout.edges {
                        path d=(layout.edge_path(from, to)) data-from=(from) data-to=(to) {}
                    }
                }
                @for (index, placed) in layout.nodes.iter().enumerate() {
                    @let style = format!("left:{}px;top:{}px", placed.x(), placed.y());
                    @let place = Place { index, layer: placed.layer, row: placed.row, style };
                    @match &placed.node {
                        NodeRef::Warehouse(name) => {
                            div.node.warehouse data-warehouse=(name) data-node=(place.index)
                                data-layer=(place.layer) data-row=(place.row) style=(place.style) {
                                div.kind { "Warehouse" }
                                div.name { (name) }
                                @if let Some(w) = warehouses.get(name.as_str()) {
                                    div.artifacts {
                                        @for sub in &w.spec.subscriptions {
                                            @if let Some(image) = &sub.image { span.image title=(image.repo_url) { (view::repo_name(&image.repo_url)) } }
                                            @if let Some(git) = &sub.git { span.commit title=(git.repo_url) { (view::repo_name(&git.repo_url)) } }
                                        }
                                    }
                                }
                            }
                        }
                        NodeRef::Stage(name) => {
                            @if let Some(stage) = by_name.get(name.as_str()) {
                                (stage_node(data, stage, &place))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Where a node is drawn: its index in the layout (edges name it), column, row and style.
struct Place {
    index: usize,
    layer: usize,
    row: usize,
    style: String,
}

/// One action a Stage node offers: its name, label, why it is refused (if it is), and the
/// Promotion it acts on (Abort).
struct Action {
    action: &'static str,
    label: &'static str,
    refusal: Option<String>,
    promotion: Option<String>,
}

/// The node's buttons, disabled with the reason as their title when refused, then the
/// reasons as text (one line each, so a viewer reads why without hovering).
fn action_buttons(stage: &str, actions: &[Action]) -> Markup {
    html! {
        div.buttons {
            @for a in actions {
                button.action type="button" data-action=(a.action) data-stage=(stage)
                    data-promotion=[a.promotion.as_deref()]
                    disabled[a.refusal.is_some()] title=[a.refusal.as_deref()] { (a.label) }
            }
        }
        @let whys = refusals(actions);
        @if !whys.is_empty() {
            ul.whys {
                @for why in &whys { li.why { (why) } }
            }
        }
    }
}

/// The distinct reasons the actions are refused, in order (one verb refused for two
/// buttons is said once).
fn refusals(actions: &[Action]) -> Vec<&str> {
    let mut whys: Vec<&str> = Vec::new();
    for why in actions.iter().filter_map(|a| a.refusal.as_deref()) {
        if !whys.contains(&why) {
            whys.push(why);
        }
    }
    whys
}

fn window_text(state: Option<&Result<WindowState, String>>) -> Option<(bool, String)> {
    match state? {
        Ok(w) if w.open => None,
        Ok(w) => {
            let blocked = w.blocked_by.as_ref()?;
            let reason = Reason::WindowClosed {
                window: blocked.window.clone(),
                until: w.next_change.or(blocked.until),
            };
            Some((false, reason.to_string()))
        }
        Err(e) => Some((false, format!("window error: {e}"))),
    }
}

/// Whether the Stage verifies its Freight: it has a `verification` or registered
/// Applications (docs/resources.md, "Health and verification").
fn verifies(stage: &Stage, status: &StageStatus) -> bool {
    stage.spec.verification.is_some() || !status.applications.is_empty()
}

/// The buttons a Stage node offers, each with the reason it is refused, if it is.
fn stage_actions(data: &ProjectData, stage: &Stage, status: &StageStatus) -> Vec<Action> {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let perms = &data.permissions;
    let no_freight = data
        .selected
        .is_none()
        .then_some("no Freight to choose yet".to_owned());
    let promote_refusal = perms
        .refusal(Verb::Promote, "stages", Some(&name))
        .or(no_freight.clone());
    let approve_refusal = perms
        .refusal(Verb::Approve, "stages", Some(&name))
        .or(no_freight);
    let mut actions = vec![
        Action {
            action: "promote",
            label: "Promote",
            refusal: promote_refusal,
            promotion: None,
        },
        Action {
            action: "approve",
            label: "Approve",
            refusal: approve_refusal,
            promotion: None,
        },
    ];
    if verifies(stage, status) {
        let verify_refusal = perms.refusal(Verb::Verify, "stages", Some(&name));
        actions.push(Action {
            action: "verify",
            label: "Verify",
            refusal: verify_refusal.clone().or_else(|| {
                status
                    .current_freight
                    .is_none()
                    .then(|| format!("no Freight in `{name}` to verify yet"))
            }),
            promotion: None,
        });
        if status
            .verification
            .as_ref()
            .is_some_and(|v| !v.phase.is_terminal())
        {
            actions.push(Action {
                action: "abort-verification",
                label: "Stop verification",
                refusal: verify_refusal,
                promotion: None,
            });
        }
    }
    if let Some(p) = &status.current_promotion {
        actions.push(Action {
            action: "abort",
            label: "Abort",
            refusal: perms.refusal(Verb::Abort, "promotions", Some(p)),
            promotion: Some(p.clone()),
        });
    }
    if status.hold.is_some() {
        actions.push(Action {
            action: "lift-hold",
            label: "Lift hold",
            refusal: perms.refusal(Verb::Promote, "stages", Some(&name)),
            promotion: None,
        });
    }
    actions
}

/// What a Stage node says about health: the verdict, and Argo CD's message when it is
/// worth reading on the node (Unhealthy).
fn health_of(stage: &Stage, status: &StageStatus) -> Option<(HealthState, String)> {
    match &status.health {
        Some(h) => Some((h.status, h.message.clone())),
        // A Stage whose health will be judged but has not been read yet.
        None if stage.spec.health.is_some() || !status.applications.is_empty() => {
            Some((HealthState::Unknown, "not read from Argo CD yet".to_owned()))
        }
        None => None,
    }
}

/// The verification's line on a Stage node.
fn verification_text(v: &VerificationInfo) -> String {
    match v.phase {
        VerificationPhase::Pending => "verification: waiting for health".to_owned(),
        VerificationPhase::Running => {
            let successful: u32 = v.metrics.iter().map(|m| m.successful).sum();
            let measured: u32 = v.metrics.iter().map(|m| m.count).sum();
            if measured == 0 {
                "verifying: measuring".to_owned()
            } else {
                format!("verifying: {successful}/{measured} successful")
            }
        }
        phase => format!("verification: {phase:?}"),
    }
}

/// Whether the verification's message is shown on the node, not only in its title.
fn verification_message_shown(v: &VerificationInfo) -> bool {
    matches!(
        v.phase,
        VerificationPhase::Failed | VerificationPhase::Inconclusive | VerificationPhase::Error
    ) && !v.message.is_empty()
}

/// The Stage's running Promotion when it has written to git and waits (for a sync).
fn written_to_git<'a>(data: &'a ProjectData, status: &StageStatus) -> Option<&'a Promotion> {
    let p = data.running.get(status.current_promotion.as_ref()?)?;
    let s = p.status.as_ref()?;
    (s.written_to_git.is_some() && matches!(s.phase, PromotionPhase::Running)).then_some(p)
}

/// What the written-to-git line says it waits for.
fn waiting_for(promotion: &Promotion) -> &'static str {
    let message = promotion
        .status
        .as_ref()
        .map(|s| s.message.as_str())
        .unwrap_or_default();
    if message.contains("waiting for sync") {
        "waiting for sync"
    } else {
        "waiting"
    }
}

fn stage_node(data: &ProjectData, stage: &Stage, place: &Place) -> Markup {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let status = stage.status.clone().unwrap_or_default();
    let current = status
        .current_freight
        .as_ref()
        .and_then(|c| data.freight.get(&c.name).map(|f| (c, f)));
    let actions = stage_actions(data, stage, &status);
    let health = health_of(stage, &status);
    let written = written_to_git(data, &status);
    html! {
        div.node.stage data-stage=(name) data-node=(place.index) data-layer=(place.layer)
            data-row=(place.row) style=(place.style) {
            div.kind { "Stage" }
            a.name href={ "/projects/" (data.project) "/stages/" (name) } { (name) }
            div.current {
                @match (&status.current_freight, current) {
                    (Some(_), Some((_, freight))) => {
                        span.alias data-current=(freight.metadata.name.clone().unwrap_or_default()) { (freight_label(freight)) }
                        (artifacts(freight))
                    }
                    (Some(c), None) => { span.alias { (if c.alias.is_empty() { &c.name } else { &c.alias }) } }
                    (None, _) => { span.none { "no Freight yet" } }
                }
            }
            @if let Some((state, message)) = &health {
                @let label = format!("{state:?}");
                div class={ "state health " (label.to_lowercase()) } data-health=(label)
                    title=[(!message.is_empty()).then_some(message)] {
                    span.dot aria-hidden="true" {}
                    "health: " strong { (label) }
                    @if *state == HealthState::Unhealthy && !message.is_empty() {
                        div.detail { (message) }
                    }
                }
            }
            @if let Some(v) = &status.verification {
                @let phase = format!("{:?}", v.phase);
                div class={ "state verification " (phase.to_lowercase()) } data-phase=(phase)
                    data-freight=(v.freight) title=[(!v.message.is_empty()).then_some(&v.message)] {
                    span.dot aria-hidden="true" {}
                    (verification_text(v))
                    @if verification_message_shown(v) {
                        div.detail { (v.message) }
                    }
                }
            }
            @if let Some(p) = written {
                @let w = p.status.as_ref().and_then(|s| s.written_to_git.as_ref());
                div.state.written-to-git title=[p.status.as_ref().map(|s| s.message.as_str())] {
                    span.dot aria-hidden="true" {}
                    "written to git, " (waiting_for(p))
                    @if let Some(w) = w {
                        div.detail { code { (w.name) } " at " (view::commit_link(&w.repo_url, &w.commit)) }
                    }
                }
            }
            div.badges {
                @if let Some(p) = &status.current_promotion {
                    a.badge.promoting href={ "/projects/" (data.project) "/promotions/" (p) } { "promoting: " (p) }
                }
                @if let Some(h) = &status.hold {
                    span.badge.hold title=(h.reason) { "hold by " (h.by) }
                }
                @match window_text(data.windows.get(&name)) {
                    Some((_, text)) => { span.badge.window.closed { (text) } }
                    None => { span.badge.window.open { "window open" } }
                }
            }
            div.actions { (action_buttons(&name, &actions)) }
        }
    }
}

/// Pixels per line of node text (`app.css`: `.node { line-height: 18px }`) and of the
/// smaller lines (details, reasons, badges: 15px).
const LINE: u32 = 18;
const SMALL_LINE: u32 = 15;
/// The width text wraps at inside a node, and rough character widths at 14px and 11–12px.
const INNER_WIDTH: u32 = graph::NODE_WIDTH - 20;
const CHAR: u32 = 7;
const SMALL_CHAR: u32 = 6;

/// Lines `text` takes when wrapped at the node's width.
fn lines(text: &str, char_width: u32) -> u32 {
    let width = text.chars().count() as u32 * char_width;
    width.div_ceil(INNER_WIDTH).max(1)
}

/// Rows that boxes of these widths take when they wrap in the node.
fn rows(widths: impl IntoIterator<Item = u32>) -> u32 {
    let (mut rows, mut used) = (0, INNER_WIDTH);
    for w in widths {
        let w = w.min(INNER_WIDTH);
        if used + w > INNER_WIDTH {
            rows += 1;
            used = 0;
        }
        used += w + 4;
    }
    rows
}

/// Each node's height, estimated from what it shows (the script measures the real ones):
/// a Warehouse is as tall as its three lines, a Stage as its content.
fn node_heights(data: &ProjectData) -> Vec<u32> {
    let stages: HashMap<&str, &Stage> = data
        .stages
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    // Padding and border, top and bottom.
    let frame = 2 * 6 + 2;
    data.layout
        .nodes
        .iter()
        .map(|n| match &n.node {
            NodeRef::Warehouse(_) => frame + SMALL_LINE + LINE + SMALL_LINE,
            NodeRef::Stage(name) => match stages.get(name.as_str()) {
                Some(stage) => frame + stage_height(data, stage),
                None => graph::NODE_HEIGHT,
            },
        })
        .collect()
}

fn stage_height(data: &ProjectData, stage: &Stage) -> u32 {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let status = stage.status.clone().unwrap_or_default();
    // Kind, name, current Freight (its artifacts wrap after the alias).
    let mut height = SMALL_LINE + LINE;
    let current: Vec<u32> = match status
        .current_freight
        .as_ref()
        .and_then(|c| data.freight.get(&c.name))
    {
        Some(f) => std::iter::once(freight_label(f).len() as u32 * CHAR)
            .chain(
                f.spec
                    .images
                    .iter()
                    .map(|i| view::image_label(i).len() as u32 * SMALL_CHAR),
            )
            .chain(
                f.spec
                    .commits
                    .iter()
                    .map(|c| (view::repo_name(&c.repo_url).len() as u32 + 8) * SMALL_CHAR),
            )
            .collect(),
        None => vec![100],
    };
    height += rows(current) * LINE + 4;
    if let Some((state, message)) = health_of(stage, &status) {
        height += LINE;
        if state == HealthState::Unhealthy && !message.is_empty() {
            height += lines(&message, SMALL_CHAR) * SMALL_LINE;
        }
    }
    if let Some(v) = &status.verification {
        height += LINE;
        if verification_message_shown(v) {
            height += lines(&v.message, SMALL_CHAR) * SMALL_LINE;
        }
    }
    if written_to_git(data, &status).is_some() {
        height += LINE + SMALL_LINE;
    }
    let mut badges: Vec<u32> = Vec::new();
    if let Some(p) = &status.current_promotion {
        badges.push((p.len() as u32 + 11) * SMALL_CHAR + 14);
    }
    if let Some(h) = &status.hold {
        badges.push((h.by.len() as u32 + 8) * SMALL_CHAR + 14);
    }
    let window = window_text(data.windows.get(&name))
        .map(|(_, t)| t)
        .unwrap_or_else(|| "window open".to_owned());
    badges.push(window.len() as u32 * SMALL_CHAR + 14);
    height += rows(badges) * (SMALL_LINE + 4) + 4;
    let actions = stage_actions(data, stage, &status);
    height += rows(actions.iter().map(|a| a.label.len() as u32 * CHAR + 22)) * 30;
    for why in refusals(&actions) {
        height += lines(why, SMALL_CHAR) * SMALL_LINE;
    }
    height
}

fn timeline(data: &ProjectData) -> Markup {
    html! {
        section #timeline {
            h2 { "Freight" }
            @if data.timeline.is_empty() {
                p.empty { "No Freight yet. A Warehouse mints it when it finds new artifacts." }
            }
            ol.freight-list {
                @for f in &data.timeline {
                    @let id = f.metadata.name.clone().unwrap_or_default();
                    @let here: Vec<&String> = f.status.as_ref().map(|s| s.currently_in.keys().collect()).unwrap_or_default();
                    li data-freight=(id) class=[(data.selected.as_deref() == Some(id.as_str())).then_some("selected")] {
                        a href={ "?freight=" (id) @if let Some(b) = &data.before { "&before=" (b) } } {
                            span.alias { (freight_label(f)) }
                        }
                        " " (artifacts(f))
                        span.meta {
                            "from " (f.spec.origin.name) ", " (view::time(f.metadata.creation_timestamp.as_ref()))
                            @if !here.is_empty() {
                                " · in "
                                @for (i, s) in here.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    (s)
                                }
                            }
                        }
                    }
                }
            }
            nav.pages {
                @if data.before.is_some() {
                    a.newest href="?" { "← newest" }
                }
                @if let Some(older) = &data.older {
                    " "
                    a.older href={ "?before=" (older) } { "older →" }
                }
            }
        }
    }
}

/// Why `freight` may not enter `stage` (the gates', then the window's), and who approved
/// it there, if anyone did.
fn reasons_for(
    data: &ProjectData,
    stage: &Stage,
    freight: &Freight,
    now: jiff::Timestamp,
) -> (Vec<String>, Option<String>) {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let gates = availability(stage, freight, now);
    let mut reasons: Vec<String> = gates.reasons.iter().map(ToString::to_string).collect();
    if let Some((_, window)) = window_text(data.windows.get(&name)) {
        reasons.push(window);
    }
    (reasons, gates.approved_by)
}

fn availability_panel(data: &ProjectData) -> Markup {
    let Some(selected) = data.selected.as_ref().and_then(|id| data.freight.get(id)) else {
        return html! { section #availability { h2 { "Availability" } p.empty { "Select a Freight." } } };
    };
    let now = jiff::Timestamp::now();
    let id = selected.metadata.name.clone().unwrap_or_default();
    html! {
        section #availability data-freight=(id) {
            h2 { "Where " (freight_label(selected)) " may go" }
            p { (artifacts(selected)) }
            table {
                tbody {
                    @for stage in &data.stages {
                        @let name = stage.metadata.name.clone().unwrap_or_default();
                        @let (reasons, approved_by) = reasons_for(data, stage, selected, now);
                        @let here = selected.status.as_ref().is_some_and(|s| s.currently_in.contains_key(&name));
                        tr data-stage=(name) class=(if reasons.is_empty() { "available" } else { "unavailable" }) {
                            th { (name) }
                            td {
                                @if reasons.is_empty() {
                                    span.ok { "available" }
                                    @if let Some(by) = &approved_by { " (approved by " (by) ")" }
                                } @else {
                                    ul.reasons { @for r in &reasons { li { (r) } } }
                                }
                                @if here { " " span.here { "here now" } }
                            }
                        }
                    }
                }
            }
        }
    }
}
