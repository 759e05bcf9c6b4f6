//! The levers in the web UI: the red banner (`role="alert"`) while a Stage or the project
//! is frozen, "rejected by …" on Freight, and the confirmation dialogs of Reject /
//! Unreject (a Freight, for one Stage or everywhere) and Freeze / Unfreeze (a Stage, or
//! the project: `GET /projects/{p}/confirm?action=…`). Each dialog's `#confirm-go` carries
//! the same API call the CLI makes (`…/freight/{f}/reject`, `…/freeze`), which the page's
//! script sends with the session's CSRF token; the API authorizes it, as for any caller.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde_json::{Value, json};

use crate::api::{Freeze, Freight, Kind, ObjectKey, Project, Stage, Verb};
use crate::server::auth::Permissions;
use crate::server::{ApiError, AppState};

use super::actions::ConfirmQuery;
use super::view::freight_label;
use super::{UiError, Viewer};

/// What a confirmation dialog shows and calls.
pub(crate) struct Confirmation {
    pub title: String,
    pub body: Markup,
    pub url: String,
    pub payload: Value,
    pub refusal: Option<String>,
}

/// A freeze's words, with its end: `frozen by ann: incident 42 (until …)`, or that it
/// expired.
pub(crate) fn freeze_text(freeze: &Freeze) -> String {
    let now = jiff::Timestamp::now();
    match &freeze.until {
        Some(until) if !freeze.is_active_at(now) => {
            format!("{} (expired {})", freeze.words(), until.0)
        }
        Some(until) => format!("{} (until {})", freeze.words(), until.0),
        None => freeze.words(),
    }
}

/// The red banner of the freezes that gate now (the project's, then the Stage's).
pub(crate) fn banner(project: Option<&Freeze>, stage: Option<(&str, &Freeze)>) -> Markup {
    let now = jiff::Timestamp::now();
    let project = project.filter(|f| f.is_active_at(now));
    let stage = stage.filter(|(_, f)| f.is_active_at(now));
    html! {
        @if project.is_some() || stage.is_some() {
            div.banner.frozen role="alert" {
                strong { "Stopped: " }
                @if let Some(f) = project {
                    span.freeze data-scope="project" { "project " (freeze_text(f)) }
                }
                @if let Some((name, f)) = stage {
                    @if project.is_some() { "; " }
                    span.freeze data-scope="stage" data-stage=(name) { "Stage " (name) " " (freeze_text(f)) }
                }
                " — promotions are refused until it is lifted."
            }
        }
    }
}

/// The rejections of `freight`, each as `rejected by …` (everywhere, then per Stage).
pub(crate) fn rejections(freight: &Freight) -> Vec<String> {
    let Some(status) = freight.status.as_ref() else {
        return Vec::new();
    };
    let everywhere = status
        .rejected
        .iter()
        .map(|r| format!("{} (everywhere)", r.words()));
    let per_stage = status
        .rejected_for
        .iter()
        .map(|(stage, r)| format!("{} (for {stage})", r.words()));
    everywhere.chain(per_stage).collect()
}

/// The reason field every lever's dialog has.
fn reason_field(label: &str) -> Markup {
    html! {
        label for="confirm-reason" { (label) }
        input #confirm-reason type="text" name="reason" required;
    }
}

/// Reject / unreject `freight` for `stage` (or everywhere, without one).
pub(crate) fn reject_dialog(
    project: &str,
    stage: Option<&str>,
    freight: &Freight,
    undo: bool,
    perms: &Permissions,
) -> Confirmation {
    let id = freight.metadata.name.clone().unwrap_or_default();
    let label = freight_label(freight);
    let place = stage.map_or_else(|| "everywhere".to_owned(), |s| format!("for {s}"));
    let action = if undo { "unreject" } else { "reject" };
    let now: Vec<String> = rejections(freight);
    Confirmation {
        title: format!(
            "{} {label} {place}",
            if undo { "Unreject" } else { "Reject" }
        ),
        body: html! {
            @for r in &now { p.rejected { (r) } }
            @if undo {
                p { "Lifting the rejection makes " strong { (label) } " available " (place) " again (other gates still apply)." }
            } @else {
                p { "Rejected Freight is refused " (place) " by promote and passed over by auto-promotion, until it is unrejected. It is kept on the record." }
                (reason_field("Why (shown in every refusal)"))
            }
        },
        url: format!("/api/v1/projects/{project}/freight/{id}/{action}"),
        payload: match undo {
            true => json!({"stage": stage}),
            false => json!({"stage": stage, "reason": ""}),
        },
        refusal: perms.refusal(Verb::Reject, "freight", Some(&id)),
    }
}

/// Freeze / unfreeze `stage` (or the project, without one); `now` is its freeze.
pub(crate) fn freeze_dialog(
    project: &str,
    stage: Option<&str>,
    now: Option<&Freeze>,
    undo: bool,
    perms: &Permissions,
) -> Confirmation {
    let place = stage.map_or_else(|| format!("project {project}"), |s| format!("Stage {s}"));
    let refusal = match stage {
        Some(stage) => perms.refusal(Verb::Freeze, "stages", Some(stage)),
        None => perms.refusal(Verb::Freeze, "projects", Some(project)),
    };
    let action = if undo { "unfreeze" } else { "freeze" };
    Confirmation {
        title: format!("{} {place}", if undo { "Unfreeze" } else { "Freeze" }),
        body: html! {
            @if let Some(f) = now { p.frozen { (freeze_text(f)) } }
            @if undo {
                p { "Lifting the freeze lets promotions into " (place) " go ahead again; held promotions continue." }
            } @else {
                p { "Stops the line: promotions into " (place) " are refused and auto-promotion stops; running promotions that have not written yet wait. Someone with "
                    code { "override" } " can still promote, on the record." }
                (reason_field("Why (shown in every refusal and the banner)"))
                label for="confirm-until" { "Until (optional: an RFC 3339 time, or a duration such as 2h)" }
                input #confirm-until type="text" name="until";
            }
        },
        url: format!("/api/v1/projects/{project}/{action}"),
        payload: match undo {
            true => json!({"stage": stage}),
            false => json!({"stage": stage, "reason": ""}),
        },
        refusal,
    }
}

/// The dialog's markup, as every confirmation draws it.
pub(crate) fn dialog(
    action: &str,
    stage: Option<&str>,
    viewer: &Viewer,
    c: Confirmation,
) -> Markup {
    html! {
        div.confirm-content data-action=(action) data-stage=[stage] {
            h2 { (c.title) }
            (c.body)
            p.you { "you are " strong { (viewer.caller.user) } }
            @if let Some(why) = &c.refusal {
                p.refused.why { (why) }
            }
            template #confirm-call data-url=(c.url) data-body=(c.payload.to_string()) data-refused=[c.refusal.as_deref()] {}
        }
    }
}

/// The Project's freeze, if it has one.
pub(crate) async fn project_freeze(
    state: &AppState,
    project: &str,
) -> Result<Option<Freeze>, UiError> {
    let key = ObjectKey::cluster(Kind::Project, project);
    let stored = state.store.get(&key).await?;
    Ok(stored
        .and_then(|p| p.to_typed::<Project>().ok())
        .and_then(|p| p.status)
        .and_then(|s| s.freeze))
}

/// The Stage's own freeze, if it has one.
pub(crate) fn stage_freeze(stage: &Stage) -> Option<&Freeze> {
    stage.status.as_ref().and_then(|s| s.freeze.as_ref())
}

/// `GET /projects/{project}/confirm?action=freeze|unfreeze|reject|unreject[&freight=…]`:
/// the project-wide levers' dialogs (the project's freeze, a rejection everywhere).
pub(crate) async fn project_confirm(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(project): Path<String>,
    Query(query): Query<ConfirmQuery>,
) -> Result<Markup, UiError> {
    let store = state.store.as_ref();
    let perms = viewer.caller.permissions(store, &project).await?;
    if !perms.allows(Verb::List, "stages", None) {
        return Err(UiError(
            ApiError::forbidden(viewer.caller.refusal(Verb::List, "stages", None)).with_hint(
                format!("ask an admin for a RoleBinding in project `{project}` (`dray-viewer` is enough to look)"),
            ),
        ));
    }
    let action = query.action.as_str();
    let confirmation = match action {
        "freeze" | "unfreeze" => {
            let now = project_freeze(&state, &project).await?;
            freeze_dialog(&project, None, now.as_ref(), action == "unfreeze", &perms)
        }
        "reject" | "unreject" => {
            let freight = query.freight_of(&state, &project).await?;
            reject_dialog(&project, None, &freight, action == "unreject", &perms)
        }
        other => {
            return Err(UiError(ApiError::bad_request(format!(
                "unknown action `{other}`; use freeze, unfreeze, reject or unreject"
            ))));
        }
    };
    Ok(dialog(action, None, &viewer, confirmation))
}
