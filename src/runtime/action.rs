//! What a reconcile asks of its controller next: look again after a while, or only when
//! something it watches changes. The same two answers kube-runtime's `Action` gives.

use std::time::Duration;

/// The answer of one reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile again after `duration` even if nothing changes (a soak ending, an
    /// interval passing, a measurement falling due). A change sooner still wakes it.
    pub fn requeue(duration: Duration) -> Self {
        Action {
            requeue_after: Some(duration),
        }
    }

    /// Reconcile again only when the object or something mapped to it changes.
    pub fn await_change() -> Self {
        Action {
            requeue_after: None,
        }
    }

    /// Reconcile again at `when` (at once when it has passed).
    pub fn requeue_at(when: jiff::Timestamp) -> Self {
        let wait = when.duration_since(jiff::Timestamp::now());
        Action::requeue(Duration::try_from(wait).unwrap_or(Duration::ZERO))
    }

    /// The sooner of two answers: both wake on change; the earlier requeue wins.
    pub fn sooner(self, other: Action) -> Action {
        match (self.requeue_after, other.requeue_after) {
            (Some(a), Some(b)) => Action::requeue(a.min(b)),
            (Some(a), None) | (None, Some(a)) => Action::requeue(a),
            (None, None) => Action::await_change(),
        }
    }

    /// How long until the next reconcile without a change, if at all.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sooner_requeue_wins_and_awaiting_change_yields_to_any_requeue() {
        let soon = Action::requeue(Duration::from_secs(5));
        let late = Action::requeue(Duration::from_secs(60));
        assert_eq!(soon.sooner(late), soon);
        assert_eq!(late.sooner(soon), soon);
        assert_eq!(Action::await_change().sooner(late), late);
        assert_eq!(
            Action::await_change().sooner(Action::await_change()),
            Action::await_change()
        );
    }

    #[test]
    fn a_time_in_the_past_requeues_at_once() {
        let past = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(30);
        assert_eq!(
            Action::requeue_at(past).requeue_after(),
            Some(Duration::ZERO)
        );
    }
}
