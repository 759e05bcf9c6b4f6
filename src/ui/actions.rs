//! What an action will do, before and while it happens.
//!
//! - `GET /projects/{p}/stages/{s}/confirm?action=…&freight=…`: the confirmation dialog's
//!   body. For Promote: per image `tag@digest → tag@digest`, per config repo
//!   `sha subject → sha subject`, the gates that apply (availability, window, approval,
//!   sign-offs and who signed, hold), what would unblock a red gate (approve, wait until …, override) for a caller
//!   allowed to, the preview of what would be committed (one collapsible `<details>` per
//!   file, from the same preview as `POST …/preview`), and who you are. The `#confirm-go`
//!   button carries the API call (URL and JSON body) the page's script makes; when RBAC or
//!   a gate refuses, it is disabled with the reason (a closed window alone keeps it
//!   disabled until someone allowed to override gives a reason). Sign off shows the same
//!   gates.
//! - `GET /projects/{p}/promotions/{name}[/view]`: a Promotion's steps (phase, message,
//!   attempts), the failed step's reason and pull requests its steps opened. Promotions
//!   keep no step logs, so the step messages are what is shown.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::{Freight, Kind, ObjectKey, Promotion, PromotionPhase, Stage, Verb};
use crate::pipeline::board::{self, FreightGates, StageBoard};
use crate::server::{ApiError, AppState};

use super::view::{self, artifacts, freight_label};
use super::{UiError, Viewer, layout, levers};

/// The query of the confirmation route.
#[derive(Deserialize, Debug, Default)]
pub(crate) struct ConfirmQuery {
    /// `promote`, `approve`, `signoff`, `abort`, `verify`, `abort-verification`,
    /// `lift-hold`, `reject`, `unreject`, `freeze` or `unfreeze`.
    #[serde(default)]
    pub(crate) action: String,
    /// The Freight (id) to promote, approve, reject or unreject.
    #[serde(default)]
    pub(crate) freight: Option<String>,
}

impl ConfirmQuery {
    /// The Freight the query names; a 404 says to choose one first.
    pub(crate) async fn freight_of(
        &self,
        state: &AppState,
        project: &str,
    ) -> Result<Freight, UiError> {
        load_freight(state, project, self.freight.as_deref())
            .await?
            .ok_or_else(|| {
                UiError(ApiError::not_found(format!(
                    "choose a Freight first: the one to {} does not exist",
                    self.action
                )))
            })
    }
}

/// The `kind` named `name` in `project`; a 404 says where to look for it.
async fn load<T: DeserializeOwned>(
    state: &AppState,
    kind: Kind,
    project: &str,
    name: &str,
) -> Result<T, UiError> {
    let key = ObjectKey::namespaced(kind, project, name);
    let stored = state.store.get(&key).await?.ok_or_else(|| {
        let hint = match kind {
            Kind::Stage => format!("open /projects/{project} to see its Stages"),
            _ => format!(
                "open /projects/{project} and a Stage's page to see its {}",
                kind.plural()
            ),
        };
        UiError(
            ApiError::not_found(format!(
                "{kind} `{name}` does not exist in project `{project}`"
            ))
            .with_hint(hint),
        )
    })?;
    Ok(stored.to_typed()?)
}

/// The `kind` named `name` in `project`, after checking the caller may `get` it.
async fn load_checked<T: DeserializeOwned>(
    state: &AppState,
    viewer: &Viewer,
    kind: Kind,
    project: &str,
    name: &str,
) -> Result<T, UiError> {
    viewer
        .caller
        .authorize(
            state.store.as_ref(),
            Verb::Get,
            kind.plural(),
            Some(project),
            Some(name),
        )
        .await?;
    load(state, kind, project, name).await
}

async fn load_freight(
    state: &AppState,
    project: &str,
    name: Option<&str>,
) -> Result<Option<Freight>, UiError> {
    let Some(name) = name else { return Ok(None) };
    let key = ObjectKey::namespaced(Kind::Freight, project, name);
    Ok(state.store.get(&key).await?.and_then(|f| f.to_typed().ok()))
}

/// The Stage, after checking the caller may `get` it.
pub(crate) async fn load_stage_checked(
    state: &AppState,
    viewer: &Viewer,
    project: &str,
    name: &str,
) -> Result<Stage, UiError> {
    load_checked(state, viewer, Kind::Stage, project, name).await
}

/// `GET /projects/{project}/stages/{stage}/confirm`.
pub(crate) async fn confirm(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((project, stage_name)): Path<(String, String)>,
    Query(query): Query<ConfirmQuery>,
) -> Result<Markup, UiError> {
    let store = state.store.as_ref();
    let perms = viewer.caller.permissions(store, &project).await?;
    if !perms.allows(Verb::Get, "stages", Some(&stage_name)) {
        return Err(UiError(
            ApiError::forbidden(viewer.caller.refusal(Verb::Get, "stages", Some(&stage_name)))
                .with_hint(format!(
                    "ask an admin for a RoleBinding in project `{project}` whose role allows `get` on `stages`"
                )),
        ));
    }
    let stage: Stage = load(&state, Kind::Stage, &project, &stage_name).await?;
    let action = query.action.as_str();
    let lever = match action {
        "reject" | "unreject" => {
            let freight = query.freight_of(&state, &project).await?;
            let undo = action == "unreject";
            Some(levers::reject_dialog(
                &project,
                Some(&stage_name),
                &freight,
                undo,
                &perms,
            ))
        }
        "freeze" | "unfreeze" => {
            let now = levers::stage_freeze(&stage);
            let undo = action == "unfreeze";
            Some(levers::freeze_dialog(
                &project,
                Some(&stage_name),
                now,
                undo,
                &perms,
            ))
        }
        _ => None,
    };
    if let Some(lever) = lever {
        return Ok(levers::dialog(action, Some(&stage_name), &viewer, lever));
    }
    let status = stage.status.clone().unwrap_or_default();
    let base = format!("/api/v1/projects/{project}/stages/{stage_name}");
    let you = html! { p.you { "you are " strong { (viewer.caller.user) } } };
    let (title, body, url, payload, refusal) = match query.action.as_str() {
        "promote" | "approve" | "signoff" => {
            let target = load_freight(&state, &project, query.freight.as_deref())
                .await?
                .ok_or_else(|| {
                    UiError(ApiError::not_found(
                        "choose a Freight first: the one to promote or approve does not exist",
                    ))
                })?;
            let id = target.metadata.name.clone().unwrap_or_default();
            let current_id = status.current_freight.as_ref().map(|c| c.name.clone());
            let current = load_freight(&state, &project, current_id.as_deref()).await?;
            let windows = board::project_windows(store, &project).await?;
            let now = jiff::Timestamp::now();
            let stage_board = board::stage_board(&stage, &[&target], &windows, now);
            let entry = stage_board.gates(&id).ok_or_else(|| {
                UiError(ApiError::not_found(format!(
                    "Freight `{id}` is not on the board of Stage `{stage_name}`; reload the page"
                )))
            })?;
            let gates = gates(&stage, &target, &stage_board, entry);
            if query.action == "signoff" {
                (
                    format!("Sign off {} for {stage_name}", freight_label(&target)),
                    html! {
                        p { "Your sign-off counts toward the " strong { (stage_name) } " sign-off gate for "
                            strong { (freight_label(&target)) } " (" (artifacts(&target)) "). It is kept on the record and in the promotion's commit." }
                        (gates)
                        label for="confirm-reason" { "Why (optional)" }
                        input #confirm-reason type="text" name="reason";
                    },
                    format!("{base}/signoffs"),
                    json!({"freight": id}),
                    perms.refusal(Verb::Signoff, "stages", Some(&stage_name)),
                )
            } else if query.action == "promote" {
                let closed = !stage_board.window.is_open();
                let may_override = perms.allows(Verb::Override, "stages", Some(&stage_name));
                let may_approve = perms.allows(Verb::Approve, "stages", Some(&stage_name));
                let rbac = perms.refusal(Verb::Promote, "stages", Some(&stage_name));
                let availability = &entry.availability;
                // A red gate disables Confirm; a closed window alone does not, for someone
                // who may override it (Confirm waits for their reason).
                let blocked = !availability.is_available() || (closed && !may_override);
                let refusal = rbac.clone().or_else(|| {
                    blocked.then(|| {
                        format!(
                            "a gate refuses `{}` into `{stage_name}`: see the gates above",
                            target.spec.alias
                        )
                    })
                });
                let preview = match &rbac {
                    Some(_) => None,
                    None => Some(preview(&state, &viewer, &project, &stage_name, &id).await),
                };
                (
                    format!("Promote {} to {stage_name}", freight_label(&target)),
                    html! {
                        (changes(current.as_ref(), &target))
                        (gates)
                        @if rbac.is_none() && (blocked || closed) {
                            (unblock(&stage_board, entry, &stage_name, closed, Levers {
                                may_approve,
                                may_override,
                                may_signoff: perms.allows(Verb::Signoff, "stages", Some(&stage_name)),
                                viewer: &viewer.caller.user,
                            }))
                        }
                        @if closed && may_override && availability.is_available() {
                            label for="confirm-override" { "Promote through the closed window anyway, because (kept on the record):" }
                            input #confirm-override type="text" name="overrideWindow" data-required="true";
                        }
                        @if let Some(preview) = &preview { (preview) }
                    },
                    format!("{base}/promote"),
                    json!({"freight": id}),
                    refusal,
                )
            } else {
                (
                    format!("Approve {} for {stage_name}", freight_label(&target)),
                    html! {
                        p { "Approval lets " strong { (freight_label(&target)) } " (" (artifacts(&target)) ") into "
                            strong { (stage_name) } " without upstream verification or soak. It is kept on the record." }
                        (gates)
                        label for="confirm-reason" { "Why" }
                        input #confirm-reason type="text" name="reason" required;
                    },
                    format!("{base}/approve"),
                    json!({"freight": id, "reason": ""}),
                    perms.refusal(Verb::Approve, "stages", Some(&stage_name)),
                )
            }
        }
        "abort" => {
            let promotion = status.current_promotion.clone().ok_or_else(|| {
                UiError(
                    ApiError::conflict(format!(
                        "Stage `{stage_name}` has no promotion running to abort"
                    ))
                    .with_hint(format!(
                        "it may have just ended; reload /projects/{project}/stages/{stage_name}"
                    )),
                )
            })?;
            (
                format!("Abort {promotion}"),
                html! { p { "A pending promotion is aborted at once; a running one stops at its next safe point and reports anything already pushed." } },
                format!("/api/v1/projects/{project}/promotions/{promotion}/abort"),
                json!({}),
                perms.refusal(Verb::Abort, "promotions", Some(&promotion)),
            )
        }
        "verify" => (
            format!("Verify {stage_name} again"),
            html! {
                p { "Runs the Stage's verification again for its current Freight"
                    @if let Some(c) = &status.current_freight { " (" (if c.alias.is_empty() { &c.name } else { &c.alias }) ")" } "." }
                @if let Some(v) = &status.verification { p { "Last: " (format!("{:?}", v.phase)) " " (view::message(&v.message)) } }
            },
            format!("{base}/verify"),
            json!({"abort": false}),
            perms.refusal(Verb::Verify, "stages", Some(&stage_name)),
        ),
        "abort-verification" => {
            let running = status
                .verification
                .as_ref()
                .filter(|v| !v.phase.is_terminal())
                .ok_or_else(|| {
                    UiError(
                        ApiError::conflict(format!(
                            "Stage `{stage_name}` has no verification waiting or running to stop"
                        ))
                        .with_hint("reload the page: the verification may have ended"),
                    )
                })?;
            (
                format!("Stop the verification of {stage_name}"),
                html! {
                    p { "Stops the verification of "
                        strong { (status.current_freight.as_ref().filter(|c| c.name == running.freight && !c.alias.is_empty()).map_or(&running.freight, |c| &c.alias)) }
                        " (" (format!("{:?}", running.phase)) ": " (view::message(&running.message)) "). It ends "
                        strong { "Aborted" } "; whether the Freight counts as verified here does not change." }
                },
                format!("{base}/verify"),
                json!({"abort": true}),
                perms.refusal(Verb::Verify, "stages", Some(&stage_name)),
            )
        }
        "lift-hold" => (
            format!("Lift the hold on {stage_name}"),
            html! {
                @if let Some(h) = &status.hold {
                    p { "Auto-promotion is held by " strong { (h.by) } ": " (h.reason) }
                }
                p { "Lifting it lets auto-promotion move the Stage to the newest available Freight again." }
            },
            format!("{base}/hold/lift"),
            json!({}),
            perms.refusal(Verb::Promote, "stages", Some(&stage_name)),
        ),
        other => {
            return Err(UiError(ApiError::bad_request(format!(
                "unknown action `{other}`; use promote, approve, signoff, abort, verify, abort-verification, lift-hold, reject, unreject, freeze or unfreeze"
            ))));
        }
    };
    Ok(html! {
        div.confirm-content data-action=(query.action) data-stage=(stage_name) {
            h2 { (title) }
            (body)
            (you)
            @if let Some(why) = &refusal {
                p.refused.why { (view::message(why)) }
            }
            template #confirm-call data-url=(url) data-body=(payload.to_string()) data-refused=[refusal.as_deref()] {}
        }
    })
}

/// What the viewer of a confirm dialog may do about a red gate.
struct Levers<'a> {
    may_approve: bool,
    may_override: bool,
    may_signoff: bool,
    /// Who is looking: a sign-off is offered only to someone who has not signed yet.
    viewer: &'a str,
}

/// What would unblock a promotion the gates refuse, as actions for a caller allowed to
/// take them: approve (lifts "not verified" and soak), sign off (a sign-off gate the
/// viewer has not signed), wait (soak, a window with a known end), override a closed
/// window.
fn unblock(
    board: &StageBoard,
    entry: &FreightGates,
    stage: &str,
    closed: bool,
    levers: Levers<'_>,
) -> Markup {
    use crate::pipeline::availability::Reason;
    let Levers {
        may_approve,
        may_override,
        may_signoff,
        viewer,
    } = levers;
    let gates = &entry.availability;
    // The sign-off gate is red; `Some(true)` when the viewer has not signed yet.
    let signoff = gates.reasons.iter().find_map(|r| match r {
        Reason::SignoffsMissing { have, own, .. } => {
            Some(!have.iter().any(|u| u == viewer) && own.as_deref() != Some(viewer))
        }
        _ => None,
    });
    let approvable = gates.reasons.iter().any(|r| {
        matches!(
            r,
            Reason::NotVerified { .. } | Reason::Soaking { .. } | Reason::SoakedTooShort { .. }
        )
    });
    let soak_ends = gates.reasons.iter().find_map(|r| match r {
        Reason::Soaking { until, .. } => Some(*until),
        _ => None,
    });
    let window_opens = board.window.reason().and_then(|r| match r {
        Reason::WindowClosed { until, .. } => until,
        _ => None,
    });
    html! {
        section.unblock {
            h3 { "What would unblock it" }
            ul.unblock {
                @if approvable && may_approve {
                    li { button type="button" data-action="approve" data-stage=(stage) { "Approve for " (stage) }
                        " — lets it in without upstream verification or soak, on the record" }
                } @else if approvable {
                    li { "an approval for " code { (stage) } " by someone with " code { "approve" } " on it" }
                }
                @match signoff {
                    Some(true) if may_signoff => {
                        li { button type="button" data-action="signoff" data-stage=(stage) { "Sign off for " (stage) }
                            " — your sign-off counts toward the gate, on the record" }
                    }
                    Some(_) => {
                        li { "more sign-offs for " code { (stage) } " by people with " code { "signoff" } " on it" }
                    }
                    None => {}
                }
                @if let Some(until) = soak_ends {
                    li.wait { "wait until " time datetime=(until.to_string()) { (until.strftime("%Y-%m-%d %H:%M UTC")) } " for the soak to end" }
                }
                @if closed {
                    @if may_override {
                        li { "override the closed window: give a reason below" }
                    } @else {
                        li { "someone with " code { "override" } " on " code { (stage) } " may promote through the window" }
                    }
                    @if let Some(until) = window_opens {
                        li.wait { "wait until " time datetime=(until.to_string()) { (until.strftime("%Y-%m-%d %H:%M UTC")) } " for the window to open" }
                    }
                }
            }
        }
    }
}

/// What promoting `freight` into `stage` would commit, previewed as `viewer` (see
/// `crate::server::preview`): one collapsible `<details>` per file, or why there is none.
async fn preview(
    state: &AppState,
    viewer: &Viewer,
    project: &str,
    stage: &str,
    freight: &str,
) -> Markup {
    let request = crate::pipeline::request::PromoteRequest {
        stage: stage.to_owned(),
        freight: Some(freight.to_owned()),
        ..Default::default()
    };
    let previewed =
        crate::server::preview::preview_through_door(state, &viewer.caller, project, request).await;
    html! {
        section.preview {
            h3 { "What would be committed" }
            @match &previewed {
                Err(error) => { p.preview-error { "no preview: " (view::message(&error.to_string())) } }
                Ok(preview) => {
                    @let report = &preview.report;
                    @if let Some(failed) = &report.failed {
                        p.preview-error { (view::message(failed)) "; the diff is what the steps before it left" }
                    }
                    @if report.checkouts.is_empty() {
                        p.preview-empty { "no changes: the stage branch already holds what these steps render" }
                    }
                    @for checkout in &report.checkouts {
                        p.checkout {
                            code { (checkout.checkout) }
                            @if let Some(branch) = &checkout.branch { " → " code { (branch) } }
                            " (" (checkout.files.len()) " file" @if checkout.files.len() != 1 { "s" } ")"
                        }
                        @for file in &checkout.files {
                            details.file-diff data-path=(file.path) data-status=(file.status.as_str()) {
                                summary { span.status { (file.status.as_str()) } " " code { (file.path) } }
                                pre.diff { @for line in file.diff.lines() {
                                    @let class = if line.starts_with("+++") || line.starts_with("---") { "meta" }
                                        else if line.starts_with('+') { "add" }
                                        else if line.starts_with('-') { "del" }
                                        else if line.starts_with("@@") { "hunk" } else { "ctx" };
                                    span class=(class) { (line) } "\n"
                                } }
                            }
                        }
                    }
                    @if let Some(step) = &report.stopped_before {
                        p.stopped { "previewed up to step " code { (step) } ", the first that writes; nothing was written" }
                    }
                }
            }
        }
    }
}

/// The confirmation's "what changes" table.
fn changes(current: Option<&Freight>, target: &Freight) -> Markup {
    let from_images = current
        .map(|c| c.spec.images.as_slice())
        .unwrap_or_default();
    let from_commits = current
        .map(|c| c.spec.commits.as_slice())
        .unwrap_or_default();
    html! {
        table.changes {
            thead { tr { th { "" } th { "now" } th { "" } th { "after" } } }
            tbody {
                tr.freight {
                    th { "Freight" }
                    td { (current.map(freight_label).unwrap_or_else(|| "none".into())) }
                    td { "→" }
                    td { (freight_label(target)) }
                }
                @for image in &target.spec.images {
                    @let before = from_images.iter().find(|i| i.repo_url == image.repo_url);
                    tr.image data-repo=(image.repo_url) {
                        th { (image.repo_url) }
                        td { (view::image_version(before)) }
                        td { "→" }
                        td { (view::image_version(Some(image))) }
                    }
                }
                @for commit in &target.spec.commits {
                    @let before = from_commits.iter().find(|c| c.repo_url == commit.repo_url);
                    tr.commit data-repo=(commit.repo_url) {
                        th { (commit.repo_url) }
                        td { (view::commit_version(before)) }
                        td { "→" }
                        td { (view::commit_version(Some(commit))) }
                    }
                }
            }
        }
    }
}

/// The gates that apply to the Freight of `entry` entering the Stage of `board`:
/// availability, window, approval, sign-offs (and who signed), hold.
fn gates(stage: &Stage, target: &Freight, board: &StageBoard, entry: &FreightGates) -> Markup {
    let name = &board.stage;
    let signed = crate::pipeline::signoff::signoffs(target, name);
    let gates = &entry.availability;
    let window = &board.window;
    html! {
        h3 { "Gates" }
        ul.gates {
            @if gates.is_available() {
                li.ok { "available to " (name) }
            } @else {
                @for r in &gates.reasons { li.refused { (view::message(&r.to_string())) } }
            }
            @if window.is_open() {
                li.ok { "promotion window open" }
            } @else if let Some(e) = window.error() {
                li.refused { "promotion windows cannot be evaluated: " (e.to_string()) }
            } @else if let Some(reason) = window.reason() {
                li.refused { (view::message(&reason.to_string())) }
            } @else {
                li.refused { "promotion window closed" }
            }
            @match &gates.approved_by {
                Some(by) => { li.ok { "approved for " (name) " by " (by) } }
                None => { li { "no approval for " (name) " (only needed to bypass verification and soak)" } }
            }
            @if let Some(policy) = &stage.spec.signoff {
                @let counted = crate::pipeline::signoff::counted(policy, signed, None);
                li class={ "signoffs " (if counted.len() >= policy.required as usize { "ok" } else { "refused" }) } {
                    "sign-offs: " (counted.len()) " of " (policy.required)
                    @if !policy.groups.is_empty() { " (members of " (policy.groups.join(", ")) ")" }
                    @if !policy.allow_self { "; the promoter's own does not count" }
                    @if counted.is_empty() { ", none yet" } @else {
                        ", signed off by "
                        @for (i, s) in counted.iter().enumerate() {
                            @if i > 0 { ", " }
                            span.signer { (s.user) }
                            @if !s.reason.is_empty() { " (" (s.reason) ")" }
                        }
                    }
                }
            }
            @if let Some(h) = &board.held {
                li { "auto-promotion is held by " (h.by) " (" (h.reason) "); promoting the newest Freight lifts it" }
            }
        }
    }
}

/// The Promotion `name` drawn for `viewer` (who must be allowed to read it).
async fn promotion_markup(
    state: &AppState,
    viewer: &Viewer,
    project: &str,
    name: &str,
) -> Result<Markup, UiError> {
    let promotion =
        load_checked::<Promotion>(state, viewer, Kind::Promotion, project, name).await?;
    let alias = promoted_alias(state, project, &promotion).await?;
    Ok(promotion_view(project, &promotion, alias.as_deref()))
}

/// `GET /projects/{project}/promotions/{name}/view`: the live Promotion fragment.
pub(crate) async fn promotion_fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((project, name)): Path<(String, String)>,
) -> Result<Markup, UiError> {
    promotion_markup(&state, &viewer, &project, &name).await
}

/// `GET /projects/{project}/promotions/{name}`: the same, as a page.
pub(crate) async fn promotion_page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((project, name)): Path<(String, String)>,
) -> Result<Markup, UiError> {
    let view = promotion_markup(&state, &viewer, &project, &name).await?;
    Ok(layout::page(
        &name,
        Some(&viewer),
        Some(&project),
        html! { div #promotion-slot data-promotion=(name) { (view) } },
    ))
}

/// The alias of the Freight a Promotion moves (`None` when it has none or is gone).
async fn promoted_alias(
    state: &AppState,
    project: &str,
    promotion: &Promotion,
) -> Result<Option<String>, UiError> {
    Ok(load_freight(state, project, Some(&promotion.spec.freight))
        .await?
        .filter(|f| !f.spec.alias.is_empty())
        .map(|f| f.spec.alias))
}

/// A Promotion's steps and outcome; the Freight by `alias` when it has one.
pub(crate) fn promotion_view(project: &str, promotion: &Promotion, alias: Option<&str>) -> Markup {
    let name = promotion.metadata.name.clone().unwrap_or_default();
    let status = promotion.status.clone().unwrap_or_default();
    let phase = format!("{:?}", status.phase);
    let failed = status
        .step_execution_metadata
        .iter()
        .find(|s| s.status.is_failure());
    let prs = view::pull_requests(status.state.as_ref());
    // Set while a later step waits; after the end, the `git-push` outputs say it.
    let pushed = status.written_to_git.clone().or_else(|| {
        view::step_outputs(status.state.as_ref()).and_then(crate::promotion::record::pushed_branch)
    });
    html! {
        section #promotion data-phase=(phase) data-promotion=(name) {
            h2 { "Promotion " (name) }
            p {
                "Freight "
                @if let Some(alias) = alias { strong.alias title=(promotion.spec.freight) { (alias) } " " }
                code { (view::short(&promotion.spec.freight)) } " to "
                a href={ "/projects/" (project) "/stages/" (promotion.spec.stage) } { (promotion.spec.stage) }
                ": " strong.phase class=(phase.to_lowercase()) { (phase) }
                @if !status.message.is_empty() { " — " span.message { (view::message(&status.message)) } }
            }
            @if matches!(status.phase, PromotionPhase::Failed | PromotionPhase::Errored) {
                p.failure role="alert" {
                    @match failed {
                        Some(step) => { "step " strong { (step.alias) } " " (step.status.as_str().to_lowercase()) ": " (view::message(&step.message)) }
                        None => { (view::message(&status.message)) }
                    }
                }
            }
            @if let Some(pushed) = &pushed {
                p.pushed data-commit=(pushed.commit) {
                    "written to git: " code { (pushed.name) } " at " (view::commit_link(&pushed.repo_url, &pushed.commit))
                }
            }
            ol.steps {
                @for (i, step) in promotion.spec.steps.iter().enumerate() {
                    @let alias = step.as_.clone().unwrap_or_else(|| format!("step-{i}"));
                    @let exec = status.step_execution_metadata.iter().find(|s| s.alias == alias)
                        .or_else(|| status.step_execution_metadata.get(i));
                    @let step_status = exec.map(|e| e.status.as_str()).unwrap_or("Pending");
                    li data-step=(alias) data-status=(step_status) class=(step_status.to_lowercase()) {
                        span.step-name { (alias) @if let Some(uses) = &step.uses { " " small { "(" (uses) ")" } } }
                        " " span.step-status { (step_status) }
                        @if let Some(e) = exec {
                            @if e.attempts > 1 { " " span.attempts { (e.attempts) " attempts" } }
                            @if !e.message.is_empty() { pre.log { (view::message(&e.message)) } }
                            @if !e.log.is_empty() {
                                details.step-log open[step_status == "Running" || step_status == "Failed" || step_status == "Errored"] {
                                    summary { (e.log.len()) " log line" @if e.log.len() != 1 { "s" } }
                                    pre.step-log-lines { @for line in &e.log { (line) "\n" } }
                                }
                            }
                        }
                    }
                }
            }
            @if !prs.is_empty() {
                ul.prs { @for (alias, url) in &prs { li { (alias) ": " a href=(url) { (url) } } } }
            }
        }
    }
}
