//! A `kube::Client` for a [`KubeAccess`], built once and shared: the step's many looks and
//! the Stage health checks that run every few seconds reuse it rather than reading the
//! kubeconfig and making a TLS configuration each time.
//!
//! Building: `Infer` is `kube::Config::infer()`; `Kubeconfig` reads the file (or the
//! default one) with the context asked for; `Server` is an in-memory kubeconfig with the
//! URL, the CA data and the project's token, so that all three share kube's handling of
//! CA data, client certificates and `exec` plugins. kube's own retries are off (the step
//! and the health check ask again on their own schedule) and a response may take at most
//! [`REQUEST_TIMEOUT`].
//!
//! The cache is process-wide, keyed by the access and the token, at most
//! [`MAX_CLIENTS`] entries, each kept [`CLIENT_TTL`] (so that a changed kubeconfig file is
//! read again). A client lives on the Tokio runtime that built it: an entry whose runtime
//! has gone (a test's) is dropped and built again. It does not own what the step asks:
//! that is `kubernetes.rs`'s.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::sync::oneshot;

use super::ArgocdError;
use super::access::KubeAccess;

/// How long one request to the Kubernetes API may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a built client is reused before it is built again.
const CLIENT_TTL: Duration = Duration::from_secs(300);

/// How many clients the cache keeps.
const MAX_CLIENTS: usize = 32;

/// A client and the cluster it talks to.
#[derive(Clone)]
pub(crate) struct Connected {
    pub(crate) client: kube::Client,
    /// The API server's URL as kube resolved it, without a trailing `/`.
    pub(crate) cluster_url: String,
}

#[derive(PartialEq, Eq, Hash)]
struct Key {
    access: KubeAccess,
    token: Option<String>,
}

struct Entry {
    connected: Connected,
    built: Instant,
    /// Closed once the runtime that built the client (and runs its worker) is gone.
    alive: oneshot::Sender<()>,
}

fn cache() -> &'static Mutex<HashMap<Key, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Installs ring as rustls' process-wide crypto provider unless one is installed: with
/// both ring and aws-lc-rs linked (reqwest brings one, octocrab the other), rustls cannot
/// choose, and kube's TLS configuration would panic.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may win the race: either provider is fine then.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A client for `access`, authenticating with `token` where the access takes one.
pub(crate) async fn connect(
    access: &KubeAccess,
    token: Option<&str>,
) -> Result<Connected, ArgocdError> {
    let key = Key {
        access: access.clone(),
        token: token.map(str::to_owned),
    };
    if let Some(found) = cached(&key) {
        return Ok(found);
    }
    let connected = build(access, token).await?;
    let (alive, watched) = oneshot::channel::<()>();
    tokio::spawn(async move {
        // Ends when the entry is dropped, or with the runtime.
        let _ = watched.await;
    });
    let mut clients = cache().lock().unwrap_or_else(PoisonError::into_inner);
    // Drop what is expired or dead (a rotated token's client, say) before counting.
    clients.retain(|_, e| e.built.elapsed() < CLIENT_TTL && !e.alive.is_closed());
    if clients.len() >= MAX_CLIENTS {
        let oldest = clients
            .iter()
            .min_by_key(|(_, e)| e.built)
            .map(|(k, _)| Key {
                access: k.access.clone(),
                token: k.token.clone(),
            });
        if let Some(oldest) = oldest {
            clients.remove(&oldest);
        }
    }
    clients.insert(
        key,
        Entry {
            connected: connected.clone(),
            built: Instant::now(),
            alive,
        },
    );
    Ok(connected)
}

fn cached(key: &Key) -> Option<Connected> {
    let mut clients = cache().lock().unwrap_or_else(PoisonError::into_inner);
    let usable = clients
        .get(key)
        .is_some_and(|e| e.built.elapsed() < CLIENT_TTL && !e.alive.is_closed());
    if usable {
        clients.get(key).map(|e| e.connected.clone())
    } else {
        clients.remove(key);
        None
    }
}

/// Reads the configuration `access` names and builds a client for it.
async fn build(access: &KubeAccess, token: Option<&str>) -> Result<Connected, ArgocdError> {
    install_crypto_provider();
    let who = access.describe();
    let mut config = match access {
        KubeAccess::Infer => kube::Config::infer().await.map_err(|e| {
            ArgocdError::Failed(format!(
                "Dray finds no Kubernetes configuration: {e}; hint: run Dray in a pod with a \
                 service account, set `$KUBECONFIG`, or set `kubeconfig` (or `server`) in \
                 the project's ProjectConfig `spec.argocd.kubernetes`"
            ))
        })?,
        KubeAccess::Kubeconfig { path, context } => {
            let options = KubeConfigOptions {
                context: context.clone(),
                ..Default::default()
            };
            let loaded = match path {
                Some(path) => {
                    let file = Kubeconfig::read_from(path).map_err(|e| unusable(&who, &e))?;
                    kube::Config::from_custom_kubeconfig(file, &options).await
                }
                None => kube::Config::from_kubeconfig(&options).await,
            };
            loaded.map_err(|e| unusable(&who, &e))?
        }
        KubeAccess::Server {
            url,
            certificate_authority_data,
        } => {
            let file = server_kubeconfig(url, certificate_authority_data.as_deref(), token)
                .map_err(|e| unusable(&who, &e))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| unusable(&who, &e))?
        }
    };
    // The step and the health check ask again on their own schedule: no hidden retries.
    config.default_retry = false;
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.reset_reader_on_write = true;
    let cluster_url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    // An `exec` plugin runs here the first time: its failure is the user's, not the CA's.
    let client = kube::Client::try_from(config).map_err(|e| match &e {
        kube::Error::Auth(auth) => ArgocdError::Failed(format!(
            "cannot authenticate to the Kubernetes API at `{cluster_url}`: {}; hint: check the \
             user of the kubeconfig (its token, client certificate or `exec` plugin), e.g. \
             with `kubectl auth whoami` in the same context",
            auth_failure(auth)
        )),
        other => ArgocdError::Failed(format!(
            "cannot make a client for {who} (`{cluster_url}`): {}; hint: check the CA data \
             and client certificate of that cluster and user",
            chain(other)
        )),
    })?;
    Ok(Connected {
        client,
        cluster_url,
    })
}

/// Walks an error's sources into one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// Why authenticating failed, without what an `exec` plugin printed on stdout (its
/// credential, if it printed one): its exit status and the last line it wrote to stderr.
pub(crate) fn auth_failure(error: &kube::client::AuthError) -> String {
    match error {
        kube::client::AuthError::AuthExecRun { out, .. } => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let said = stderr.lines().rev().find(|l| !l.trim().is_empty());
            let said: String = said.unwrap_or("").trim().chars().take(300).collect();
            format!(
                "the kubeconfig's `exec` credential plugin failed ({}){}",
                out.status,
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            )
        }
        // A parse error may quote what the plugin printed: a credential, perhaps.
        kube::client::AuthError::AuthExecParse(_) => {
            "the kubeconfig's `exec` credential plugin printed no `ExecCredential` \
             (`client.authentication.k8s.io/v1`) on stdout"
                .to_owned()
        }
        other => chain(other),
    }
}

fn unusable(who: &str, error: &kube::config::KubeconfigError) -> ArgocdError {
    // A YAML error may quote the file, tokens and keys included: never its words.
    let why = match error {
        kube::config::KubeconfigError::Parse(_) => "it is not valid kubeconfig YAML".to_owned(),
        other => chain(other),
    };
    ArgocdError::Failed(format!(
        "cannot use {who}: {why}; hint: check that the file exists and names the context, \
         its cluster and its user, e.g. with `kubectl config view --kubeconfig <path>`"
    ))
}

/// The kubeconfig of a server URL: its CA data, and the bearer token when there is one.
fn server_kubeconfig(
    url: &str,
    certificate_authority_data: Option<&str>,
    token: Option<&str>,
) -> Result<Kubeconfig, kube::config::KubeconfigError> {
    let mut cluster = json!({"server": url});
    if let Some(ca) = certificate_authority_data {
        cluster["certificate-authority-data"] = json!(ca);
    }
    let user = match token {
        Some(token) => json!({"token": token}),
        None => json!({}),
    };
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "argocd", "cluster": cluster}],
        "users": [{"name": "dray", "user": user}],
        "contexts": [{"name": "argocd", "context": {"cluster": "argocd", "user": "dray"}}],
        "current-context": "argocd",
    });
    // JSON is YAML: kube's own parser reads it, as it reads a kubeconfig file.
    Kubeconfig::from_yaml(&document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_url_becomes_a_client_for_that_url() {
        let access = KubeAccess::Server {
            url: "http://127.0.0.1:1/".into(),
            certificate_authority_data: None,
        };
        let connected = connect(&access, Some("t")).await.unwrap();
        assert_eq!(connected.cluster_url, "http://127.0.0.1:1");
        // The second time it comes from the cache.
        let key = Key {
            access: access.clone(),
            token: Some("t".into()),
        };
        assert!(cached(&key).is_some());
        assert!(
            cached(&Key {
                access,
                token: None
            })
            .is_none()
        );
    }

    #[test]
    fn a_client_whose_runtime_is_gone_is_built_again() {
        let access = KubeAccess::Server {
            url: "http://127.0.0.1:2".into(),
            certificate_authority_data: None,
        };
        let key = Key {
            access: access.clone(),
            token: None,
        };
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        first.block_on(connect(&access, None)).unwrap();
        assert!(first.block_on(async { cached(&key).is_some() }));
        // Its worker ran on that runtime: once it is gone, the client is no use.
        drop(first);
        assert!(cached(&key).is_none());
    }

    #[tokio::test]
    async fn bad_ca_data_is_refused_naming_the_server() {
        let access = KubeAccess::Server {
            url: "https://127.0.0.1:1".into(),
            certificate_authority_data: Some("not base64!".into()),
        };
        let error = connect(&access, None).await.err().unwrap().to_string();
        assert!(
            error.starts_with("cannot use the Kubernetes API at `https://127.0.0.1:1`"),
            "{error}"
        );
        assert!(error.contains("hint:"), "{error}");
    }
}
