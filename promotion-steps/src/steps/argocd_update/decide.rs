//! The decision at the heart of `argocd-update`, as a pure function: from an
//! Application's JSON (patched already) and what the step wants, the one [`Action`] to
//! take — done, wait (naming for what), wait for a sync window, or request a sync. No
//! request is made here; `look.rs` carries the action out.
//!
//! The table, in order:
//! 1. `status.sync.revision` and `operationState.syncResult.revision` are the desired
//!    revisions and the operation `Succeeded` → [`Action::Done`] (a `Degraded` or
//!    `Missing` health is reported, not judged);
//! 2. an operation `Running`: held by a sync window → [`Action::WaitForWindow`]; ours →
//!    wait for it; someone else's → wait for it to finish, naming who started it;
//! 3. an operation requested but not started: ours → wait for the controller; someone
//!    else's → wait, naming who;
//! 4. not asked for this revision yet, or our sync failed → [`Action::Sync`];
//! 5. otherwise wait, naming the cause: the failed sync, a comparison error, a sync that
//!    succeeded against another revision (hint: `updateTargetRevision`), or plain syncing.

use serde_json::Value;

use crate::argocd::{BLOCKED_BY_WINDOW, initiator, same_commit};

/// What the step wants of one Application.
pub(super) struct Wanted<'a> {
    /// The Application as messages show it (`namespace/name` or `name`).
    pub(super) shown: &'a str,
    /// Whether it has `spec.sources` (else one `spec.source`).
    pub(super) multi: bool,
    /// Each matched source's index and the commit it must be synced at.
    pub(super) desired: Vec<(usize, &'a str)>,
    /// Whether this step already asked Argo CD to sync it to the first desired revision.
    pub(super) asked: bool,
}

impl Wanted<'_> {
    /// The first desired revision, shortened for messages.
    pub(super) fn rev(&self) -> &str {
        let rev = self.desired[0].1;
        &rev[..rev.len().min(12)]
    }
}

/// What to do about one Application.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Synced at the desired revisions. `unhealthy` is a `Degraded` or `Missing` health
    /// and Argo CD's message, to log (the Stage's health check judges it).
    Done {
        /// The health state and message, when the Application is not well.
        unhealthy: Option<(String, String)>,
    },
    /// Wait, for what `cause` says.
    Wait {
        /// What the step waits for.
        cause: String,
    },
    /// Argo CD's controller holds an operation until a sync window opens: wait, naming
    /// the windows (which takes a request).
    WaitForWindow {
        /// ` (the operation is <who>'s)` when the operation is not ours, else empty.
        whose: String,
        /// The comparison errors, ` (Argo CD cannot compare …)`, or empty.
        comparison: String,
    },
    /// Ask Argo CD to sync to the desired revisions; once asked, wait for `then`.
    Sync {
        /// What the step waits for once the sync is requested.
        then: String,
        /// The comparison errors, for the message if Argo CD refuses the sync, or empty.
        comparison: String,
    },
}

/// Decides what to do about `app` (see the module doc for the table).
pub(super) fn decide(app: &Value, wanted: &Wanted) -> Action {
    let (shown, rev) = (wanted.shown, wanted.rev());
    let status = &app["status"];
    let op = &status["operationState"];
    let phase = op["phase"].as_str().unwrap_or("");
    let at = |value: &Value| {
        wanted
            .desired
            .iter()
            .all(|(i, d)| same_commit(&revision_at(value, wanted.multi, *i), d))
    };
    let (synced, applied, op_target) = (
        at(&status["sync"]),
        at(&op["syncResult"]),
        at(&op["operation"]["sync"]),
    );
    // 1. Done?
    if synced && applied && phase == "Succeeded" {
        let health = &status["health"];
        let unhealthy = match health["status"].as_str() {
            Some(state @ ("Degraded" | "Missing")) => Some((
                state.to_owned(),
                health["message"]
                    .as_str()
                    .unwrap_or("(Argo CD gave no message)")
                    .to_owned(),
            )),
            _ => None,
        };
        return Action::Done { unhealthy };
    }
    let comparison = comparison_errors(status, shown);
    let wait = |cause: String| Action::Wait { cause };
    // 2. An operation in progress, ours or someone else's.
    let asked = wanted.asked;
    if phase == "Running" {
        let by = initiator(&op["operation"]);
        let message = op["message"].as_str().filter(|m| !m.is_empty());
        if message.is_some_and(|m| m.starts_with(BLOCKED_BY_WINDOW)) {
            let whose = if asked && op_target {
                String::new()
            } else {
                format!(" (the operation is {by}'s)")
            };
            return Action::WaitForWindow { whose, comparison };
        }
        let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
        let started = op["startedAt"].as_str().unwrap_or("?");
        if asked && op_target {
            return wait(format!(
                "Argo CD to finish syncing `{shown}` to `{rev}` (operation running since {started}{detail}){comparison}"
            ));
        }
        return wait(format!(
            "an operation on `{shown}` started by {by} at {started} to finish before syncing `{rev}`{detail}{comparison}"
        ));
    }
    // 3. An operation requested but not started by Argo CD's controller yet.
    if let Some(pending) = app.get("operation").filter(|o| o.is_object()) {
        if asked && at(&pending["sync"]) {
            return wait(format!(
                "Argo CD's controller to start the requested sync of `{shown}` to `{rev}`{comparison}"
            ));
        }
        return wait(format!(
            "an operation on `{shown}` requested by {} to finish before syncing `{rev}`{comparison}",
            initiator(pending)
        ));
    }
    // 5. What is left to wait for (after a sync request, when 4 makes one).
    let failed_ours = asked && op_target && matches!(phase, "Failed" | "Error");
    let then = if failed_ours {
        format!(
            "a retried sync of `{shown}` to `{rev}`, after Argo CD's sync {}: {}{comparison}",
            phase.to_lowercase(),
            op["message"].as_str().unwrap_or("(no message)")
        )
    } else if !comparison.is_empty() {
        format!("Argo CD to sync `{shown}` to `{rev}`{comparison}")
    } else if applied && phase == "Succeeded" {
        format!(
            "Argo CD to report `{shown}` synced at `{rev}`: the sync succeeded, but it compares \
             against `{}`; hint: set `updateTargetRevision: true` or push to the branch it tracks",
            revision_at(&status["sync"], wanted.multi, wanted.desired[0].0)
        )
    } else {
        format!("Argo CD to sync `{shown}` to `{rev}` (the change is written to git)")
    };
    // 4. Ask for a sync, once per revision (again after our sync failed).
    if !asked || failed_ours {
        return Action::Sync { then, comparison };
    }
    wait(then)
}

/// The revision a sync status, result or operation names for source `index`.
fn revision_at(value: &Value, multi: bool, index: usize) -> String {
    if multi {
        value["revisions"][index].as_str().unwrap_or("").to_owned()
    } else {
        value["revision"].as_str().unwrap_or("").to_owned()
    }
}

/// ` (Argo CD cannot compare `app`: …)` from the Application's comparison and sync error
/// conditions, or empty.
fn comparison_errors(status: &Value, shown: &str) -> String {
    let errors: Vec<String> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| matches!(c["type"].as_str(), Some("ComparisonError" | "SyncError")))
        .map(|c| {
            format!(
                "{}: {}",
                c["type"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    if errors.is_empty() {
        String::new()
    } else {
        format!(" (Argo CD cannot compare `{shown}`: {})", errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const REV: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    const OLD: &str = "1111111111111111111111111111111111111111";

    fn wanted(asked: bool) -> Wanted<'static> {
        Wanted {
            shown: "shop",
            multi: false,
            desired: vec![(0, REV)],
            asked,
        }
    }

    fn cause(action: Action) -> String {
        match action {
            Action::Wait { cause } => cause,
            other => panic!("not a wait: {other:?}"),
        }
    }

    fn synced_app(health: &str) -> Value {
        json!({"status": {
            "sync": {"revision": REV},
            "health": {"status": health, "message": "pod crashloops"},
            "operationState": {"phase": "Succeeded", "syncResult": {"revision": REV}}
        }})
    }

    #[test]
    fn synced_at_the_revision_is_done_and_an_unwell_health_is_reported() {
        assert_eq!(
            decide(&synced_app("Healthy"), &wanted(true)),
            Action::Done { unhealthy: None }
        );
        assert_eq!(
            decide(&synced_app("Degraded"), &wanted(false)),
            Action::Done {
                unhealthy: Some(("Degraded".into(), "pod crashloops".into()))
            }
        );
    }

    #[test]
    fn a_new_revision_is_synced_once_then_waited_for() {
        let app = json!({"status": {"sync": {"revision": OLD}}});
        assert_eq!(
            decide(&app, &wanted(false)),
            Action::Sync {
                then: "Argo CD to sync `shop` to `4b825dc642cb` (the change is written to git)"
                    .into(),
                comparison: String::new()
            }
        );
        assert_eq!(
            cause(decide(&app, &wanted(true))),
            "Argo CD to sync `shop` to `4b825dc642cb` (the change is written to git)"
        );
    }

    #[test]
    fn running_operations_are_waited_for_naming_whose_they_are() {
        let running = |sync_rev: &str, message: &str| {
            json!({"status": {"operationState": {
                "phase": "Running", "startedAt": "12:00", "message": message,
                "operation": {"sync": {"revision": sync_rev}, "initiatedBy": {"username": "ann"}}
            }}})
        };
        let ours = cause(decide(&running(REV, ""), &wanted(true)));
        assert!(
            ours.starts_with(
                "Argo CD to finish syncing `shop` to `4b825dc642cb` (operation running since 12:00)"
            ),
            "{ours}"
        );
        let theirs = cause(decide(&running(OLD, "working"), &wanted(true)));
        assert!(
            theirs.starts_with("an operation on `shop` started by "),
            "{theirs}"
        );
        assert!(
            theirs.ends_with("at 12:00 to finish before syncing `4b825dc642cb`: working"),
            "{theirs}"
        );
        let held = decide(
            &running(REV, &format!("{BLOCKED_BY_WINDOW}s")),
            &wanted(true),
        );
        assert_eq!(
            held,
            Action::WaitForWindow {
                whose: String::new(),
                comparison: String::new()
            }
        );
        let Action::WaitForWindow { whose, .. } = decide(
            &running(OLD, &format!("{BLOCKED_BY_WINDOW}s")),
            &wanted(true),
        ) else {
            panic!("not held by a window")
        };
        assert!(
            whose.starts_with(" (the operation is ") && whose.ends_with("'s)"),
            "{whose}"
        );
    }

    #[test]
    fn a_requested_operation_is_waited_for_and_never_replaced() {
        let pending = |rev: &str| json!({"operation": {"sync": {"revision": rev}}, "status": {}});
        assert_eq!(
            cause(decide(&pending(REV), &wanted(true))),
            "Argo CD's controller to start the requested sync of `shop` to `4b825dc642cb`"
        );
        let theirs = cause(decide(&pending(OLD), &wanted(false)));
        assert!(
            theirs.starts_with("an operation on `shop` requested by ")
                && theirs.ends_with(" to finish before syncing `4b825dc642cb`"),
            "{theirs}"
        );
    }

    #[test]
    fn a_failed_sync_of_ours_is_requested_again_naming_the_failure() {
        let app = json!({"status": {
            "sync": {"revision": OLD},
            "conditions": [{"type": "ComparisonError", "message": "bad yaml"}],
            "operationState": {"phase": "Failed", "message": "hook failed",
                               "operation": {"sync": {"revision": REV}}}
        }});
        assert_eq!(
            decide(&app, &wanted(true)),
            Action::Sync {
                then: "a retried sync of `shop` to `4b825dc642cb`, after Argo CD's sync failed: \
                       hook failed (Argo CD cannot compare `shop`: ComparisonError: bad yaml)"
                    .into(),
                comparison: " (Argo CD cannot compare `shop`: ComparisonError: bad yaml)".into()
            }
        );
    }

    #[test]
    fn a_sync_against_another_revision_hints_at_update_target_revision() {
        let app = json!({"status": {
            "sync": {"revision": OLD},
            "operationState": {"phase": "Succeeded", "syncResult": {"revision": REV}}
        }});
        let waiting = cause(decide(&app, &wanted(true)));
        assert!(
            waiting.contains(&format!("it compares against `{OLD}`"))
                && waiting.contains("hint: set `updateTargetRevision: true`"),
            "{waiting}"
        );
    }

    #[test]
    fn multi_source_applications_compare_each_matched_source() {
        let app = json!({"status": {
            "sync": {"revisions": ["x", REV]},
            "operationState": {"phase": "Succeeded", "syncResult": {"revisions": ["y", REV]}}
        }});
        let mut wants = wanted(true);
        wants.multi = true;
        wants.desired = vec![(1, REV)];
        assert_eq!(decide(&app, &wants), Action::Done { unhealthy: None });
        wants.desired = vec![(0, REV)];
        assert!(matches!(decide(&app, &wants), Action::Wait { .. }));
    }
}
