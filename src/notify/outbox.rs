//! The outbox on a `ProjectConfig`'s status: putting new occurrences in it (one delivery
//! per notification that wants the event, and per commit status), and recording how an
//! attempt went (gone when delivered; tried again after an exponential backoff; given up
//! after [`Backoff::attempts`], counted in the notification's `failures` with the reason).
//! Pure bookkeeping: nothing here sends or stores.

use std::time::Duration;

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::api::{
    CommitStatusDelivery, Notification, NotificationStatus, Outbox, PendingDelivery, Time,
};

use super::events::{Occurrence, advance, new_since};

/// The name commit statuses' deliveries are recorded under in `status.notifications`.
pub const COMMIT_STATUSES: &str = "commitStatuses";
/// The most deliveries an outbox holds; past it the oldest are given up (and counted).
pub const MAX_PENDING: usize = 500;

/// When to try again: `first`, then twice as long each time, `attempts` tries in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failed attempt.
    pub first: Duration,
    /// How many attempts before giving up.
    pub attempts: u32,
}

impl Default for Backoff {
    /// Five attempts over about a minute: 4s, 8s, 16s, 32s apart.
    fn default() -> Self {
        Backoff {
            first: Duration::from_secs(4),
            attempts: 5,
        }
    }
}

impl Backoff {
    /// The wait after `failed` failed attempts (1 or more).
    pub fn after(self, failed: u32) -> Duration {
        self.first
            .saturating_mul(2u32.saturating_pow(failed.saturating_sub(1)))
    }
}

/// A delivery's id: the same for an occurrence and a target on every read and attempt.
fn delivery_id(occurrence: &str, target: &str) -> String {
    let digest = Sha256::digest(format!("{occurrence}\n{target}").as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Takes the occurrences newer than the outbox's watermark into it: a delivery for each
/// notification whose `events` list the event, and one per commit status `commit_statuses`
/// answers for it (a newer state for the same commit and Stage replaces one not yet
/// delivered). A new outbox starts at `now` and takes nothing from before. Returns whether
/// anything changed.
pub fn take(
    outbox: &mut Option<Outbox>,
    notifications: &[Notification],
    all: &[Occurrence],
    now: Timestamp,
    commit_statuses: impl Fn(&Occurrence) -> Vec<CommitStatusDelivery>,
) -> bool {
    let Some(outbox) = outbox.as_mut() else {
        *outbox = Some(Outbox {
            since: Some(Time(now)),
            ..Outbox::default()
        });
        return true;
    };
    let since = outbox.since.as_ref().map_or(now, |t| t.0);
    let taken = new_since(all, since, &outbox.seen);
    if taken.is_empty() {
        return false;
    }
    for occurrence in &taken {
        for n in notifications
            .iter()
            .filter(|n| n.events.contains(&occurrence.payload.event))
        {
            outbox.pending.push(PendingDelivery {
                id: delivery_id(&occurrence.id, &format!("notification/{}", n.name)),
                notification: Some(n.name.clone()),
                commit_status: None,
                event: occurrence.payload.clone(),
                attempts: 0,
                next_attempt_at: None,
                last_error: None,
            });
        }
        for status in commit_statuses(occurrence) {
            let stage = &occurrence.payload.stage;
            outbox.pending.retain(|p| {
                p.commit_status.as_ref().is_none_or(|c| {
                    !(c.repo_url == status.repo_url
                        && c.sha == status.sha
                        && p.event.stage == *stage)
                })
            });
            outbox.pending.push(PendingDelivery {
                id: delivery_id(
                    &occurrence.id,
                    &format!("commit/{}/{}", status.repo_url, status.sha),
                ),
                notification: None,
                commit_status: Some(status),
                event: occurrence.payload.clone(),
                attempts: 0,
                next_attempt_at: None,
                last_error: None,
            });
        }
    }
    let (since, seen) = advance(since, &outbox.seen, &taken);
    outbox.since = Some(since);
    outbox.seen = seen;
    true
}

/// The name a delivery's outcome is recorded under.
pub fn record_name(delivery: &PendingDelivery) -> &str {
    delivery.notification.as_deref().unwrap_or(COMMIT_STATUSES)
}

/// The deliveries due at `now`.
pub fn due(outbox: &Outbox, now: Timestamp) -> Vec<PendingDelivery> {
    outbox
        .pending
        .iter()
        .filter(|p| p.next_attempt_at.as_ref().is_none_or(|t| t.0 <= now))
        .cloned()
        .collect()
}

/// How long until the next delivery is due (`None`: nothing pending).
pub fn next_due(outbox: &Outbox, now: Timestamp) -> Option<Duration> {
    outbox
        .pending
        .iter()
        .map(|p| match &p.next_attempt_at {
            Some(t) if t.0 > now => Duration::try_from(t.0.duration_since(now)).unwrap_or_default(),
            _ => Duration::ZERO,
        })
        .min()
}

fn record<'a>(statuses: &'a mut Vec<NotificationStatus>, name: &str) -> &'a mut NotificationStatus {
    if let Some(i) = statuses.iter().position(|s| s.name == name) {
        return &mut statuses[i];
    }
    statuses.push(NotificationStatus {
        name: name.to_owned(),
        ..NotificationStatus::default()
    });
    statuses.last_mut().expect("just pushed")
}

/// Records how the attempt at delivery `id` went: `Ok` removes it and notes the time;
/// `Err(reason)` schedules the next attempt, or gives up after the last one (counted in
/// `failures`, `reason` in `lastError`). A delivery no longer in the outbox is ignored.
pub fn settle(
    outbox: &mut Outbox,
    statuses: &mut Vec<NotificationStatus>,
    id: &str,
    outcome: Result<(), String>,
    now: Timestamp,
    backoff: Backoff,
) {
    let Some(i) = outbox.pending.iter().position(|p| p.id == id) else {
        return;
    };
    let name = record_name(&outbox.pending[i]).to_owned();
    match outcome {
        Ok(()) => {
            outbox.pending.remove(i);
            let status = record(statuses, &name);
            status.last_delivered_at = Some(Time(now));
            status.last_error = None;
        }
        Err(reason) => {
            let pending = &mut outbox.pending[i];
            pending.attempts += 1;
            if pending.attempts >= backoff.attempts {
                let given_up = outbox.pending.remove(i);
                let status = record(statuses, &name);
                status.failures += 1;
                status.last_error = Some(format!(
                    "{} for `{}` in `{}`: gave up after {} attempts: {reason}",
                    given_up.event.event,
                    given_up.event.freight.name,
                    given_up.event.stage,
                    given_up.attempts
                ));
            } else {
                let wait = backoff.after(pending.attempts);
                pending.next_attempt_at = Some(Time(
                    now.checked_add(jiff::SignedDuration::try_from(wait).unwrap_or_default())
                        .unwrap_or(now),
                ));
                pending.last_error = Some(reason);
            }
        }
    }
}

/// Gives up the oldest deliveries past [`MAX_PENDING`], counting them as failures.
pub fn trim(outbox: &mut Outbox, statuses: &mut Vec<NotificationStatus>) {
    while outbox.pending.len() > MAX_PENDING {
        let dropped = outbox.pending.remove(0);
        let status = record(statuses, record_name(&dropped));
        status.failures += 1;
        status.last_error = Some(format!(
            "more than {MAX_PENDING} deliveries waited; the oldest ({} for `{}`) was dropped",
            dropped.event.event, dropped.event.stage
        ));
    }
}

/// Keeps only the statuses of notifications that exist (and of commit statuses).
pub fn prune(statuses: &mut Vec<NotificationStatus>, notifications: &[Notification]) {
    statuses
        .retain(|s| s.name == COMMIT_STATUSES || notifications.iter().any(|n| n.name == s.name));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CommitState, EventFreight, EventPayload, NotificationEvent};

    fn occurrence(id: &str, event: NotificationEvent, second: i64) -> Occurrence {
        Occurrence {
            id: id.into(),
            payload: EventPayload {
                event,
                project: "demo".into(),
                stage: "prod".into(),
                freight: EventFreight {
                    name: "f1".into(),
                    alias: "frosty-otter".into(),
                },
                promotion: None,
                phase: "Succeeded".into(),
                message: String::new(),
                at: Time(Timestamp::from_second(second).unwrap()),
                url: "http://x/projects/demo/stages/prod".into(),
            },
        }
    }

    fn notification(name: &str, events: &[NotificationEvent]) -> Notification {
        Notification {
            name: name.into(),
            events: events.to_vec(),
            ..Notification::default()
        }
    }

    #[test]
    fn a_new_outbox_takes_nothing_from_before_and_then_each_wanted_event_once() {
        let hooks = vec![
            notification("all", &NotificationEvent::ALL),
            notification("failures", &[NotificationEvent::PromotionFailed]),
        ];
        let old = occurrence("old", NotificationEvent::PromotionSucceeded, 10);
        let mut outbox = None;
        let start = Timestamp::from_second(20).unwrap();
        assert!(take(
            &mut outbox,
            &hooks,
            std::slice::from_ref(&old),
            start,
            |_| vec![]
        ));
        assert!(outbox.as_ref().unwrap().pending.is_empty());
        let new = occurrence("new", NotificationEvent::PromotionSucceeded, 30);
        let all = [old, new];
        assert!(take(&mut outbox, &hooks, &all, start, |_| vec![]));
        let pending = &outbox.as_ref().unwrap().pending;
        assert_eq!(pending.len(), 1, "only `all` wants PromotionSucceeded");
        assert_eq!(pending[0].notification.as_deref(), Some("all"));
        assert!(!take(&mut outbox, &hooks, &all, start, |_| vec![]));
    }

    #[test]
    fn failures_back_off_then_give_up_on_the_status_and_success_clears_the_error() {
        let hooks = vec![notification("hook", &NotificationEvent::ALL)];
        let now = Timestamp::from_second(100).unwrap();
        let mut outbox = Some(Outbox {
            since: Some(Time(Timestamp::from_second(1).unwrap())),
            ..Outbox::default()
        });
        let first = occurrence("a", NotificationEvent::PromotionSucceeded, 50);
        take(&mut outbox, &hooks, &[first], now, |_| vec![]);
        let mut outbox = outbox.unwrap();
        let mut statuses = Vec::new();
        let backoff = Backoff {
            first: Duration::from_secs(4),
            attempts: 3,
        };
        let id = outbox.pending[0].id.clone();
        settle(
            &mut outbox,
            &mut statuses,
            &id,
            Err("answered 500".into()),
            now,
            backoff,
        );
        assert_eq!(next_due(&outbox, now), Some(Duration::from_secs(4)));
        assert!(due(&outbox, now).is_empty());
        settle(
            &mut outbox,
            &mut statuses,
            &id,
            Err("answered 500".into()),
            now,
            backoff,
        );
        assert_eq!(next_due(&outbox, now), Some(Duration::from_secs(8)));
        assert!(
            statuses.is_empty(),
            "nothing is a failure before it gives up"
        );
        settle(
            &mut outbox,
            &mut statuses,
            &id,
            Err("answered 503".into()),
            now,
            backoff,
        );
        assert!(outbox.pending.is_empty());
        assert_eq!(statuses[0].failures, 1);
        let error = statuses[0].last_error.clone().unwrap();
        assert!(
            error.contains("gave up after 3 attempts: answered 503"),
            "{error}"
        );
        // The next delivery succeeds: the time is noted, the error cleared, the count kept.
        let mut wrapped = Some(outbox);
        let second = occurrence("b", NotificationEvent::PromotionFailed, 60);
        take(&mut wrapped, &hooks, &[second], now, |_| vec![]);
        let mut outbox = wrapped.unwrap();
        let id = outbox.pending[0].id.clone();
        settle(&mut outbox, &mut statuses, &id, Ok(()), now, backoff);
        assert_eq!(statuses[0].last_error, None);
        assert_eq!(statuses[0].failures, 1);
        assert_eq!(statuses[0].last_delivered_at, Some(Time(now)));
    }

    #[test]
    fn a_newer_commit_status_replaces_one_not_yet_delivered() {
        let mut outbox = Some(Outbox {
            since: Some(Time(Timestamp::from_second(1).unwrap())),
            ..Outbox::default()
        });
        let status = |state| CommitStatusDelivery {
            repo_url: "https://github.com/acme/app".into(),
            sha: "abc".into(),
            state,
            image: None,
        };
        let promoted = occurrence("p", NotificationEvent::PromotionSucceeded, 10);
        let verified = occurrence("v", NotificationEvent::FreightVerified, 11);
        let now = Timestamp::from_second(20).unwrap();
        take(&mut outbox, &[], &[promoted, verified], now, |o| {
            vec![status(if o.id == "p" {
                CommitState::Pending
            } else {
                CommitState::Success
            })]
        });
        let pending = &outbox.unwrap().pending;
        assert_eq!(pending.len(), 1);
        assert_eq!(
            pending[0].commit_status.as_ref().unwrap().state,
            CommitState::Success
        );
        assert_eq!(record_name(&pending[0]), COMMIT_STATUSES);
    }
}
