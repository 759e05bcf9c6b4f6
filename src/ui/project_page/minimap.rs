//! `/projects/{p}/minimap.svg`: the overview of the whole pipeline, however large — every
//! Warehouse and Stage as a small mark in its column (the same layout as the graph: a
//! Stage's column is its longest path from a Warehouse), a Stage coloured by its health,
//! with its name as the mark's tooltip. The project page loads it lazily beside the graph
//! (an `<img>`), so the page's first response does not grow with it.
//!
//! One read of the Stages' outline (`super::outline`) and one of the Warehouses; the caller needs `list` on Stages, as
//! for the page.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use maud::html;

use crate::api::{HealthState, Kind, Verb, Warehouse};
use crate::server::AppState;

use super::super::graph::{self, NodeRef};
use super::super::{UiError, Viewer};
use super::outline::StageOutline;
use super::pipeline::upstreams;

/// One mark's size and the gap after it, in the SVG's units.
const MARK: u32 = 6;
const GAP: u32 = 2;
/// The most rows drawn per column; a taller column is cut with a count beneath.
const MAX_ROWS: usize = 400;

/// The colour of a Stage's mark.
fn colour(stage: &StageOutline) -> &'static str {
    let holds = stage.holds_freight;
    match stage.health {
        Some(HealthState::Healthy) => "#1a7f37",
        Some(HealthState::Progressing) => "#bf8700",
        Some(HealthState::Unhealthy) => "#cf222e",
        _ if holds => "#8c959f",
        _ => "#d0d7de",
    }
}

/// `GET /projects/{project}/minimap.svg`.
pub(crate) async fn minimap(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
) -> Result<impl IntoResponse, UiError> {
    let store = state.store.as_ref();
    viewer
        .caller
        .authorize(store, Verb::List, "stages", Some(&project), None)
        .await?;
    let stages = super::outline::read(store, &project).await?;
    let warehouses: Vec<String> = store
        .list(Kind::Warehouse, Some(&project))
        .await?
        .iter()
        .filter_map(|w| w.to_typed::<Warehouse>().ok()?.metadata.name)
        .collect();
    let layout = graph::layout(
        &warehouses,
        &stages
            .iter()
            .map(|s| (s.name.clone(), upstreams(&s.requested_freight)))
            .collect::<Vec<_>>(),
    );
    let by_name: std::collections::HashMap<&str, &StageOutline> =
        stages.iter().map(|s| (s.name.as_str(), s)).collect();
    let step = MARK + GAP;
    let columns = layout.nodes.iter().map(|n| n.layer + 1).max().unwrap_or(1);
    let tallest = layout.nodes.iter().map(|n| n.row + 1).max().unwrap_or(1);
    let mut cut = vec![0usize; columns];
    for n in &layout.nodes {
        if n.row >= MAX_ROWS {
            cut[n.layer] += 1;
        }
    }
    let rows = tallest.min(MAX_ROWS) as u32 + u32::from(cut.iter().any(|&c| c > 0)) * 2;
    let (width, height) = (columns as u32 * step * 3 + GAP, rows * step + GAP);
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } role="img" {
            title { "Pipeline of " (project) ": " (warehouses.len()) " Warehouses, " (stages.len()) " Stages" }
            @for n in layout.nodes.iter().filter(|n| n.row < MAX_ROWS) {
                @let (x, y) = (GAP + n.layer as u32 * step * 3, GAP + n.row as u32 * step);
                @match &n.node {
                    NodeRef::Warehouse(name) => {
                        rect x=(x) y=(y) width=(MARK * 2) height=(MARK) fill="#0969da" { title { "Warehouse " (name) } }
                    }
                    NodeRef::Stage(name) => {
                        @let fill = by_name.get(name.as_str()).map_or("#d0d7de", |s| colour(s));
                        rect x=(x) y=(y) width=(MARK * 2) height=(MARK) fill=(fill) data-stage=(name) { title { (name) } }
                    }
                }
            }
            @for (layer, n) in cut.iter().enumerate().filter(|(_, n)| **n > 0) {
                text x=(GAP + layer as u32 * step * 3) y=(height - GAP) font-size="8" { "+" (n) }
            }
        }
    };
    Ok((
        [(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")],
        svg.into_string(),
    ))
}
