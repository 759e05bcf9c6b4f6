//! The watches that keep the [`Mirror`] current: one kube-runtime `watcher` per Dray kind
//! (all namespaces), one per Secret label that marks a credential, and one on Namespaces
//! for the selection. Each relists on 410 Gone and backs off on errors
//! (`WatchStreamExt::default_backoff`), so a broken watch resumes by itself.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::{Kind, ObjectKey};
use crate::secrets::{SecretKey, plaintext_secrets, seal_credential};
use crate::store::{StoreError, StoredObject};

use super::mirror::{Mirror, Namespaces};
use super::resources::{api_resource, stored};
use super::secrets::{
    CRED_TYPE_LABEL, FROM_SECRET_ANNOTATION, KARGO_CRED_TYPE_LABEL, credential_of,
};

/// The label a project namespace carries (set by `dray controller` on each Project's
/// namespace), and the default namespace selector.
pub const PROJECT_LABEL: &str = "dray.dev/project";

/// Which namespaces' Dray objects the store reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceSelection {
    /// Every namespace.
    All,
    /// Namespaces matching a label selector (`dray.dev/project` by default).
    Labelled(String),
}

impl Default for NamespaceSelection {
    fn default() -> Self {
        NamespaceSelection::Labelled(PROJECT_LABEL.into())
    }
}

impl NamespaceSelection {
    pub(super) fn initial(&self) -> Namespaces {
        match self {
            NamespaceSelection::All => Namespaces::All,
            NamespaceSelection::Labelled(_) => Namespaces::Selected(BTreeSet::new()),
        }
    }
}

/// The watches' first listings: which are still missing.
pub(super) struct Synced {
    pending: watch::Receiver<BTreeSet<String>>,
}

impl Synced {
    /// Waits until every watch has listed once, at most `timeout`.
    pub(super) async fn wait(mut self, timeout: Duration) -> Result<(), StoreError> {
        let done = tokio::time::timeout(timeout, self.pending.wait_for(BTreeSet::is_empty))
            .await
            .is_ok_and(|r| r.is_ok());
        match done {
            true => Ok(()),
            false => {
                let missing: Vec<String> = self.pending.borrow().iter().cloned().collect();
                Err(StoreError::Kubernetes {
                    what: format!("list {}", missing.join(", ")),
                    code: 0,
                    message: format!(
                        "no complete listing within {}s (are the CRDs installed? `kubectl apply --server-side -f crds/`; does Dray's ServiceAccount have list and watch on them?)",
                        timeout.as_secs()
                    ),
                })
            }
        }
    }
}

#[derive(Clone)]
struct Pending(Arc<Mutex<watch::Sender<BTreeSet<String>>>>);

impl Pending {
    fn done(&self, name: &str) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        sender.send_if_modified(|pending| pending.remove(name));
    }
}

/// Starts every watch.
pub(super) fn start(
    client: kube::Client,
    mirror: Arc<Mirror>,
    namespaces: NamespaceSelection,
    secret_key: Arc<SecretKey>,
) -> (JoinSet<()>, Synced) {
    let mut names: BTreeSet<String> = Kind::ALL.iter().map(|k| k.plural().to_owned()).collect();
    let labels = CREDENTIAL_LABELS;
    names.extend(labels.iter().map(|l| format!("secrets labelled {l}")));
    if let NamespaceSelection::Labelled(selector) = &namespaces {
        names.insert(format!("namespaces matching `{selector}`"));
    }
    let (sender, pending) = watch::channel(names);
    let pending_set = Pending(Arc::new(Mutex::new(sender)));
    let mut tasks = JoinSet::new();
    for kind in Kind::ALL {
        let api = Api::<DynamicObject>::all_with(client.clone(), &api_resource(kind));
        let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
        let convert = {
            let key = secret_key.clone();
            move |o: &DynamicObject| typed_object(kind, o, &key)
        };
        let owns = |o: &StoredObject| annotation(o, FROM_SECRET_ANNOTATION).is_none();
        tasks.spawn(follow(
            kind.plural().to_owned(),
            kind,
            stream,
            convert,
            owns,
            mirror.clone(),
            pending_set.clone(),
        ));
    }
    for label in labels {
        let api = Api::<Secret>::all(client.clone());
        let config = watcher::Config::default().labels(label);
        let stream = watcher::watcher(api, config).default_backoff();
        let key = secret_key.clone();
        let convert = move |s: &Secret| secret_credential(s, label, &key);
        let owns = move |o: &StoredObject| annotation(o, FROM_SECRET_ANNOTATION) == Some(label);
        tasks.spawn(follow(
            format!("secrets labelled {label}"),
            Kind::Credential,
            stream,
            convert,
            owns,
            mirror.clone(),
            pending_set.clone(),
        ));
    }
    if let NamespaceSelection::Labelled(selector) = namespaces {
        tasks.spawn(follow_namespaces(client, selector, mirror, pending_set));
    }
    (tasks, Synced { pending })
}

/// The Credential a Secret found by `label` stands for (a warning and `None` when it is
/// labelled but unreadable).
pub(super) fn secret_credential(
    secret: &Secret,
    label: &'static str,
    key: &SecretKey,
) -> Option<StoredObject> {
    match credential_of(secret, key)? {
        Ok(mut stored) => {
            stored.object["metadata"]["annotations"][FROM_SECRET_ANNOTATION] = label.into();
            Some(stored)
        }
        Err(error) => {
            tracing::warn!(%error, "a labelled Secret is not read as a credential");
            None
        }
    }
}

/// The labels that mark a Secret as a credential.
pub(super) const CREDENTIAL_LABELS: [&str; 2] = [CRED_TYPE_LABEL, KARGO_CRED_TYPE_LABEL];

fn annotation<'a>(object: &'a StoredObject, name: &str) -> Option<&'a str> {
    object.object["metadata"]["annotations"][name].as_str()
}

/// A Dray object from its watch; a Credential written with plain-text secrets (by
/// `kubectl apply`) is sealed on the way in, as the embedded store seals it.
pub(super) fn typed_object(
    kind: Kind,
    object: &DynamicObject,
    key: &SecretKey,
) -> Option<StoredObject> {
    let mut stored = match stored(kind, object) {
        Ok(stored) => stored,
        Err(error) => {
            tracing::warn!(%error, "a watched object cannot be read; it is left out");
            return None;
        }
    };
    if kind == Kind::Credential && plaintext_secrets(&stored.object).is_some() {
        if let Err(error) = seal_credential(key, &mut stored.object, None) {
            tracing::warn!(object = %stored.key, %error, "a Credential cannot be sealed; it is left out");
            return None;
        }
    }
    Some(stored)
}

/// Follows one watch into the mirror until the stream ends (never, with backoff).
async fn follow<K, S>(
    name: String,
    kind: Kind,
    stream: S,
    convert: impl Fn(&K) -> Option<StoredObject>,
    owns: impl Fn(&StoredObject) -> bool,
    mirror: Arc<Mirror>,
    pending: Pending,
) where
    K: kube::Resource,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut listing = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(object)) => listing.extend(convert(&object)),
            Ok(Event::InitDone) => {
                mirror.relisted(kind, &owns, std::mem::take(&mut listing));
                pending.done(&name);
            }
            Ok(Event::Apply(object)) => {
                if let Some(stored) = convert(&object) {
                    mirror.applied(stored);
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some(key) = key_of_meta(kind, object.meta()) {
                    mirror.deleted(&key);
                }
            }
            Err(error) => {
                tracing::warn!(watch = %name, %error, "a Kubernetes watch failed; it resumes with backoff");
            }
        }
    }
}

fn key_of_meta(
    kind: Kind,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectKey> {
    let name = meta.name.as_deref()?;
    Some(match meta.namespace.as_deref() {
        Some(namespace) if kind.is_namespaced() => ObjectKey::namespaced(kind, namespace, name),
        _ => ObjectKey::cluster(kind, name),
    })
}

/// Follows the namespaces matching `selector` into the mirror's selection.
async fn follow_namespaces(
    client: kube::Client,
    selector: String,
    mirror: Arc<Mirror>,
    pending: Pending,
) {
    let name = format!("namespaces matching `{selector}`");
    let api = Api::<Namespace>::all(client);
    let stream =
        watcher::watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut selected = BTreeSet::new();
    let mut listing = BTreeSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(ns)) => listing.extend(ns.metadata.name),
            Ok(Event::InitDone) => {
                selected = std::mem::take(&mut listing);
                mirror.select(Namespaces::Selected(selected.clone()));
                pending.done(&name);
            }
            Ok(Event::Apply(ns)) => {
                if let Some(n) = ns.metadata.name {
                    selected.insert(n);
                    mirror.select(Namespaces::Selected(selected.clone()));
                }
            }
            Ok(Event::Delete(ns)) => {
                if let Some(n) = ns.metadata.name {
                    selected.remove(&n);
                    mirror.select(Namespaces::Selected(selected.clone()));
                }
            }
            Err(error) => {
                tracing::warn!(watch = %name, %error, "the namespace watch failed; it resumes with backoff");
            }
        }
    }
}
