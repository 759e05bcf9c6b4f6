//! One promotion's run in memory ([`Run`]): its status, the outputs and saved state of
//! the steps that ran, and the [`StepEffect`]s they reported, kept in the Promotion's
//! `status.state` (`{outputs, saved, effects}`) so that a resumed run starts from them.
//! [`Run::settle`] files a step's outcome; nothing here touches the store.

use dray_steps::StepOutcome;
use serde_json::{Map, Value, json};

use crate::api::{ObjectKey, Promotion, PromotionStatus, StepExecution, StepPhase, Time};
use crate::expr::exprlang::ExprLanguage;
use crate::promotion::plan::task_of;
use crate::promotion::record::{StepEffect, effects_of};
use crate::promotion::step_log::StepLogs;

/// A promotion being run.
pub(super) struct Run {
    /// The Promotion.
    pub(super) key: ObjectKey,
    /// Its spec, as read when the run started.
    pub(super) promotion: Promotion,
    /// Its status, saved after every step.
    pub(super) status: PromotionStatus,
    /// `outputs.<alias>.*` (and `outputs.<task>.*`, the task's steps' merged).
    pub(super) outputs: Map<String, Value>,
    /// What each step saved for its next run, by alias.
    pub(super) saved: Map<String, Value>,
    /// What the steps changed outside the work directory, in the order they did it.
    pub(super) effects: Vec<StepEffect>,
    /// Log lines not saved yet.
    pub(super) logs: StepLogs,
    /// The language of its expressions (its `dray.dev/expression-language` annotation).
    pub(super) language: ExprLanguage,
    /// Whether its status is saved to the store (a preview's is not: it is never stored).
    pub(super) persist: bool,
}

/// Now, as the status records times.
pub(super) fn now() -> Option<Time> {
    Some(Time(jiff::Timestamp::now()))
}

impl Run {
    /// The run of `promotion` from its saved status: every step `Pending` when the plan and
    /// the status do not agree (a new promotion), else where it was.
    pub(super) fn resume(key: &ObjectKey, promotion: Promotion) -> Run {
        let language = ExprLanguage::of_annotations(promotion.metadata.annotations.as_ref());
        let mut status = promotion.status.clone().unwrap_or_default();
        let state = status.state.take().unwrap_or_default();
        let map_at = |name: &str| {
            state
                .get(name)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        if status.step_execution_metadata.len() != promotion.spec.steps.len() {
            status.step_execution_metadata = promotion
                .spec
                .steps
                .iter()
                .map(|s| StepExecution {
                    alias: s.as_.clone().unwrap_or_default(),
                    status: StepPhase::Pending,
                    ..Default::default()
                })
                .collect();
        }
        Run {
            key: key.clone(),
            outputs: map_at("outputs"),
            saved: map_at("saved"),
            effects: effects_of(Some(&state)),
            status,
            promotion,
            logs: StepLogs::default(),
            language,
            persist: true,
        }
    }

    /// What `status.state` keeps.
    pub(super) fn state(&self) -> Value {
        json!({"outputs": self.outputs, "saved": self.saved, "effects": self.effects})
    }

    /// Files step `index`'s (`alias`) outcome: its status and message, and when it
    /// succeeded its outputs, saved state and effects; the run moves on to the next step.
    pub(super) fn settle(&mut self, index: usize, alias: &str, outcome: StepOutcome) {
        let (status, message) = summarise(&outcome);
        if let StepOutcome::Succeeded {
            outputs,
            state,
            effects,
        } = outcome
        {
            if let Some((task, _)) = task_of(alias) {
                let merged = self
                    .outputs
                    .entry(task.to_owned())
                    .or_insert_with(|| json!({}));
                if let Some(map) = merged.as_object_mut() {
                    map.extend(outputs.clone());
                }
            }
            self.outputs
                .insert(alias.to_owned(), Value::Object(outputs));
            match state {
                Some(state) => self.saved.insert(alias.to_owned(), state),
                None => self.saved.remove(alias),
            };
            // A step run again after a crash reports its effects again: keep them once.
            self.effects.retain(|e| e.step != alias);
            self.effects
                .extend(effects.into_iter().map(|effect| StepEffect {
                    step: alias.to_owned(),
                    effect,
                }));
        }
        let meta = &mut self.status.step_execution_metadata[index];
        meta.status = status;
        meta.message = message;
        meta.finished_at = now();
        if meta.started_at.is_none() {
            meta.started_at = meta.finished_at.clone();
        }
        self.status.current_step = Some(index as u32 + 1);
    }

    /// The branches the steps pushed so far, as `` `stage/dev` at 1a2b3c4d5e6f `` each.
    pub(super) fn pushed(&self) -> Vec<String> {
        self.effects
            .iter()
            .filter_map(|e| e.effect.pushed())
            .map(|(_, branch, commit)| format!("`{branch}` at {}", &commit[..commit.len().min(12)]))
            .collect()
    }
}

/// A step's status and message for its `StepExecution`.
pub(super) fn summarise(outcome: &StepOutcome) -> (StepPhase, String) {
    match outcome {
        StepOutcome::Succeeded { .. } => (StepPhase::Succeeded, String::new()),
        StepOutcome::Running { waiting_for, .. } => {
            (StepPhase::Running, format!("waiting for {waiting_for}"))
        }
        StepOutcome::Failed { reason } => (StepPhase::Failed, reason.clone()),
        StepOutcome::Errored { reason } => (StepPhase::Errored, reason.clone()),
        StepOutcome::Skipped { reason } => (StepPhase::Skipped, reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use dray_steps::Effect;

    use super::*;

    fn promotion(steps: serde_json::Value) -> Promotion {
        serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
            "metadata": {"name": "dev-1", "namespace": "demo"},
            "spec": {"stage": "dev", "freight": "f1", "steps": steps}
        }))
        .unwrap()
    }

    fn pushed(commit: &str) -> StepOutcome {
        let outputs = json!({"branch": "stage/dev", "commit": commit});
        StepOutcome::wrote(
            outputs.as_object().cloned().unwrap(),
            vec![Effect::PushedBranch {
                repo_url: "http://git/cd.git".into(),
                branch: "stage/dev".into(),
                commit: commit.into(),
            }],
        )
    }

    #[test]
    fn a_settled_step_keeps_its_outputs_and_effects_once_and_a_resumed_run_reads_them() {
        let key = ObjectKey::namespaced(crate::api::Kind::Promotion, "demo", "dev-1");
        let steps =
            json!([{"uses": "git-push", "as": "render::push"}, {"uses": "http", "as": "gate"}]);
        let mut run = Run::resume(&key, promotion(steps.clone()));
        assert_eq!(
            run.status.step_execution_metadata[1].status,
            StepPhase::Pending
        );
        run.settle(0, "render::push", pushed("1a2b3c4d5e6f7a8b"));
        // Run again after a crash: the same effect is not kept twice.
        run.settle(0, "render::push", pushed("1a2b3c4d5e6f7a8b"));
        assert_eq!(run.effects.len(), 1);
        assert_eq!(run.pushed(), ["`stage/dev` at 1a2b3c4d5e6f"]);
        assert_eq!(run.outputs["render::push"]["commit"], "1a2b3c4d5e6f7a8b");
        assert_eq!(run.outputs["render"]["branch"], "stage/dev");
        assert_eq!(run.status.current_step, Some(1));

        let mut saved = promotion(steps);
        let mut status = run.status.clone();
        status.state = Some(run.state());
        saved.status = Some(status);
        let resumed = Run::resume(&key, saved);
        assert_eq!(resumed.effects, run.effects);
        assert_eq!(resumed.outputs, run.outputs);
        assert_eq!(
            resumed.status.step_execution_metadata[0].status,
            StepPhase::Succeeded
        );
    }
}
