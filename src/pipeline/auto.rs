//! Auto-promotion, a reconciler of Stages: a Stage selected by a ProjectConfig
//! `promotionPolicies[]` entry with `autoPromotionEnabled: true` promotes by itself as
//! soon as Freight becomes available to it — including the moment a soak completes: it
//! requeues for the earliest soak end it knows of.
//!
//! It leaves a Stage alone while it runs or queues a promotion, while its newest promotion
//! succeeded but is not recorded on it yet (`succeeded_unrecorded`), while a person's rollback
//! holds it (`status.hold`), while it or its project is frozen ([`super::freeze`]; it
//! looks again when the freeze expires), passes over rejected Freight, and for Freight whose promotion into the Stage already failed
//! (it would fail again; a person decides).
//!
//! Contract of [`reconcile`]:
//! - reads (from the caches) the Stage, its project's ProjectConfig, Freight and the
//!   Stage's Promotions, and for `MatchUpstream` the upstream Stage;
//! - writes a Promotion, through the promote path ([`request::request_promotion`], as
//!   [`AutoPromotion`]), so every gate applies;
//! - wakes on the Stage's changes, on Freight changes that can change what is available
//!   to it ([`freight_stages`]: new Freight from its origin, or Freight verified, current,
//!   approved or signed off in it or its upstream Stages), on its Promotions' changes, on its
//!   upstream Stages' current Freight changing and on ProjectConfig changes — only Stages
//!   a policy auto-promotes are ever woken by another object's change; it requeues at the soak end it
//!   waits for, and after [`REFUSED_RETRY`] when the promote path refused (a window that
//!   opens later, a gate that clears by itself).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::{
    Freight, FreightStatus, Kind, ObjectKey, Project, ProjectConfig, Promotion, PromotionPhase,
    PromotionPolicy, SelectionPolicy, Stage,
};
use crate::runtime::{Action, Cache, Changed, Controller, Resource};

use super::availability::availability;
use super::door::AutoPromotion;
use super::queue::promotion_stage;
use super::request::{self, PromoteRequest};

/// How long after a refusal the Stage is looked at again.
pub const REFUSED_RETRY: Duration = Duration::from_secs(60);
/// A soak is looked at this long after it ends, so that it has ended by then.
const AFTER_SOAK: Duration = Duration::from_millis(50);

/// Promotes Stages by policy.
pub struct AutoPromoter {
    cache: Cache,
}

/// What auto-promotion decided for one Stage.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Request a promotion of this Freight.
    Promote(String),
    /// Nothing to do until a change, or until this time (a soak ending).
    Wait(Option<Timestamp>),
}

impl AutoPromoter {
    /// An auto-promoter reading `cache`.
    pub fn new(cache: Cache) -> Self {
        AutoPromoter { cache }
    }

    /// Runs until `shutdown` is cancelled.
    pub async fn run(self, shutdown: tokio_util::sync::CancellationToken) {
        Controller::<Stage>::for_kind("auto-promotion", &self.cache)
            .watches(Kind::Freight, freight_stages)
            .watches(Kind::Promotion, |changed, _| {
                promotion_stage(changed).into_iter().collect()
            })
            .watches(Kind::Stage, downstream_stages)
            .watches(Kind::ProjectConfig, |changed, cache| {
                project_stages(cache, changed.change.key.namespace.as_deref())
            })
            .watches(Kind::Project, |changed, cache| {
                project_stages(cache, Some(changed.change.key.name.as_str()))
            })
            // In a cluster a Stage and the tasks it runs come through separate watches, in
            // either order: a task that arrives after its Stage wakes it.
            .watches(Kind::PromotionTask, |changed, cache| {
                project_stages(cache, changed.change.key.namespace.as_deref())
            })
            .watches(Kind::ClusterPromotionTask, |_, cache| {
                cache
                    .list::<Project>(None)
                    .iter()
                    .flat_map(|project| project_stages(cache, Some(project.name())))
                    .collect()
            })
            .run(
                reconcile,
                |_, error: &Infallible, _| match *error {},
                Arc::new(self.cache.clone()),
                shutdown,
            )
            .await;
    }
}

/// Requests a promotion when [`decide`] says so; see the module doc.
pub async fn reconcile(stage: Arc<Stage>, cache: Arc<Cache>) -> Result<Action, Infallible> {
    let id = match decide(&stage, &cache, Timestamp::now()) {
        Decision::Wait(None) => return Ok(Action::await_change()),
        Decision::Wait(Some(at)) => return Ok(Action::requeue_at(at + AFTER_SOAK)),
        Decision::Promote(id) => id,
    };
    let request = PromoteRequest {
        stage: stage.name().to_owned(),
        freight: Some(id.clone()),
        ..Default::default()
    };
    let store = cache.store().as_ref();
    let name = stage.name();
    match request::request_promotion(store, &AutoPromotion, stage.project(), &request).await {
        Ok(created) => {
            tracing::info!(promotion = %created.key, freight = %id, "auto-promotion requested");
            Ok(Action::await_change())
        }
        Err(request::PromoteError::Refused { reasons, .. }) => {
            tracing::debug!(stage = %name, freight = %id, ?reasons, "auto-promotion refused");
            Ok(Action::requeue(REFUSED_RETRY))
        }
        Err(error) => {
            tracing::warn!(stage = %name, %error, "auto-promotion failed");
            Ok(Action::requeue(REFUSED_RETRY))
        }
    }
}

/// Which Freight, if any, auto-promotion wants in `stage` at `now`.
pub fn decide(stage: &Stage, cache: &Cache, now: Timestamp) -> Decision {
    let project = stage.project();
    let name = stage.name();
    let configs = cache.list::<ProjectConfig>(Some(project));
    let Some(policy) = policy_for(stage, &configs) else {
        return Decision::Wait(None);
    };
    let status = stage.status.clone().unwrap_or_default();
    if status.hold.is_some() {
        return Decision::Wait(None);
    }
    let of_project = cache.get::<Project>("", project);
    let frozen = super::freeze::active(of_project.as_deref(), stage, now);
    if !frozen.is_empty() {
        let expires = frozen.iter().map(|(_, f)| f.until.as_ref().map(|u| u.0));
        // Wakes when the last freeze expires; one that never does waits for a change.
        let last = expires
            .collect::<Option<Vec<_>>>()
            .and_then(|u| u.into_iter().max());
        return Decision::Wait(last);
    }
    let in_this_stage: Vec<Arc<Promotion>> = cache
        .list::<Promotion>(Some(project))
        .into_iter()
        .filter(|p| p.spec.stage == name)
        .collect();
    if in_this_stage.iter().any(|p| !phase(p).is_terminal()) {
        return Decision::Wait(None);
    }
    if succeeded_unrecorded(&in_this_stage, status.last_promotion.as_deref()) {
        return Decision::Wait(None);
    }
    let mut candidates = cache.list::<Freight>(Some(project));
    candidates.sort_by_key(|f| std::cmp::Reverse(f.metadata.creation_timestamp.clone()));
    let upstream_current = match policy.selection_policy {
        SelectionPolicy::NewestFreight => None,
        SelectionPolicy::MatchUpstream => {
            let upstream = upstreams(stage).next().map(str::to_owned);
            let current = upstream
                .and_then(|up| cache.get::<Stage>(project, &up))
                .and_then(|s| s.status.as_ref()?.current_freight.clone())
                .map(|c| c.name);
            match current {
                Some(current) => Some(current),
                None => return Decision::Wait(None),
            }
        }
    };
    let mut soak_ends: Option<Timestamp> = None;
    let wanted = candidates
        .iter()
        .filter(|f| upstream_current.as_deref().is_none_or(|id| f.name() == id))
        .find(|f| {
            let gates = availability(stage, f, now);
            if let Some(end) = gates.soak_ends_at {
                soak_ends = Some(soak_ends.map_or(end, |n| n.min(end)));
            }
            gates.is_available()
        });
    let Some(freight) = wanted else {
        return Decision::Wait(soak_ends);
    };
    let id = freight.name();
    let current = status.current_freight.as_ref().map(|c| c.name.as_str());
    let failed_before = in_this_stage.iter().any(|p| {
        p.spec.freight == id && matches!(phase(p), PromotionPhase::Failed | PromotionPhase::Errored)
    });
    if current == Some(id) || failed_before {
        return Decision::Wait(soak_ends);
    }
    Decision::Promote(id.to_owned())
}

/// Whether the Stage's newest Promotion succeeded but the Stage does not record it yet
/// (its `status.lastPromotion` names another). The engine records the Stage before the
/// Promotion says Succeeded, but in a cluster the caches follow Stages and Promotions
/// through two watches, so the Promotion's end can arrive first: a look then would see
/// the Stage still on its old Freight with nothing running, and promote the same Freight
/// again. The Stage's own change, when it arrives, wakes auto-promotion.
fn succeeded_unrecorded(in_this_stage: &[Arc<Promotion>], last_promotion: Option<&str>) -> bool {
    in_this_stage
        .iter()
        .max_by(|a, b| {
            (&a.metadata.creation_timestamp, a.name())
                .cmp(&(&b.metadata.creation_timestamp, b.name()))
        })
        .is_some_and(|newest| {
            phase(newest) == PromotionPhase::Succeeded && last_promotion != Some(newest.name())
        })
}

/// The auto-promotion policy selecting `stage`, when one with auto-promotion does.
fn policy_for<'a>(stage: &Stage, configs: &'a [Arc<ProjectConfig>]) -> Option<&'a PromotionPolicy> {
    super::policy::auto_promotion(stage, configs.iter().map(AsRef::as_ref))
}

fn phase(promotion: &Promotion) -> PromotionPhase {
    promotion
        .status
        .as_ref()
        .map(|s| s.phase)
        .unwrap_or_default()
}

/// The Stages `stage` draws Freight from.
fn upstreams(stage: &Stage) -> impl Iterator<Item = &str> {
    stage
        .spec
        .requested_freight
        .iter()
        .flat_map(|r| r.sources.stages.iter().map(String::as_str))
}

/// The Stages of `project` an auto-promotion policy selects: the only ones this
/// reconciler has anything to do for, so a change wakes no other.
fn auto_promoted(cache: &Cache, project: &str, wanted: impl Fn(&Stage) -> bool) -> Vec<ObjectKey> {
    let configs = cache.list::<ProjectConfig>(Some(project));
    if !configs.iter().any(|c| {
        c.spec
            .promotion_policies
            .iter()
            .any(|p| p.auto_promotion_enabled)
    }) {
        return Vec::new();
    }
    cache
        .list::<Stage>(Some(project))
        .iter()
        .filter(|s| wanted(s) && policy_for(s, &configs).is_some())
        .map(|s| s.key_of())
        .collect()
}

fn project_stages(cache: &Cache, project: Option<&str>) -> Vec<ObjectKey> {
    match project {
        Some(project) => auto_promoted(cache, project, |_| true),
        None => Vec::new(),
    }
}

/// The Stages of the project drawing from a Stage whose current Freight changed (for
/// `MatchUpstream`).
fn downstream_stages(changed: &Changed, cache: &Cache) -> Vec<ObjectKey> {
    let Some(project) = changed.change.key.namespace.as_deref() else {
        return Vec::new();
    };
    let (before, after) = changed.typed::<Stage>();
    let current = |s: &Option<Stage>| {
        s.as_ref()
            .and_then(|s| s.status.as_ref()?.current_freight.as_ref())
            .map(|c| c.name.clone())
    };
    if current(&before) == current(&after) {
        return Vec::new();
    }
    let name = changed.change.key.name.as_str();
    auto_promoted(cache, project, |s| upstreams(s).any(|up| up == name))
}

/// The Stages a Freight change can make something available to: for new Freight, those
/// taking its origin directly; for a status change, those whose own or upstream entry in
/// `currentlyIn`, `verifiedIn` or `approvedFor` changed.
pub fn freight_stages(changed: &Changed, cache: &Cache) -> Vec<ObjectKey> {
    let (before, after) = changed.typed::<Freight>();
    let Some(freight) = after.as_ref().or(before.as_ref()) else {
        return Vec::new();
    };
    let origin = &freight.spec.origin.name;
    let is_new = before.is_none();
    let touched = touched_stages(
        before.as_ref().and_then(|f| f.status.as_ref()),
        after.as_ref().and_then(|f| f.status.as_ref()),
    );
    auto_promoted(cache, freight.project(), |stage| {
        stage.spec.requested_freight.iter().any(|request| {
            request.origin.name == *origin
                && ((is_new && request.sources.direct)
                    || touched.contains(stage.name())
                    || request.sources.stages.iter().any(|up| touched.contains(up)))
        })
    })
}

/// Adds the keys whose entries differ between `a` and `b`.
fn differing<V: PartialEq>(
    a: &BTreeMap<String, V>,
    b: &BTreeMap<String, V>,
    into: &mut BTreeSet<String>,
) {
    for key in a.keys().chain(b.keys()) {
        if a.get(key) != b.get(key) {
            into.insert(key.clone());
        }
    }
}

/// The Stage names whose entries differ between two Freight statuses.
fn touched_stages(
    before: Option<&FreightStatus>,
    after: Option<&FreightStatus>,
) -> BTreeSet<String> {
    let empty = FreightStatus::default();
    let (before, after) = (before.unwrap_or(&empty), after.unwrap_or(&empty));
    let mut touched = BTreeSet::new();
    differing(&before.currently_in, &after.currently_in, &mut touched);
    differing(&before.verified_in, &after.verified_in, &mut touched);
    differing(&before.approved_for, &after.approved_for, &mut touched);
    differing(&before.signed_off_for, &after.signed_off_for, &mut touched);
    touched
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::runtime::{Kinds, reflector};
    use crate::store::{SqliteStore, Store};

    /// Auto-promotion must wake when a soak completes, not at the next periodic pass: a
    /// decision over Freight that is still soaking says exactly when the soak ends.
    #[tokio::test]
    async fn a_decision_reports_when_the_soak_ends() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let since = jiff::Timestamp::now().round(jiff::Unit::Second).unwrap();
        let objects = [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
                   "metadata": {"name": "demo", "namespace": "demo"},
                   "spec": {"promotionPolicies": [{"stageSelector": {"name": "staging"}, "autoPromotionEnabled": true}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                   "metadata": {"name": "staging", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                            "sources": {"stages": ["dev"], "requiredSoakTime": "10m"}}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                   "metadata": {"name": "f1", "namespace": "demo"},
                   "alias": "frosty-otter", "origin": {"kind": "Warehouse", "name": "app"},
                   "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}],
                   "status": {"currentlyIn": {"dev": {"since": since.to_string()}},
                              "verifiedIn": {"dev": {"verifiedAt": since.to_string()}}}}),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        let shutdown = CancellationToken::new();
        let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
            .await
            .unwrap();
        let stage = cache.get::<Stage>("demo", "staging").unwrap();
        assert_eq!(
            decide(&stage, &cache, Timestamp::now()),
            Decision::Wait(Some(since + jiff::SignedDuration::from_mins(10)))
        );
        let after_soak = since + jiff::SignedDuration::from_mins(11);
        assert_eq!(
            decide(&stage, &cache, after_soak),
            Decision::Promote("f1".into()),
            "once the soak ended the Freight is wanted"
        );
        shutdown.cancel();
    }

    /// A Stage with `spec.signoff` is auto-promoted only once enough people signed the
    /// Freight off: an approval does not stand in for them.
    #[tokio::test]
    async fn auto_promotion_waits_for_signoffs_and_not_for_an_approval() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let stage = |name: &str| {
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                   "metadata": {"name": name, "namespace": "demo"},
                   "spec": {"signoff": {"required": 1},
                            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                                  "sources": {"direct": true}}]}})
        };
        let objects = [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
                   "metadata": {"name": "demo", "namespace": "demo"},
                   "spec": {"promotionPolicies": [
                       {"stageSelector": {"name": "staging"}, "autoPromotionEnabled": true},
                       {"stageSelector": {"name": "qa"}, "autoPromotionEnabled": true}]}}),
            stage("staging"),
            stage("qa"),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                   "metadata": {"name": "f1", "namespace": "demo"},
                   "alias": "frosty-otter", "origin": {"kind": "Warehouse", "name": "app"},
                   "images": [{"repoURL": "reg/app", "tag": "1.0.0", "digest": "sha256:aa"}],
                   "status": {"approvedFor": {"staging": {"by": "ann", "reason": "hotfix"}},
                              "signedOffFor": {"qa": [{"user": "ann"}]}}}),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        let shutdown = CancellationToken::new();
        let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
            .await
            .unwrap();
        let staging = cache.get::<Stage>("demo", "staging").unwrap();
        assert_eq!(
            decide(&staging, &cache, Timestamp::now()),
            Decision::Wait(None),
            "approved, but nobody signed it off for staging"
        );
        let qa = cache.get::<Stage>("demo", "qa").unwrap();
        assert_eq!(
            decide(&qa, &cache, Timestamp::now()),
            Decision::Promote("f1".into()),
            "one sign-off for qa is enough"
        );
        shutdown.cancel();
    }

    /// A cache that holds a promotion's end before the Stage's record of it (two watches
    /// in a cluster) must not promote the same Freight again.
    #[tokio::test]
    async fn a_succeeded_promotion_not_yet_recorded_on_the_stage_is_not_repeated() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let freight = |id: &str, alias: &str| {
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
                   "metadata": {"name": id, "namespace": "demo"},
                   "alias": alias, "origin": {"kind": "Warehouse", "name": "app"},
                   "images": [{"repoURL": "reg/app", "tag": alias, "digest": "sha256:aa"}]})
        };
        let promotion = |name: &str, freight: &str| {
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
                   "metadata": {"name": name, "namespace": "demo"},
                   "spec": {"stage": "dev", "freight": freight}})
        };
        let objects = [
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "demo"}, "spec": {}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
                   "metadata": {"name": "demo", "namespace": "demo"},
                   "spec": {"promotionPolicies": [{"stageSelector": {"name": "dev"}, "autoPromotionEnabled": true}]}}),
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                   "metadata": {"name": "dev", "namespace": "demo"},
                   "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                            "sources": {"direct": true}}]}}),
            freight("f1", "one"),
            promotion("dev-one", "f1"),
            freight("f2", "two"),
        ];
        for object in objects {
            store.create(object).await.unwrap();
        }
        let succeeded = json!({"phase": "Succeeded"});
        let key = |kind, name: &str| ObjectKey::namespaced(kind, "demo", name);
        store
            .update_status(&key(Kind::Promotion, "dev-one"), succeeded.clone(), None)
            .await
            .unwrap();
        let on = |id: &str, by: &str| json!({"currentFreight": {"name": id, "alias": id}, "lastPromotion": by});
        let dev = key(Kind::Stage, "dev");
        store
            .update_status(&dev, on("f1", "dev-one"), None)
            .await
            .unwrap();
        let shutdown = CancellationToken::new();
        let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
            .await
            .unwrap();
        let decide_now = |cache: &Cache| {
            let stage = cache.get::<Stage>("demo", "dev").unwrap();
            decide(&stage, cache, Timestamp::now())
        };
        assert_eq!(decide_now(&cache), Decision::Promote("f2".into()));

        // `f2`'s promotion succeeded; the Stage does not say so yet.
        store.create(promotion("dev-two", "f2")).await.unwrap();
        store
            .update_status(&key(Kind::Promotion, "dev-two"), succeeded, None)
            .await
            .unwrap();
        assert!(
            cache.catch_up(Duration::from_secs(10)).await,
            "the cache sees the write"
        );
        assert_eq!(
            decide_now(&cache),
            Decision::Wait(None),
            "f2 is going in: not again"
        );

        store
            .update_status(&dev, on("f2", "dev-two"), None)
            .await
            .unwrap();
        store.create(freight("f3", "three")).await.unwrap();
        assert!(cache.catch_up(Duration::from_secs(10)).await);
        assert_eq!(
            decide_now(&cache),
            Decision::Promote("f3".into()),
            "once recorded, newer Freight goes in"
        );
        shutdown.cancel();
    }

    #[test]
    fn kargo_stage_shorthand_selects_that_stage_only() {
        let config: ProjectConfig = serde_json::from_value(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
            "metadata": {"name": "demo", "namespace": "demo"},
            "spec": {"promotionPolicies": [{"stage": "dev", "autoPromotionEnabled": true}]}
        }))
        .unwrap();
        let configs = [Arc::new(config)];
        let stage = |name: &str| -> Stage {
            serde_json::from_value(json!({
                "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                "metadata": {"name": name, "namespace": "demo"}, "spec": {"requestedFreight": []}
            }))
            .unwrap()
        };
        assert!(policy_for(&stage("dev"), &configs).is_some());
        assert!(
            policy_for(&stage("staging"), &configs).is_none(),
            "`stage: dev` is not an empty selector that selects every Stage"
        );
    }

    #[test]
    fn a_status_change_touches_only_the_stages_whose_entries_changed() {
        let before: FreightStatus = serde_json::from_value(json!({
            "currentlyIn": {"dev": {"since": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap();
        let after: FreightStatus = serde_json::from_value(json!({
            "currentlyIn": {"dev": {"since": "2026-01-01T00:00:00Z"}},
            "verifiedIn": {"dev": {"verifiedAt": "2026-01-01T00:05:00Z"}},
            "approvedFor": {"prod": {}}
        }))
        .unwrap();
        let touched = touched_stages(Some(&before), Some(&after));
        assert_eq!(
            touched,
            BTreeSet::from(["dev".to_owned(), "prod".to_owned()])
        );
        assert!(touched_stages(Some(&after), Some(&after)).is_empty());
    }
}
