//! The transitions of a Stage's verification run, as pure functions over its status:
//! whether a promotion's end starts a run ([`verifies`]), starting one ([`begin`]),
//! ending one ([`end`]) and filing it in the bounded history ([`file`]). Shared by the
//! promotion's record of success (`promotion::record`) and the verification controller,
//! which therefore need not import each other; the writes these lead to are theirs.

use jiff::Timestamp;

use super::{
    RegisteredApplication, Stage, StageStatus, Time, VERIFICATION_HISTORY_LIMIT, VerificationInfo,
    VerificationPhase,
};

/// Who starts the verification that follows a promotion.
pub const DRAY_ACTOR: &str = "dray";

/// Whether a Stage verifies its Freight after a promotion rather than counting it verified
/// at once: it has AnalysisTemplates, or the promotion registered Applications to watch.
pub fn verifies(stage: &Stage, applications: &[RegisteredApplication]) -> bool {
    !applications.is_empty()
        || stage
            .spec
            .verification
            .as_ref()
            .is_some_and(|v| !v.analysis_templates.is_empty())
}

/// Ends the running verification (if any) with `phase` and `message`, and files it in the
/// history. Returns the ended run.
pub fn end(
    status: &mut StageStatus,
    phase: VerificationPhase,
    message: &str,
    now: Timestamp,
) -> Option<VerificationInfo> {
    let run = status.verification.as_mut()?;
    if run.phase.is_terminal() {
        return None;
    }
    run.phase = phase;
    run.message = message.to_owned();
    run.finish_time = Some(Time(now));
    let ended = run.clone();
    file(status, ended.clone());
    Some(ended)
}

/// Files an ended run at the front of the history, keeping the newest few.
pub fn file(status: &mut StageStatus, run: VerificationInfo) {
    status.verification_history.retain(|r| r.id != run.id);
    status.verification_history.insert(0, run);
    status
        .verification_history
        .truncate(VERIFICATION_HISTORY_LIMIT);
}

/// Starts a new verification of `freight`, ending a running one as `Aborted` with
/// `superseded` as its message.
pub fn begin(
    status: &mut StageStatus,
    freight: &str,
    actor: &str,
    superseded: &str,
    now: Timestamp,
) -> VerificationInfo {
    end(status, VerificationPhase::Aborted, superseded, now);
    let run = VerificationInfo {
        id: format!("{freight:.8}-{}", now.as_millisecond()),
        freight: freight.to_owned(),
        phase: VerificationPhase::Pending,
        message: if status.applications.is_empty() {
            "starting the analysis".to_owned()
        } else {
            "waiting for the Stage to be healthy".to_owned()
        },
        actor: actor.to_owned(),
        start_time: Some(Time(now)),
        ..Default::default()
    };
    status.verification = Some(run.clone());
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_new_run_ends_the_running_one_as_aborted_and_files_it() {
        let mut status = StageStatus::default();
        let first = begin(&mut status, "f1", "dray", "unused", at(0));
        assert_eq!(first.phase, VerificationPhase::Pending);
        assert!(status.verification_history.is_empty());
        let second = begin(&mut status, "f2", "ann", "superseded by a promotion", at(5));
        assert_eq!(status.verification.as_ref().unwrap().id, second.id);
        assert_eq!(status.verification_history.len(), 1);
        let filed = &status.verification_history[0];
        assert_eq!(
            (filed.freight.as_str(), filed.phase, filed.message.as_str()),
            (
                "f1",
                VerificationPhase::Aborted,
                "superseded by a promotion"
            )
        );
        assert_eq!(filed.finish_time, Some(Time(at(5))));
    }

    #[test]
    fn ending_twice_files_once_and_the_history_is_bounded() {
        let mut status = StageStatus::default();
        for i in 0..(VERIFICATION_HISTORY_LIMIT as i64 + 5) {
            begin(&mut status, &format!("f{i}"), "dray", "x", at(i));
            assert!(end(&mut status, VerificationPhase::Failed, "no", at(i)).is_some());
            assert!(end(&mut status, VerificationPhase::Failed, "no", at(i)).is_none());
        }
        assert_eq!(
            status.verification_history.len(),
            VERIFICATION_HISTORY_LIMIT
        );
        assert_eq!(
            status.verification_history[0].freight,
            format!("f{}", VERIFICATION_HISTORY_LIMIT + 4)
        );
    }

    #[test]
    fn a_stage_with_registered_applications_is_verified() {
        let apps: Vec<RegisteredApplication> = serde_json::from_value(json!([
            {"name": "shop", "apiServer": "http://a", "desiredRevisions": ["abc1234"], "url": ""}
        ]))
        .unwrap();
        let stage = Stage::new("dev", Default::default());
        assert!(verifies(&stage, &apps));
        assert!(!verifies(&stage, &[]));
    }
}
