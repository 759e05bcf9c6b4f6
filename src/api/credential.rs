//! `Credential`: how Dray authenticates to a git repository, an image registry, or how a
//! webhook receiver checks its caller. Secret fields (`password`, `token`,
//! `sshPrivateKey`) are write-only: the embedded store keeps them encrypted, the API never
//! returns them, and logs never show them.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Credentials for repositories matching `repoURL` or `repoURLPattern`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Credential",
    namespaced,
    status = "CredentialStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSpec {
    /// What the credential is for: `git`, `image`, `helm`, `webhook`, `argocd` or `signing`.
    #[serde(rename = "type")]
    pub type_: CredentialType,
    /// The repository it applies to, exactly (e.g. `https://git.example.com/team/config.git`
    /// or `registry.example.com/team/app`). Not used for `webhook`.
    #[serde(default, rename = "repoURL", skip_serializing_if = "Option::is_none")]
    pub repo_url: Option<String>,
    /// A regular expression matched against repository URLs, instead of `repoURL`.
    #[serde(
        default,
        rename = "repoURLPattern",
        skip_serializing_if = "Option::is_none"
    )]
    pub repo_url_pattern: Option<String>,
    /// The user name (with `password` or `token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// A password. Write-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A token (used as the password; for webhooks, the shared secret). Write-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// An SSH private key in OpenSSH format (for `signing`). Write-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_private_key: Option<String>,
    /// The encrypted secret fields, as the embedded store keeps them. Set by Dray.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<String>,
}

impl std::fmt::Debug for CredentialSpec {
    /// Never prints a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialSpec")
            .field("type", &self.type_)
            .field("repo_url", &self.repo_url)
            .field("repo_url_pattern", &self.repo_url_pattern)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "ssh_private_key",
                &self.ssh_private_key.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// What a credential is for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CredentialType {
    /// A git repository.
    #[default]
    Git,
    /// An OCI image registry.
    Image,
    /// A Helm chart repository: a classic one (`repoURL` `https://charts.example.com`) or
    /// one in an OCI registry (`oci://registry.example.com/team/charts/app`).
    Helm,
    /// A webhook receiver's shared secret.
    Webhook,
    /// An Argo CD API server (`repoURL` is the server's URL; `token` its API token).
    Argocd,
    /// The SSH key (`sshPrivateKey`) that signs the commits Dray makes for the matching
    /// repositories (`gpg.format=ssh`; auditors check them with `git verify-commit`).
    Signing,
}

/// What the API shows of a credential's secrets: which fields are set, never their values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialStatus {
    /// The names of the secret fields that hold a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_fields: Vec<String>,
}
