//! Entry points for fuzzing the steps' parsers of untrusted input: each takes raw bytes
//! and returns nothing; a panic, an abort or a stack overflow is a finding.
//!
//! Called by the cargo-fuzz targets in the repository's `fuzz/` and by the bounded
//! property tests of `dray::fuzzing` (which hold the one harness for both crates). Not an
//! API: hidden from the docs, and free to change with the parsers.

use serde_json::Value;

use crate::steps::typed::TypedStep;
use crate::steps::{
    argocd_update, copy, delete, git_clear, git_clone, git_commit, git_merge_pr, git_open_pr,
    git_push, git_wait_for_pr, helm_template, http, kustomize_build, kustomize_set_image,
    yaml_update,
};
use crate::{builtin_steps, parse_config};

fn parse<T: TypedStep>(_step: T, config: &Value) {
    let _ = parse_config::<T::Config>(T::KIND, config.clone());
}

/// A step's `config` (JSON, as the engine hands it over after evaluating `${{ }}`), parsed
/// by every built-in step, and read for its default timeout.
pub fn step_config(data: &[u8]) {
    let Ok(config) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    parse(git_clone::GitClone, &config);
    parse(git_clear::GitClear, &config);
    parse(git_commit::GitCommit, &config);
    parse(git_push::GitPush, &config);
    parse(git_open_pr::GitOpenPr, &config);
    parse(git_wait_for_pr::GitWaitForPr, &config);
    parse(git_merge_pr::GitMergePr, &config);
    parse(kustomize_set_image::KustomizeSetImage, &config);
    parse(yaml_update::YamlUpdate, &config);
    parse(kustomize_build::KustomizeBuild, &config);
    parse(helm_template::HelmTemplate, &config);
    parse(copy::CopyFiles, &config);
    parse(delete::Delete, &config);
    parse(http::Http, &config);
    parse(argocd_update::ArgocdUpdate, &config);
    let registry = builtin_steps();
    for kind in registry.kinds() {
        if let Some(step) = registry.get(kind) {
            let _ = step.default_timeout(&config);
        }
    }
}

/// A branch or tag name as `git-clone` and `git-push` check it, a URL as logs redact it,
/// and a duration (`timeout`, `retry.timeout`).
pub fn git_ref(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::git::is_valid_ref_name(&text);
    let _ = crate::git::redact_url(&text);
    let _ = crate::duration::parse(&text);
}

/// A YAML file of a repository, opened for editing by `yaml-update` and
/// `kustomize-set-image`; the first line is the `yaml-update` key.
pub fn yaml_edit(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (key, file) = text.split_once('\n').unwrap_or(("image.tag", text));
    let _ = crate::steps::key_path::parse("yaml-update", key);
    if let Ok(edit) = crate::steps::yaml_doc::YamlEdit::parse(file, "fuzz.yaml") {
        let _ = edit.finish(&edit.before, "fuzz.yaml");
    }
}
