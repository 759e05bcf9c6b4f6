//! `GET /`: the release board (what runs where across the projects the viewer may read,
//! and what is stuck), drawn from [`crate::server::board::visible_board`] as the API and
//! `dray get board` show it. One row per project, one column per Stage name; each cell
//! is two short lines — its Freight (alias, image tag or config commit, what differs
//! downstream) and its state as a colour and a word (what is stuck, else health and
//! verification) with how long it has been there — so 25 and more projects fit on one
//! 1080-px screen; the cell's `title` and the project page hold the details. The filters
//! are a plain GET form (`?name=&warehouse=&stuck=1`, `attention=true` as the API takes
//! it) and the columns and rows are paged by plain links ([`super::board_pages`]), so
//! everything works without JavaScript. With no filter and one project to show, `/` goes
//! straight to that project's page.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use crate::api::{HealthState, PromotionPhase, VerificationPhase};
use crate::pipeline::release_board::{
    Attention, BoardFilter, Cell, ProjectRow, ReleaseBoard, age_text,
};
use crate::server::AppState;
use crate::server::board::{board_filter, visible_board};

use super::board_pages::{self, Paging};
use super::{UiError, Viewer, layout};

/// `GET /`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, UiError> {
    let (paging, stuck, rest) = board_pages::split(&query)?;
    let mut filter = board_filter(&rest)?;
    filter.attention |= stuck;
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
            @if !board.rows.is_empty() { (table(&board, &filter, paging)) }
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
                input #board-attention type="checkbox" name="stuck" value="1" checked[filter.attention];
                " Stuck only (failed, unhealthy, held, frozen, waiting)"
            }
            button #board-filter type="submit" { "Filter" }
            @if !filter.is_empty() { a href="/" { "Clear filters" } }
        }
    }
}

/// How many projects are shown and how many are stuck, or why none is.
fn summary(board: &ReleaseBoard, filter: &BoardFilter) -> Markup {
    let stuck = board.rows.iter().filter(|r| r.needs_attention()).count();
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
                @if !filter.attention {
                    " "
                    @if stuck > 0 {
                        a.stuck-count href=(board_pages::href(&BoardFilter { attention: true, ..filter.clone() }, Paging::default(), |_| {})) {
                            strong { (stuck) " stuck" }
                        }
                    } @else {
                        span.ok { "Nothing stuck." }
                    }
                }
            }
        }
    }
}

fn table(board: &ReleaseBoard, filter: &BoardFilter, paging: Paging) -> Markup {
    let (cols, colpage) = board_pages::window(board.columns.len(), paging.cols, paging.colpage);
    let (rows, page) = board_pages::window(board.rows.len(), paging.rows, paging.page);
    let paging = Paging {
        colpage,
        page,
        ..paging
    };
    let columns = &board.columns[cols.clone()];
    html! {
        (board_pages::nav("board-colpages", "Stage names", board.columns.len(), &cols, colpage, paging.cols,
            |n| board_pages::href(filter, paging, |p| p.colpage = n)))
        (board_pages::nav("board-rowpages", "projects", board.rows.len(), &rows, page, paging.rows,
            |n| board_pages::href(filter, paging, |p| p.page = n)))
        div.board-scroll {
            table.board {
                caption.visually-hidden { "Freight in each Stage, by project" }
                thead {
                    tr {
                        th scope="col" { "Project" }
                        @for column in columns { th scope="col" data-column=(column) { (column) } }
                    }
                }
                tbody {
                    @for row in &board.rows[rows] { (project_row(board, columns, row)) }
                }
            }
        }
    }
}

fn project_row(board: &ReleaseBoard, columns: &[String], row: &ProjectRow) -> Markup {
    let warehouses = row.warehouses.join(", ");
    html! {
        tr data-project=(row.project) {
            th scope="row" title=[(!warehouses.is_empty()).then(|| format!("Warehouses: {warehouses}"))] {
                a href={ "/projects/" (row.project) } { (row.project) }
                @if !warehouses.is_empty() { " " span.warehouses { (warehouses) } }
            }
            @for (column, cell) in row.aligned(columns) {
                @match cell {
                    Some(cell) => { (stage_cell(board, &row.project, cell)) }
                    None => { td.absent data-stage=(column) { span.visually-hidden { "no such Stage" } } }
                }
            }
        }
    }
}

fn stage_cell(board: &ReleaseBoard, project: &str, cell: &Cell) -> Markup {
    let stuck = !cell.attention.is_empty();
    let age = cell.age(board.now).map(age_text);
    html! {
        td.cell.attention[stuck] data-stage=(cell.stage) title=(details(cell, age.as_deref())) {
            div.line {
                @match &cell.freight {
                    Some(f) => {
                        a.alias href={ "/projects/" (project) "?freight=" (f.id) } data-freight=(f.id) { (f.label()) }
                        @if let Some(version) = f.images.first().and_then(|i| i.rsplit_once(':')).map(|(_, tag)| tag) {
                            " " span.tag { (version) }
                        } @else if let Some(commit) = &f.commit {
                            " " code.commit { (commit) }
                        }
                    }
                    None => { span.none { "no Freight" } }
                }
                @if !cell.differs_from.is_empty() {
                    " " span.differs data-differs=(cell.differs_from.join(" ")) {
                        span aria-hidden="true" { "≠" } span.visually-hidden { "ahead of " } (cell.differs_from.join(", "))
                    }
                }
            }
            div.line {
                (state(project, cell))
                @if let Some(age) = &age {
                    " " span.age { (age) }
                }
            }
        }
    }
}

/// The cell's state as a colour and a word: what is stuck when something is (a link to
/// the Promotion when it failed or waits), else its health and verification.
fn state(project: &str, cell: &Cell) -> Markup {
    let health = cell.health.map(health_word);
    let phase = cell.verification;
    html! {
        @if !cell.attention.is_empty() {
            span.state.stuck data-health=[health] data-phase=[phase.map(|p| p.as_str())] {
                span.dot aria-hidden="true" {}
                @for (i, a) in cell.attention.iter().enumerate() {
                    @if i > 0 { ", " }
                    @match (&cell.promotion, a) {
                        (Some(p), Attention::PromotionFailed | Attention::Waiting) => {
                            a href={ "/projects/" (project) "/promotions/" (p.name) } data-attention=(a.word()) { (a.word()) }
                        }
                        _ => { strong data-attention=(a.word()) { (a.word()) } }
                    }
                }
            }
        } @else {
            @if let Some(word) = health {
                span class={ "state health " (word.to_lowercase()) } data-health=(word) {
                    span.dot aria-hidden="true" {} (word)
                }
            }
            @if let Some(phase) = phase {
                " " span class={ "state verification " (phase.as_str().to_lowercase()) } data-phase=(phase.as_str()) {
                    (verification_word(phase))
                }
            }
            @if let Some(p) = cell.promotion.as_ref().filter(|p| p.phase == PromotionPhase::Running) {
                " " a.promotion data-phase=(p.phase.as_str()) href={ "/projects/" (project) "/promotions/" (p.name) } { "promoting" }
            }
        }
    }
}

/// Everything about a cell in one line of text, for its `title`.
fn details(cell: &Cell, age: Option<&str>) -> String {
    let mut parts = vec![cell.stage.clone()];
    if let Some(f) = &cell.freight {
        parts.push(format!("Freight {} ({})", f.label(), f.id));
        parts.extend(f.images.iter().cloned());
        if let Some(commit) = &f.commit {
            parts.push(format!("config commit {commit}"));
        }
        if let (Some(age), Some(since)) = (age, f.since) {
            parts.push(format!("there for {age}, since {since}"));
        }
    } else {
        parts.push("no Freight yet".into());
    }
    if let Some(health) = cell.health {
        parts.push(format!("health: {}", health_word(health)));
    }
    if let Some(phase) = cell.verification {
        parts.push(format!("verification: {}", verification_word(phase)));
    }
    if let Some(p) = &cell.promotion {
        parts.push(format!("promotion {} {}", p.name, p.phase.as_str()));
    }
    if !cell.attention.is_empty() {
        let words: Vec<&str> = cell.attention.iter().map(|a| a.word()).collect();
        parts.push(format!("needs attention: {}", words.join(", ")));
    }
    if !cell.differs_from.is_empty() {
        parts.push(format!("ahead of {}", cell.differs_from.join(", ")));
    }
    parts.join(" · ")
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
        VerificationPhase::Successful => "verified",
        phase => phase.as_str(),
    }
}
