//! The credentials a promotion's steps and a verification's providers may use: every
//! Credential of the project, opened once when the promotion (or the project's first
//! verification) starts, matched to repository URLs synchronously by the rule of
//! [`super::credentials`]: the same [`RepoUrl`] first, then a `repoURLPattern`.

use dray_steps::{CredentialProvider, GitCredentials};
use serde_json::Value;

use crate::api::{Kind, RepoUrl};
use crate::secrets::{self, CredentialSecrets, SecretKey};
use crate::store::{Store, StoreError};

struct Entry {
    kind: String,
    repo_url: Option<RepoUrl>,
    pattern: Option<regex::Regex>,
    username: String,
    secrets: CredentialSecrets,
}

/// A project's credentials for the duration of one promotion.
pub struct ProjectCredentials {
    entries: Vec<Entry>,
}

impl ProjectCredentials {
    /// Loads and opens every Credential of `project`; one that cannot be opened is left
    /// out (and logged), so it fails where it is used, with the repository named.
    pub async fn load(
        store: &dyn Store,
        key: &SecretKey,
        project: &str,
    ) -> Result<Self, StoreError> {
        let mut entries = Vec::new();
        for stored in store.list(Kind::Credential, Some(project)).await? {
            let text = |p: &str| {
                stored
                    .object
                    .pointer(p)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let secrets = match secrets::open_credential(key, &stored.object) {
                Ok(secrets) => secrets,
                Err(error) => {
                    tracing::warn!(credential = %stored.key, %error, "cannot open credential");
                    continue;
                }
            };
            entries.push(Entry {
                kind: text("/spec/type").unwrap_or_default(),
                repo_url: text("/spec/repoURL").map(|u| RepoUrl::new(&u)),
                pattern: text("/spec/repoURLPattern").and_then(|p| regex::Regex::new(&p).ok()),
                username: text("/spec/username").unwrap_or_default(),
                secrets,
            });
        }
        Ok(ProjectCredentials { entries })
    }

    fn find(&self, kinds: &[&str], url: &str) -> Option<&Entry> {
        let wanted = RepoUrl::new(url);
        let of_kind = || {
            self.entries
                .iter()
                .filter(|e| kinds.contains(&e.kind.as_str()))
        };
        of_kind()
            .find(|e| e.repo_url.as_ref() == Some(&wanted))
            .or_else(|| of_kind().find(|e| e.pattern.as_ref().is_some_and(|p| p.is_match(url))))
    }
}

impl CredentialProvider for ProjectCredentials {
    fn git(&self, repo_url: &str) -> Option<GitCredentials> {
        let entry = self.find(&["git"], repo_url)?;
        Some(GitCredentials {
            username: entry.username.clone(),
            password: entry.secrets.password_or_token()?.to_owned(),
        })
    }

    fn token(&self, url: &str) -> Option<String> {
        let entry = self.find(&["argocd", "git", "image", "webhook"], url)?;
        entry
            .secrets
            .token
            .clone()
            .or_else(|| entry.secrets.password.clone())
    }

    /// A `helm` Credential for the chart repository; for `oci://`, an `image` Credential
    /// of the registry repository also serves (as in discovery).
    fn helm(&self, repo_url: &str) -> Option<GitCredentials> {
        let entry = self.find(&["helm"], repo_url).or_else(|| {
            dray_steps::helm::is_oci(repo_url)
                .then(|| self.find(&["image"], repo_url))
                .flatten()
        })?;
        Some(GitCredentials {
            username: entry.username.clone(),
            password: entry.secrets.password_or_token()?.to_owned(),
        })
    }

    /// An `image` Credential for the image repository (`registry/repository`), as
    /// discovery finds it for the same repository.
    fn image(&self, repo_url: &str) -> Option<GitCredentials> {
        let entry = self.find(&["image"], repo_url)?;
        Some(GitCredentials {
            username: entry.username.clone(),
            password: entry.secrets.password_or_token()?.to_owned(),
        })
    }

    fn signing_key(&self, repo_url: &str) -> Option<String> {
        self.find(&["signing"], repo_url)?
            .secrets
            .ssh_private_key
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::discovery::credentials;
    use crate::discovery::git;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn discovery_and_the_steps_find_the_same_credential_however_the_url_is_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let key = SecretKey::load(dir.path()).unwrap();
        let mut object = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
            "metadata": {"name": "config", "namespace": "demo"},
            "spec": {"type": "git", "repoURL": "https://h/team/config.git", "username": "bot", "password": "pw"},
        });
        secrets::seal_credential(&key, &mut object, None).unwrap();
        store.create(object).await.unwrap();
        let steps = ProjectCredentials::load(&store, &key, "demo")
            .await
            .unwrap();
        for url in [
            "https://h/team/config",
            "https://h/team/config.git/",
            "https://H/team/config",
            "git@h:team/config.git",
        ] {
            let discovery = credentials::for_git(&store, &key, "demo", url)
                .await
                .unwrap();
            assert_eq!(
                discovery,
                Some(git::GitCredentials::new("bot", "pw")),
                "{url}"
            );
            let step = steps.git(url).map(|c| (c.username, c.password));
            assert_eq!(step, Some(("bot".to_owned(), "pw".to_owned())), "{url}");
        }
        // An `image` Credential serves the OCI steps for its repository only.
        let mut image = json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Credential",
            "metadata": {"name": "registry", "namespace": "demo"},
            "spec": {"type": "image", "repoURL": "reg.example.com/team/app", "username": "ci", "password": "ipw"},
        });
        secrets::seal_credential(&key, &mut image, None).unwrap();
        store.create(image).await.unwrap();
        let steps = ProjectCredentials::load(&store, &key, "demo")
            .await
            .unwrap();
        let found = steps
            .image("reg.example.com/team/app")
            .map(|c| (c.username, c.password));
        assert_eq!(found, Some(("ci".to_owned(), "ipw".to_owned())));
        assert!(steps.image("reg.example.com/team/other").is_none());
        assert!(
            steps.image("https://h/team/config").is_none(),
            "not a git one"
        );
        let other = "https://h/team/other";
        assert!(steps.git(other).is_none());
        let discovery = credentials::for_git(&store, &key, "demo", other)
            .await
            .unwrap();
        assert!(discovery.is_none());
    }
}
