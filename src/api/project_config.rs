//! `ProjectConfig`: project-wide policy (auto-promotion policies, webhook receivers,
//! promotion windows, Argo CD, notifications). There is at most one per project, and its
//! name is the project's name.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Project-wide policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "ProjectConfig",
    namespaced,
    status = "ProjectConfigStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectConfigSpec {
    /// Auto-promotion policies, matched to Stages by selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub promotion_policies: Vec<PromotionPolicy>,
    /// Webhook receivers that refresh Warehouses when CI or a registry says something changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_receivers: Vec<WebhookReceiverConfig>,
    /// When the selected Stages may be promoted: deny windows freeze them while active;
    /// allow windows, if any apply to a Stage, permit promotion only while one is active.
    /// A deny window wins over an allow window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub promotion_windows: Vec<PromotionWindow>,
    /// How Dray reaches Argo CD for this project (`argocd-update` steps, whose own
    /// `apiServer` overrides it, and the Stages' health): exactly one of `apiServer` and
    /// `kubernetes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argocd: Option<ArgocdConfig>,
    /// Where Dray tells people and systems what happened: a JSON POST (or a Slack
    /// message) per event, retried with backoff, never holding up a promotion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<super::Notification>,
}

/// How Dray reaches Argo CD. Where a bearer token is needed (Argo CD's API server, or a
/// Kubernetes `server` URL), it is the project's Credential of type `argocd` whose
/// `repoURL` is the URL given here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgocdConfig {
    /// Argo CD's API server, e.g. `https://argocd.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
    /// The Kubernetes API server of the cluster Argo CD runs in: Applications are read and
    /// patched as `argoproj.io/v1alpha1` objects, and Argo CD's controller syncs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<ArgocdKubernetes>,
}

impl ArgocdConfig {
    /// The target the steps and the health check reach Argo CD with: `apiServer`, else
    /// `kubernetes` (`None` when neither is set).
    pub fn target(&self) -> Option<dray_steps::argocd::ArgocdTarget> {
        use dray_steps::argocd::{ArgocdTarget, KubeAccess};
        match (&self.api_server, &self.kubernetes) {
            (Some(url), _) => Some(ArgocdTarget::ApiServer { url: url.clone() }),
            (None, Some(kubernetes)) => Some(ArgocdTarget::Kubernetes {
                access: KubeAccess::from_fields(
                    kubernetes.server.clone(),
                    kubernetes.certificate_authority_data.clone(),
                    kubernetes.kubeconfig.clone().map(Into::into),
                    kubernetes.context.clone(),
                ),
                namespace: kubernetes.namespace().to_owned(),
            }),
            (None, None) => None,
        }
    }
}

/// Argo CD reached through the Kubernetes API. With neither `server` nor `kubeconfig` nor
/// `context` (`kubernetes: {}`), Dray infers the cluster as kubectl would: `$KUBECONFIG`
/// or `~/.kube/config` when there is one, else the pod's service account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgocdKubernetes {
    /// The Kubernetes API server's URL, e.g. `https://k8s.example.com:6443`; the bearer
    /// token is the project's `argocd` Credential for this URL. Not with `kubeconfig` or
    /// `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// With `server`: the CA bundle that signed its certificate, PEM and base64-encoded
    /// as kubeconfig's `certificate-authority-data` (default: the system's trust store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    /// An absolute path to a kubeconfig on the machine Dray runs on (default `$KUBECONFIG`
    /// or `~/.kube/config`); its user authenticates (a token, a client certificate or an
    /// `exec` credential plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// The kubeconfig context to use (default: its `current-context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Argo CD's namespace, where its Applications and AppProjects live (default
    /// `argocd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ArgocdKubernetes {
    /// Argo CD's namespace when `namespace` says nothing.
    pub const DEFAULT_NAMESPACE: &'static str = "argocd";

    /// `namespace`, or `argocd`.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(Self::DEFAULT_NAMESPACE)
    }
}

/// Whether a promotion window permits or forbids promotion while it is active.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WindowKind {
    /// Promotion is permitted only while an `Allow` window that applies to the Stage is
    /// active (when at least one applies).
    #[default]
    Allow,
    /// Promotion is forbidden while the window is active (a freeze). Wins over `Allow`.
    Deny,
}

/// A recurring period during which promotion to the selected Stages is allowed or denied,
/// in the manner of Argo CD sync windows. Each occurrence starts at a time given by
/// `schedule` (cron) or `rrule` (exactly one of them) and lasts `duration`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionWindow {
    /// The window's name, unique in the project; named when it blocks a promotion.
    pub name: String,
    /// `Allow` or `Deny`.
    pub kind: WindowKind,
    /// When each occurrence starts: a standard 5-field cron expression (minute, hour,
    /// day of month, month, day of week), e.g. `0 22 * * 5` for Fridays at 22:00,
    /// read in `timeZone`. Exactly one of `schedule` and `rrule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long each occurrence lasts, written the Go way (`60h`, `1h30m`, `2d`).
    /// Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::optional_duration_string")]
    pub duration: Option<String>,
    /// When each occurrence starts: an RFC 5545 recurrence rule, optionally with its
    /// `DTSTART` line, e.g. `DTSTART:20261224T000000Z` then `RRULE:FREQ=YEARLY;COUNT=3`
    /// on the next line, or just `FREQ=WEEKLY;BYDAY=FR;BYHOUR=22`. Times without a zone
    /// are read in `timeZone`. Exactly one of `schedule` and `rrule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrule: Option<String>,
    /// The IANA time zone in which `schedule` and `rrule` are read, e.g. `Europe/Berlin`
    /// (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Which Stages the window applies to; an empty selector selects every Stage.
    #[serde(default)]
    pub stage_selector: StageSelector,
    /// Why the window exists, e.g. a change ticket; shown when it blocks a promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Selects Stages by name (exact or `glob:`) or by labels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageSelector {
    /// A Stage name, or a pattern prefixed with `glob:` (e.g. `glob:prod-*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels that the Stage must carry, all of them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// How a Stage picks Freight when it promotes by itself.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SelectionPolicy {
    /// The newest Freight available to the Stage.
    #[default]
    NewestFreight,
    /// The Freight currently in the upstream Stage.
    MatchUpstream,
}

/// Whether and how the selected Stages promote by themselves.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionPolicy {
    /// Which Stages this policy applies to.
    #[serde(default)]
    pub stage_selector: StageSelector,
    /// One Stage by name: Kargo's shorthand for `stageSelector: {name: …}` (set one of
    /// the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Promote new available Freight without a person clicking.
    #[serde(default)]
    pub auto_promotion_enabled: bool,
    /// Which Freight auto-promotion picks.
    #[serde(default)]
    pub selection_policy: SelectionPolicy,
}

impl PromotionPolicy {
    /// The Stages this policy selects: `stage` as a name selector when it is set, else
    /// `stageSelector`.
    pub fn selector(&self) -> std::borrow::Cow<'_, StageSelector> {
        match &self.stage {
            Some(name) => std::borrow::Cow::Owned(StageSelector {
                name: Some(name.clone()),
                ..StageSelector::default()
            }),
            None => std::borrow::Cow::Borrowed(&self.stage_selector),
        }
    }
}

/// A webhook receiver. Exactly one of the provider blocks is set; each names the
/// Credential (type `webhook`) whose `token` is the shared secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReceiverConfig {
    /// The receiver's name, unique in the project; part of its URL.
    pub name: String,
    /// GitHub: `X-Hub-Signature-256` HMAC with the named secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<WebhookSecretRef>,
    /// GitLab: `X-Gitlab-Token` must equal the named secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<WebhookSecretRef>,
    /// Gitea (and Forgejo): `X-Gitea-Signature` HMAC-SHA256 of the body with the named
    /// secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitea: Option<WebhookSecretRef>,
    /// Bitbucket Cloud and Bitbucket Server (Data Center): `X-Hub-Signature: sha256=…`
    /// HMAC of the body with the named secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitbucket: Option<WebhookSecretRef>,
    /// Azure Container Registry and Azure DevOps service hooks: they sign nothing, so the
    /// secret is part of the URL path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<WebhookSecretRef>,
    /// Docker Hub: it signs nothing, so the secret is part of the URL path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerhub: Option<WebhookSecretRef>,
    /// Quay: it signs nothing, so the secret is part of the URL path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quay: Option<WebhookSecretRef>,
    /// Harbor: the `Authorization` header must equal the named secret (Harbor's "Auth
    /// Header" setting, sent as it is written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harbor: Option<WebhookSecretRef>,
    /// JFrog Artifactory: `X-JFrog-Event-Auth` is the named secret, or its HMAC-SHA256 of
    /// the body when the webhook signs its payloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifactory: Option<ArtifactoryReceiver>,
    /// Generic: the secret is part of the URL path. Without `actions`, the call's JSON
    /// names the repositories (`repoURL`, `repoURLs`); with them, the actions name the
    /// Warehouses (Kargo's form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generic: Option<GenericReceiver>,
    /// A CNCF distribution registry's notifications, with a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<WebhookSecretRef>,
}

/// The services a webhook receiver takes deliveries from: one per provider block of
/// [`WebhookReceiverConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookProvider {
    /// `github`.
    GitHub,
    /// `gitlab`.
    GitLab,
    /// `gitea`.
    Gitea,
    /// `bitbucket`.
    Bitbucket,
    /// `azure`.
    Azure,
    /// `dockerhub`.
    DockerHub,
    /// `quay`.
    Quay,
    /// `harbor`.
    Harbor,
    /// `artifactory`.
    Artifactory,
    /// `generic`.
    Generic,
    /// `registry`.
    Registry,
}

impl WebhookProvider {
    /// Every provider, in the order the docs list them.
    pub const ALL: [WebhookProvider; 11] = [
        WebhookProvider::GitHub,
        WebhookProvider::GitLab,
        WebhookProvider::Gitea,
        WebhookProvider::Bitbucket,
        WebhookProvider::Azure,
        WebhookProvider::DockerHub,
        WebhookProvider::Quay,
        WebhookProvider::Harbor,
        WebhookProvider::Artifactory,
        WebhookProvider::Generic,
        WebhookProvider::Registry,
    ];

    /// The provider block's field name, which is also the kind in the
    /// project-independent receiver's URL (`/webhooks/-/{kind}`).
    pub fn field(self) -> &'static str {
        match self {
            WebhookProvider::GitHub => "github",
            WebhookProvider::GitLab => "gitlab",
            WebhookProvider::Gitea => "gitea",
            WebhookProvider::Bitbucket => "bitbucket",
            WebhookProvider::Azure => "azure",
            WebhookProvider::DockerHub => "dockerhub",
            WebhookProvider::Quay => "quay",
            WebhookProvider::Harbor => "harbor",
            WebhookProvider::Artifactory => "artifactory",
            WebhookProvider::Generic => "generic",
            WebhookProvider::Registry => "registry",
        }
    }

    /// The provider whose field is `field`.
    pub fn from_field(field: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.field() == field)
    }
}

impl WebhookReceiverConfig {
    /// The provider blocks set, each with the name of its secret (exactly one in a valid
    /// receiver).
    pub fn providers(&self) -> Vec<(WebhookProvider, &str)> {
        let blocks = [
            (WebhookProvider::GitHub, self.github.as_ref()),
            (WebhookProvider::GitLab, self.gitlab.as_ref()),
            (WebhookProvider::Gitea, self.gitea.as_ref()),
            (WebhookProvider::Bitbucket, self.bitbucket.as_ref()),
            (WebhookProvider::Azure, self.azure.as_ref()),
            (WebhookProvider::DockerHub, self.dockerhub.as_ref()),
            (WebhookProvider::Quay, self.quay.as_ref()),
            (WebhookProvider::Harbor, self.harbor.as_ref()),
            (WebhookProvider::Registry, self.registry.as_ref()),
        ];
        let mut set: Vec<(WebhookProvider, &str)> = blocks
            .into_iter()
            .filter_map(|(p, r)| r.map(|r| (p, r.secret_ref.as_str())))
            .collect();
        if let Some(a) = &self.artifactory {
            set.push((WebhookProvider::Artifactory, a.secret_ref.as_str()));
        }
        if let Some(g) = &self.generic {
            set.push((WebhookProvider::Generic, g.secret_ref.as_str()));
        }
        set
    }

    /// The one provider and its secret's name; `None` unless exactly one block is set.
    pub fn provider(&self) -> Option<(WebhookProvider, &str)> {
        match self.providers().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }
}

/// An Artifactory receiver: its secret, and optionally the virtual repository the
/// Warehouses pull through.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactoryReceiver {
    /// The name of the secret in the project.
    pub secret_ref: String,
    /// The virtual repository the Warehouses' images are pulled through (e.g.
    /// `docker-virtual`): a push to one of its local repositories names the image under
    /// this repository key instead, so `host/docker-virtual/app` is refreshed by a push
    /// to `docker-local`. Default: the repository key the event names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_repo_name: Option<String>,
}

/// A generic receiver: its secret, and what a call does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericReceiver {
    /// The name of the secret in the project.
    pub secret_ref: String,
    /// What a call does (Kargo's form). Without actions, the call's JSON names the
    /// repositories whose Warehouses look again (`repoURL`, `repoURLs`; neither: every
    /// Warehouse of the project).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<GenericWebhookAction>,
}

/// One action of a generic receiver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericWebhookAction {
    /// What to do: `Refresh` (the only action, as in Kargo).
    pub action: GenericWebhookActionKind,
    /// The resources to act on, by name.
    pub target_selection_criteria: Vec<GenericWebhookTarget>,
}

/// What a generic receiver's action does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum GenericWebhookActionKind {
    /// The targets look for new artifacts now.
    #[default]
    Refresh,
}

/// A resource a generic receiver's action acts on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericWebhookTarget {
    /// `Warehouse` (the only kind, as in Kargo).
    pub kind: GenericWebhookTargetKind,
    /// The Warehouse's name.
    pub name: String,
}

/// The kind of a generic receiver's target.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum GenericWebhookTargetKind {
    /// A Warehouse of the project.
    #[default]
    Warehouse,
}

/// Names the Credential that holds a webhook receiver's shared secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecretRef {
    /// The name of the secret in the project.
    pub secret_ref: String,
}

/// The observed state of a project's configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectConfigStatus {
    /// Conditions such as `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The URL of each webhook receiver, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_receivers: Vec<WebhookReceiverStatus>,
    /// How each notification's deliveries went, by name (written by Dray only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<super::NotificationStatus>,
    /// What Dray still has to deliver (notifications and commit statuses), kept here so
    /// that a restart loses nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<super::Outbox>,
}

/// Where a webhook receiver listens.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReceiverStatus {
    /// The receiver's name.
    pub name: String,
    /// The path, relative to the server's URL, that the forge or registry should call.
    pub path: String,
}
