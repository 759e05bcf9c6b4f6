//! The configuration of `argocd-update`, and its checks before any request: every
//! Application named once (`name` or `selector`), each with sources whose
//! `desiredRevision` is a commit and whose overrides name an image or a parameter; and
//! how to reach Argo CD (the step's `apiServer`, else the project's `spec.argocd`).

use schemars::JsonSchema;
use serde::Deserialize;

use super::patch::image_name;
use crate::StepContext;
use crate::argocd::{ApplicationRef, ArgocdTarget, is_commit};

/// Kustomize image overrides for a source (Argo CD's `spec.source.kustomize.images`).
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KustomizeOverride {
    /// Images as Argo CD writes them: `repo:tag`, `repo@sha256:…`, or
    /// `old=repo:tag`; each replaces the override of the same image, or is added.
    pub(super) images: Vec<String>,
}

/// A Helm value that holds an image reference.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HelmImage {
    /// The Helm parameter's name, e.g. `image.tag`.
    pub(super) key: String,
    /// Its value, e.g. `${{ imageFrom("registry.example.com/app").tag }}`.
    pub(super) value: String,
}

/// Helm overrides for a source (set into Argo CD's `spec.source.helm.parameters`).
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HelmOverride {
    /// Parameters to set; each replaces the parameter of the same name, or is added.
    pub(super) images: Vec<HelmImage>,
}

/// A source of an Application to move.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SourceConfig {
    /// The source's `repoURL`, as the Application spells it (a trailing `.git` or `/` is
    /// ignored).
    #[serde(rename = "repoURL")]
    pub(super) repo_url: String,
    /// The commit Argo CD must report synced, e.g. `${{ outputs.push.commit }}`.
    pub(super) desired_revision: String,
    /// Also set the source's `targetRevision` to `desiredRevision`.
    #[serde(default)]
    pub(super) update_target_revision: bool,
    /// Set Kustomize image overrides on the source.
    #[serde(default)]
    pub(super) kustomize: Option<KustomizeOverride>,
    /// Set Helm parameters on the source.
    #[serde(default)]
    pub(super) helm: Option<HelmOverride>,
}

/// An Application to move.
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AppConfig {
    /// `metadata.name` (or `selector`).
    #[serde(default)]
    pub(super) name: String,
    /// A label selector (`team=shop,env=prod`) instead of `name`: every Application it
    /// matches, each of which must be authorised for this Stage.
    #[serde(default)]
    pub(super) selector: Option<String>,
    /// `metadata.namespace` (Argo CD's `appNamespace`), when not Argo CD's own.
    #[serde(default)]
    pub(super) namespace: Option<String>,
    /// The sources to move.
    pub(super) sources: Vec<SourceConfig>,
}

impl AppConfig {
    pub(super) fn reference(&self) -> ApplicationRef {
        ApplicationRef {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// The configuration of `argocd-update`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// Argo CD's API server, e.g. `https://argocd.example.com`, overriding the project's
    /// ProjectConfig `spec.argocd`; its token is the project's credential for this URL.
    #[serde(default)]
    pub(super) api_server: Option<String>,
    /// The Applications.
    pub(super) apps: Vec<AppConfig>,
    /// How long to wait between two looks (default `5s`).
    #[serde(default)]
    pub(super) poll_interval: Option<String>,
}

/// The step's own `apiServer`, else the project's `spec.argocd` (shared by `argocd-wait`).
pub(crate) fn target(
    ctx: &StepContext,
    api_server: Option<&String>,
) -> Result<ArgocdTarget, String> {
    let target = match (api_server, &ctx.argocd) {
        (Some(url), _) => ArgocdTarget::ApiServer { url: url.clone() },
        (None, Some(target)) => target.clone(),
        (None, None) => {
            return Err(format!(
                "Dray does not know how to reach Argo CD for project `{}`; hint: set \
                 `spec.argocd` in the project's ProjectConfig (`apiServer: <url>`, or \
                 `kubernetes: {{}}` for the in-cluster service account or kubeconfig, \
                 `kubernetes: {{kubeconfig: <path>, context: <name>}}`, \
                 `kubernetes: {{server: <url>}}`), or `apiServer` in this step's config",
                ctx.project
            ));
        }
    };
    target.check().map_err(|e| match &target {
        ArgocdTarget::ApiServer { url } if api_server.is_some() => {
            format!(
                "`apiServer` `{}` is not an http(s) URL",
                url.trim_end_matches('/')
            )
        }
        _ => format!("ProjectConfig `spec.argocd`: {e}"),
    })?;
    Ok(target)
}

/// Checks `apps` before anything is asked of Argo CD; the error says which field is wrong.
pub(super) fn check_apps(apps: &[AppConfig]) -> Result<(), String> {
    if apps.is_empty() {
        return Err("`apps` is empty".to_owned());
    }
    for app in apps {
        if app.name.is_empty() == app.selector.is_none() {
            return Err("each of `apps` needs exactly one of `name` and `selector`".to_owned());
        }
        if app.sources.is_empty() {
            return Err(format!("app `{}` has no `sources`", app.name));
        }
        for source in &app.sources {
            check_source(app, source)?;
        }
    }
    Ok(())
}

fn check_source(app: &AppConfig, source: &SourceConfig) -> Result<(), String> {
    if !is_commit(&source.desired_revision) {
        return Err(format!(
            "`desiredRevision` `{}` of app `{}` is not a commit id; hint: use the commit \
             a step wrote, e.g. `${{{{ outputs.push.commit }}}}`",
            source.desired_revision, app.name
        ));
    }
    let kustomize = source.kustomize.iter().flat_map(|k| &k.images);
    if let Some(bad) = kustomize.into_iter().find(|i| image_name(i).is_empty()) {
        return Err(format!(
            "`kustomize.images` entry `{bad}` of app `{}` names no image; hint: write \
             `repo:tag` or `repo@sha256:…`",
            app.name
        ));
    }
    if source
        .helm
        .iter()
        .flat_map(|h| &h.images)
        .any(|i| i.key.trim().is_empty())
    {
        return Err(format!(
            "a `helm.images` entry of app `{}` has an empty `key`; hint: name the Helm \
             parameter, e.g. `image.tag`",
            app.name
        ));
    }
    Ok(())
}
