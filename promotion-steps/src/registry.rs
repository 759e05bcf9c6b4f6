//! The built-in steps, by kind.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::Step;

/// Steps by the name used in `uses:`.
#[derive(Clone, Default)]
pub struct StepRegistry {
    steps: BTreeMap<&'static str, Arc<dyn Step>>,
}

impl StepRegistry {
    /// A registry holding `steps`.
    pub fn new(steps: Vec<Arc<dyn Step>>) -> Self {
        StepRegistry {
            steps: steps.into_iter().map(|s| (s.kind(), s)).collect(),
        }
    }

    /// The step named `kind`.
    pub fn get(&self, kind: &str) -> Option<Arc<dyn Step>> {
        self.steps.get(kind).cloned()
    }

    /// Every registered kind, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.steps.keys().copied().collect()
    }
}

/// Every built-in step.
pub fn builtin_steps() -> StepRegistry {
    StepRegistry::new(Vec::new())
}
