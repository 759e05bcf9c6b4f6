//! Finding the Credential for a repository: an exact `repoURL` match wins over a
//! `repoURLPattern` match; the secrets are opened only for the one that is used.

use serde_json::Value;

use crate::api::{Kind, ObjectKey};
use crate::secrets::{self, CredentialSecrets, SecretKey};
use crate::store::{Store, StoreError, StoredObject};

/// A user name and secret for one repository.
#[derive(Clone)]
pub struct ResolvedCredential {
    /// Which Credential this came from, e.g. `demo/registry`.
    pub source: ObjectKey,
    /// The user name (empty when the Credential names none).
    pub username: String,
    /// The secrets.
    pub secrets: CredentialSecrets,
}

impl std::fmt::Debug for ResolvedCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedCredential")
            .field("source", &self.source.to_string())
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Why a credential could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum CredentialLookupError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Credential's secrets could not be opened.
    #[error(transparent)]
    Sealed(#[from] secrets::SecretError),
}

fn normalise(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The best Credential among `candidates`: an exact `repoURL` first, then a pattern.
fn choose<'a>(
    candidates: &'a [StoredObject],
    credential_type: &str,
    repo_url: &str,
) -> Option<&'a StoredObject> {
    let of_type: Vec<&StoredObject> = candidates
        .iter()
        .filter(|c| text(&c.object, "/spec/type") == Some(credential_type))
        .collect();
    for candidate in &of_type {
        if text(&candidate.object, "/spec/repoURL")
            .is_some_and(|u| normalise(u) == normalise(repo_url))
        {
            return Some(candidate);
        }
    }
    for candidate in &of_type {
        let pattern = text(&candidate.object, "/spec/repoURLPattern");
        if pattern
            .and_then(|p| regex::Regex::new(p).ok())
            .is_some_and(|re| re.is_match(repo_url))
        {
            return Some(candidate);
        }
    }
    None
}

/// The Credential of `credential_type` (`git`, `image`, `webhook`) in `project` for `repo_url`.
pub async fn find(
    store: &dyn Store,
    key: &SecretKey,
    project: &str,
    credential_type: &str,
    repo_url: &str,
) -> Result<Option<ResolvedCredential>, CredentialLookupError> {
    let candidates = store.list(Kind::Credential, Some(project)).await?;
    let chosen = choose(&candidates, credential_type, repo_url);
    let Some(stored) = chosen else {
        return Ok(None);
    };
    Ok(Some(ResolvedCredential {
        source: stored.key.clone(),
        username: stored
            .object
            .pointer("/spec/username")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        secrets: secrets::open_credential(key, &stored.object)?,
    }))
}

/// The webhook secret named `name` in `project` (a Credential of type `webhook`).
pub async fn webhook_secret(
    store: &dyn Store,
    key: &SecretKey,
    project: &str,
    name: &str,
) -> Result<Option<String>, CredentialLookupError> {
    let key_of = ObjectKey::namespaced(Kind::Credential, project, name);
    let Some(stored) = store.get(&key_of).await? else {
        return Ok(None);
    };
    if stored.object.pointer("/spec/type").and_then(Value::as_str) != Some("webhook") {
        return Ok(None);
    }
    let secrets = secrets::open_credential(key, &stored.object)?;
    Ok(secrets.token.or(secrets.password))
}

/// The git credentials of `project` for `repo_url`, ready for the mirror cache.
pub async fn for_git(
    store: &dyn Store,
    key: &SecretKey,
    project: &str,
    repo_url: &str,
) -> Result<Option<crate::discovery::git::GitCredentials>, CredentialLookupError> {
    Ok(find(store, key, project, "git", repo_url).await?.map(|c| {
        crate::discovery::git::GitCredentials::new(
            c.username,
            c.secrets.password_or_token().unwrap_or_default(),
        )
    }))
}

/// The registry credentials of `project` for the image repository `repo_url`.
pub async fn for_registry(
    store: &dyn Store,
    key: &SecretKey,
    project: &str,
    repo_url: &str,
) -> Result<Option<crate::discovery::image::RegistryCredentials>, CredentialLookupError> {
    Ok(find(store, key, project, "image", repo_url)
        .await?
        .map(|c| crate::discovery::image::RegistryCredentials {
            username: c.username,
            password: c.secrets.password_or_token().unwrap_or_default().to_owned(),
        }))
}
