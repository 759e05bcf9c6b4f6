//! Finding the Credential for a repository: an exact `repoURL` match (the same
//! [`RepoUrl`]) wins over a `repoURLPattern` match; the secrets are opened only for the
//! one that is used. [`ProjectCredentials`](super::project_credentials::ProjectCredentials)
//! is the same rule over every Credential of a project, opened at once.

use serde_json::Value;

use crate::api::{Kind, ObjectKey, RepoUrl};
use crate::discovery::git::GitCredentials;
use crate::discovery::image::RegistryCredentials;
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
    let wanted = RepoUrl::new(repo_url);
    for candidate in &of_type {
        if text(&candidate.object, "/spec/repoURL").is_some_and(|u| RepoUrl::new(u) == wanted) {
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
    Ok(find_among(&candidates, key, credential_type, repo_url)?)
}

/// Like [`find`], among Credentials already read from the store (one project's), for a
/// caller that resolves several repositories at once.
pub fn find_among(
    candidates: &[StoredObject],
    key: &SecretKey,
    credential_type: &str,
    repo_url: &str,
) -> Result<Option<ResolvedCredential>, secrets::SecretError> {
    let Some(stored) = choose(candidates, credential_type, repo_url) else {
        return Ok(None);
    };
    Ok(Some(ResolvedCredential {
        source: stored.key.clone(),
        username: text(&stored.object, "/spec/username")
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
) -> Result<Option<GitCredentials>, CredentialLookupError> {
    Ok(find(store, key, project, "git", repo_url)
        .await?
        .map(git_credentials))
}

/// The registry credentials of `project` for the image repository `repo_url`.
pub async fn for_registry(
    store: &dyn Store,
    key: &SecretKey,
    project: &str,
    repo_url: &str,
) -> Result<Option<RegistryCredentials>, CredentialLookupError> {
    Ok(find(store, key, project, "image", repo_url)
        .await?
        .map(registry_credentials))
}

/// A resolved `git` Credential as the mirror cache takes it.
pub fn git_credentials(credential: ResolvedCredential) -> GitCredentials {
    GitCredentials::new(
        credential.username,
        credential.secrets.password_or_token().unwrap_or_default(),
    )
}

/// A resolved `image` Credential as the registry client takes it.
pub fn registry_credentials(credential: ResolvedCredential) -> RegistryCredentials {
    RegistryCredentials {
        password: credential
            .secrets
            .password_or_token()
            .unwrap_or_default()
            .to_owned(),
        username: credential.username,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored(key: &SecretKey, name: &str, spec: Value) -> StoredObject {
        let mut object = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": spec,
        });
        secrets::seal_credential(key, &mut object, None).unwrap();
        StoredObject {
            key: ObjectKey::namespaced(Kind::Credential, "demo", name),
            resource_version: 1,
            object,
        }
    }

    #[test]
    fn an_exact_url_of_the_right_type_wins_over_a_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let url = "https://git.example.com/team/config.git";
        let candidates = [
            stored(
                &key,
                "pattern",
                json!({"type": "git", "repoURLPattern": "^https://git\\.example\\.com/", "username": "any", "password": "p1"}),
            ),
            stored(
                &key,
                "image",
                json!({"type": "image", "repoURL": url, "username": "img", "password": "p2"}),
            ),
            stored(
                &key,
                "exact",
                json!({"type": "git", "repoURL": format!("{url}/"), "username": "bot", "token": "t3"}),
            ),
        ];
        let found = find_among(&candidates, &key, "git", url).unwrap().unwrap();
        assert_eq!(found.source.name, "exact");
        assert_eq!(git_credentials(found), GitCredentials::new("bot", "t3"));

        let other = "https://git.example.com/team/other.git";
        let found = find_among(&candidates, &key, "git", other)
            .unwrap()
            .unwrap();
        assert_eq!(found.source.name, "pattern");
        let found = find_among(&candidates, &key, "image", url)
            .unwrap()
            .unwrap();
        let registry = registry_credentials(found);
        assert_eq!(
            (registry.username.as_str(), registry.password.as_str()),
            ("img", "p2")
        );
        assert!(
            find_among(&candidates, &key, "image", other)
                .unwrap()
                .is_none()
        );
    }
}
