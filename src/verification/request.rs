//! What a person asks of verification: re-run it for the Stage's current Freight, or stop
//! the one that is running (`dray verify stage S [--abort]`,
//! `POST …/stages/{stage}/verify`).

use jiff::Timestamp;

use crate::api::{Kind, ObjectKey, VerificationInfo, VerificationPhase};
use crate::store::{Store, StoreError};

use super::state;

/// Why a verification request was refused.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The Stage holds no Freight.
    #[error("Stage `{stage}` holds no Freight yet, so there is nothing to verify")]
    NoFreight {
        /// The Stage.
        stage: String,
    },
    /// The Stage neither runs analysis nor watches Applications.
    #[error(
        "Stage `{stage}` has nothing to verify with: no `spec.verification.analysisTemplates` and no Argo CD \
         Applications registered by its last promotion"
    )]
    NothingToVerifyWith {
        /// The Stage.
        stage: String,
    },
    /// `--abort` with nothing running.
    #[error("no verification is running in Stage `{stage}`{last}")]
    NotRunning {
        /// The Stage.
        stage: String,
        /// How the last one ended, in words.
        last: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl VerifyError {
    /// What to do about it, in the shape of a command where one helps.
    pub fn hint(&self, project: &str) -> Option<String> {
        match self {
            VerifyError::NoFreight { stage } => Some(format!(
                "promote Freight into it first: `dray promote -p {project} --stage {stage} --alias ALIAS`"
            )),
            VerifyError::NothingToVerifyWith { .. } => Some(
                "add an AnalysisTemplate to the Stage's `verification`, or an `argocd-update` step \
                 to its promotion"
                    .to_owned(),
            ),
            VerifyError::NotRunning { stage, .. } => Some(format!(
                "start one with `dray verify stage {stage} -p {project}`"
            )),
            VerifyError::Store(_) => None,
        }
    }
}

/// Starts a new verification of the Stage's current Freight (ending a running one).
pub async fn rerun(
    store: &dyn Store,
    project: &str,
    stage: &str,
    actor: &str,
) -> Result<VerificationInfo, VerifyError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    let mut refusal = None;
    let run = state::modify_stage(store, &key, |current, status| {
        let Some(freight) = status.current_freight.as_ref().map(|f| f.name.clone()) else {
            refusal = Some(VerifyError::NoFreight {
                stage: stage.to_owned(),
            });
            return Ok(None);
        };
        if !state::verifies(current, &status.applications) {
            refusal = Some(VerifyError::NothingToVerifyWith {
                stage: stage.to_owned(),
            });
            return Ok(None);
        }
        let superseded = format!("superseded by a re-verification asked for by `{actor}`");
        Ok(Some(state::begin(
            status,
            &freight,
            actor,
            &superseded,
            Timestamp::now(),
        )))
    })
    .await?;
    match (run, refusal) {
        (Some(run), _) => Ok(run),
        (None, Some(refusal)) => Err(refusal),
        (None, None) => Err(StoreError::Internal("verification not started".into()).into()),
    }
}

/// Stops the running verification; the Freight's `verifiedIn` is left as it was.
pub async fn abort(
    store: &dyn Store,
    project: &str,
    stage: &str,
    actor: &str,
) -> Result<VerificationInfo, VerifyError> {
    let key = ObjectKey::namespaced(Kind::Stage, project, stage);
    let mut last = String::new();
    let ended = state::modify_stage(store, &key, |_, status| {
        if let Some(run) = &status.verification {
            last = format!(
                "; the last one ({}) ended {:?}{}",
                run.id,
                run.phase,
                if run.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", run.message)
                }
            );
        }
        Ok(state::end(
            status,
            VerificationPhase::Aborted,
            &format!("aborted by `{actor}`"),
            Timestamp::now(),
        ))
    })
    .await?;
    ended.ok_or(VerifyError::NotRunning {
        stage: stage.to_owned(),
        last,
    })
}
