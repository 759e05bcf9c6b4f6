//! The Freight timeline of the project page: newest first, a page at a time, each with its
//! artifacts, origin, age and the Stages it is in; the selected one marked.

use maud::{Markup, html};

use super::super::view::{self, artifacts, freight_label};
use super::ProjectData;

/// How many of the Stages a Freight is in its row names (the rest are counted).
const IN_SHOWN: usize = 8;

pub(super) fn timeline(data: &ProjectData) -> Markup {
    let project = &data.project;
    // Each row's diff link compares it with the next older Freight from its Warehouse.
    let previous: Vec<Option<&str>> = data
        .timeline
        .iter()
        .enumerate()
        .map(|(i, f)| {
            data.timeline[i + 1..]
                .iter()
                .find(|o| o.spec.origin.name == f.spec.origin.name)
                .and_then(|o| o.metadata.name.as_deref())
        })
        .collect();
    html! {
        section #timeline {
            h2 { "Freight" }
            @if data.timeline.is_empty() {
                p.empty { "No Freight yet. A Warehouse mints it when it finds new artifacts." }
            }
            @if data.timeline.len() > 1 {
                p { a.compare href={ "/projects/" (project) "/diff" } { "Compare two Freight…" } }
            }
            ol.freight-list {
                @for (f, previous) in data.timeline.iter().zip(&previous) {
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
