//! The Freight timeline of the project page: newest first, a page at a time, each with its
//! artifacts, origin, age and the Stages it is in; the selected one marked.

use maud::{Markup, html};

use crate::api::Verb;

use super::super::view::{self, artifacts, freight_label};
use super::ProjectData;

/// How many of the Stages a Freight is in its row names (the rest are counted).
const IN_SHOWN: usize = 8;

pub(super) fn timeline(data: &ProjectData) -> Markup {
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
