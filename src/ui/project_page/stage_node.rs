//! One Stage's node on the project page: its current Freight, health, verification, a
//! promotion written to git and waiting, its badges (promotion, hold, window: as the
//! Stage's board says) and its buttons, each disabled with why when refused.

use maud::{Markup, html};

use crate::api::{
    HealthState, Promotion, PromotionPhase, Stage, StageStatus, Verb, VerificationInfo,
    VerificationPhase,
};
use crate::pipeline::board::StageBoard;

use super::super::view::{self, artifacts, freight_label};
use super::ProjectData;

/// Where a node is drawn: its index in the layout (edges name it), column, row and style.
pub(super) struct Place {
    pub(super) index: usize,
    pub(super) layer: usize,
    pub(super) row: usize,
    pub(super) style: String,
}

/// One action a Stage node offers: its name, label, why it is refused (if it is), and the
/// Promotion it acts on (Abort).
pub(super) struct Action {
    action: &'static str,
    pub(super) label: &'static str,
    refusal: Option<String>,
    promotion: Option<String>,
}

/// The node's buttons, disabled with the reason as their title when refused, then the
/// reasons as text (one line each, so a viewer reads why without hovering).
fn action_buttons(stage: &str, actions: &[Action]) -> Markup {
    html! {
        div.buttons {
            @for a in actions {
                button.action type="button" data-action=(a.action) data-stage=(stage)
                    data-promotion=[a.promotion.as_deref()]
                    disabled[a.refusal.is_some()] title=[a.refusal.as_deref()] { (a.label) }
            }
        }
        @let whys = refusals(actions);
        @if !whys.is_empty() {
            ul.whys {
                @for why in &whys { li.why { (crate::ui::view::message(why)) } }
            }
        }
    }
}

/// The distinct reasons the actions are refused, in order (one verb refused for two
/// buttons is said once).
pub(super) fn refusals(actions: &[Action]) -> Vec<&str> {
    let mut whys: Vec<&str> = Vec::new();
    for why in actions.iter().filter_map(|a| a.refusal.as_deref()) {
        if !whys.contains(&why) {
            whys.push(why);
        }
    }
    whys
}

/// What a Stage's badge says when its windows keep Freight out (the board's reason, or
/// why the windows cannot be evaluated); `None` when they are open.
pub(super) fn window_text(board: Option<&StageBoard>) -> Option<String> {
    let window = &board?.window;
    if let Some(error) = window.error() {
        return Some(format!("window error: {error}"));
    }
    window.reason().map(|reason| reason.to_string())
}

/// Whether the Stage verifies its Freight: it has a `verification` or registered
/// Applications (docs/resources.md, "Health and verification").
fn verifies(stage: &Stage, status: &StageStatus) -> bool {
    stage.spec.verification.is_some() || !status.applications.is_empty()
}

/// The buttons a Stage node offers, each with the reason it is refused, if it is.
pub(super) fn stage_actions(
    data: &ProjectData,
    stage: &Stage,
    status: &StageStatus,
) -> Vec<Action> {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let perms = &data.permissions;
    let no_freight = data
        .selected
        .is_none()
        .then_some("no Freight to choose yet".to_owned());
    let promote_refusal = perms
        .refusal(Verb::Promote, "stages", Some(&name))
        .or(no_freight.clone());
    let approve_refusal = perms
        .refusal(Verb::Approve, "stages", Some(&name))
        .or(no_freight.clone());
    let mut actions = vec![
        Action {
            action: "promote",
            label: "Promote",
            refusal: promote_refusal,
            promotion: None,
        },
        Action {
            action: "approve",
            label: "Approve",
            refusal: approve_refusal,
            promotion: None,
        },
    ];
    if stage.spec.signoff.is_some() {
        actions.push(Action {
            action: "signoff",
            label: "Sign off",
            refusal: perms
                .refusal(Verb::Signoff, "stages", Some(&name))
                .or(no_freight),
            promotion: None,
        });
    }
    if verifies(stage, status) {
        let verify_refusal = perms.refusal(Verb::Verify, "stages", Some(&name));
        actions.push(Action {
            action: "verify",
            label: "Verify",
            refusal: verify_refusal.clone().or_else(|| {
                status
                    .current_freight
                    .is_none()
                    .then(|| format!("no Freight in `{name}` to verify yet"))
            }),
            promotion: None,
        });
        if status
            .verification
            .as_ref()
            .is_some_and(|v| !v.phase.is_terminal())
        {
            actions.push(Action {
                action: "abort-verification",
                label: "Stop verification",
                refusal: verify_refusal,
                promotion: None,
            });
        }
    }
    if let Some(p) = &status.current_promotion {
        actions.push(Action {
            action: "abort",
            label: "Abort",
            refusal: perms.refusal(Verb::Abort, "promotions", Some(p)),
            promotion: Some(p.clone()),
        });
    }
    let frozen = status
        .freeze
        .as_ref()
        .is_some_and(|f| f.is_active_at(jiff::Timestamp::now()));
    actions.push(Action {
        action: if frozen { "unfreeze" } else { "freeze" },
        label: if frozen { "Unfreeze" } else { "Freeze" },
        refusal: perms.refusal(Verb::Freeze, "stages", Some(&name)),
        promotion: None,
    });
    if let Some(id) = &data.selected {
        let rejected_here = data
            .freight
            .get(id)
            .and_then(|f| f.status.as_ref())
            .is_some_and(|s| s.rejected_for.contains_key(&name));
        actions.push(Action {
            action: if rejected_here { "unreject" } else { "reject" },
            label: if rejected_here { "Unreject" } else { "Reject" },
            refusal: perms.refusal(Verb::Reject, "freight", Some(id)),
            promotion: None,
        });
    }
    if status.hold.is_some() {
        actions.push(Action {
            action: "lift-hold",
            label: "Lift hold",
            refusal: perms.refusal(Verb::Promote, "stages", Some(&name)),
            promotion: None,
        });
    }
    actions
}

/// What a Stage node says about health: the verdict, and Argo CD's message when it is
/// worth reading on the node (Unhealthy).
pub(super) fn health_of(stage: &Stage, status: &StageStatus) -> Option<(HealthState, String)> {
    match &status.health {
        Some(h) => Some((h.status, h.message.clone())),
        // A Stage whose health will be judged but has not been read yet.
        None if stage.spec.health.is_some() || !status.applications.is_empty() => {
            Some((HealthState::Unknown, "not read from Argo CD yet".to_owned()))
        }
        None => None,
    }
}

/// The verification's line on a Stage node.
fn verification_text(v: &VerificationInfo) -> String {
    match v.phase {
        VerificationPhase::Pending => "verification: waiting for health".to_owned(),
        VerificationPhase::Running => {
            let successful: u32 = v.metrics.iter().map(|m| m.successful).sum();
            let measured: u32 = v.metrics.iter().map(|m| m.count).sum();
            if measured == 0 {
                "verifying: measuring".to_owned()
            } else {
                format!("verifying: {successful}/{measured} successful")
            }
        }
        phase => format!("verification: {phase:?}"),
    }
}

/// Whether the verification's message is shown on the node, not only in its title.
pub(super) fn verification_message_shown(v: &VerificationInfo) -> bool {
    matches!(
        v.phase,
        VerificationPhase::Failed | VerificationPhase::Inconclusive | VerificationPhase::Error
    ) && !v.message.is_empty()
}

/// The Stage's running Promotion when it has written to git and waits (for a sync).
pub(super) fn written_to_git<'a>(
    data: &'a ProjectData,
    status: &StageStatus,
) -> Option<&'a Promotion> {
    let p = data.running.get(status.current_promotion.as_ref()?)?;
    let s = p.status.as_ref()?;
    (s.written_to_git.is_some() && matches!(s.phase, PromotionPhase::Running)).then_some(p)
}

/// What the written-to-git line says it waits for.
fn waiting_for(promotion: &Promotion) -> &'static str {
    let message = promotion
        .status
        .as_ref()
        .map(|s| s.message.as_str())
        .unwrap_or_default();
    if message.contains("waiting for sync") {
        "waiting for sync"
    } else {
        "waiting"
    }
}

pub(super) fn stage_node(data: &ProjectData, stage: &Stage, place: &Place) -> Markup {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let status = stage.status.clone().unwrap_or_default();
    let current = status
        .current_freight
        .as_ref()
        .and_then(|c| data.freight.get(&c.name).map(|f| (c, f)));
    let actions = stage_actions(data, stage, &status);
    let health = health_of(stage, &status);
    let written = written_to_git(data, &status);
    html! {
        div.node.stage data-stage=(name) data-node=(place.index) data-layer=(place.layer)
            data-row=(place.row) style=(place.style) {
            div.kind { "Stage" }
            a.name href={ "/projects/" (data.project) "/stages/" (name) } { (name) }
            div.current {
                @match (&status.current_freight, current) {
                    (Some(_), Some((_, freight))) => {
                        span.alias data-current=(freight.metadata.name.clone().unwrap_or_default()) { (freight_label(freight)) }
                        (artifacts(freight))
                    }
                    (Some(c), None) => { span.alias { (if c.alias.is_empty() { &c.name } else { &c.alias }) } }
                    (None, _) => { span.none { "no Freight yet" } }
                }
            }
            @if let Some((state, message)) = &health {
                @let label = format!("{state:?}");
                div class={ "state health " (label.to_lowercase()) } data-health=(label)
                    title=[(!message.is_empty()).then_some(message)] {
                    span.dot aria-hidden="true" {}
                    "health: " strong { (label) }
                    @if *state == HealthState::Unhealthy && !message.is_empty() {
                        div.detail { (message) }
                    }
                }
            }
            @if let Some(v) = &status.verification {
                @let phase = format!("{:?}", v.phase);
                div class={ "state verification " (phase.to_lowercase()) } data-phase=(phase)
                    data-freight=(v.freight) title=[(!v.message.is_empty()).then_some(&v.message)] {
                    span.dot aria-hidden="true" {}
                    (verification_text(v))
                    @if verification_message_shown(v) {
                        div.detail { (crate::ui::view::message(&v.message)) }
                    }
                }
            }
            @if let Some(p) = written {
                @let w = p.status.as_ref().and_then(|s| s.written_to_git.as_ref());
                div.state.written-to-git title=[p.status.as_ref().map(|s| s.message.as_str())] {
                    span.dot aria-hidden="true" {}
                    "written to git, " (waiting_for(p))
                    @if let Some(w) = w {
                        div.detail { code { (w.name) } " at " (view::commit_link(&w.repo_url, &w.commit)) }
                    }
                }
            }
            div.badges {
                @if let Some(p) = &status.current_promotion {
                    a.badge.promoting href={ "/projects/" (data.project) "/promotions/" (p) } { "promoting: " (p) }
                }
                @if let Some(f) = status.freeze.as_ref().filter(|f| f.is_active_at(jiff::Timestamp::now())) {
                    span.badge.frozen title=(f.reason) { (f.words()) }
                }
                @if let Some(h) = &status.hold {
                    span.badge.hold title=(h.reason) { "hold by " (h.by) }
                }
                @match window_text(data.boards.get(&name)) {
                    Some(text) => { span.badge.window.closed { (text) } }
                    None => { span.badge.window.open { "window open" } }
                }
            }
            div.actions { (action_buttons(&name, &actions)) }
        }
    }
}
