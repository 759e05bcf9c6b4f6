//! `GET /`: the release board (what runs where across the projects the viewer may read,
//! and what is stuck), drawn from [`crate::server::board::visible_board`] as the API and
//! `dray get board` show it. One row per project, one column per Stage name; each cell
//! its Freight (alias, images, config commit), how long it has been there, health and
//! verification as a colour and a word, what needs attention, and the downstream Stages
//! that hold other Freight. The filters are a plain GET form (`?name=&warehouse=&
//! attention=true`), so they work without JavaScript. With no filter and one project to
//! show, `/` goes straight to that project's page.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use crate::api::{HealthState, VerificationPhase};
use crate::pipeline::release_board::{BoardFilter, Cell, ProjectRow, ReleaseBoard, age_text};
use crate::server::AppState;
use crate::server::board::{board_filter, visible_board};

use super::{UiError, Viewer, layout};

/// `GET /`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, UiError> {
    let filter = board_filter(&query)?;
    let board = visible_board(&state, &viewer.caller, &filter).await?;
    if let ([only], true) = (board.rows.as_slice(), query.is_empty())
        && board.projects == 1
    {
        return Ok(Redirect::to(&format!("/projects/{}", only.project)).into_response());
    }
    Ok(layout::page(
        "Release board",
        Some(&viewer),
        None,
        html! {
            h1 { "Release board" }
            (filters(&filter))
            (summary(&board, &filter))
            @if !board.rows.is_empty() { (table(&board)) }
        },
    )
    .into_response())
}

/// The filter form: a GET to `/`, labelled fields, no script needed.
fn filters(filter: &BoardFilter) -> Markup {
    html! {
        form.board-filters method="get" action="/" role="search" aria-label="Filter the board" {
            label for="board-name" { "Project name" }
            input #board-name type="search" name="name" value=[filter.name.as_deref()];
            label for="board-warehouse" { "Warehouse" }
            input #board-warehouse type="text" name="warehouse" value=[filter.warehouse.as_deref()];
            label for="board-attention" {
                input #board-attention type="checkbox" name="attention" value="true" checked[filter.attention];
                " Needs attention"
            }
            button #board-filter type="submit" { "Filter" }
            @if !filter.is_empty() { a href="/" { "Clear filters" } }
        }
    }
}

/// How many projects are shown, or why none is.
fn summary(board: &ReleaseBoard, filter: &BoardFilter) -> Markup {
    html! {
        @if board.projects == 0 {
            p.empty { "No project you may see. Apply one with " code { "dray apply -f" } ", or ask an admin for a RoleBinding." }
        } @else if board.rows.is_empty() {
            p.empty #board-summary { "No project of " (board.projects) " matches the filters." }
        } @else {
            p #board-summary {
                (board.rows.len()) " of " (board.projects) " projects"
                @if filter.attention { ", each with a Stage that needs attention" }
                "."
            }
        }
    }
}

fn table(board: &ReleaseBoard) -> Markup {
    html! {
        div.board-scroll {
            table.board {
                caption.visually-hidden { "Freight in each Stage, by project" }
                thead {
                    tr {
                        th scope="col" { "Project" }
                        @for column in &board.columns { th scope="col" data-column=(column) { (column) } }
                    }
                }
                tbody {
                    @for row in &board.rows { (project_row(board, row)) }
                }
            }
        }
    }
}

fn project_row(board: &ReleaseBoard, row: &ProjectRow) -> Markup {
    html! {
        tr data-project=(row.project) {
            th scope="row" {
                a href={ "/projects/" (row.project) } { (row.project) }
                @if !row.warehouses.is_empty() {
                    div.warehouses { (row.warehouses.join(", ")) }
                }
            }
            @for (column, cell) in row.aligned(&board.columns) {
                @match cell {
                    Some(cell) => { (stage_cell(board, &row.project, cell)) }
                    None => { td.absent data-stage=(column) { span.visually-hidden { "no such Stage" } } }
                }
            }
        }
    }
}

fn stage_cell(board: &ReleaseBoard, project: &str, cell: &Cell) -> Markup {
    let attention = !cell.attention.is_empty();
    html! {
        td.cell.attention[attention] data-stage=(cell.stage) {
            @match &cell.freight {
                Some(f) => {
                    a.alias href={ "/projects/" (project) "?freight=" (f.id) } data-freight=(f.id) { (f.label()) }
                    div.artifacts {
                        @for image in &f.images { span.image { (image) } }
                        @if let Some(commit) = &f.commit { span.commit title="config commit" { code { (commit) } } }
                    }
                    @if let Some(age) = cell.age(board.now) {
                        div.age title=[f.since.map(|s| s.to_string())] { "for " (age_text(age)) }
                    }
                }
                None => { span.none { "no Freight yet" } }
            }
            @if let Some(health) = cell.health {
                @let word = health_word(health);
                div class={ "state health " (word.to_lowercase()) } data-health=(word) {
                    span.dot aria-hidden="true" {} "health: " strong { (word) }
                }
            }
            @if let Some(phase) = cell.verification {
                div class={ "state verification " (phase.as_str().to_lowercase()) } data-phase=(phase.as_str()) {
                    span.dot aria-hidden="true" {} "verification: " strong { (verification_word(phase)) }
                }
            }
            @if let Some(p) = &cell.promotion {
                div.promotion data-phase=(p.phase.as_str()) {
                    a href={ "/projects/" (project) "/promotions/" (p.name) } { "promotion " (p.phase.as_str()) }
                }
            }
            @if attention {
                ul.attention-list aria-label="needs attention" {
                    @for a in &cell.attention { li data-attention=(a.word()) { (a.word()) } }
                }
            }
            @if !cell.differs_from.is_empty() {
                div.differs data-differs=(cell.differs_from.join(" ")) {
                    span aria-hidden="true" { "≠ " } "ahead of " (cell.differs_from.join(", "))
                }
            }
        }
    }
}

/// The word for a health verdict.
fn health_word(health: HealthState) -> &'static str {
    match health {
        HealthState::Unknown => "Unknown",
        HealthState::Healthy => "Healthy",
        HealthState::Progressing => "Progressing",
        HealthState::Unhealthy => "Unhealthy",
    }
}

/// The word for a verification phase.
fn verification_word(phase: VerificationPhase) -> &'static str {
    match phase {
        VerificationPhase::Pending => "waiting for health",
        VerificationPhase::Running => "measuring",
        phase => phase.as_str(),
    }
}
