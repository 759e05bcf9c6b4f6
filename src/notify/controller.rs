//! The `notifications` reconciler: one per ProjectConfig (one per project).
//!
//! Contract of [`reconcile`]:
//! - reads, from the caches, the project's Promotions, Stages, Freight and Warehouses and
//!   turns their state into occurrences (`events`); the project's `webhook` Credentials
//!   (signing secrets, Slack URLs) and `git` Credentials (commit statuses) when it sends;
//! - writes the ProjectConfig's `status.outbox` (first: the new deliveries, before any is
//!   attempted, so a crash loses nothing and at worst sends one again with the same
//!   `X-Dray-Delivery`) and `status.notifications` (each attempt's outcome);
//! - wakes when its spec changes and when a Promotion, Stage, Freight or Warehouse of its
//!   project changes, and requeues when its next delivery is due.
//!
//! It runs beside the engine and the verification reconciler and is never waited on: a
//! slow or failing receiver delays only this project's other deliveries (each attempt
//! gives up after [`REQUEST_TIMEOUT`]).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::api::{
    Freight, Kind, Notification, ObjectKey, Outbox, PendingDelivery, Project, ProjectConfig,
    ProjectConfigStatus, Promotion, Stage, Warehouse,
};
use crate::discovery::credentials;
use crate::runtime::{Action, Cache, Changed, Controller, Resource};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError, modify_typed_status};

use super::commit_statuses;
use super::deliver::{self, shown};
use super::events::{Links, occurrences};
use super::outbox::{self, Backoff};

/// How long one delivery attempt may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How many deliveries of one project are attempted at once.
const AT_ONCE: usize = 8;

/// Sends a project's notifications and commit statuses.
pub struct Notifier {
    store: Arc<dyn Store>,
    secret_key: Arc<SecretKey>,
    http: reqwest::Client,
    links: Links,
    backoff: Backoff,
}

/// What [`reconcile`] works with.
pub struct NotifyContext {
    notifier: Notifier,
    cache: Cache,
}

impl NotifyContext {
    /// The notifier, reading from `cache`.
    pub fn new(notifier: Notifier, cache: Cache) -> Self {
        NotifyContext { notifier, cache }
    }
}

impl Notifier {
    /// A notifier whose links point at `public_url` (Dray's external URL).
    pub fn new(
        store: Arc<dyn Store>,
        secret_key: Arc<SecretKey>,
        public_url: &str,
    ) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("dray/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Notifier {
            store,
            secret_key,
            http,
            links: Links {
                base: public_url.trim_end_matches('/').to_owned(),
            },
            backoff: Backoff::default(),
        })
    }

    /// Retries after `backoff` instead of the default (tests make it short).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Runs the reconciler until `shutdown`.
    pub async fn run(self, cache: Cache, shutdown: CancellationToken) {
        let context = Arc::new(NotifyContext::new(self, cache.clone()));
        let to_config = |changed: &Changed, cache: &Cache| {
            let project = changed.change.key.namespace.clone().unwrap_or_default();
            let key = ObjectKey::namespaced(Kind::ProjectConfig, &project, &project);
            cache.get_stored(&key).map(|_| key).into_iter().collect()
        };
        Controller::<ProjectConfig>::for_kind("notifications", &cache)
            .only_when(|before, after| {
                before.is_none_or(|b| b.object.get("spec") != after.object.get("spec"))
            })
            .watches(Kind::Promotion, to_config)
            .watches(Kind::Stage, to_config)
            .watches(Kind::Freight, to_config)
            .watches(Kind::Warehouse, to_config)
            // A project-wide freeze is on the Project (cluster-scoped: named as its project).
            .watches(Kind::Project, |changed: &Changed, cache: &Cache| {
                let project = &changed.change.key.name;
                let key = ObjectKey::namespaced(Kind::ProjectConfig, project, project);
                cache.get_stored(&key).map(|_| key).into_iter().collect()
            })
            .run(
                reconcile,
                |_, _: &StoreError, _| Action::requeue(Duration::from_secs(30)),
                context,
                shutdown,
            )
            .await;
    }
}

/// Whether any git or image subscription of the project posts commit statuses.
fn posts_commit_statuses(warehouses: &[Arc<Warehouse>]) -> bool {
    warehouses
        .iter()
        .flat_map(|w| w.spec.subscriptions.iter())
        .any(|s| s.posts_commit_statuses())
}

/// Takes new occurrences into the outbox, attempts what is due, records how it went; see
/// the module doc.
pub async fn reconcile(
    config: Arc<ProjectConfig>,
    context: Arc<NotifyContext>,
) -> Result<Action, StoreError> {
    let (notifier, cache) = (&context.notifier, &context.cache);
    let project = config.project().to_owned();
    let warehouses = cache.list::<Warehouse>(Some(&project));
    let has_outbox = config.status.as_ref().is_some_and(|s| s.outbox.is_some());
    if config.spec.notifications.is_empty() && !posts_commit_statuses(&warehouses) && !has_outbox {
        return Ok(Action::await_change());
    }
    let freight = cache.list::<Freight>(Some(&project));
    let project_freeze = cache
        .get_key::<Project>(&ObjectKey::cluster(Kind::Project, &project))
        .and_then(|p| p.status.as_ref().and_then(|s| s.freeze.clone()));
    let all = occurrences(
        &project,
        project_freeze.as_ref(),
        &cache.list::<Promotion>(Some(&project)),
        &cache.list::<Stage>(Some(&project)),
        &freight,
        &notifier.links,
    );
    let key = config.key_of();
    let now = Timestamp::now();
    let mut current = Outbox::default();
    let mut notifications: Vec<Notification> = Vec::new();
    modify_typed_status::<ProjectConfig, ProjectConfigStatus, ()>(
        notifier.store.as_ref(),
        &key,
        |fresh, status| {
            notifications = fresh.spec.notifications.clone();
            let before = (status.outbox.clone(), status.notifications.clone());
            outbox::take(&mut status.outbox, &notifications, &all, now, |o| {
                commit_statuses::plan(o, &freight, &warehouses)
            });
            if let Some(outbox) = status.outbox.as_mut() {
                outbox.pending.retain(|p| {
                    p.notification
                        .as_ref()
                        .is_none_or(|n| notifications.iter().any(|x| &x.name == n))
                });
                outbox::trim(outbox, &mut status.notifications);
                current = outbox.clone();
            }
            outbox::prune(&mut status.notifications, &notifications);
            let changed = before != (status.outbox.clone(), status.notifications.clone());
            Ok(changed.then_some(()))
        },
    )
    .await?;
    let due = outbox::due(&current, now);
    if due.is_empty() {
        return Ok(next(&current, now));
    }
    let attempts = due.iter().map(|delivery| async {
        let outcome = attempt(notifier, &project, &notifications, &warehouses, delivery).await;
        if let Err(reason) = &outcome {
            tracing::info!(project, delivery = delivery.id, %reason, "a delivery failed");
        }
        (delivery.id.clone(), outcome)
    });
    let mut outcomes = Vec::with_capacity(due.len());
    let mut attempts = attempts.collect::<Vec<_>>().into_iter();
    loop {
        let batch: Vec<_> = attempts.by_ref().take(AT_ONCE).collect();
        if batch.is_empty() {
            break;
        }
        outcomes.extend(futures::future::join_all(batch).await);
    }
    let now = Timestamp::now();
    let backoff = notifier.backoff;
    let mut after = current.clone();
    modify_typed_status::<ProjectConfig, ProjectConfigStatus, ()>(
        notifier.store.as_ref(),
        &key,
        |_, status| {
            let Some(outbox) = status.outbox.as_mut() else {
                return Ok(None);
            };
            for (id, outcome) in &outcomes {
                outbox::settle(
                    outbox,
                    &mut status.notifications,
                    id,
                    outcome.clone(),
                    now,
                    backoff,
                );
            }
            after = outbox.clone();
            Ok(Some(()))
        },
    )
    .await?;
    Ok(next(&after, now))
}

fn next(outbox: &Outbox, now: Timestamp) -> Action {
    match outbox::next_due(outbox, now) {
        Some(wait) => Action::requeue(wait.max(Duration::from_millis(10))),
        None => Action::await_change(),
    }
}

/// One attempt at `delivery`; the error is what the status says (no secret in it).
async fn attempt(
    notifier: &Notifier,
    project: &str,
    notifications: &[Notification],
    warehouses: &[Arc<Warehouse>],
    delivery: &PendingDelivery,
) -> Result<(), String> {
    if let Some(status) = &delivery.commit_status {
        return commit_statuses::post(
            notifier.store.as_ref(),
            &notifier.secret_key,
            warehouses,
            delivery,
            status,
        )
        .await
        .map_err(|e| e.to_string());
    }
    let name = delivery.notification.as_deref().unwrap_or_default();
    let Some(notification) = notifications.iter().find(|n| n.name == name) else {
        return Err(format!("notification `{name}` no longer exists"));
    };
    let secret = |name: String| async move {
        credentials::webhook_secret(
            notifier.store.as_ref(),
            &notifier.secret_key,
            project,
            &name,
        )
        .await
        .map_err(|e| format!("cannot read Credential `{name}`: {e}"))?
        .ok_or_else(|| {
            format!(
                "Credential `{name}` of type `webhook` does not exist in project \
                     `{project}` or has no `token`; hint: create it, or fix the name"
            )
        })
    };
    let event = delivery.event.event;
    if let Some(webhook) = &notification.webhook {
        let key = match webhook.secret_ref.clone() {
            Some(name) => Some(secret(name).await?),
            None => None,
        };
        let body = serde_json::to_vec(&delivery.event).map_err(|e| e.to_string())?;
        return deliver::post(
            &notifier.http,
            &webhook.url,
            &shown(&webhook.url),
            &delivery.id,
            event,
            body,
            key.as_deref(),
        )
        .await
        .map_err(|e| e.to_string());
    }
    if let Some(slack) = &notification.slack {
        let url = match (&slack.url, &slack.url_secret_ref) {
            (Some(url), _) => url.clone(),
            (None, Some(name)) => secret(name.clone()).await?,
            (None, None) => return Err("the Slack notification names no URL".to_owned()),
        };
        let body = serde_json::to_vec(&deliver::slack_message(&delivery.event))
            .map_err(|e| e.to_string())?;
        return deliver::post(
            &notifier.http,
            &url,
            "the Slack webhook",
            &delivery.id,
            event,
            body,
            None,
        )
        .await
        .map_err(|e| e.to_string());
    }
    Err(format!(
        "notification `{name}` has neither `webhook` nor `slack`"
    ))
}
