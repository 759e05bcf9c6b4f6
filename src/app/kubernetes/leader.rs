//! One active controller: leader election on a `coordination.k8s.io/v1` Lease, with the
//! guarantees client-go's elector gives, which `kube-lease-manager` does not (it keeps
//! "leading" through renewal errors and judges expiry by the holder's `renewTime`, the
//! holder's clock):
//!
//! - **A renew deadline shorter than the lease.** The holder renews every
//!   [`LeaseTimings::retry`]; if no renewal has succeeded for [`LeaseTimings::renew_deadline`]
//!   (counted from when the last successful request was *sent*), it has lost the lease, and
//!   `dray controller` exits at once: no step, push or status write after that.
//! - **Expiry by the observer's own clock.** A standby takes the lease only after it has
//!   seen the same Lease record (holder, `renewTime`, transitions) unchanged for the lease's
//!   duration on its own monotonic clock: clock skew between replicas cannot shorten it.
//!
//! Since the holder stops at `sent + renew_deadline` and a standby can take over no sooner
//! than `observed + duration` (and it observes a renewal only after it was sent), the two
//! never reconcile at once; the margin is `duration - renew_deadline`. Every write to the
//! Lease is an update naming the `resourceVersion` it read, so two standbys racing for an
//! expired lease cannot both win.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The Lease and how it is held.
#[derive(Clone, Debug)]
pub struct LeaseOptions {
    /// The Lease's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// This replica's name in `spec.holderIdentity`.
    pub identity: String,
    /// How long a holder's claim lasts after its last renewal.
    pub duration: Duration,
}

/// The elector's periods, derived from the lease duration in client-go's proportions
/// (15 s lease, 10 s renew deadline, 2 s retry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LeaseTimings {
    /// How long a claim lasts (`spec.leaseDurationSeconds`).
    pub duration: Duration,
    /// How long the holder keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the holder renews and a standby looks.
    pub retry: Duration,
}

impl LeaseTimings {
    /// Timings for a lease of `duration` (at least 3 s).
    pub(super) fn for_duration(duration: Duration) -> Self {
        let duration = duration.max(Duration::from_secs(3));
        LeaseTimings {
            duration,
            renew_deadline: duration * 2 / 3,
            retry: (duration * 2 / 15).max(Duration::from_millis(200)),
        }
    }
}

/// Where this replica stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    Standby,
    Leading,
    /// Leadership is over for this process; why.
    Lost(String),
}

/// A held or awaited Lease.
pub(super) struct Leadership {
    role: watch::Receiver<Role>,
    task: JoinHandle<()>,
    api: Api<Lease>,
    options: LeaseOptions,
}

/// The Lease record as last read, and when (on this replica's clock) it last changed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    holder: String,
    renew_time: Option<String>,
    transitions: i32,
    duration_seconds: i32,
}

impl Record {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            renew_time: spec.renew_time.map(|t| t.0.to_string()),
            transitions: spec.lease_transitions.unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
        }
    }
}

/// What a standby last saw of the Lease.
#[derive(Clone, Debug)]
struct Observation {
    record: Record,
    since: Instant,
}

/// What a standby does with the Lease it just read.
#[derive(Debug, PartialEq, Eq)]
enum Look {
    /// Nobody holds it, it is ours already, or its holder let it expire: take it.
    Take,
    /// Someone else holds it: look again later.
    Wait,
}

/// Records `record` (seen `now`) and decides. The record's age counts from when this
/// replica first saw it unchanged, never from the holder's `renewTime`.
fn look(observed: &mut Option<Observation>, record: Record, me: &str, now: Instant) -> Look {
    if observed.as_ref().is_none_or(|o| o.record != record) {
        *observed = Some(Observation {
            record: record.clone(),
            since: now,
        });
    }
    let since = observed.as_ref().map_or(now, |o| o.since);
    let duration = Duration::from_secs(u64::try_from(record.duration_seconds).unwrap_or(0));
    if record.holder.is_empty() || record.holder == me || since + duration <= now {
        Look::Take
    } else {
        Look::Wait
    }
}

/// Why a renewal did not renew.
#[derive(Debug)]
enum RenewError {
    /// Another replica holds the lease now.
    TakenBy(String),
    /// The API server did not answer as it should (retried until the deadline).
    Api(kube::Error),
}

impl Leadership {
    /// Starts competing for the Lease.
    pub(super) async fn compete(
        client: kube::Client,
        options: &LeaseOptions,
    ) -> anyhow::Result<Self> {
        let api: Api<Lease> = Api::namespaced(client, &options.namespace);
        let (tell, role) = watch::channel(Role::Standby);
        let elector = Elector {
            api: api.clone(),
            options: options.clone(),
            timings: LeaseTimings::for_duration(options.duration),
        };
        let task = tokio::spawn(elector.run(tell));
        Ok(Leadership {
            role,
            task,
            api,
            options: options.clone(),
        })
    }

    /// Waits until this replica holds the Lease.
    pub(super) async fn acquired(&mut self) -> anyhow::Result<()> {
        let role = self
            .role
            .wait_for(|role| *role != Role::Standby)
            .await
            .map_err(|_| anyhow::anyhow!("the leader elector stopped"))?
            .clone();
        match role {
            Role::Lost(why) => Err(anyhow::anyhow!(why)),
            _ => Ok(()),
        }
    }

    /// A future that resolves, with why, when the Lease is lost (it holds a receiver of
    /// its own, so it can run on its own task while this handle is kept for the release).
    pub(super) fn lost(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut role = self.role.clone();
        async move {
            match role.wait_for(|role| matches!(role, Role::Lost(_))).await {
                Ok(role) => match &*role {
                    Role::Lost(why) => why.clone(),
                    _ => unreachable!("waited for Lost"),
                },
                Err(_) => "the leader elector stopped".into(),
            }
        }
    }

    /// Gives the Lease up (on shutdown), so a standby takes over at once.
    pub(super) async fn release(self) {
        self.task.abort();
        let released = tokio::time::timeout(Duration::from_secs(5), async {
            let mut lease = self.api.get(&self.options.name).await?;
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
                return Ok(());
            }
            let now = MicroTime(jiff::Timestamp::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            self.api
                .replace(&self.options.name, &PostParams::default(), &lease)
                .await
                .map(drop)
        })
        .await;
        match released {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(
                %error,
                "cannot release the lease; a standby takes over once it expires"
            ),
            Err(_) => tracing::warn!(
                "releasing the lease timed out; a standby takes over once it expires"
            ),
        }
    }
}

/// The loop behind [`Leadership`].
struct Elector {
    api: Api<Lease>,
    options: LeaseOptions,
    timings: LeaseTimings,
}

impl Elector {
    async fn run(self, tell: watch::Sender<Role>) {
        let mut observed = None;
        let mut last_renewed = loop {
            let sent = Instant::now();
            match self.try_acquire(&mut observed).await {
                Ok(true) => break sent,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, lease = %self.options.name,
                    "cannot read the lease; trying again"),
            }
            tokio::time::sleep(self.timings.retry).await;
        };
        tell.send_replace(Role::Leading);
        loop {
            let deadline = last_renewed + self.timings.renew_deadline;
            tokio::time::sleep_until((last_renewed + self.timings.retry).min(deadline)).await;
            let sent = Instant::now();
            if sent >= deadline {
                tell.send_replace(Role::Lost(format!(
                    "could not renew the lease {}/{} for {}s (the renew deadline; it lasts {}s): \
                     stopping before another replica can take it",
                    self.options.namespace,
                    self.options.name,
                    self.timings.renew_deadline.as_secs_f32(),
                    self.timings.duration.as_secs()
                )));
                return;
            }
            match tokio::time::timeout(deadline - sent, self.renew()).await {
                Ok(Ok(())) => last_renewed = sent,
                Ok(Err(RenewError::TakenBy(holder))) => {
                    tell.send_replace(Role::Lost(format!(
                        "the lease {}/{} is held by `{holder}` now",
                        self.options.namespace, self.options.name
                    )));
                    return;
                }
                Ok(Err(RenewError::Api(error))) => {
                    tracing::warn!(%error, "cannot renew the lease; retrying until the renew deadline");
                    // Try again soon, but not in a tight loop against a failing server.
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep((self.timings.retry / 4).min(left)).await;
                }
                Err(_) => {}
            }
        }
    }

    /// Reads the Lease and takes it when free, ours, or expired by our clock; `true` when
    /// this replica holds it now.
    async fn try_acquire(&self, observed: &mut Option<Observation>) -> Result<bool, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let duration_seconds = i32::try_from(self.timings.duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.options.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.options.name.clone()),
                    namespace: Some(self.options.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.options.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(error) => Err(error),
            };
        };
        let record = Record::of(&lease);
        if look(
            observed,
            record.clone(),
            &self.options.identity,
            Instant::now(),
        ) == Look::Wait
        {
            return Ok(false);
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if record.holder != self.options.identity {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(record.transitions.saturating_add(1));
        }
        spec.holder_identity = Some(self.options.identity.clone());
        spec.lease_duration_seconds = Some(duration_seconds);
        spec.renew_time = Some(now);
        // The read's resourceVersion rides along: a replica that changed it meanwhile wins.
        match self
            .api
            .replace(&self.options.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Renews the Lease this replica holds.
    async fn renew(&self) -> Result<(), RenewError> {
        let mut lease = self
            .api
            .get(&self.options.name)
            .await
            .map_err(RenewError::Api)?;
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder != self.options.identity {
            return Err(RenewError::TakenBy(holder));
        }
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        self.api
            .replace(&self.options.name, &PostParams::default(), &lease)
            .await
            .map(drop)
            .map_err(RenewError::Api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, renewed: &str) -> Record {
        Record {
            holder: holder.into(),
            renew_time: Some(renewed.into()),
            transitions: 0,
            duration_seconds: 15,
        }
    }

    #[test]
    fn timings_keep_the_renew_deadline_inside_the_lease() {
        let t = LeaseTimings::for_duration(Duration::from_secs(15));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
        assert_eq!(t.retry, Duration::from_secs(2));
        for seconds in [1, 3, 4, 6, 15, 60] {
            let t = LeaseTimings::for_duration(Duration::from_secs(seconds));
            assert!(t.retry < t.renew_deadline, "{t:?}");
            assert!(t.renew_deadline < t.duration, "{t:?}");
        }
    }

    #[test]
    fn a_held_lease_expires_only_after_its_duration_on_the_observers_clock() {
        let start = Instant::now();
        let mut observed = None;
        // The holder's renewTime may be hours old by the holder's clock: it does not count.
        let stale = record("other", "2000-01-01T00:00:00Z");
        assert_eq!(look(&mut observed, stale.clone(), "me", start), Look::Wait);
        let later = start + Duration::from_secs(14);
        assert_eq!(look(&mut observed, stale.clone(), "me", later), Look::Wait);
        // A renewal seen restarts the count from when it was seen.
        let renewed = record("other", "2000-01-01T00:00:10Z");
        assert_eq!(
            look(&mut observed, renewed.clone(), "me", later),
            Look::Wait
        );
        let expired_by_first = start + Duration::from_secs(16);
        assert_eq!(
            look(&mut observed, renewed.clone(), "me", expired_by_first),
            Look::Wait
        );
        let expired = later + Duration::from_secs(15);
        assert_eq!(look(&mut observed, renewed, "me", expired), Look::Take);
    }

    #[test]
    fn a_free_or_own_lease_is_taken_at_once() {
        let now = Instant::now();
        assert_eq!(look(&mut None, record("", "x"), "me", now), Look::Take);
        assert_eq!(look(&mut None, record("me", "x"), "me", now), Look::Take);
    }
}
