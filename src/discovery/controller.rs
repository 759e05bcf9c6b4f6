//! The Warehouse controller: decides when each Warehouse is discovered, runs discovery,
//! mints Freight and writes the Warehouse status.
//!
//! A Warehouse is reconciled when its spec changed (`observedGeneration`), when someone
//! asked for a refresh (the `dray.dev/refresh` annotation differs from
//! `status.lastHandledRefresh`; the CLI, the API and webhook receivers set it), or when its
//! `interval` (default 5m) has passed.
//!
//! Contract of [`reconcile`], a reconciler of Warehouses on the runtime:
//! - reads the Warehouse (from the caches), the project's Credentials, the registries and
//!   git repositories it subscribes to, and the Freight it minted before;
//! - writes Freight (minting) and the Warehouse's status;
//! - wakes on the Warehouse's changes (its spec, a refresh annotation; its own status
//!   write, after which it finds it is not due) and requeues for when its interval
//!   passes (at most [`MAX_SLEEP`] apart).
//!
//! Freight is minted only when every subscription was discovered and the newest
//! combination satisfies `freightCreationCriteria` (see [`super::criteria`]; its verdict is
//! the `FreightCreationCriteriaSatisfied` condition, whatever the policy); a failing
//! subscription leaves a readable message in `status.subscriptions[].message` and the
//! `Ready` condition, and mints nothing. Minting is idempotent (the id is the content
//! hash), so a crash between discovery and the status write mints nothing twice.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{
    ChartSubscription, Condition, DiscoveredChartRef, DiscoveredCommitRef, DiscoveredImageRef,
    FreightChart, FreightCreationPolicy, FreightImage, Kind, ObjectKey, RepoSubscription,
    ResourceBody as _, SubscriptionKind, SubscriptionStatus, Time, Warehouse, WarehouseStatus,
    parse_duration,
};
use crate::expr::exprlang::ExprLanguage;
use crate::runtime::{Action, Cache, Controller, Resource};
use crate::secrets::SecretKey;
use crate::store::{Store, StoreError, StoredObject};

use super::chart::ChartDiscoverer;
use super::credentials;
use super::criteria;
use super::git::{GitDiscoverer, GitDiscoveryState};
use super::image::ImageDiscoverer;
use super::mint;

/// The annotation that asks for a refresh; its value is an opaque token.
pub use crate::api::annotations::REFRESH as REFRESH_ANNOTATION;
/// The label that names the Warehouse a Freight came from.
pub use crate::api::annotations::WAREHOUSE_LABEL;
/// The default discovery interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// The longest a Warehouse goes without a look (its status write normally wakes it).
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// At most this many Warehouses are discovered at once.
const MAX_DISCOVERIES: usize = 16;

/// What [`reconcile`] works with.
pub struct WarehouseContext {
    controller: WarehouseController,
    cache: Cache,
}

/// Runs discovery for every Warehouse.
#[derive(Clone)]
pub struct WarehouseController {
    store: Arc<dyn Store>,
    secret_key: Arc<SecretKey>,
    images: ImageDiscoverer,
    git: GitDiscoverer,
    charts: ChartDiscoverer,
}

/// What the loop decided about one Warehouse.
enum Due {
    Now,
    At(jiff::Timestamp),
}

impl WarehouseController {
    /// A controller over `store`.
    pub fn new(
        store: Arc<dyn Store>,
        secret_key: Arc<SecretKey>,
        images: ImageDiscoverer,
        git: GitDiscoverer,
    ) -> Self {
        WarehouseController {
            store,
            secret_key,
            charts: ChartDiscoverer::new(images.clone()),
            images,
            git,
        }
    }

    /// Runs until `shutdown` is cancelled, reconciling the Warehouses in `cache`.
    pub async fn run(self, cache: Cache, shutdown: CancellationToken) {
        let context = Arc::new(WarehouseContext {
            controller: self,
            cache: cache.clone(),
        });
        Controller::<Warehouse>::for_kind("warehouse", &cache)
            .concurrency(MAX_DISCOVERIES)
            .run(
                reconcile,
                |_, error: &Infallible, _| match *error {},
                context,
                shutdown,
            )
            .await;
    }

    /// Discovers one Warehouse, mints Freight and writes its status.
    pub async fn reconcile(&self, stored: StoredObject) {
        let began = std::time::Instant::now();
        let key = stored.key.clone();
        let warehouse: Warehouse = match stored.to_typed() {
            Ok(w) => w,
            Err(error) => {
                tracing::error!(warehouse = %key, %error, "unreadable warehouse");
                return;
            }
        };
        let project = key.namespace.clone().unwrap_or_default();
        let previous = warehouse.status.clone().unwrap_or_default();
        let refresh = refresh_token(&stored.object);
        let mut status = WarehouseStatus {
            observed_generation: warehouse.metadata.generation,
            last_discovered_at: Some(Time(jiff::Timestamp::now())),
            last_freight_id: previous.last_freight_id.clone(),
            last_handled_refresh: refresh.or(previous.last_handled_refresh.clone()),
            ..Default::default()
        };
        // Read once for every subscription; only the chosen Credential's secrets are opened.
        let credentials = self
            .store
            .list(Kind::Credential, Some(&project))
            .await
            .map_err(|error| error.to_string());
        let language = ExprLanguage::of_annotations(warehouse.metadata.annotations.as_ref());
        for (index, sub) in warehouse.spec.subscriptions.iter().enumerate() {
            let before = previous.subscriptions.get(index);
            status
                .subscriptions
                .push(self.discover(&credentials, sub, before, language).await);
        }
        let failures: Vec<String> = status
            .subscriptions
            .iter()
            .filter(|s| !s.ready)
            .map(|s| format!("{}: {}", s.repo_url, s.message))
            .collect();
        if failures.is_empty() {
            let candidate = criteria::newest(&status.subscriptions);
            let decision = candidate.as_ref().map(|c| {
                criteria::decide(
                    warehouse.spec.freight_creation_criteria.as_ref(),
                    language,
                    c,
                )
            });
            if let Some(decision) = &decision {
                status
                    .conditions
                    .extend(decision.condition(warehouse.metadata.generation));
                if let criteria::Decision::Failed(message) = decision {
                    status.conditions.push(condition(
                        "Ready",
                        false,
                        "CriteriaEvaluationFailed",
                        message,
                    ));
                }
            }
            let mintable =
                candidate.filter(|_| decision.as_ref().is_some_and(criteria::Decision::allows));
            match self.mint(&key, &warehouse, mintable).await {
                Ok(Some((id, warnings))) => {
                    status.last_freight_id = Some(id);
                    status.warnings = warnings;
                }
                Ok(None) => status.warnings = previous.warnings.clone(),
                Err(error) => {
                    tracing::error!(warehouse = %key, %error, "minting failed");
                    status.conditions.push(condition(
                        "Ready",
                        false,
                        "MintFailed",
                        &error.to_string(),
                    ));
                }
            }
            if !status.conditions.iter().any(|c| c.type_ == "Ready") {
                status.conditions.push(condition(
                    "Ready",
                    true,
                    "Discovered",
                    "every subscription was discovered",
                ));
            }
        } else {
            status.conditions.push(condition(
                "Ready",
                false,
                "DiscoveryFailed",
                &failures.join("; "),
            ));
            status.warnings = previous.warnings.clone();
        }
        let failed = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status != "True");
        crate::runtime::instruments::record_discovery(&project, &key.name, began.elapsed(), failed);
        let status = match serde_json::to_value(&status) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(warehouse = %key, %error, "cannot encode status");
                return;
            }
        };
        match self.store.update_status(&key, status, None).await {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(error) => tracing::error!(warehouse = %key, %error, "cannot write status"),
        }
    }

    /// Discovers one subscription with the project's `credentials` (or why they could not
    /// be read); its filter is in the Warehouse's `language`.
    async fn discover(
        &self,
        credentials: &Result<Vec<StoredObject>, String>,
        sub: &RepoSubscription,
        before: Option<&SubscriptionStatus>,
        language: ExprLanguage,
    ) -> SubscriptionStatus {
        if let Some(image) = &sub.image {
            let mut status = SubscriptionStatus {
                repo_url: image.repo_url.clone(),
                kind: SubscriptionKind::Image,
                ..Default::default()
            };
            let creds = match self.credential(credentials, "image", &image.repo_url) {
                Ok(found) => found.map(credentials::registry_credentials),
                Err(message) => {
                    status.message = message;
                    return status;
                }
            };
            match self
                .images
                .discover_in(image, creds.as_ref(), language)
                .await
            {
                Ok(found) => {
                    status.ready = true;
                    status.images = found
                        .images
                        .iter()
                        .map(|i| DiscoveredImageRef {
                            tag: i.tag.clone(),
                            digest: i.digest.clone(),
                            created_at: i.created.map(Time),
                            source: i.source.clone(),
                            revision: i.revision.clone(),
                        })
                        .collect();
                }
                Err(error) => status.message = error.to_string(),
            }
            return status;
        }
        if let (None, Some(chart)) = (&sub.git, &sub.chart) {
            return self.discover_chart(credentials, chart).await;
        }
        let Some(git) = &sub.git else {
            return SubscriptionStatus {
                kind: SubscriptionKind::Unknown,
                message: "a subscription must set `image`, `git` or `chart`".into(),
                ..Default::default()
            };
        };
        let mut status = SubscriptionStatus {
            repo_url: git.repo_url.clone(),
            kind: SubscriptionKind::Git,
            ..Default::default()
        };
        let creds = match self.credential(credentials, "git", &git.repo_url) {
            Ok(found) => found.map(credentials::git_credentials),
            Err(message) => {
                status.message = message;
                return status;
            }
        };
        let previous_state: Option<GitDiscoveryState> = before
            .filter(|b| b.repo_url == git.repo_url && b.ready)
            .and_then(|b| b.git_state.clone())
            .and_then(|v| serde_json::from_value(v).ok());
        match self
            .git
            .discover_in(git, creds.as_ref(), previous_state.as_ref(), language)
            .await
        {
            Ok(found) => {
                status.ready = true;
                status.git_state = serde_json::to_value(&found.state).ok();
                status.commits = if found.unchanged {
                    before.map(|b| b.commits.clone()).unwrap_or_default()
                } else {
                    found
                        .commits
                        .iter()
                        .map(|c| DiscoveredCommitRef {
                            id: c.id.clone(),
                            branch: c.branch.clone(),
                            tag: c.tag.clone(),
                            message: c.message.clone(),
                            author: c.author.clone(),
                        })
                        .collect()
                };
            }
            Err(error) => status.message = error.to_string(),
        }
        status
    }

    /// Discovers one chart subscription: with the project's `helm` Credential for its
    /// `repoURL` or, for `oci://`, the `image` Credential of the registry repository.
    async fn discover_chart(
        &self,
        credentials: &Result<Vec<StoredObject>, String>,
        chart: &ChartSubscription,
    ) -> SubscriptionStatus {
        let mut status = SubscriptionStatus {
            repo_url: chart.repo_url.clone(),
            kind: SubscriptionKind::Chart,
            ..Default::default()
        };
        let found = match self.credential(credentials, "helm", &chart.repo_url) {
            Ok(None) if dray_steps::helm::is_oci(&chart.repo_url) => {
                self.credential(credentials, "image", &chart.repo_url)
            }
            other => other,
        };
        let creds = match found {
            Ok(found) => found.map(credentials::registry_credentials),
            Err(message) => {
                status.message = message;
                return status;
            }
        };
        match self.charts.discover(chart, creds.as_ref()).await {
            Ok(found) => {
                status.ready = true;
                status.charts = found
                    .charts
                    .iter()
                    .map(|c| DiscoveredChartRef {
                        name: c.name.clone(),
                        version: c.version.clone(),
                        digest: c.digest.clone(),
                    })
                    .collect();
            }
            Err(error) => status.message = error.to_string(),
        }
        status
    }

    /// The Credential of `credential_type` for `repo_url` among the project's
    /// `credentials`; the error is the message for the subscription's status.
    fn credential(
        &self,
        credentials: &Result<Vec<StoredObject>, String>,
        credential_type: &str,
        repo_url: &str,
    ) -> Result<Option<credentials::ResolvedCredential>, String> {
        let candidates = credentials.as_ref().map_err(Clone::clone)?;
        credentials::find_among(candidates, &self.secret_key, credential_type, repo_url)
            .map_err(|error| error.to_string())
    }

    /// Mints Freight from `candidate` (the newest artifact of every subscription, when the
    /// criteria allow it), unless the policy is `Manual` or it exists. Returns the id and
    /// warnings of newly minted Freight.
    async fn mint(
        &self,
        key: &ObjectKey,
        warehouse: &Warehouse,
        candidate: Option<criteria::Candidate>,
    ) -> Result<Option<(String, Vec<String>)>, StoreError> {
        if warehouse.spec.freight_creation_policy == FreightCreationPolicy::Manual {
            return Ok(None);
        }
        let Some(criteria::Candidate {
            images,
            commits,
            charts,
        }) = candidate
        else {
            return Ok(None);
        };
        let project = key.namespace.as_deref().unwrap_or_default();
        let id = mint::artifacts_id(&images, &commits, &charts);
        let freight_key = ObjectKey::namespaced(Kind::Freight, project, &id);
        if self.store.get(&freight_key).await?.is_some() {
            return Ok(None);
        }
        let existing = self.store.list(Kind::Freight, Some(project)).await?;
        let warnings = moved_tags(&existing, &key.name, &images, &charts);
        let request = mint::MintRequest {
            project,
            warehouse: &key.name,
            images: &images,
            commits: &commits,
            charts: &charts,
            origin: mint::MintOrigin::Discovered {
                warnings: warnings.clone(),
            },
        };
        match mint::mint(self.store.as_ref(), &request, &existing).await {
            Ok(mint::Minted::Created(created)) => {
                let alias = created
                    .object
                    .get("alias")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tracing::info!(warehouse = %key, freight = %id, %alias, "minted freight");
                Ok(Some((id, warnings)))
            }
            Ok(mint::Minted::Existing(_)) => Ok(None),
            // Discovered Freight takes a free alias; kept for the match to be complete.
            Err(taken @ mint::MintError::AliasTaken { .. }) => {
                Err(StoreError::Internal(taken.to_string()))
            }
            Err(mint::MintError::Store(StoreError::AlreadyExists(_))) => Ok(None),
            Err(mint::MintError::Store(error)) => Err(error),
        }
    }
}

/// Warnings for images whose tag, and OCI charts whose version, was seen before, in this
/// Warehouse's Freight, with another digest.
fn moved_tags(
    existing: &[StoredObject],
    warehouse: &str,
    images: &[FreightImage],
    charts: &[FreightChart],
) -> Vec<String> {
    // (field, repoURL, tag or version) → digest
    let mut seen: BTreeMap<(&str, String, String), String> = BTreeMap::new();
    for freight in existing {
        if freight
            .object
            .pointer("/origin/name")
            .and_then(Value::as_str)
            != Some(warehouse)
        {
            continue;
        }
        for (field, version) in [("images", "tag"), ("charts", "version")] {
            for artifact in freight
                .object
                .get(field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = |name: &str| {
                    artifact
                        .get(name)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                if artifact.get("digest").is_some_and(Value::is_string) {
                    seen.insert((field, text("repoURL"), text(version)), text("digest"));
                }
            }
        }
    }
    let now = images
        .iter()
        .map(|i| ("images", &i.repo_url, &i.tag, Some(&i.digest)))
        .chain(
            charts
                .iter()
                .map(|c| ("charts", &c.repo_url, &c.version, c.digest.as_ref())),
        );
    now.filter_map(|(field, repo_url, tag, digest)| {
        let digest = digest?;
        let previous = seen.get(&(field, repo_url.clone(), tag.clone()))?;
        (previous != digest).then(|| {
            format!(
                "tagMoved: `{repo_url}:{tag}` now points at `{digest}`; it was `{previous}` when earlier Freight was minted"
            )
        })
    })
    .collect()
}

/// Discovers the Warehouse when it is due; see the module doc.
pub async fn reconcile(
    warehouse: Arc<Warehouse>,
    context: Arc<WarehouseContext>,
) -> Result<Action, Infallible> {
    let Some(stored) = context.cache.get_stored(&warehouse.key_of()) else {
        return Ok(Action::await_change());
    };
    match due(&warehouse) {
        Due::At(when) => Ok(Action::requeue_at(when)),
        Due::Now => {
            context.controller.reconcile((*stored).clone()).await;
            // The status write wakes it again and `due` then says when; this only
            // bounds the wait should that write have failed.
            Ok(Action::requeue(MAX_SLEEP))
        }
    }
}

fn refresh_token(object: &Value) -> Option<String> {
    object.annotation(REFRESH_ANNOTATION).map(str::to_owned)
}

/// Whether `warehouse` is due a discovery now, or when.
fn due(warehouse: &Warehouse) -> Due {
    let status = warehouse.status.clone().unwrap_or_default();
    if warehouse.metadata.generation != status.observed_generation {
        return Due::Now;
    }
    let requested = warehouse
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REFRESH_ANNOTATION));
    if requested.is_some() && requested != status.last_handled_refresh.as_ref() {
        return Due::Now;
    }
    let interval = warehouse
        .spec
        .interval
        .as_deref()
        .and_then(|text| parse_duration(text).ok())
        .unwrap_or(DEFAULT_INTERVAL);
    let Some(Time(last)) = status.last_discovered_at else {
        return Due::Now;
    };
    let next = last
        + jiff::SignedDuration::try_from(interval).unwrap_or(jiff::SignedDuration::from_secs(300));
    if next <= jiff::Timestamp::now() {
        Due::Now
    } else {
        Due::At(next)
    }
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True".into() } else { "False".into() },
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(Time(jiff::Timestamp::now())),
        observed_generation: None,
    }
}

/// A refresh token: unique enough to tell two requests apart.
pub fn new_refresh_token() -> String {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", jiff::Timestamp::now(), &unique[..8])
}
