//! The Freight timeline of the project page, in lanes: one per Warehouse (its newest few,
//! with a link to the whole lane), or, for a project with one Warehouse or one lane asked
//! for (`?lane=W`), one lane paged newest first. Each row has its artifacts, origin, age,
//! the Stages it is in and a link to its diff with the previous Freight of its Warehouse;
//! the selected one is marked.

use maud::{Markup, html};

use crate::api::Verb;

use super::super::view::{self, artifacts, freight_label};
use super::ProjectData;
use super::data::Lane;

/// How many of the Stages a Freight is in its row names (the rest are counted).
const IN_SHOWN: usize = 8;

pub(super) fn timeline(data: &ProjectData) -> Markup {
    let project = &data.project;
    html! {
        section #timeline {
            h2 { "Freight" }
            @if data.timeline.is_empty() {
                p.empty { "No Freight yet. A Warehouse mints it when it finds new artifacts." }
            }
            @if data.timeline.len() > 1 {
                p { a.compare href={ "/projects/" (project) "/diff" } { "Compare two Freight…" } }
            }
            @if data.lanes.one_asked() {
                p.lane-scope { "One Warehouse's lane · " a href="?" { "every lane" } }
            }
            @for lane in &data.lanes.shown {
                @if data.lanes.is_single() && !data.lanes.one_asked() {
                    (rows(data, lane))
                } @else {
                    section.lane data-lane=[lane.warehouse.as_deref()] {
                        h3 { "Warehouse " (lane.warehouse.as_deref().unwrap_or_default()) }
                        @if lane.freight.is_empty() { p.empty { "No Freight from it yet." } }
                        (rows(data, lane))
                    }
                }
            }
            @if !data.lanes.more.is_empty() {
                p.more-lanes {
                    "More Warehouses: "
                    @for (i, w) in data.lanes.more.iter().enumerate() {
                        @if i > 0 { ", " }
                        a href={ "?lane=" (w) } { (w) }
                    }
                }
            }
        }
    }
}

/// A lane's rows and its paging.
fn rows(data: &ProjectData, lane: &Lane) -> Markup {
    let project = &data.project;
    let paged = data.lanes.is_single();
    // Each row's diff link compares it with the next older Freight from its Warehouse.
    let previous: Vec<Option<&str>> = lane
        .freight
        .iter()
        .enumerate()
        .map(|(i, f)| {
            lane.freight[i + 1..]
                .iter()
                .find(|o| o.spec.origin.name == f.spec.origin.name)
                .and_then(|o| o.metadata.name.as_deref())
        })
        .collect();
    let lane_query = match (&lane.warehouse, data.lanes.one_asked()) {
        (Some(w), true) => format!("&lane={w}"),
        _ => String::new(),
    };
    html! {
        ol.freight-list {
            @for (f, previous) in lane.freight.iter().zip(&previous) {
                @let id = f.metadata.name.clone().unwrap_or_default();
                @let here: Vec<&String> = f.status.as_ref().map(|s| s.currently_in.keys().collect()).unwrap_or_default();
                li data-freight=(id) class=[(data.selected.as_deref() == Some(id.as_str())).then_some("selected")] {
                    a href={ "?freight=" (id) (lane_query) @if let Some(b) = &data.before { "&before=" (b) } } {
                        span.alias { (freight_label(f)) }
                    }
                    " " (artifacts(f))
                    @for r in super::super::levers::rejections(f) {
                        " " span.badge.rejected { (r) }
                    }
                    @let rejected = f.status.as_ref().is_some_and(|s| s.rejected.is_some());
                    @let refusal = data.permissions.refusal(Verb::Reject, "freight", Some(&id));
                    " " button.action.reject type="button" data-action=(if rejected { "unreject" } else { "reject" })
                        data-freight=(id) disabled[refusal.is_some()] title=[refusal.as_deref()] {
                        (if rejected { "Unreject" } else { "Reject" })
                    }
                    span.meta {
                        "from " (f.spec.origin.name) ", " (view::time(f.metadata.creation_timestamp.as_ref()))
                        @if !here.is_empty() {
                            " · in "
                            @for (i, s) in here.iter().take(IN_SHOWN).enumerate() {
                                @if i > 0 { ", " }
                                (s)
                            }
                            @if here.len() > IN_SHOWN { " and " (here.len() - IN_SHOWN) " more" }
                        }
                    }
                    @if let Some(previous) = previous {
                        " "
                        a.diff href={ "/projects/" (project) "/diff?from=" (previous) "&to=" (id) }
                            title="what changed since the previous Freight from this Warehouse" { "diff" }
                    }
                }
            }
        }
        nav.pages {
            @if paged {
                @if data.before.is_some() {
                    a.newest href={ "?" (lane_query.trim_start_matches('&')) } { "← newest" }
                }
                @if let Some(older) = &lane.older {
                    " "
                    a.older href={ "?before=" (older) (lane_query) } { "older →" }
                }
            } @else if let (Some(w), Some(_)) = (&lane.warehouse, &lane.older) {
                a.older href={ "?lane=" (w) } { "all of " (w) "'s Freight →" }
            }
        }
    }
}
