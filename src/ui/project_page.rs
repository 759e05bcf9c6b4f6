//! `/` (the projects) and `/projects/{p}` (one project at a glance): the pipeline as a
//! graph with each Stage's Freight, health, verification, promotion, hold, window and
//! actions; the Freight timeline, newest first, 50 at a time; and, for the selected
//! Freight, each Stage's `available` or the reasons it is not.
//!
//! Reads are bounded whatever the project's size: one list of Stages, one of Warehouses,
//! the newest page of Freight (an index read), one batched read of the Freight Stages
//! hold, one ProjectConfig and one RoleBinding list (the caller's permissions). Nothing
//! is read per Stage. `/projects/{p}/live` answers the part the script swaps in when the
//! change feed moves.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::{
    Freight, FreightOriginKind, HealthState, Kind, ObjectKey, Project, ProjectConfig, Stage, Verb,
    Warehouse,
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
    Ok(ProjectData {
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
    })
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
            div.graph style={ "width:" (layout.width()) "px;height:" (layout.height()) "px" } {
                svg.edges width=(layout.width()) height=(layout.height()) aria-hidden="true" {
                    @for &(from, to) in &layout.edges {
                        path d=(layout.edge_path(from, to)) {}
                    }
                }
                @for placed in &layout.nodes {
                    @let style = format!("left:{}px;top:{}px", placed.x(), placed.y());
                    @match &placed.node {
                        NodeRef::Warehouse(name) => {
                            div.node.warehouse data-warehouse=(name) style=(style) {
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
                                (stage_node(data, stage, &style))
                            }
                        }
                    }
                }
            }
        }
    }
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
        @let whys: Vec<&str> = actions.iter().filter_map(|a| a.refusal.as_deref()).collect();
        @if !whys.is_empty() {
            ul.whys {
                @for why in &whys { li.why { (why) } }
            }
        }
    }
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

fn stage_node(data: &ProjectData, stage: &Stage, style: &str) -> Markup {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let status = stage.status.clone().unwrap_or_default();
    let current = status
        .current_freight
        .as_ref()
        .and_then(|c| data.freight.get(&c.name).map(|f| (c, f)));
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
    if stage.spec.verification.is_some() {
        actions.push(Action {
            action: "verify",
            label: "Verify",
            refusal: perms.refusal(Verb::Verify, "stages", Some(&name)),
            promotion: None,
        });
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
    html! {
        div.node.stage data-stage=(name) style=(style) {
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
            div.badges {
                @let health = status.health.as_ref().map(|h| h.status).unwrap_or_default();
                @if status.health.is_some() {
                    span class={ "badge health " (format!("{health:?}").to_lowercase()) } title=[status.health.as_ref().map(|h| h.message.as_str())] {
                        "health: " (format!("{health:?}"))
                    }
                }
                @if let Some(v) = &status.verification {
                    span class={ "badge verification " (format!("{:?}", v.phase).to_lowercase()) } title=(v.message) {
                        "verification: " (format!("{:?}", v.phase))
                    }
                }
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
                @if health == HealthState::Unhealthy {
                    span.sr { "unhealthy" }
                }
            }
            div.actions { (action_buttons(&name, &actions)) }
        }
    }
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
