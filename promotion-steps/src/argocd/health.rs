//! Judging an Application's health for a Stage: Healthy only when Argo CD reports the
//! desired revisions synced and applied by a Succeeded operation, and health `Healthy`.

use serde_json::Value;

/// A verdict on one Application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppHealth {
    /// Synced to the desired revisions and `Healthy`.
    Healthy,
    /// Not synced to them yet, or `Progressing` / `Suspended` (or a health Argo CD does
    /// not know yet).
    Progressing,
    /// `Degraded` or `Missing` after the sync, or the sync to them failed.
    Unhealthy,
}

/// A full or abbreviated (7+) hex commit id.
pub(crate) fn is_commit(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// Whether `reported` (a full commit) is `desired` (full or abbreviated).
pub(crate) fn same_commit(reported: &str, desired: &str) -> bool {
    !desired.is_empty()
        && is_commit(reported)
        && reported
            .to_ascii_lowercase()
            .starts_with(&desired.to_ascii_lowercase())
}

/// The revisions a status object reports: `revisions[]` for multi-source, else `revision`.
fn reported(value: &Value) -> Vec<String> {
    match value["revisions"].as_array() {
        Some(list) => list
            .iter()
            .map(|r| r.as_str().unwrap_or("").to_owned())
            .collect(),
        None => value["revision"]
            .as_str()
            .map(|r| vec![r.to_owned()])
            .unwrap_or_default(),
    }
}

fn all_reported(value: &Value, desired: &[String]) -> bool {
    let reported = reported(value);
    desired
        .iter()
        .all(|d| reported.iter().any(|r| same_commit(r, d)))
}

/// Whether Argo CD reports `app` synced to `desired` (every revision, a prefix match) and
/// applied by a Succeeded operation: what it runs now is ours, so its pods are ours too.
/// `desired` empty: any revision it reports (what `argocd-wait` waits for).
pub fn is_applied(app: &Value, desired: &[String]) -> bool {
    let status = &app["status"];
    let op = &status["operationState"];
    if desired.is_empty() {
        return op["phase"] == "Succeeded" || op.is_null();
    }
    op["phase"] == "Succeeded"
        && all_reported(&op["syncResult"], desired)
        && all_reported(&status["sync"], desired)
}

/// Whether an operation syncing `app` to `desired` is running (sync waves wait for the
/// health of earlier waves: a pod that will not come up holds it until its timeout).
pub fn is_syncing_to(app: &Value, desired: &[String]) -> bool {
    let op = &app["status"]["operationState"];
    !desired.is_empty()
        && op["phase"] == "Running"
        && all_reported(&op["operation"]["sync"], desired)
}

/// Judges an Application: Healthy only when `status.sync.revision(s)` and
/// `status.operationState.syncResult.revision(s)` match the desired revisions (a prefix
/// match, so abbreviated ids work), the operation `Succeeded` and health is `Healthy`;
/// `Progressing` / `Suspended` or not synced yet is Progressing; `Degraded` / `Missing` is
/// Unhealthy with Argo CD's message. Returns (verdict, Argo CD's health status, the synced
/// revision(s) comma-separated, a message).
pub fn judge(app: &Value, desired_revisions: &[String]) -> (AppHealth, String, String, String) {
    let status = &app["status"];
    let health = status["health"]["status"]
        .as_str()
        .unwrap_or("Unknown")
        .to_owned();
    let synced_revision = reported(&status["sync"]).join(",");
    let name = app["metadata"]["name"].as_str().unwrap_or("?");
    let desired: Vec<String> = desired_revisions
        .iter()
        .map(|d| d[..d.len().min(12)].to_owned())
        .collect();
    let desired_text = desired.join(", ");
    let argocd_message = status["health"]["message"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    let op = &status["operationState"];
    let phase = op["phase"].as_str().unwrap_or("");
    let applied = all_reported(&op["syncResult"], desired_revisions);
    let aimed = all_reported(&op["operation"]["sync"], desired_revisions) || applied;
    let synced = all_reported(&status["sync"], desired_revisions);
    if desired_revisions.is_empty() {
        return (
            AppHealth::Progressing,
            health,
            synced_revision,
            format!("no desired revision is registered for `{name}`"),
        );
    }
    if aimed && matches!(phase, "Failed" | "Error") {
        return (
            AppHealth::Unhealthy,
            health,
            synced_revision,
            format!(
                "Argo CD's sync of `{name}` to `{desired_text}` ended in {phase}: {}",
                op["message"].as_str().unwrap_or("(no message)")
            ),
        );
    }
    if !(synced && applied && phase == "Succeeded") {
        let now = if synced_revision.is_empty() {
            "nothing yet".to_owned()
        } else {
            format!("`{synced_revision}`")
        };
        let running = if phase == "Running" {
            " (an operation is running)"
        } else {
            ""
        };
        return (
            AppHealth::Progressing,
            health,
            synced_revision,
            format!(
                "Argo CD has not synced `{name}` to `{desired_text}` yet; it reports {now}{running}"
            ),
        );
    }
    let (verdict, message) = match health.as_str() {
        "Healthy" => (
            AppHealth::Healthy,
            format!("`{name}` is synced to `{desired_text}` and Healthy"),
        ),
        "Degraded" | "Missing" => (
            AppHealth::Unhealthy,
            format!(
                "`{name}` is {health}: {}",
                argocd_message
                    .as_deref()
                    .unwrap_or("(Argo CD gave no message)")
            ),
        ),
        other => (
            AppHealth::Progressing,
            format!(
                "`{name}` is {other}{}",
                argocd_message.map(|m| format!(": {m}")).unwrap_or_default()
            ),
        ),
    };
    (verdict, health, synced_revision, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const REV: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    const OLD: &str = "1111111111111111111111111111111111111111";

    fn app(synced: &str, applied: &str, phase: &str, health: Value) -> Value {
        json!({
            "metadata": {"name": "shop-prod"},
            "status": {
                "sync": {"status": "Synced", "revision": synced},
                "health": health,
                "operationState": {
                    "phase": phase,
                    "message": "one or more objects failed to apply",
                    "operation": {"sync": {"revision": applied}},
                    "syncResult": {"revision": applied},
                },
            },
        })
    }

    #[test]
    fn healthy_only_when_synced_applied_succeeded_and_healthy() {
        let healthy = app(REV, REV, "Succeeded", json!({"status": "Healthy"}));
        let (verdict, health, revision, message) = judge(&healthy, &["4b825dc6".to_owned()]);
        assert_eq!(verdict, AppHealth::Healthy, "{message}");
        assert_eq!(health, "Healthy");
        assert_eq!(revision, REV);
        // Healthy, but at the old revision: still progressing towards ours.
        let old = app(OLD, OLD, "Succeeded", json!({"status": "Healthy"}));
        let (verdict, _, revision, message) = judge(&old, &[REV.to_owned()]);
        assert_eq!(verdict, AppHealth::Progressing);
        assert_eq!(revision, OLD);
        assert!(
            message.contains("has not synced `shop-prod` to `4b825dc642cb`"),
            "{message}"
        );
        // Compared at ours, but the operation that applied it is older.
        let unapplied = app(REV, OLD, "Succeeded", json!({"status": "Healthy"}));
        assert_eq!(
            judge(&unapplied, &[REV.to_owned()]).0,
            AppHealth::Progressing
        );
        // Running.
        let running = app(REV, REV, "Running", json!({"status": "Healthy"}));
        assert_eq!(judge(&running, &[REV.to_owned()]).0, AppHealth::Progressing);
    }

    #[test]
    fn degraded_and_missing_are_unhealthy_with_argocds_message() {
        let degraded = app(
            REV,
            REV,
            "Succeeded",
            json!({"status": "Degraded", "message": "Deployment \"app\" exceeded its progress deadline"}),
        );
        let (verdict, health, _, message) = judge(&degraded, &[REV.to_owned()]);
        assert_eq!(verdict, AppHealth::Unhealthy);
        assert_eq!(health, "Degraded");
        assert_eq!(
            message,
            "`shop-prod` is Degraded: Deployment \"app\" exceeded its progress deadline"
        );
        let missing = app(REV, REV, "Succeeded", json!({"status": "Missing"}));
        assert_eq!(judge(&missing, &[REV.to_owned()]).0, AppHealth::Unhealthy);
        for progressing in ["Progressing", "Suspended", "Unknown"] {
            let app = app(REV, REV, "Succeeded", json!({"status": progressing}));
            let (verdict, _, _, message) = judge(&app, &[REV.to_owned()]);
            assert_eq!(verdict, AppHealth::Progressing, "{progressing}");
            assert!(message.contains(progressing), "{message}");
        }
    }

    #[test]
    fn a_failed_sync_to_the_desired_revision_is_unhealthy() {
        let failed = app(OLD, REV, "Failed", json!({"status": "Healthy"}));
        let (verdict, _, _, message) = judge(&failed, &[REV.to_owned()]);
        assert_eq!(verdict, AppHealth::Unhealthy);
        assert!(
            message.contains("ended in Failed: one or more objects failed"),
            "{message}"
        );
        // A failed sync to some other revision says nothing about ours.
        let other = app(OLD, OLD, "Failed", json!({"status": "Healthy"}));
        assert_eq!(judge(&other, &[REV.to_owned()]).0, AppHealth::Progressing);
    }

    #[test]
    fn multi_source_revisions_must_all_be_reported() {
        let other = "2222222222222222222222222222222222222222";
        let multi = json!({
            "metadata": {"name": "shop"},
            "spec": {"sources": [{}, {}]},
            "status": {
                "sync": {"revisions": [REV, other]},
                "health": {"status": "Healthy"},
                "operationState": {"phase": "Succeeded", "syncResult": {"revisions": [REV, other]}},
            },
        });
        let (verdict, _, revision, _) = judge(&multi, &[REV.to_owned(), other.to_owned()]);
        assert_eq!(verdict, AppHealth::Healthy);
        assert_eq!(revision, format!("{REV},{other}"));
        assert_eq!(
            judge(&multi, &[REV.to_owned(), OLD.to_owned()]).0,
            AppHealth::Progressing
        );
        assert_eq!(judge(&multi, &[]).0, AppHealth::Progressing);
    }
}
