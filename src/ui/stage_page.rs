//! `/projects/{p}/stages/{s}`: one Stage's health and history. Health (the verdict and,
//! per Argo CD Application, its health, synced revision and message), promotions (newest
//! first: Freight by alias, actor, phase, time, the failed step's reason, pull requests),
//! verifications (the current one and `status.verificationHistory`: phase, Freight,
//! actor, start and finish, message, and per metric its counts and newest measurements),
//! and the audit trail read from the stage branch in git through the same code as the
//! audit API, with links to commits when the repository is served over http(s).
//!
//! Reads: the Stage, the project's newest Promotions (one indexed read), one batched read
//! of the Freight they and the verifications name (for aliases), and the audit trail.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};

use std::collections::HashMap;

use crate::api::{Freight, Kind, MetricResult, Promotion, Stage, Verb, VerificationInfo};
use crate::promotion::audit::AuditEntry;
use crate::server::AppState;
use crate::server::promotions::{AuditParams, audit_trail};

use super::actions::load_stage_checked;
use super::view::{self, commit_link, freight_label};
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
    let aliases = aliases(&state, &project, &stage, &promotions).await?;
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
    let project_freeze = super::levers::project_freeze(&state, &project).await?;
    let own_freeze = super::levers::stage_freeze(&stage);
    let frozen = own_freeze.is_some_and(|f| f.is_active_at(jiff::Timestamp::now()));
    let perms = viewer.caller.permissions(store, &project).await?;
    let freeze_refusal = perms.refusal(Verb::Freeze, "stages", Some(&name));
    Ok(layout::page(
        &name,
        Some(&viewer),
        Some(&project),
        html! {
            section #stage data-stage=(name) {
                h1 { "Stage " (name) }
                (super::levers::banner(project_freeze.as_ref(), own_freeze.map(|f| (name.as_str(), f))))
                div.stage-actions {
                    button.action.freeze type="button" data-action=(if frozen { "unfreeze" } else { "freeze" })
                        data-stage=(name) disabled[freeze_refusal.is_some()] title=[freeze_refusal.as_deref()] {
                        (if frozen { "Unfreeze" } else { "Freeze" })
                    }
                }
                (summary(&stage))
                (health_section(&stage, &repo))
                (promotion_history(&project, &promotions, &aliases))
                (verification_history(&stage, &aliases))
                (audit_section(&repo, &audit))
            }
            dialog #confirm {
                div.confirm-body {}
                div #confirm-error role="alert" {}
                menu {
                    button #confirm-go type="button" disabled { "Confirm" }
                    button #confirm-cancel type="button" { "Cancel" }
                }
            }
        },
    ))
}

/// The aliases of the Freight the promotions and verifications name, by id, in one read.
async fn aliases(
    state: &AppState,
    project: &str,
    stage: &Stage,
    promotions: &[Promotion],
) -> Result<HashMap<String, String>, UiError> {
    let status = stage.status.clone().unwrap_or_default();
    let mut ids: Vec<String> = promotions
        .iter()
        .map(|p| p.spec.freight.clone())
        .chain(status.verification.iter().map(|v| v.freight.clone()))
        .chain(
            status
                .verification_history
                .iter()
                .map(|v| v.freight.clone()),
        )
        .filter(|id| !id.is_empty())
        .collect();
    ids.sort();
    ids.dedup();
    let mut aliases = HashMap::new();
    if let Some(c) = &status.current_freight
        && !c.alias.is_empty()
    {
        aliases.insert(c.name.clone(), c.alias.clone());
    }
    if ids.is_empty() {
        return Ok(aliases);
    }
    for stored in state.store.get_many(Kind::Freight, project, &ids).await? {
        if let Ok(f) = stored.to_typed::<Freight>() {
            aliases.insert(stored.key.name.clone(), freight_label(&f));
        }
    }
    Ok(aliases)
}

/// A Freight by its alias (when known), with its id in the title.
fn freight_ref(id: &str, aliases: &HashMap<String, String>) -> Markup {
    match aliases.get(id).filter(|a| a.as_str() != id) {
        Some(alias) => {
            html! { span.freight-ref title=(id) { strong.alias { (alias) } " " code.id { (view::short(id)) } } }
        }
        None => html! { code.freight-ref { (id) } },
    }
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
            @if let Some(h) = &status.hold {
                dt { "Hold" }
                dd { "by " (h.by) ": " (h.reason) }
            }
            @if let Some(d) = &status.drift {
                dt { "Drift" }
                dd.refused { "the branch moved outside Dray to " code { (view::short(&d.commit)) } " " (view::message(&d.message)) }
            }
        }
    }
}

fn promotion_history(
    project: &str,
    promotions: &[Promotion],
    aliases: &HashMap<String, String>,
) -> Markup {
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
                        @let failed = status.step_execution_metadata.iter().find(|s| s.status.is_failure());
                        tr data-promotion=(name) {
                            td { a href={ "/projects/" (project) "/promotions/" (name) } { (name) } }
                            td { (freight_ref(&p.spec.freight, aliases)) }
                            td { (actor) }
                            td class=(format!("{:?}", status.phase).to_lowercase()) { (format!("{:?}", status.phase)) }
                            td { (view::time(status.finished_at.as_ref().or(status.started_at.as_ref()).or(p.metadata.creation_timestamp.as_ref()))) }
                            td {
                                @if let Some(step) = failed { "step " (step.alias) ": " (view::message(&step.message)) }
                                @else if status.phase != crate::api::PromotionPhase::Succeeded { (view::message(&status.message)) }
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

/// How many of a metric's newest measurements a run shows.
const MEASUREMENTS_SHOWN: usize = 5;

fn health_section(stage: &Stage, repo: &str) -> Markup {
    let status = stage.status.clone().unwrap_or_default();
    let Some(health) = &status.health else {
        return html! {
            @if !status.applications.is_empty() || stage.spec.health.is_some() {
                section #health data-health="Unknown" {
                    h2 { "Health" }
                    p.empty { "Not read from Argo CD yet." }
                }
            }
        };
    };
    let label = format!("{:?}", health.status);
    html! {
        section #health data-health=(label) {
            h2 { "Health: " span class=(label.to_lowercase()) { (label) } }
            p {
                @if !health.message.is_empty() { span.message { (view::message(&health.message)) } " · " }
                @if let Some(since) = &health.since { "since " (view::time(Some(since))) }
                @if let Some(checked) = &health.checked_at { ", checked " (view::time(Some(checked))) }
            }
            @if !health.applications.is_empty() {
                table.applications {
                    thead { tr { th { "Application" } th { "Argo CD health" } th { "Synced revision" } th { "Verdict" } th { "Message" } } }
                    tbody {
                        @for app in &health.applications {
                            @let verdict = format!("{:?}", app.status);
                            tr data-application=(app.name) data-health=(verdict) {
                                td { (app.name) }
                                td { (if app.argocd_health.is_empty() { "—" } else { &app.argocd_health }) }
                                td {
                                    @if app.synced_revision.is_empty() { "—" }
                                    @else if is_commit(&app.synced_revision) { (commit_link(repo, &app.synced_revision)) }
                                    @else { code { (app.synced_revision) } }
                                }
                                td class=(verdict.to_lowercase()) { (verdict) }
                                td { (view::message(&app.message)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Whether a revision is a commit id (a tag or a Helm chart version is not linked).
fn is_commit(revision: &str) -> bool {
    revision.len() >= 7 && revision.chars().all(|c| c.is_ascii_hexdigit())
}

fn metric_row(m: &MetricResult) -> Markup {
    let skip = m.measurements.len().saturating_sub(MEASUREMENTS_SHOWN);
    html! {
        div.metric data-metric=(m.name) data-phase=(format!("{:?}", m.phase)) {
            strong { (m.name) } " "
            span class=(format!("{:?}", m.phase).to_lowercase()) { (format!("{:?}", m.phase)) } " "
            span.counts title="successful/failed/inconclusive/error of the measurements taken" {
                (m.successful) "/" (m.failed) "/" (m.inconclusive) "/" (m.error)
            }
            " of " (m.count) " measured"
            @if !m.message.is_empty() { " — " span.message { (view::message(&m.message)) } }
            @if !m.measurements.is_empty() {
                // Newest first, numbered as taken (the kept ones are the newest).
                @let taken = (m.count as usize).max(m.measurements.len());
                @let first = taken - m.measurements.len();
                ol.measurements reversed start=(taken) {
                    @for (i, ms) in m.measurements.iter().enumerate().skip(skip).rev() {
                        li data-measurement=(first + i + 1) class=(format!("{:?}", ms.phase).to_lowercase()) {
                            code.value { (if ms.value.is_empty() { "—" } else { &ms.value }) } " "
                            (format!("{:?}", ms.phase))
                            @if !ms.message.is_empty() { " — " (view::message(&ms.message)) }
                            @if let Some(t) = ms.finished_at.as_ref().or(ms.started_at.as_ref()) {
                                " " small { (view::time(Some(t))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn verification_row(v: &VerificationInfo, aliases: &HashMap<String, String>) -> Markup {
    let phase = format!("{:?}", v.phase);
    html! {
        tr data-verification=(v.id) data-phase=(phase) {
            td { (freight_ref(&v.freight, aliases)) }
            td class=(phase.to_lowercase()) { (phase) }
            td { (v.actor) }
            td { (view::time(v.start_time.as_ref())) }
            td { (view::time(v.finish_time.as_ref())) }
            td.message { (view::message(&v.message)) }
            td { @for m in &v.metrics { (metric_row(m)) } }
        }
    }
}

fn verification_history(stage: &Stage, aliases: &HashMap<String, String>) -> Markup {
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
                table.history {
                    thead { tr { th { "Freight" } th { "Phase" } th { "By" } th { "Started" } th { "Finished" } th { "Message" } th { "Metrics (successful/failed/inconclusive/error)" } } }
                    tbody { @for v in all { (verification_row(v, aliases)) } }
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
                                        @if !e.signed_off_by.is_empty() { " · signed off by " (e.signed_off_by.join(", ")) }
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
