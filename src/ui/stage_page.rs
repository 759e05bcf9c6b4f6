//! `/projects/{p}/stages/{s}`: one Stage's history. Promotions (newest first: Freight,
//! actor, phase, time, the failed step's reason, pull requests), verifications (the
//! current one and `status.verificationHistory`, with metric counts), and the audit trail
//! read from the stage branch in git through the same code as the audit API, with links
//! to commits when the repository is served over http(s).

use axum::extract::{Path, Query, State};
use maud::{Markup, html};

use crate::api::{Kind, Promotion, Stage, Verb, VerificationInfo};
use crate::promotion::audit::AuditEntry;
use crate::server::AppState;
use crate::server::promotions::{AuditParams, audit_trail};

use super::actions::load_stage_checked;
use super::view::{self, commit_link};
use super::{UiError, Viewer, layout};

/// How many of the project's newest Promotions are searched for this Stage's.
const PROMOTIONS_READ: usize = 1000;

/// `GET /projects/{project}/stages/{stage}`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((project, name)): Path<(String, String)>,
) -> Result<Markup, UiError> {
    let stage = load_stage_checked(&state, &viewer, &project, &name).await?;
    let store = state.store.as_ref();
    let mut promotions: Vec<Promotion> = Vec::new();
    if viewer
        .caller
        .may(store, Verb::List, "promotions", Some(&project), None)
        .await?
    {
        promotions = store
            .list_newest(Kind::Promotion, &project, PROMOTIONS_READ, None)
            .await?
            .iter()
            .filter_map(|p| p.to_typed::<Promotion>().ok())
            .filter(|p| p.spec.stage == name)
            .collect();
    }
    let audit = audit_trail(
        State(state.clone()),
        Path((project.clone(), name.clone())),
        viewer.caller.clone(),
        Query(AuditParams::default()),
    )
    .await
    .map(|json| json.0)
    .map_err(|e| e.to_string());
    let repo = stage
        .status
        .as_ref()
        .and_then(|s| s.branch.as_ref())
        .map(|b| b.repo_url.clone())
        .unwrap_or_default();
    Ok(layout::page(
        &name,
        Some(&viewer),
        Some(&project),
        html! {
            section #stage data-stage=(name) {
                h1 { "Stage " (name) }
                (summary(&stage))
                (promotion_history(&project, &promotions))
                (verification_history(&stage))
                (audit_section(&repo, &audit))
            }
        },
    ))
}

fn summary(stage: &Stage) -> Markup {
    let status = stage.status.clone().unwrap_or_default();
    html! {
        dl.summary {
            dt { "Freight" }
            dd { @match &status.current_freight {
                Some(c) => { (if c.alias.is_empty() { &c.name } else { &c.alias }) " since " (view::time(c.since.as_ref())) }
                None => { "none yet" }
            } }
            @if let Some(b) = &status.branch {
                dt { "Branch" }
                dd { code { (b.name) } " in " (b.repo_url) " at " (commit_link(&b.repo_url, &b.commit)) }
            }
            @if let Some(h) = &status.health {
                dt { "Health" }
                dd { (format!("{:?}", h.status)) @if !h.message.is_empty() { " — " (h.message) } }
            }
            @if let Some(h) = &status.hold {
                dt { "Hold" }
                dd { "by " (h.by) ": " (h.reason) }
            }
            @if let Some(d) = &status.drift {
                dt { "Drift" }
                dd.refused { "the branch moved outside Dray to " code { (view::short(&d.commit)) } " " (d.message) }
            }
        }
    }
}

fn promotion_history(project: &str, promotions: &[Promotion]) -> Markup {
    html! {
        section #promotions {
            h2 { "Promotions" }
            @if promotions.is_empty() { p.empty { "None yet." } }
            table.history {
                thead { tr { th { "Promotion" } th { "Freight" } th { "Actor" } th { "Phase" } th { "Time" } th { "Why" } } }
                tbody {
                    @for p in promotions {
                        @let name = p.metadata.name.clone().unwrap_or_default();
                        @let status = p.status.clone().unwrap_or_default();
                        @let actor = p.metadata.annotations.as_ref().and_then(|a| a.get(crate::pipeline::ACTOR_ANNOTATION).cloned()).unwrap_or_default();
                        @let failed = status.step_execution_metadata.iter().find(|s| s.status == "Failed" || s.status == "Errored");
                        tr data-promotion=(name) {
                            td { a href={ "/projects/" (project) "/promotions/" (name) } { (name) } }
                            td { code { (p.spec.freight) } }
                            td { (actor) }
                            td class=(format!("{:?}", status.phase).to_lowercase()) { (format!("{:?}", status.phase)) }
                            td { (view::time(status.finished_at.as_ref().or(status.started_at.as_ref()).or(p.metadata.creation_timestamp.as_ref()))) }
                            td {
                                @if let Some(step) = failed { "step " (step.alias) ": " (step.message) }
                                @else if status.phase != crate::api::PromotionPhase::Succeeded { (status.message) }
                                @for (alias, url) in view::pull_requests(status.state.as_ref()) {
                                    " " a.pr href=(url) title=(alias) { "pull request" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn verification_row(v: &VerificationInfo) -> Markup {
    html! {
        tr data-verification=(v.id) {
            td { code { (v.freight) } }
            td class=(format!("{:?}", v.phase).to_lowercase()) { (format!("{:?}", v.phase)) }
            td { (v.actor) }
            td { (view::time(v.start_time.as_ref())) }
            td { (v.message) }
            td {
                @for m in &v.metrics {
                    div.metric {
                        strong { (m.name) } " " (format!("{:?}", m.phase)) ": "
                        (m.count) " measured, " (m.successful) " ok, " (m.failed) " failed, "
                        (m.inconclusive) " inconclusive, " (m.error) " errors"
                        @if !m.message.is_empty() { " — " (m.message) }
                    }
                }
            }
        }
    }
}

fn verification_history(stage: &Stage) -> Markup {
    let status = stage.status.clone().unwrap_or_default();
    let mut all: Vec<&VerificationInfo> = status.verification.iter().collect();
    all.extend(
        status
            .verification_history
            .iter()
            .filter(|h| status.verification.as_ref().is_none_or(|v| v.id != h.id)),
    );
    html! {
        section #verifications {
            h2 { "Verifications" }
            @if all.is_empty() { p.empty { "None yet." } } @else {
                table {
                    thead { tr { th { "Freight" } th { "Phase" } th { "By" } th { "Started" } th { "Message" } th { "Metrics" } } }
                    tbody { @for v in all { (verification_row(v)) } }
                }
            }
        }
    }
}

fn audit_section(repo: &str, audit: &Result<Vec<AuditEntry>, String>) -> Markup {
    html! {
        section #audit {
            h2 { "Audit trail (from the stage branch)" }
            @match audit {
                Err(e) => { p.empty { (e) } }
                Ok(entries) => {
                    table {
                        thead { tr { th { "Commit" } th { "Time" } th { "Actor" } th { "Freight" } th { "Subject" } } }
                        tbody {
                            @for e in entries {
                                tr data-commit=(e.commit) class=[(!e.by_dray).then_some("outside")] {
                                    td { (commit_link(repo, &e.commit)) }
                                    td { (e.time) }
                                    td { (e.actor.clone().unwrap_or_else(|| e.author.clone())) }
                                    td { (e.freight.clone().unwrap_or_default()) }
                                    td {
                                        (e.subject)
                                        @if !e.by_dray { " " span.refused { "(not made by Dray)" } }
                                        @if let Some(by) = &e.approved_by { " · approved by " (by) }
                                        @if let Some(w) = &e.window_override { " · window override: " (w) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
