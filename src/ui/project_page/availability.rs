//! Where the selected Freight may go: for each Stage, `available` (and who approved it) or
//! every reason it is not, as the Stage's board says (the gates', then the window's, then
//! the freezes').

use maud::{Markup, html};

use crate::api::Stage;

use super::super::view::{artifacts, freight_label};
use super::ProjectData;
use super::stage_node::window_text;

/// Why the selected Freight `id` may not enter `stage` (the gates', then the window's), and
/// who approved it there, if anyone did: what the Stage's board says.
fn reasons_for(data: &ProjectData, stage: &Stage, id: &str) -> (Vec<String>, Option<String>) {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let board = data.boards.get(&name);
    let gates = board.and_then(|b| b.gates(id));
    let mut reasons: Vec<String> = gates
        .map(|g| {
            g.availability
                .reasons
                .iter()
                .map(ToString::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(window) = window_text(board) {
        reasons.push(window);
    }
    // A freeze gates every Freight alike: the project's, then the Stage's, as promote says.
    let project = crate::api::Project {
        status: Some(crate::api::ProjectStatus {
            freeze: data.freeze.clone(),
            ..Default::default()
        }),
        ..crate::api::Project::new(&data.project, Default::default())
    };
    for reason in crate::pipeline::freeze::reasons(Some(&project), stage, jiff::Timestamp::now()) {
        reasons.push(reason.to_string());
    }
    (
        reasons,
        gates.and_then(|g| g.availability.approved_by.clone()),
    )
}

pub(super) fn availability_panel(data: &ProjectData) -> Markup {
    let Some(selected) = data.selected.as_ref().and_then(|id| data.freight.get(id)) else {
        return html! { section #availability { h2 { "Availability" } p.empty { "Select a Freight." } } };
    };
    let id = selected.metadata.name.clone().unwrap_or_default();
    html! {
        section #availability data-freight=(id) {
            h2 { "Where " (freight_label(selected)) " may go" }
            p { (artifacts(selected)) }
            table {
                tbody {
                    @for stage in &data.stages {
                        @let name = stage.metadata.name.clone().unwrap_or_default();
                        @let (reasons, approved_by) = reasons_for(data, stage, &id);
                        @let here = selected.status.as_ref().is_some_and(|s| s.currently_in.contains_key(&name));
                        tr data-stage=(name) class=(if reasons.is_empty() { "available" } else { "unavailable" }) {
                            th { (name) }
                            td {
                                @if reasons.is_empty() {
                                    span.ok { "available" }
                                    @if let Some(by) = &approved_by { " (approved by " (by) ")" }
                                } @else {
                                    ul.reasons { @for r in &reasons { li { (crate::ui::view::message(r)) } } }
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
