//! `Warehouse`: a subscription to artifact sources (OCI image repositories, git config
//! repositories and Helm chart repositories) from which Freight is minted.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, Time, optional_duration_string};

/// A Warehouse watches image and git repositories and mints Freight.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "dray.dev",
    version = "v1alpha1",
    kind = "Warehouse",
    namespaced,
    status = "WarehouseStatus",
    shortname = "wh"
)]
#[serde(rename_all = "camelCase")]
pub struct WarehouseSpec {
    /// The artifact sources. Each piece of Freight holds one artifact per subscription.
    pub subscriptions: Vec<RepoSubscription>,
    /// How often to look for new artifacts when no webhook says so (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_string")]
    pub interval: Option<String>,
    /// `Automatic` (default) mints Freight on discovery; `Manual` only records what it found.
    #[serde(default)]
    pub freight_creation_policy: FreightCreationPolicy,
    /// A condition the newest combination of artifacts must meet to be minted
    /// automatically (e.g. the image tag equals the config tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freight_creation_criteria: Option<FreightCreationCriteria>,
}

/// The Warehouse condition that carries `freightCreationCriteria`'s verdict on the newest
/// combination (`CriteriaSatisfied`, `CriteriaNotSatisfied`, `CriteriaEvaluationFailed`).
pub const CRITERIA_CONDITION: &str = "FreightCreationCriteriaSatisfied";

/// When discovery may mint the combination it found.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreightCreationCriteria {
    /// A CEL expression over the candidate's artifacts (`imageFrom(repoURL)`,
    /// `commitFrom(repoURL)`) that must be true, e.g.
    /// `imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag`.
    pub expression: String,
}

/// Whether discovery mints Freight by itself.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FreightCreationPolicy {
    /// Mint Freight whenever discovery finds a new combination of artifacts.
    #[default]
    Automatic,
    /// Record discovered artifacts; Freight is created by hand.
    Manual,
}

/// One artifact source. Exactly one of `image`, `git` and `chart` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepoSubscription {
    /// An OCI image repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSubscription>,
    /// A git repository holding configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSubscription>,
    /// A Helm chart, in a classic chart repository or an OCI registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<ChartSubscription>,
}

impl RepoSubscription {
    /// What the subscription follows; `None` when none of `image`, `git` and `chart` is set.
    pub fn kind(&self) -> Option<SubscriptionKind> {
        match (&self.image, &self.git, &self.chart) {
            (Some(_), _, _) => Some(SubscriptionKind::Image),
            (None, Some(_), _) => Some(SubscriptionKind::Git),
            (None, None, Some(_)) => Some(SubscriptionKind::Chart),
            (None, None, None) => None,
        }
    }

    /// Whether the subscription posts commit statuses (`commitStatuses` of its `git` or
    /// `image`).
    pub fn posts_commit_statuses(&self) -> bool {
        match (&self.image, &self.git) {
            (Some(image), _) => image.commit_statuses,
            (None, Some(git)) => git.commit_statuses,
            (None, None) => false,
        }
    }

    /// The subscribed repository's URL.
    pub fn repo_url(&self) -> Option<&str> {
        match (&self.image, &self.git, &self.chart) {
            (Some(image), _, _) => Some(&image.repo_url),
            (None, Some(git), _) => Some(&git.repo_url),
            (None, None, Some(chart)) => Some(&chart.repo_url),
            (None, None, None) => None,
        }
    }
}

/// What a subscription follows, as its status and the tables say (`image`, `git`, `chart`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SubscriptionKind {
    /// An OCI image repository.
    Image,
    /// A git repository.
    Git,
    /// A Helm chart.
    Chart,
    /// None of `image`, `git` and `chart` is set (`dray apply` refuses that; discovery
    /// says so).
    #[default]
    Unknown,
}

impl SubscriptionKind {
    /// `image`, `git` or `chart`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionKind::Image => "image",
            SubscriptionKind::Git => "git",
            SubscriptionKind::Chart => "chart",
            SubscriptionKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for SubscriptionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the newest acceptable image is chosen.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ImageSelectionStrategy {
    /// The highest semantic version that satisfies `constraint`.
    #[default]
    SemVer,
    /// The lexically greatest tag.
    Lexical,
    /// The most recently built image (from the image config's `created`).
    NewestBuild,
    /// Follow the digest of the one tag named in `constraint`.
    Digest,
}

/// A subscription to an OCI image repository.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSubscription {
    /// The repository, e.g. `registry.example.com/team/app` (no tag, no scheme).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// How the newest acceptable image is chosen (default `SemVer`).
    #[serde(default)]
    pub image_selection_strategy: ImageSelectionStrategy,
    /// A semver range for `SemVer` (e.g. `^1.0.0`), or the tag to follow for `Digest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// Only tags that are strict semantic versions count (default true; a leading `v` is accepted).
    #[serde(default = "default_true")]
    pub strict_semvers: bool,
    /// Regular expressions; when set, only matching tags are considered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_tags: Vec<String>,
    /// Regular expressions; matching tags are never considered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_tags: Vec<String>,
    /// `os/arch` (e.g. `linux/arm64`) to pick from a multi-platform image index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// How many candidates discovery keeps (default 20, at most 100).
    #[serde(default = "default_discovery_limit")]
    pub discovery_limit: u32,
    /// Talk plain HTTP to this registry (for loopback registries in tests).
    #[serde(default)]
    pub insecure: bool,
    /// A CEL expression over the tag (`tag`); only tags for which it is true are
    /// considered, e.g. `int(tag.split('-')[1]) >= 100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression_filter: Option<String>,
    /// Post commit statuses (GitHub) / commit statuses (GitLab) to the commit the image was
    /// built from, one per Stage (`dray/<project>/<stage>`), as for a git subscription. The
    /// commit is named by the image's `org.opencontainers.image.source` (the repository)
    /// and `org.opencontainers.image.revision` (the commit) labels or manifest annotations;
    /// an image without both posts nothing. Needs a `git` Credential for the source
    /// repository whose token may write statuses (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commit_statuses: bool,
    /// Which forge hosts the image's source repository and where its API is, for commit
    /// statuses on a host other than `github.com` or `gitlab.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<ForgeRef>,
}

/// How the config commit is chosen.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CommitSelectionStrategy {
    /// The newest commit on `branch`.
    #[default]
    NewestFromBranch,
    /// The tag with the highest semantic version matching `semverConstraint`.
    SemVer,
    /// The lexically greatest tag.
    Lexical,
    /// The most recently created tag.
    NewestTag,
}

/// A subscription to a git repository.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSubscription {
    /// The repository URL: `https://`, `http://`, `file://` or `ssh://`.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// How the commit is chosen (default `NewestFromBranch`).
    #[serde(default)]
    pub commit_selection_strategy: CommitSelectionStrategy,
    /// The branch to follow for `NewestFromBranch` (default: the remote's default branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// A semver range for the `SemVer` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver_constraint: Option<String>,
    /// For `SemVer`: only tags that are full `major.minor.patch` versions count (default
    /// true; a leading `v` is accepted). False also takes `1.2` and `v1` (as `1.2.0`, `1.0.0`).
    #[serde(default = "default_true")]
    pub strict_semvers: bool,
    /// Regular expressions; when set, only matching tags are considered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_tags: Vec<String>,
    /// Regular expressions; matching tags are never considered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_tags: Vec<String>,
    /// Only commits touching these paths count (plain prefix, `glob:` or `regex:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_paths: Vec<String>,
    /// Commits touching only these paths never count (plain prefix, `glob:` or `regex:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_paths: Vec<String>,
    /// How many candidates discovery keeps (default 20, at most 100).
    #[serde(default = "default_discovery_limit")]
    pub discovery_limit: u32,
    /// A CEL expression over a commit's fields (`id`, `subject`, `message`, `author`,
    /// `committer`, `commitDate`, `branch`, `tag`); only commits for which it is true
    /// count (and count towards `discoveryLimit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression_filter: Option<String>,
    /// An RFC 3339 time (`2026-01-31T00:00:00Z`); commits made before it never count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Post commit statuses (GitHub) / commit statuses (GitLab) to the Freight's commit of
    /// this repository, one per Stage (`dray/<project>/<stage>`): pending when promoted,
    /// success when verified, failure when verification fails. Needs a `git` Credential
    /// whose token may write statuses (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commit_statuses: bool,
    /// Which forge hosts the repository and where its API is, for commit statuses on a
    /// host other than `github.com` or `gitlab.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<ForgeRef>,
}

/// The forge a git repository lives on, for commit statuses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgeRef {
    /// `github` or `gitlab` (default: from the host, `github.com` or `gitlab.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ForgeProvider>,
    /// The API's base URL (default: `https://api.github.com`, `https://<host>/api/v3` for
    /// GitHub Enterprise, `https://<host>` for GitLab).
    #[serde(default, rename = "apiURL", skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
}

/// A forge Dray posts commit statuses to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ForgeProvider {
    /// GitHub or GitHub Enterprise.
    Github,
    /// GitLab.
    Gitlab,
}

impl GitSubscription {
    /// `since` as a time: `None` when unset or blank, an error naming the cause when it is
    /// not RFC 3339 with an offset (`2026-01-31T00:00:00Z`).
    pub fn since_time(&self) -> Result<Option<jiff::Timestamp>, String> {
        match self
            .since
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|e: jiff::Error| e.to_string()),
            None => Ok(None),
        }
    }
}

/// A subscription to a Helm chart: in a classic chart repository (an `index.yaml` served
/// over `https://` or `http://`, `name` required) or in an OCI registry
/// (`oci://host/path/chart`, the chart is the repository's last path segment, no `name`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChartSubscription {
    /// The chart repository, e.g. `https://charts.example.com` or
    /// `oci://registry.example.com/team/charts/app`.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The chart's name in a classic repository; must be unset for `oci://`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A semver range (e.g. `^1.0.0`); the highest version satisfying it is chosen.
    /// Pre-releases only when the range names one. Unset: the highest release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver_constraint: Option<String>,
    /// How many versions discovery keeps (default 20, at most 100).
    #[serde(default = "default_discovery_limit")]
    pub discovery_limit: u32,
    /// Talk plain HTTP to an `oci://` registry (for loopback registries in tests).
    #[serde(default)]
    pub insecure: bool,
}

fn default_true() -> bool {
    true
}

fn default_discovery_limit() -> u32 {
    20
}

/// The observed state of a Warehouse.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarehouseStatus {
    /// Conditions such as `Ready` (discovery works) and `Healthy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation of the spec that discovery last ran against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When discovery last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_discovered_at: Option<Time>,
    /// The id of the newest Freight this Warehouse minted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_freight_id: Option<String>,
    /// The refresh request (`dray.dev/refresh` annotation) handled last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_refresh: Option<String>,
    /// What each subscription found last time, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<SubscriptionStatus>,
    /// Surprises seen by discovery, e.g. a tag that moved to another digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What one subscription found, or why it found nothing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The subscribed repository.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// What the subscription follows.
    pub kind: SubscriptionKind,
    /// Whether the last discovery worked.
    pub ready: bool,
    /// Why it failed, in words that say what to do.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Recently discovered images (newest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<DiscoveredImageRef>,
    /// Recently discovered commits (newest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<DiscoveredCommitRef>,
    /// Recently discovered chart versions (highest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<DiscoveredChartRef>,
    /// Opaque state that lets the next git discovery skip a fetch when nothing moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::optional_free_form_object")]
    pub git_state: Option<serde_json::Value>,
}

/// A discovered image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredImageRef {
    /// The tag.
    pub tag: String,
    /// The pinned digest.
    pub digest: String,
    /// When the image was built, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// The repository the image was built from (`org.opencontainers.image.source`), if
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The commit the image was built from (`org.opencontainers.image.revision`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// A discovered commit.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredCommitRef {
    /// The commit id.
    pub id: String,
    /// The branch it was found on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The tag it was found under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The subject line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The author.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub author: String,
}

/// A discovered chart version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredChartRef {
    /// The chart's name.
    pub name: String,
    /// The chart version.
    pub version: String,
    /// The manifest digest of an OCI chart, when read (always for the highest version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}
