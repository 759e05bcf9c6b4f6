//! The per-Stage board: for each Stage, at one moment, which of some Freight may enter it
//! and why not ([`availability`](super::availability)'s gates, with reasons), whether its
//! promotion windows are open now and when that next changes ([`super::windows`]), and
//! whether it is held (auto-promotion paused) or busy (a promotion running).
//!
//! [`board`] is the one place this is assembled; the API (`GET …/stages/{s}/freight`,
//! `…/window`, `status.window` on listed Stages) and the web UI (the project page's nodes
//! and availability table, the confirmation dialog) only show what it says. It is pure:
//! the caller reads the Stages, the Freight and the project's windows ([`project_windows`],
//! one ProjectConfig read) and gives `now`.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::api::{Freight, Kind, ObjectKey, ProjectConfig, PromotionWindow, Stage, StageHold};
use crate::store::{Store, StoreError};

use super::availability::{Availability, Reason, availability};
use super::windows::{self, WindowError, WindowState};

/// What the board says about one Stage.
#[derive(Debug, Clone)]
pub struct StageBoard {
    /// The Stage's name.
    pub stage: String,
    /// Its promotion windows now.
    pub window: StageWindow,
    /// Why auto-promotion is paused on it, if it is.
    pub held: Option<StageHold>,
    /// The Promotion running in it now, if any.
    pub busy: Option<String>,
    /// The gates for each Freight asked about, in the order asked.
    pub freight: Vec<FreightGates>,
}

impl StageBoard {
    /// The gates for the Freight `id`, if it was asked about.
    pub fn gates(&self, id: &str) -> Option<&FreightGates> {
        self.freight.iter().find(|f| f.freight == id)
    }
}

/// The gates for one Freight entering one Stage (windows aside: they are the Stage's, the
/// same for every Freight, in [`StageBoard::window`]).
#[derive(Debug, Clone)]
pub struct FreightGates {
    /// The Freight's id.
    pub freight: String,
    /// What the gates say: every reason it may not enter, who approved it.
    pub availability: Availability,
}

/// A Stage's promotion windows at one moment: open or not, which window blocks and until
/// when, when that next changes; or why they cannot be evaluated (a bad window, which
/// keeps promotion out rather than guessing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageWindow(pub Result<WindowState, WindowError>);

impl StageWindow {
    /// The windows of `windows` that select the Stage `name` with `labels`, at `now`.
    pub fn of(
        windows: &[PromotionWindow],
        name: &str,
        labels: &BTreeMap<String, String>,
        now: Timestamp,
    ) -> Self {
        StageWindow(windows::evaluate(windows, name, labels, now))
    }

    /// Whether promotion is permitted now.
    pub fn is_open(&self) -> bool {
        self.0.as_ref().is_ok_and(|w| w.open)
    }

    /// The gate's reason when a window keeps Freight out now: the blocking window, and when
    /// promotion next becomes possible (else when that window changes).
    pub fn reason(&self) -> Option<Reason> {
        let state = self.0.as_ref().ok().filter(|w| !w.open)?;
        let blocked = state.blocked_by.as_ref()?;
        Some(Reason::WindowClosed {
            window: blocked.window.clone(),
            until: state.next_change.or(blocked.until),
        })
    }

    /// Why the windows cannot be evaluated, if they cannot.
    pub fn error(&self) -> Option<&WindowError> {
        self.0.as_ref().err()
    }
}

/// The board of `stages` at `now` under the project's `windows`: for each Stage, in order,
/// its window, hold and running Promotion, and the gates for each of `freight`.
pub fn board(
    stages: &[Stage],
    freight: &[&Freight],
    windows: &[PromotionWindow],
    now: Timestamp,
) -> Vec<StageBoard> {
    stages
        .iter()
        .map(|stage| stage_board(stage, freight, windows, now))
        .collect()
}

/// The board of one Stage (see [`board`]).
pub fn stage_board(
    stage: &Stage,
    freight: &[&Freight],
    windows: &[PromotionWindow],
    now: Timestamp,
) -> StageBoard {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let labels = stage.metadata.labels.clone().unwrap_or_default();
    let status = stage.status.as_ref();
    StageBoard {
        window: StageWindow::of(windows, &name, &labels, now),
        stage: name,
        held: status.and_then(|s| s.hold.clone()),
        busy: status.and_then(|s| s.current_promotion.clone()),
        freight: freight
            .iter()
            .map(|f| FreightGates {
                freight: f.metadata.name.clone().unwrap_or_default(),
                availability: availability(stage, f, now),
            })
            .collect(),
    }
}

/// The promotion windows of `project` (its ProjectConfig's `promotionWindows`; none when
/// it has no ProjectConfig): one read, whatever the number of Stages.
pub async fn project_windows(
    store: &dyn Store,
    project: &str,
) -> Result<Vec<PromotionWindow>, StoreError> {
    let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
    let config: Option<ProjectConfig> = store.get(&key).await?.and_then(|c| c.to_typed().ok());
    Ok(config.map(|c| c.spec.promotion_windows).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::WindowKind;

    fn prod() -> Stage {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": "prod", "namespace": "demo"},
            "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                "sources": {"stages": ["staging"]}}]},
            "status": {"currentPromotion": "prod-abc",
                "hold": {"by": "ann", "freight": "f0", "reason": "rollback"}}
        }))
        .unwrap()
    }

    fn freight(name: &str, status: serde_json::Value) -> Freight {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": name, "namespace": "demo"},
            "alias": "frosty-otter", "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}],
            "status": status
        }))
        .unwrap()
    }

    fn freeze() -> PromotionWindow {
        PromotionWindow {
            name: "freeze".to_owned(),
            kind: WindowKind::Deny,
            schedule: Some("0 0 * * *".to_owned()),
            duration: Some("24h".to_owned()),
            ..PromotionWindow::default()
        }
    }

    fn now() -> Timestamp {
        "2026-06-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_stage_board_holds_the_gates_of_each_freight_its_window_hold_and_promotion() {
        let verified = freight(
            "f1",
            json!({"verifiedIn": {"staging": {"verifiedAt": "2026-05-01T00:00:00Z"}}}),
        );
        let new = freight("f2", json!({}));
        let boards = board(&[prod()], &[&verified, &new], &[freeze()], now());
        let [prod] = boards.as_slice() else {
            panic!("one board per Stage: {boards:?}");
        };
        assert_eq!(prod.stage, "prod");
        assert_eq!(prod.busy.as_deref(), Some("prod-abc"));
        assert_eq!(prod.held.as_ref().map(|h| h.by.as_str()), Some("ann"));
        let f1 = prod.gates("f1").expect("f1 was asked about");
        assert!(f1.availability.is_available(), "{f1:?}");
        let f2 = prod.gates("f2").expect("f2 was asked about");
        assert_eq!(
            f2.availability.reasons,
            vec![Reason::NotVerified {
                stages: vec!["staging".to_owned()],
                all: false
            }]
        );
        assert!(prod.gates("f3").is_none());
        // Frozen all day, every day: closed, named, with no end in sight.
        assert!(!prod.window.is_open());
        assert_eq!(
            prod.window.reason(),
            Some(Reason::WindowClosed {
                window: "freeze".to_owned(),
                until: None
            })
        );
    }

    #[test]
    fn a_stage_without_windows_is_open_and_a_bad_window_is_an_error_not_open() {
        let open = stage_board(&prod(), &[], &[], now());
        assert!(open.window.is_open());
        assert_eq!(open.window.reason(), None);
        assert!(open.window.error().is_none());
        let mut bad = freeze();
        bad.schedule = Some("not cron".to_owned());
        let broken = stage_board(&prod(), &[], &[bad], now());
        assert!(!broken.window.is_open());
        assert_eq!(broken.window.reason(), None);
        let error = broken.window.error().expect("a bad window is an error");
        assert_eq!(error.window(), "freeze");
    }
}
