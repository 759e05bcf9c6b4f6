//! What a step gets to work with: the narrow [`StepContext`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// An image of the Freight being promoted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FreightImage {
    /// The repository, e.g. `registry.example.com/team/app`.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The tag.
    pub tag: String,
    /// The digest, `sha256:…`.
    pub digest: String,
}

/// A config commit of the Freight being promoted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FreightCommit {
    /// The repository URL.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The full commit id.
    pub id: String,
    /// The branch it was found on.
    #[serde(default)]
    pub branch: Option<String>,
    /// The subject line.
    #[serde(default)]
    pub message: String,
    /// The author.
    #[serde(default)]
    pub author: String,
}

/// A Helm chart of the Freight being promoted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FreightChart {
    /// The chart repository (`https://…` or `oci://…`).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The chart's name.
    pub name: String,
    /// The version.
    pub version: String,
    /// The manifest digest of an OCI chart.
    #[serde(default)]
    pub digest: Option<String>,
}

/// The Freight a promotion moves.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TargetFreight {
    /// The id (content hash).
    pub id: String,
    /// The alias.
    pub alias: String,
    /// The Warehouse it came from.
    pub origin: String,
    /// Its images.
    pub images: Vec<FreightImage>,
    /// Its config commits.
    pub commits: Vec<FreightCommit>,
    /// Its Helm charts.
    #[serde(default)]
    pub charts: Vec<FreightChart>,
}

/// A user name and a password or token for HTTP Basic: git over HTTP, and Helm chart
/// repositories.
#[derive(Clone, PartialEq, Eq)]
pub struct GitCredentials {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: String,
}

impl std::fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Finds credentials for a repository URL.
pub trait CredentialProvider: Send + Sync {
    /// Credentials for a git repository, if the project has any for it.
    fn git(&self, repo_url: &str) -> Option<GitCredentials>;
    /// A token for a forge or API at `url` (GitHub, GitLab, Argo CD), if any.
    fn token(&self, url: &str) -> Option<String>;
    /// The SSH private key (OpenSSH format) that commits Dray makes for the repository at
    /// `repo_url` are signed with, if the project signs them.
    fn signing_key(&self, _repo_url: &str) -> Option<String> {
        None
    }
    /// Credentials for a Helm chart repository (`https://…` or `oci://…`), if any.
    fn helm(&self, _repo_url: &str) -> Option<GitCredentials> {
        None
    }
    /// Credentials for an image repository (`registry/repository`, no scheme), e.g. for
    /// `oci-download` and `oci-push`, if any.
    fn image(&self, _repo_url: &str) -> Option<GitCredentials> {
        None
    }
}

/// A provider with no credentials at all.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCredentials;

impl CredentialProvider for NoCredentials {
    fn git(&self, _: &str) -> Option<GitCredentials> {
        None
    }
    fn token(&self, _: &str) -> Option<String> {
        None
    }
}

/// The shared bare mirrors of git repositories, so that a promotion never clones afresh.
///
/// An implementation must hold [`crate::MirrorLocks`]' lock for a mirror while it fetches
/// into it or collects its garbage: `git-clone` adds worktrees to the same mirror, and git
/// fails when it meets a half-registered worktree.
#[async_trait]
pub trait RepoCache: Send + Sync {
    /// Brings the mirror of `repo_url` up to date and returns its path.
    async fn fetch(
        &self,
        repo_url: &str,
        credentials: Option<&GitCredentials>,
    ) -> Result<PathBuf, String>;

    /// Like [`Self::fetch`], for a checkout that needs only `refs` (full names:
    /// `refs/heads/stage/dev`) as the remote has them now and `commits` (full ids): a
    /// mirror that already holds them need not fetch. By default, [`Self::fetch`].
    async fn fetch_for(
        &self,
        repo_url: &str,
        credentials: Option<&GitCredentials>,
        refs: &[String],
        commits: &[String],
    ) -> Result<PathBuf, String> {
        let _ = (refs, commits);
        self.fetch(repo_url, credentials).await
    }
}

/// Where the external tools are.
#[derive(Clone, Debug)]
pub struct ToolPaths {
    /// `git`.
    pub git: PathBuf,
    /// `kubectl` (for `kubectl kustomize`).
    pub kubectl: PathBuf,
    /// A standalone `kustomize`, used instead of `kubectl kustomize` when set.
    pub kustomize: Option<PathBuf>,
    /// `helm`.
    pub helm: PathBuf,
}

impl Default for ToolPaths {
    fn default() -> Self {
        ToolPaths {
            git: PathBuf::from("git"),
            kubectl: PathBuf::from("kubectl"),
            kustomize: None,
            helm: PathBuf::from("helm"),
        }
    }
}

/// Evaluates CEL for steps that take expressions (`http`'s `successExpression`, …).
///
/// The steps crate cannot import `dray`, where CEL lives; the engine hands each step an
/// evaluator that also sees the step's `ctx`, `vars` and `outputs`. `variables` become
/// top-level CEL variables (e.g. `response`) and shadow nothing the engine defines. JSON
/// integers are CEL `int`s, so `response.status + 1` works.
pub trait ExprEvaluator: Send + Sync {
    /// Evaluates `expression` (bare CEL, or one `${{ }}`); it must be a bool.
    fn condition(&self, expression: &str, variables: &Map<String, Value>) -> Result<bool, String>;
    /// Evaluates `expression` (bare CEL) to a JSON value.
    fn evaluate(&self, expression: &str, variables: &Map<String, Value>) -> Result<Value, String>;
}

/// An evaluator that refuses every expression, for contexts that have none to offer.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoExprs;

impl ExprEvaluator for NoExprs {
    fn condition(&self, expression: &str, _: &Map<String, Value>) -> Result<bool, String> {
        Err(format!(
            "no expression evaluator here to evaluate `{expression}`"
        ))
    }
    fn evaluate(&self, expression: &str, _: &Map<String, Value>) -> Result<Value, String> {
        Err(format!(
            "no expression evaluator here to evaluate `{expression}`"
        ))
    }
}

/// Where a step's log lines go (the promotion's log, shown live in the CLI and UI).
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Everything a step may use.
#[derive(Clone)]
pub struct StepContext {
    /// The promotion's work directory; step paths are relative to it.
    pub work_dir: PathBuf,
    /// The Stage's warm directory, where the checkouts of its previous promotion wait to be
    /// reused (see [`crate::park_worktrees`]); `None`: every checkout is made anew (previews).
    pub warm_dir: Option<PathBuf>,
    /// The project.
    pub project: String,
    /// The Stage being promoted into.
    pub stage: String,
    /// The promotion's name.
    pub promotion: String,
    /// Who asked for the promotion.
    pub actor: String,
    /// The step's alias (for messages).
    pub alias: String,
    /// The Freight being promoted.
    pub freight: TargetFreight,
    /// Who approved the Freight for this Stage, if anyone did.
    pub approved_by: Option<String>,
    /// Who promoted through a closed promotion window, and why (`ann: incident 42`).
    pub window_override: Option<String>,
    /// The people whose sign-offs counted for this promotion (the Stage's `spec.signoff`),
    /// each `user` or `user (reason)`: one `Dray-Signed-Off-By` trailer each.
    pub signed_off_by: Vec<String>,
    /// The freeze a person with `override` promoted through, and why
    /// (`frozen by ann: incident 42 (Stage `prod`); overridden by bob: hotfix`).
    pub freeze_override: Option<String>,
    /// Credentials by repository.
    pub credentials: Arc<dyn CredentialProvider>,
    /// Bare mirrors of git repositories.
    pub repos: Arc<dyn RepoCache>,
    /// An HTTP client.
    pub http: reqwest::Client,
    /// Evaluates the CEL expressions a step takes in its config (bare, not `${{ }}`).
    pub exprs: Arc<dyn ExprEvaluator>,
    /// External tools.
    pub tools: ToolPaths,
    /// Set when the promotion is aborted: stop at the next safe point.
    pub cancel: CancellationToken,
    /// The promotion's log.
    pub log: LogSink,
    /// What this step saved on its previous run, if it ran before.
    pub saved_state: Option<Value>,
    /// How the project reaches Argo CD (ProjectConfig `spec.argocd`), if it says.
    pub argocd: Option<crate::argocd::ArgocdTarget>,
}

impl StepContext {
    /// Resolves a path from a step's config inside the work directory, refusing paths that
    /// escape it (`..`, absolute paths).
    pub fn path(&self, relative: &str) -> Result<PathBuf, String> {
        let candidate = Path::new(relative);
        let escapes = candidate.is_absolute()
            || candidate
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if escapes {
            return Err(format!(
                "path `{relative}` leaves the promotion's work directory; use a relative path without `..`"
            ));
        }
        Ok(self.work_dir.join(candidate))
    }

    /// Writes a line to the promotion's log.
    pub fn log(&self, line: &str) {
        (self.log)(line);
    }
}
