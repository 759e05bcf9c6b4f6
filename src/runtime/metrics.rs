//! The runtime's counters: how many times each controller reconciled, for `/metrics` and
//! the controller benchmark.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// One monotonically increasing counter.
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

fn registry() -> &'static Mutex<BTreeMap<&'static str, Counter>> {
    static REGISTRY: OnceLock<Mutex<BTreeMap<&'static str, Counter>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The reconcile counter of the controller `name`.
pub fn reconciles(name: &'static str) -> Counter {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(name)
        .or_default()
        .clone()
}

/// Every controller's reconcile count, by controller name.
pub fn reconcile_counts() -> Vec<(&'static str, u64)> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(name, counter)| (*name, counter.get()))
        .collect()
}
