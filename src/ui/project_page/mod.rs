//! `/projects/{p}` (one project at a glance): the pipeline as a
//! graph with each Stage's Freight (at most `scope::GRAPH_LIMIT` Stage cards: a large
//! graph collapses by depth, and a search or a Warehouse picks the rest), health, verification, promotion, hold, window and
//! actions; the Freight timeline, newest first, 50 at a time; and, for the selected
//! Freight, each Stage's `available` or the reasons it is not.
//!
//! Each Stage node shows its health (`status.health`, Argo CD's message when Unhealthy),
//! its verification (waiting for health, measuring with counts, or how it ended) and a
//! promotion that is written to git and waiting for Argo CD to sync, apart from failures.
//!
//! Reads are bounded whatever the project's size: the outline of the Stages (`outline`: a
//! few fields of each, picked by the store), the Stages drawn (one batched read), one list of Warehouses,
//! the newest page of Freight (an index read), one batched read of the Freight Stages
//! hold, one batched read of the Promotions running in them, the ProjectConfig (its windows,
//! and its notifications' deliveries, shown under "Notifications") and one
//! RoleBinding list (the caller's permissions). Nothing is read per Stage.
//! `/projects/{p}/live` answers the part the script swaps in when the change feed moves.
//!
//! The parts, one job each:
//! - `data`: reading what the page shows ([`ProjectData`]), the board of each Stage
//!   included (`crate::pipeline::board`: gates and windows are decided there);
//! - `outline`: the few fields of every Stage that choosing and placing them needs;
//! - `scope`: which Stages the graph draws (all, or beyond a size collapsed by depth;
//!   `?q=` and `?warehouse=` pick them);
//! - `pipeline`: the graph section, Warehouses and the edges, the search;
//! - `stage_node`: one Stage's node (Freight, health, verification, badges, buttons);
//! - `heights`: each node's height, estimated for the first layout;
//! - `timeline`: the Freight timeline;
//! - `availability`: where the selected Freight may go, and why not;
//! - `dora`: the DORA panel (deployments per day as bars, the four numbers per Stage),
//!   below the live part: it reads the project's newest Promotions (bounded, see
//!   `pipeline::dora::read`) once per page load, not on every live update.

mod availability;
mod data;
mod dora;
mod heights;
mod minimap;
mod outline;
mod pipeline;
mod scope;
mod stage_node;
mod timeline;

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::Verb;
use crate::server::AppState;

use super::{UiError, Viewer, layout};

pub(crate) use data::ProjectData;
use data::load;
pub(crate) use minimap::minimap;

/// How many Freight the timeline shows per page (one lane).
pub(crate) const TIMELINE_PAGE: usize = 50;
/// How many Freight each Warehouse's lane shows when every lane is shown.
pub(crate) const LANE_PAGE: usize = 6;
/// The most lanes shown at once; the other Warehouses are links to their lane.
pub(crate) const MAX_LANES: usize = 12;

/// The query of the project page.
#[derive(Deserialize, Debug, Default)]
pub(crate) struct ProjectQuery {
    /// The selected Freight (id).
    #[serde(default)]
    pub(crate) freight: Option<String>,
    /// Show Freight older than this one (id).
    #[serde(default)]
    pub(crate) before: Option<String>,
    /// Show only this Warehouse's Freight lane, paged.
    #[serde(default)]
    pub(crate) lane: Option<String>,
    /// Draw only the Stages whose name contains this.
    #[serde(default)]
    pub(crate) q: Option<String>,
    /// Draw only the Stages taking Freight from this Warehouse.
    #[serde(default)]
    pub(crate) warehouse: Option<String>,
}

/// `GET /projects/{project}`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
    Query(query): Query<ProjectQuery>,
) -> Result<Markup, UiError> {
    let data = load(&state, &viewer, &project, &query).await?;
    let numbers = dora::load(&state, &viewer, &project).await?;
    Ok(layout::page(
        &project,
        Some(&viewer),
        Some(&project),
        html! {
            div #live data-selected=[data.selected.as_deref()] { (live_body(&data)) }
            @if let Some(numbers) = &numbers { (dora::panel(numbers)) }
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
    let frozen = data
        .freeze
        .as_ref()
        .is_some_and(|f| f.is_active_at(jiff::Timestamp::now()));
    let (action, label) = if frozen {
        ("unfreeze", "Unfreeze project")
    } else {
        ("freeze", "Freeze project")
    };
    let refusal = data
        .permissions
        .refusal(Verb::Freeze, "projects", Some(&data.project));
    html! {
        h1 { "Project " (data.project) }
        (super::levers::banner(data.freeze.as_ref(), None))
        div.project-actions {
            button.action.freeze type="button" data-action=(action)
                disabled[refusal.is_some()] title=[refusal.as_deref()] { (label) }
        }
        (pipeline::pipeline(data))
        div.columns {
            (timeline::timeline(data))
            (availability::availability_panel(data))
        }
        (deliveries(data))
    }
}

/// How notifications and commit statuses went, when the project has any.
fn deliveries(data: &ProjectData) -> Markup {
    let (records, pending) = &data.deliveries;
    if records.is_empty() && *pending == 0 {
        return html! {};
    }
    html! {
        section #deliveries {
            h2 { "Notifications" }
            @if *pending > 0 {
                p.muted { (pending) " deliveries waiting" }
            }
            table {
                thead { tr { th { "Name" } th { "Last delivered" } th { "Failures" } th { "Last error" } } }
                tbody {
                    @for record in records {
                        tr data-notification=(record.name) {
                            td { (record.name) }
                            td { @match &record.last_delivered_at { Some(t) => (t.0.to_string()), None => "never" } }
                            td { (record.failures) }
                            td { (record.last_error.as_deref().unwrap_or("-")) }
                        }
                    }
                }
            }
        }
    }
}
