//! `/projects/{p}/diff?from=A&to=B`: the Freight diff in the browser — each image, chart
//! and config commit (`from → to`, unchanged ones dimmed), the config commits in between
//! with links, and the rendered manifests, one collapsible section per file. Without both
//! names it is a form that picks them from the newest Freight. The answer is the API's
//! (`GET /api/v1/projects/{p}/freight/{from}/diff?to=B`, same authorization); no
//! JavaScript is needed.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::{Freight, Kind, Verb};
use crate::promotion::freight_diff::{ArtifactChange, FreightDiff, Manifests};
use crate::server::AppState;
use crate::server::freight_diff::{DiffParams, freight_diff};

use super::view::{self, commit_link, freight_label};
use super::{UiError, Viewer, layout};

/// How many of the newest Freight the pickers offer.
const PICKABLE: usize = 100;

/// The page's query.
#[derive(Debug, Deserialize, Default)]
pub(crate) struct Pick {
    from: Option<String>,
    to: Option<String>,
}

/// `GET /projects/{project}/diff`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
    Query(pick): Query<Pick>,
) -> Result<Markup, UiError> {
    viewer
        .caller
        .authorize(
            state.store.as_ref(),
            Verb::List,
            "freight",
            Some(&project),
            None,
        )
        .await?;
    let given = |v: &Option<String>| v.as_ref().filter(|s| !s.trim().is_empty()).cloned();
    let body = match (given(&pick.from), given(&pick.to)) {
        (Some(from), Some(to)) => {
            let diff = freight_diff(
                State(state.clone()),
                Path((project.clone(), from.clone())),
                viewer.caller.clone(),
                Query(DiffParams {
                    to: Some(to.clone()),
                }),
            )
            .await?
            .0;
            html! {
                (picker(&state, &project, Some(&from), Some(&to)).await?)
                (render(&project, &diff))
            }
        }
        (from, to) => picker(&state, &project, from.as_deref(), to.as_deref()).await?,
    };
    Ok(layout::page(
        "Freight diff",
        Some(&viewer),
        Some(&project),
        html! { section #freight-diff { h1 { "Freight diff" } (body) } },
    ))
}

/// Two selects over the newest Freight, newest first; the older one first by default.
async fn picker(
    state: &AppState,
    project: &str,
    from: Option<&str>,
    to: Option<&str>,
) -> Result<Markup, UiError> {
    let newest: Vec<Freight> = state
        .store
        .list_newest(Kind::Freight, project, PICKABLE, None)
        .await?
        .iter()
        .filter_map(|f| f.to_typed().ok())
        .collect();
    let option = |f: &Freight, chosen: Option<&str>| {
        let id = f.metadata.name.clone().unwrap_or_default();
        let selected = chosen.is_some_and(|c| c == id || c == f.spec.alias);
        html! { option value=(id) selected[selected] { (freight_label(f)) " — " (f.spec.origin.name) } }
    };
    Ok(html! {
        form.diff-pick method="get" action={ "/projects/" (project) "/diff" } {
            label for="diff-from" { "From" }
            select #diff-from name="from" {
                @for (i, f) in newest.iter().enumerate() {
                    @if from.is_some() { (option(f, from)) }
                    @else { (option(f, (i == 1).then_some(f.metadata.name.as_deref().unwrap_or_default()))) }
                }
            }
            label for="diff-to" { "to" }
            select #diff-to name="to" {
                @for (i, f) in newest.iter().enumerate() {
                    @if to.is_some() { (option(f, to)) }
                    @else { (option(f, (i == 0).then_some(f.metadata.name.as_deref().unwrap_or_default()))) }
                }
            }
            button type="submit" { "Compare" }
        }
    })
}

fn artifact_rows(title: &str, changes: &[ArtifactChange]) -> Markup {
    let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    html! {
        @if !changes.is_empty() {
            h2 { (title) }
            table.diff-artifacts {
                thead { tr { th { "Artifact" } th { "From" } th { "To" } } }
                tbody {
                    @for c in changes {
                        tr class=(if c.changed() { "changed" } else { "same" }) {
                            td { code { (c.artifact) } }
                            td { code { (side(&c.from)) } }
                            td { code { (side(&c.to)) } }
                        }
                    }
                }
            }
        }
    }
}

/// One line of a patch, classed by what it is.
fn patch_line(line: &str) -> Markup {
    let class = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
        "meta"
    } else if line.starts_with('+') {
        "add"
    } else if line.starts_with('-') {
        "del"
    } else if line.starts_with("@@") {
        "hunk"
    } else {
        "ctx"
    };
    html! { span class=(class) { (line) } }
}

fn render(project: &str, diff: &FreightDiff) -> Markup {
    let name = |s: &crate::promotion::freight_diff::Side| {
        if s.alias.is_empty() {
            view::short(&s.name).to_owned()
        } else {
            s.alias.clone()
        }
    };
    html! {
        p.diff-sides {
            a href={ "/projects/" (project) "?freight=" (diff.from.name) } { strong { (name(&diff.from)) } }
            " → "
            a href={ "/projects/" (project) "?freight=" (diff.to.name) } { strong { (name(&diff.to)) } }
        }
        (artifact_rows("Images", &diff.images))
        (artifact_rows("Charts", &diff.charts))
        @for c in &diff.commits {
            h2 { "Commits in " code { (view::repo_name(&c.repo_url)) } }
            @if let Some(e) = &c.error { p.refused { "Cannot list them: " (e) } }
            @if c.log.is_empty() && c.error.is_none() { p.empty { "The same commit." } }
            ol.diff-commits {
                @for line in &c.log {
                    li { (commit_link(&c.repo_url, &line.id)) " " (line.subject) " " span.meta { "(" (line.author) ")" } }
                }
            }
            @if !c.complete && c.error.is_none() {
                p.empty { "… more commits, or the older commit is not an ancestor of the newer one." }
            }
        }
        h2 { "Rendered manifests" }
        @match &diff.manifests {
            Manifests::NotCompared { reason } => { p.empty { (reason) } }
            Manifests::Compared { stage, from_commit, to_commit, files, truncated } => {
                p {
                    "In the branch of Stage " a href={ "/projects/" (project) "/stages/" (stage) } { (stage) }
                    ": " code { (view::short(from_commit)) } " → " code { (view::short(to_commit)) }
                    ", " (files.len()) " file(s) changed"
                }
                @if files.is_empty() { p.empty { "The rendered manifests are the same." } }
                @for f in files {
                    details.diff-file open[files.len() <= 10] {
                        summary { code { (f.path) } " " span.meta { (f.change) } }
                        pre.patch { @for line in f.patch.lines() { (patch_line(line)) } }
                    }
                }
                @if *truncated { p.empty { "The diff is longer: this is its beginning (dray freight diff prints the same)." } }
            }
        }
    }
}
