//! What steps do to the world outside a promotion's work directory, as types: what a kind
//! of step *may* change ([`Writes`], declared by each step through [`crate::Step::writes`])
//! and what one run *did* change ([`Effect`], returned with [`crate::StepOutcome::Succeeded`]).
//!
//! The engine and the recorder read these instead of naming step kinds or sniffing step
//! outputs: a promotion that has started a step that writes is not superseded; a
//! [`Effect::PushedBranch`] becomes the Stage's branch; an
//! [`Effect::RegisteredApplication`] is watched for the Stage's health; an
//! [`Effect::PushedArtifact`] is kept in the record. The changes a step asks of Dray's own
//! resources ([`Effect::SetMetadata`], [`Effect::SetFreightAlias`]) are applied by the
//! engine when the step succeeds (a step never touches the store), and a refusal there
//! fails the step. The outputs users read in `${{ outputs.<alias>.* }}` are separate and
//! unchanged.

use serde::{Deserialize, Serialize};

/// What a kind of step may change outside the promotion's work directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Writes {
    /// Nothing: it reads, renders, commits locally or checks a gate (`git-clone`,
    /// `kustomize-build`, `git-commit`, `http`, waiting for a review).
    Nothing,
    /// A git remote: it pushes a branch or a tag (`git-push`, `github-push`).
    Git,
    /// A forge: it opens or merges a pull request.
    Forge,
    /// A deployment tool: it asks Argo CD to sync what was written to git. While such a
    /// step waits after a push, the promotion is "written to git, waiting for sync".
    Deployment,
    /// An OCI registry: it pushes a manifest under a tag (`oci-push`).
    Registry,
    /// An HTTP service: an `http` request whose method is not safe (`POST`, `PUT`,
    /// `PATCH`, `DELETE`, …). Only [`crate::Step::writes_with`] says it: the kind itself
    /// is a gate that reads.
    Service,
}

impl Writes {
    /// Whether a step of this kind changes anything outside Dray.
    pub fn anything(self) -> bool {
        self != Writes::Nothing
    }
}

/// One change a step made outside the promotion's work directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "camelCase")]
pub enum Effect {
    /// Pushed `commit` to `branch` of the repository at `repo_url` (or found it there).
    #[serde(rename_all = "camelCase")]
    PushedBranch {
        /// The repository.
        #[serde(rename = "repoURL")]
        repo_url: String,
        /// The branch, e.g. `stage/prod`.
        branch: String,
        /// The full commit id the branch holds.
        commit: String,
    },
    /// Pushed tag `tag`, at `commit`, to the repository at `repo_url` (or found it there).
    #[serde(rename_all = "camelCase")]
    PushedTag {
        /// The repository.
        #[serde(rename = "repoURL")]
        repo_url: String,
        /// The tag, e.g. `v1.2.0`.
        tag: String,
        /// The full commit id the tag points at.
        commit: String,
    },
    /// Opened a pull request (or found the one it opened before).
    OpenedPullRequest(PullRequestRef),
    /// Merged a pull request; `commit` is what landed on the target branch.
    MergedPullRequest {
        /// The pull request.
        #[serde(flatten)]
        pr: PullRequestRef,
        /// The commit on the target branch.
        commit: String,
    },
    /// Registered an Argo CD Application for the Stage's health check.
    RegisteredApplication(ArgocdApplication),
    /// Pushed the manifest `digest` to `image` (`registry/repository:tag`), or found it there.
    PushedArtifact {
        /// `registry/repository:tag`.
        image: String,
        /// The manifest's digest, `sha256:…`.
        digest: String,
    },
    /// Asks Dray to merge `values` into the metadata of the Stage or Freight `name` of the
    /// promotion's project (a `null` value removes its key).
    #[serde(rename_all = "camelCase")]
    SetMetadata {
        /// Whose metadata.
        kind: MetadataKind,
        /// The Stage's name or the Freight's name (id).
        name: String,
        /// Key → JSON value.
        values: serde_json::Map<String, serde_json::Value>,
    },
    /// Asks Dray to give Freight `freight` (its name) of the promotion's project the alias
    /// `alias`.
    #[serde(rename_all = "camelCase")]
    SetFreightAlias {
        /// The Freight's name (id).
        freight: String,
        /// The new alias.
        alias: String,
    },
}

/// The resources that hold metadata, spelled as Kargo's `set-metadata` spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum MetadataKind {
    /// A Stage.
    Stage,
    /// A Freight.
    Freight,
}

impl std::fmt::Display for MetadataKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetadataKind::Stage => "Stage",
            MetadataKind::Freight => "Freight",
        })
    }
}

/// A pull request on a forge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequestRef {
    /// The number (GitHub `number`, GitLab `iid`).
    pub number: u64,
    /// The web URL.
    pub url: String,
}

/// An Argo CD Application a promotion synced, and how it was reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgocdApplication {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Argo CD API server it was reached through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
    /// The Kubernetes API server it was reached through (the Kubernetes transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// The revisions (one per matched source) it must report synced.
    pub desired_revisions: Vec<String>,
}

impl Effect {
    /// The branch and commit this effect left on a remote, if it pushed one.
    pub fn pushed(&self) -> Option<(&str, &str, &str)> {
        match self {
            Effect::PushedBranch {
                repo_url,
                branch,
                commit,
            } => Some((repo_url, branch, commit)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn effects_round_trip_through_json_with_a_tag() {
        let effects = vec![
            Effect::PushedBranch {
                repo_url: "http://git/cd.git".into(),
                branch: "stage/dev".into(),
                commit: "abc".into(),
            },
            Effect::MergedPullRequest {
                pr: PullRequestRef {
                    number: 7,
                    url: "http://forge/pr/7".into(),
                },
                commit: "def".into(),
            },
            Effect::RegisteredApplication(ArgocdApplication {
                name: "shop".into(),
                desired_revisions: vec!["abc".into()],
                ..Default::default()
            }),
            Effect::SetMetadata {
                kind: MetadataKind::Freight,
                name: "f1".into(),
                values: json!({"ok": true}).as_object().cloned().unwrap(),
            },
            Effect::SetFreightAlias {
                freight: "f1".into(),
                alias: "rc-1".into(),
            },
            Effect::PushedArtifact {
                image: "registry/app:v1".into(),
                digest: "sha256:d".into(),
            },
        ];
        let value = serde_json::to_value(&effects).unwrap();
        assert_eq!(
            value,
            json!([
                {"effect": "pushedBranch", "repoURL": "http://git/cd.git", "branch": "stage/dev", "commit": "abc"},
                {"effect": "mergedPullRequest", "number": 7, "url": "http://forge/pr/7", "commit": "def"},
                {"effect": "registeredApplication", "name": "shop", "desiredRevisions": ["abc"]},
                {"effect": "setMetadata", "kind": "Freight", "name": "f1", "values": {"ok": true}},
                {"effect": "setFreightAlias", "freight": "f1", "alias": "rc-1"},
                {"effect": "pushedArtifact", "image": "registry/app:v1", "digest": "sha256:d"}
            ])
        );
        let back: Vec<Effect> = serde_json::from_value(value).unwrap();
        assert_eq!(back, effects);
        assert_eq!(
            back[0].pushed(),
            Some(("http://git/cd.git", "stage/dev", "abc"))
        );
        assert_eq!(back[1].pushed(), None);
    }

    #[test]
    fn only_nothing_writes_nothing() {
        assert!(!Writes::Nothing.anything());
        for writes in [
            Writes::Git,
            Writes::Forge,
            Writes::Deployment,
            Writes::Registry,
            Writes::Service,
        ] {
            assert!(writes.anything(), "{writes:?}");
        }
    }
}
