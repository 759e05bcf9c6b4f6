//! What happened in a project, read from the state its resources are in: a Promotion
//! that ended (`PromotionSucceeded`, `PromotionFailed`, `PromotionErrored`), Freight
//! verified in a Stage (`FreightVerified`, from the Freight's `verifiedIn`), a
//! verification that failed (`VerificationFailed`, from the Stage's verification
//! history), Freight rejected by a person (`FreightRejected`, from the Freight's
//! `rejected`/`rejectedFor`), and a line stopped (`StageFrozen`, from a Stage's or the
//! Project's `freeze`). Each occurrence has an id that stays the same however often it is
//! read (a rejection or freeze is named by its time, so lifting one and pulling the lever
//! again is a new occurrence), so the outbox takes each once.
//!
//! Reading events from state rather than from the moment a phase changes means nothing
//! is lost while Dray is down: what ended meanwhile is still in the resources when it
//! starts again.

use jiff::Timestamp;

use crate::api::{
    EventFreight, EventPayload, Freeze, Freight, NotificationEvent, Promotion, PromotionPhase,
    Rejection, Stage, Time, VerificationPhase,
};

/// The Stage named in a project-wide rejection's or freeze's payload: every Stage.
pub const EVERY_STAGE: &str = "*";

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    /// Stable across reads, e.g. `promotion/dev-abc/Succeeded`.
    pub id: String,
    /// The payload sent for it.
    pub payload: EventPayload,
}

impl Occurrence {
    /// When it happened.
    pub fn at(&self) -> Timestamp {
        self.payload.at.0
    }
}

/// Where the links in payloads point.
#[derive(Debug, Clone)]
pub struct Links {
    /// Dray's external URL, without a trailing `/`.
    pub base: String,
}

impl Links {
    /// The project's page in the web UI.
    pub fn project(&self, project: &str) -> String {
        format!("{}/projects/{project}", self.base.trim_end_matches('/'))
    }

    /// The Stage's page in the web UI.
    pub fn stage(&self, project: &str, stage: &str) -> String {
        format!(
            "{}/projects/{project}/stages/{stage}",
            self.base.trim_end_matches('/')
        )
    }
}

/// Everything in `project` that happened, oldest first (ties in a fixed order: promotion
/// events before verification events, then by id).
pub fn occurrences(
    project: &str,
    project_freeze: Option<&Freeze>,
    promotions: &[impl AsRef<Promotion>],
    stages: &[impl AsRef<Stage>],
    freight: &[impl AsRef<Freight>],
    links: &Links,
) -> Vec<Occurrence> {
    let alias_of = |name: &str| {
        freight
            .iter()
            .map(AsRef::as_ref)
            .find(|f| f.metadata.name.as_deref() == Some(name))
            .map(|f| f.spec.alias.clone())
            .unwrap_or_default()
    };
    let mut found = Vec::new();
    for promo in promotions.iter().map(AsRef::as_ref) {
        let Some(status) = &promo.status else {
            continue;
        };
        let event = match status.phase {
            PromotionPhase::Succeeded => NotificationEvent::PromotionSucceeded,
            PromotionPhase::Failed => NotificationEvent::PromotionFailed,
            PromotionPhase::Errored => NotificationEvent::PromotionErrored,
            _ => continue,
        };
        let Some(at) = status.finished_at.clone() else {
            continue;
        };
        let name = promo.metadata.name.clone().unwrap_or_default();
        found.push(Occurrence {
            id: format!("promotion/{name}/{}", status.phase),
            payload: EventPayload {
                event,
                project: project.to_owned(),
                stage: promo.spec.stage.clone(),
                freight: EventFreight {
                    name: promo.spec.freight.clone(),
                    alias: alias_of(&promo.spec.freight),
                },
                promotion: Some(name),
                phase: status.phase.to_string(),
                message: status.message.clone(),
                at,
                url: links.stage(project, &promo.spec.stage),
            },
        });
    }
    for f in freight.iter().map(AsRef::as_ref) {
        let name = f.metadata.name.clone().unwrap_or_default();
        let verified = f.status.iter().flat_map(|s| s.verified_in.iter());
        for (stage, verified) in verified {
            let Some(at) = verified.verified_at.clone() else {
                continue;
            };
            found.push(Occurrence {
                id: format!("verified/{name}/{stage}/{}", at.0.as_second()),
                payload: EventPayload {
                    event: NotificationEvent::FreightVerified,
                    project: project.to_owned(),
                    stage: stage.clone(),
                    freight: EventFreight {
                        name: name.clone(),
                        alias: f.spec.alias.clone(),
                    },
                    promotion: None,
                    phase: "Verified".to_owned(),
                    message: format!("verified in `{stage}`"),
                    at,
                    url: links.stage(project, stage),
                },
            });
        }
    }
    for f in freight.iter().map(AsRef::as_ref) {
        let Some(status) = &f.status else {
            continue;
        };
        let everywhere = status.rejected.iter().map(|r| (EVERY_STAGE, r));
        let per_stage = status.rejected_for.iter().map(|(s, r)| (s.as_str(), r));
        for (stage, rejection) in everywhere.chain(per_stage) {
            found.extend(rejected(project, f, stage, rejection, links));
        }
    }
    if let Some(freeze) = project_freeze {
        found.extend(frozen(project, EVERY_STAGE, freeze, links));
    }
    for stage in stages.iter().map(AsRef::as_ref) {
        let Some(status) = &stage.status else {
            continue;
        };
        let stage_name = stage.metadata.name.clone().unwrap_or_default();
        if let Some(freeze) = &status.freeze {
            found.extend(frozen(project, &stage_name, freeze, links));
        }
        let mut runs: Vec<_> = status.verification_history.iter().collect();
        runs.extend(status.verification.iter());
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        runs.dedup_by(|a, b| a.id == b.id);
        for run in runs {
            let failed = matches!(
                run.phase,
                VerificationPhase::Failed
                    | VerificationPhase::Inconclusive
                    | VerificationPhase::Error
            );
            let (true, Some(at)) = (failed, run.finish_time.clone()) else {
                continue;
            };
            found.push(Occurrence {
                id: format!("verification/{stage_name}/{}", run.id),
                payload: EventPayload {
                    event: NotificationEvent::VerificationFailed,
                    project: project.to_owned(),
                    stage: stage_name.clone(),
                    freight: EventFreight {
                        name: run.freight.clone(),
                        alias: alias_of(&run.freight),
                    },
                    promotion: None,
                    phase: format!("{:?}", run.phase),
                    message: run.message.clone(),
                    at,
                    url: links.stage(project, &stage_name),
                },
            });
        }
    }
    found.sort_by(|a, b| {
        (a.at(), rank(a.payload.event), &a.id).cmp(&(b.at(), rank(b.payload.event), &b.id))
    });
    found
}

/// `FreightRejected` for `freight` in `stage` ([`EVERY_STAGE`] when everywhere).
fn rejected(
    project: &str,
    freight: &Freight,
    stage: &str,
    rejection: &Rejection,
    links: &Links,
) -> Option<Occurrence> {
    let at = rejection.rejected_at.clone()?;
    let name = freight.metadata.name.clone().unwrap_or_default();
    Some(Occurrence {
        id: format!("rejected/{name}/{stage}/{}", at.0.as_second()),
        payload: EventPayload {
            event: NotificationEvent::FreightRejected,
            project: project.to_owned(),
            stage: stage.to_owned(),
            freight: EventFreight {
                name,
                alias: freight.spec.alias.clone(),
            },
            promotion: None,
            phase: "Rejected".to_owned(),
            message: rejection.words(),
            at,
            url: stage_or_project(links, project, stage),
        },
    })
}

/// `StageFrozen` for `stage` ([`EVERY_STAGE`] for the whole project); no Freight.
fn frozen(project: &str, stage: &str, freeze: &Freeze, links: &Links) -> Option<Occurrence> {
    let at = freeze.since.clone()?;
    Some(Occurrence {
        id: format!("frozen/{stage}/{}", at.0.as_second()),
        payload: EventPayload {
            event: NotificationEvent::StageFrozen,
            project: project.to_owned(),
            stage: stage.to_owned(),
            freight: EventFreight::default(),
            promotion: None,
            phase: "Frozen".to_owned(),
            message: freeze.words(),
            at,
            url: stage_or_project(links, project, stage),
        },
    })
}

/// The Stage's page, or the project's for [`EVERY_STAGE`].
fn stage_or_project(links: &Links, project: &str, stage: &str) -> String {
    if stage == EVERY_STAGE {
        links.project(project)
    } else {
        links.stage(project, stage)
    }
}

/// Promotion events sort before what follows from them at the same instant.
fn rank(event: NotificationEvent) -> u8 {
    match event {
        NotificationEvent::PromotionSucceeded
        | NotificationEvent::PromotionFailed
        | NotificationEvent::PromotionErrored => 0,
        _ => 1,
    }
}

/// The occurrences not yet taken: after `since`, or at `since` and not in `seen`.
pub fn new_since<'a>(
    all: &'a [Occurrence],
    since: Timestamp,
    seen: &[String],
) -> Vec<&'a Occurrence> {
    all.iter()
        .filter(|o| o.at() > since || (o.at() == since && !seen.contains(&o.id)))
        .collect()
}

/// The watermark after taking `taken` on top of `(since, seen)`: the newest time, and the
/// ids seen at exactly that time.
pub fn advance(since: Timestamp, seen: &[String], taken: &[&Occurrence]) -> (Time, Vec<String>) {
    let newest = taken
        .iter()
        .map(|o| o.at())
        .max()
        .unwrap_or(since)
        .max(since);
    let mut ids: Vec<String> = if newest == since {
        seen.to_vec()
    } else {
        Vec::new()
    };
    ids.extend(
        taken
            .iter()
            .filter(|o| o.at() == newest)
            .map(|o| o.id.clone()),
    );
    ids.sort();
    ids.dedup();
    (Time(newest), ids)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::{PromotionSpec, PromotionStatus, StageStatus, VerificationInfo};

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn promotion(name: &str, phase: PromotionPhase, finished: Option<i64>) -> Promotion {
        let mut promo = Promotion::new(
            name,
            PromotionSpec {
                stage: "prod".into(),
                freight: "f1".into(),
                ..PromotionSpec::default()
            },
        );
        promo.status = Some(PromotionStatus {
            phase,
            message: format!("{phase} for a reason"),
            finished_at: finished.map(at),
            ..PromotionStatus::default()
        });
        promo
    }

    fn arcs<T>(items: Vec<T>) -> Vec<Arc<T>> {
        items.into_iter().map(Arc::new).collect()
    }

    fn links() -> Links {
        Links {
            base: "https://dray.example.com/".into(),
        }
    }

    #[test]
    fn ended_promotions_and_failed_verifications_are_events_in_time_order() {
        let promotions = vec![
            promotion("p-ok", PromotionPhase::Succeeded, Some(20)),
            promotion("p-bad", PromotionPhase::Failed, Some(10)),
            promotion("p-broke", PromotionPhase::Errored, Some(30)),
            promotion("p-running", PromotionPhase::Running, None),
            promotion("p-aborted", PromotionPhase::Aborted, Some(5)),
        ];
        let mut freight = Freight::new("f1", Default::default());
        freight.spec.alias = "frosty-otter".into();
        freight.status = Some(crate::api::FreightStatus {
            verified_in: [(
                "prod".to_owned(),
                crate::api::VerifiedStage {
                    verified_at: Some(at(20)),
                    longest_soak_seconds: None,
                },
            )]
            .into(),
            ..Default::default()
        });
        let mut stage = Stage::new("prod", Default::default());
        let failed = VerificationInfo {
            id: "v1".into(),
            freight: "f1".into(),
            phase: VerificationPhase::Failed,
            message: "error rate 9%".into(),
            finish_time: Some(at(40)),
            ..VerificationInfo::default()
        };
        stage.status = Some(StageStatus {
            verification: Some(failed.clone()),
            verification_history: vec![
                failed,
                VerificationInfo {
                    id: "v0".into(),
                    freight: "f1".into(),
                    phase: VerificationPhase::Successful,
                    finish_time: Some(at(1)),
                    ..VerificationInfo::default()
                },
            ],
            ..StageStatus::default()
        });
        let found = occurrences(
            "demo",
            None,
            &arcs(promotions),
            &arcs(vec![stage]),
            &arcs(vec![freight]),
            &links(),
        );
        let seen: Vec<(&str, NotificationEvent)> = found
            .iter()
            .map(|o| (o.id.as_str(), o.payload.event))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("promotion/p-bad/Failed", NotificationEvent::PromotionFailed),
                (
                    "promotion/p-ok/Succeeded",
                    NotificationEvent::PromotionSucceeded
                ),
                ("verified/f1/prod/20", NotificationEvent::FreightVerified),
                (
                    "promotion/p-broke/Errored",
                    NotificationEvent::PromotionErrored
                ),
                (
                    "verification/prod/v1",
                    NotificationEvent::VerificationFailed
                ),
            ]
        );
        let ok = &found[1].payload;
        assert_eq!(ok.freight.alias, "frosty-otter");
        assert_eq!(ok.promotion.as_deref(), Some("p-ok"));
        assert_eq!(ok.url, "https://dray.example.com/projects/demo/stages/prod");
        assert_eq!(found[4].payload.message, "error rate 9%");
        assert_eq!(found[4].payload.phase, "Failed");
    }

    #[test]
    fn rejections_and_freezes_are_events_once_and_again_after_a_lift() {
        let rejection = |by: &str, second: i64| Rejection {
            by: by.into(),
            reason: "CVE-2026-1".into(),
            rejected_at: Some(at(second)),
        };
        let freeze = |second: i64| Freeze {
            by: "ann".into(),
            reason: "incident 42".into(),
            since: Some(at(second)),
            until: None,
        };
        let mut freight = Freight::new("f1", Default::default());
        freight.spec.alias = "frosty-otter".into();
        freight.status = Some(crate::api::FreightStatus {
            rejected: Some(rejection("ann", 10)),
            rejected_for: [("prod".to_owned(), rejection("bob", 11))].into(),
            ..Default::default()
        });
        let mut stage = Stage::new("prod", Default::default());
        stage.status = Some(StageStatus {
            freeze: Some(freeze(12)),
            ..StageStatus::default()
        });
        let no_promotions: Vec<Arc<Promotion>> = Vec::new();
        let read = |project_freeze: Option<&Freeze>, freight: &Freight, stage: &Stage| {
            occurrences(
                "demo",
                project_freeze,
                &no_promotions,
                &arcs(vec![stage.clone()]),
                &arcs(vec![freight.clone()]),
                &links(),
            )
        };
        let found = read(Some(&freeze(13)), &freight, &stage);
        let ids: Vec<&str> = found.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "rejected/f1/*/10",
                "rejected/f1/prod/11",
                "frozen/prod/12",
                "frozen/*/13"
            ]
        );
        let everywhere = &found[0].payload;
        assert_eq!(everywhere.event, NotificationEvent::FreightRejected);
        assert_eq!(everywhere.message, "rejected by ann: CVE-2026-1");
        assert_eq!(everywhere.freight.alias, "frosty-otter");
        assert_eq!(everywhere.url, "https://dray.example.com/projects/demo");
        let frozen = &found[2].payload;
        assert_eq!(frozen.event, NotificationEvent::StageFrozen);
        assert_eq!(frozen.message, "frozen by ann: incident 42");
        assert_eq!(
            frozen.url,
            "https://dray.example.com/projects/demo/stages/prod"
        );
        // Read again, the same occurrences: the outbox takes each once.
        assert_eq!(read(Some(&freeze(13)), &freight, &stage), found);
        // Unrejected and rejected again later, unfrozen and frozen again: new occurrences.
        freight.status.as_mut().unwrap().rejected = Some(rejection("ann", 40));
        stage.status.as_mut().unwrap().freeze = Some(freeze(41));
        let again = read(None, &freight, &stage);
        let ids: Vec<&str> = again.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(
            ids,
            vec!["rejected/f1/prod/11", "rejected/f1/*/40", "frozen/prod/41"]
        );
        let since = found.last().unwrap().at();
        let seen = vec![found.last().unwrap().id.clone()];
        let new: Vec<&str> = new_since(&again, since, &seen)
            .iter()
            .map(|o| o.id.as_str())
            .collect();
        assert_eq!(new, vec!["rejected/f1/*/40", "frozen/prod/41"]);
    }

    #[test]
    fn the_watermark_takes_each_occurrence_once_even_within_one_second() {
        let promotions = vec![
            promotion("a", PromotionPhase::Succeeded, Some(10)),
            promotion("b", PromotionPhase::Succeeded, Some(10)),
        ];
        let none: Vec<Arc<Stage>> = Vec::new();
        let nothing: Vec<Arc<Freight>> = Vec::new();
        let promotions = arcs(promotions);
        let all = occurrences("demo", None, &promotions[..1], &none, &nothing, &links());
        let since = Timestamp::from_second(5).unwrap();
        let taken = new_since(&all, since, &[]);
        assert_eq!(taken.len(), 1);
        let (since, seen) = advance(since, &[], &taken);
        assert_eq!(seen, vec!["promotion/a/Succeeded".to_owned()]);
        // `b` ends in the same second, after `a` was taken: it is new, `a` is not.
        let all = occurrences("demo", None, &promotions, &none, &nothing, &links());
        let taken = new_since(&all, since.0, &seen);
        let ids: Vec<&str> = taken.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, vec!["promotion/b/Succeeded"]);
        let (since, seen) = advance(since.0, &seen, &taken);
        assert_eq!(seen.len(), 2);
        assert!(new_since(&all, since.0, &seen).is_empty());
    }
}
