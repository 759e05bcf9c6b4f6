//! The pipeline section of the project page: the graph (`super::super::graph` places the
//! nodes), its edges, the Warehouse nodes, and each Stage's node (`super::stage_node`).

use std::collections::HashMap;

use maud::{Markup, html};

use crate::api::{FreightOriginKind, FreightRequest, Stage, Warehouse};

use super::super::graph::{self, NodeRef, Upstream};
use super::super::view;
use super::ProjectData;
use super::stage_node::{Place, stage_node};

/// What feeds the Stage in the graph: Warehouses it takes Freight from directly, and its
/// upstream Stages.
pub(super) fn upstreams(requested_freight: &[FreightRequest]) -> Vec<Upstream> {
    let mut ups = Vec::new();
    for request in requested_freight {
        if request.sources.direct && request.origin.kind == FreightOriginKind::Warehouse {
            ups.push(Upstream::Warehouse(request.origin.name.clone()));
        }
        ups.extend(request.sources.stages.iter().cloned().map(Upstream::Stage));
    }
    ups
}

/// From how many Stages the page shows the overview minimap.
const MINIMAP_FROM: usize = 12;

pub(super) fn pipeline(data: &ProjectData) -> Markup {
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
            (scope_bar(data))
            @if data.scope.total > MINIMAP_FROM {
                figure.minimap {
                    img src={ "/projects/" (data.project) "/minimap.svg" } loading="lazy"
                        alt={ "Overview of all " (data.scope.total) " Stages, by column, coloured by health" };
                    figcaption { "All " (data.scope.total) " Stages: green healthy, amber progressing, red unhealthy, grey holding Freight, pale empty." }
                }
            }
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
                            @let refused = warehouses.get(name.as_str()).and_then(|w| criteria_refusal(w));
                            div.node.warehouse.criteria-refused[refused.is_some()] data-warehouse=(name) data-node=(place.index)
                                data-layer=(place.layer) data-row=(place.row) style=(place.style)
                                title=[refused] {
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

/// The Stage search (a GET form, so it works without JavaScript) and, when the graph
/// leaves Stages out, how many and where to find them.
fn scope_bar(data: &ProjectData) -> Markup {
    let scope = &data.scope;
    let base = format!("/projects/{}", data.project);
    html! {
        form.stage-search method="get" action=(base) role="search" aria-label="Find a Stage" {
            label for="stage-q" { "Find a Stage" }
            input #stage-q type="search" name="q" value=[scope.q.as_deref()];
            @if let Some(w) = &scope.warehouse { input type="hidden" name="warehouse" value=(w); }
            @if let Some(f) = &data.selected { input type="hidden" name="freight" value=(f); }
            button #stage-search type="submit" { "Find" }
            @if scope.q.is_some() || scope.warehouse.is_some() { " " a.all href=(base) { "all Stages" } }
        }
        @if scope.is_partial() {
            p #scope role="status" data-shown=(data.stages.len()) data-total=(scope.total) {
                "Showing " (data.stages.len()) " of " (scope.total) " Stages"
                @if let Some(q) = &scope.q { ", those named like “" (q) "” (" (scope.matched) ")" }
                @if let Some(w) = &scope.warehouse { ", taking Freight from " (w) }
                @if let Some(d) = scope.depth { ", up to " (d + 1) " steps from the Warehouses" }
                "."
                @if !scope.hidden_by_warehouse.is_empty() {
                    " Not shown, by Warehouse: "
                    @for (i, (w, n)) in scope.hidden_by_warehouse.iter().enumerate() {
                        @if i > 0 { ", " }
                        a data-scope-warehouse=(w) href={ (base) "?warehouse=" (w) } { (w) " (" (n) ")" }
                    }
                    "."
                }
            }
        }
    }
}

/// The message of a Warehouse's refused (or failed) `freightCreationCriteria`, shown as
/// the node's tooltip.
fn criteria_refusal(warehouse: &Warehouse) -> Option<String> {
    warehouse
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::CRITERIA_CONDITION && c.status == "False")
        .map(|c| c.message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Condition, WarehouseStatus};

    #[test]
    fn a_refused_criteria_is_the_warehouse_nodes_tooltip() {
        let mut warehouse = Warehouse::new("app", Default::default());
        assert_eq!(criteria_refusal(&warehouse), None);
        let verdict = |status: &str| Condition {
            type_: crate::api::CRITERIA_CONDITION.into(),
            status: status.into(),
            message: "freightCreationCriteria refused reg/app:v2".into(),
            ..Condition::default()
        };
        warehouse.status = Some(WarehouseStatus {
            conditions: vec![verdict("True")],
            ..WarehouseStatus::default()
        });
        assert_eq!(criteria_refusal(&warehouse), None);
        warehouse.status = Some(WarehouseStatus {
            conditions: vec![verdict("False")],
            ..WarehouseStatus::default()
        });
        assert_eq!(
            criteria_refusal(&warehouse).as_deref(),
            Some("freightCreationCriteria refused reg/app:v2")
        );
    }
}
