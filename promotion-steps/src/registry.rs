//! The built-in steps, by kind.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::Step;

/// Steps by the name used in `uses:`.
#[derive(Clone, Default)]
pub struct StepRegistry {
    steps: BTreeMap<&'static str, Arc<dyn Step>>,
}

impl StepRegistry {
    /// A registry holding `steps`.
    pub fn new(steps: Vec<Arc<dyn Step>>) -> Self {
        StepRegistry {
            steps: steps.into_iter().map(|s| (s.kind(), s)).collect(),
        }
    }

    /// The step named `kind`.
    pub fn get(&self, kind: &str) -> Option<Arc<dyn Step>> {
        self.steps.get(kind).cloned()
    }

    /// What a step of `kind` may change, when `kind` is registered (see [`Step::writes`]).
    pub fn writes(&self, kind: &str) -> Option<crate::Writes> {
        self.steps.get(kind).map(|s| s.writes())
    }

    /// Every registered kind, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.steps.keys().copied().collect()
    }
}

/// Every built-in step.
// One `push` per step, so that adding a step is adding a line.
#[allow(clippy::vec_init_then_push)]
pub fn builtin_steps() -> StepRegistry {
    let mut steps: Vec<Arc<dyn Step>> = Vec::new();
    // git
    steps.push(Arc::new(crate::steps::git_clone::GitClone));
    steps.push(Arc::new(crate::steps::git_clear::GitClear));
    steps.push(Arc::new(crate::steps::git_commit::GitCommit));
    steps.push(Arc::new(crate::steps::git_push::GitPush));
    steps.push(Arc::new(crate::steps::git_tag::GitTag));
    steps.push(Arc::new(crate::steps::github_push::GitHubPush));
    // pull requests
    steps.push(Arc::new(crate::steps::git_open_pr::GitOpenPr));
    steps.push(Arc::new(crate::steps::git_wait_for_pr::GitWaitForPr));
    steps.push(Arc::new(crate::steps::git_merge_pr::GitMergePr));
    // render
    steps.push(Arc::new(
        crate::steps::kustomize_set_image::KustomizeSetImage,
    ));
    steps.push(Arc::new(crate::steps::yaml_update::YamlUpdate));
    steps.push(Arc::new(crate::steps::kustomize_build::KustomizeBuild));
    steps.push(Arc::new(crate::steps::helm_template::HelmTemplate));
    steps.push(Arc::new(crate::steps::helm_update_chart::HelmUpdateChart));
    steps.push(Arc::new(crate::steps::copy::CopyFiles));
    steps.push(Arc::new(crate::steps::delete::Delete));
    steps.push(Arc::new(crate::steps::json_update::JsonUpdate));
    steps.push(Arc::new(crate::steps::toml_update::TomlUpdate));
    steps.push(Arc::new(crate::steps::yaml_merge::YamlMerge));
    steps.push(Arc::new(crate::steps::file_write::FileWrite));
    steps.push(Arc::new(crate::steps::tar::Tar));
    steps.push(Arc::new(crate::steps::untar::Untar));
    // read values into outputs
    steps.push(Arc::new(crate::steps::json_parse::JsonParse));
    steps.push(Arc::new(crate::steps::toml_parse::TomlParse));
    steps.push(Arc::new(crate::steps::yaml_parse::YamlParse));
    steps.push(Arc::new(crate::steps::compose_output::ComposeOutput));
    // control
    steps.push(Arc::new(crate::steps::fail::Fail));
    // Dray's own resources (the engine applies the effects)
    steps.push(Arc::new(crate::steps::set_metadata::SetMetadata));
    steps.push(Arc::new(crate::steps::set_freight_alias::SetFreightAlias));
    // gates
    steps.push(Arc::new(crate::steps::http::Http));
    steps.push(Arc::new(crate::steps::http_download::HttpDownload));
    // OCI registries
    steps.push(Arc::new(crate::steps::oci_download::OciDownload));
    steps.push(Arc::new(crate::steps::oci_push::OciPush));
    // deploy
    steps.push(Arc::new(crate::steps::argocd_update::ArgocdUpdate));
    steps.push(Arc::new(crate::steps::argocd_wait::ArgocdWait));
    StepRegistry::new(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_that_write_declare_what_they_write() {
        let steps = builtin_steps();
        let writing: Vec<_> = steps
            .kinds()
            .into_iter()
            .filter_map(|kind| Some((kind, steps.writes(kind)?)))
            .filter(|(_, writes)| writes.anything())
            .collect();
        assert_eq!(
            writing,
            [
                ("argocd-update", crate::Writes::Deployment),
                ("git-merge-pr", crate::Writes::Forge),
                ("git-open-pr", crate::Writes::Forge),
                ("git-push", crate::Writes::Git),
                ("github-push", crate::Writes::Git),
                ("oci-push", crate::Writes::Registry),
            ]
        );
        assert_eq!(steps.writes("no-such-step"), None);
    }
}
