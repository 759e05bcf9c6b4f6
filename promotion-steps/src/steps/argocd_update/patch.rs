//! What `argocd-update` asks of an Application before any sync, as pure functions of its
//! JSON: that it is authorised for this Stage, which of its sources the config names, and
//! the spec patch (`targetRevision`, `kustomize.images`, `helm.parameters`) — empty when
//! the Application already says it, so a re-run patches nothing.

use serde_json::{Map, Value, json};

use super::config::{AppConfig, HelmImage, SourceConfig};

/// The annotation that authorises a Stage to touch an Application.
pub(super) const AUTHORIZED_STAGE: &str = "dray.dev/authorized-stage";

/// Checks that `app` carries `dray.dev/authorized-stage: <wanted>`; the refusal names what
/// it carries instead and what to do.
pub(super) fn authorised(app: &Value, shown: &str, wanted: &str) -> Result<(), String> {
    match app["metadata"]["annotations"][AUTHORIZED_STAGE].as_str() {
        Some(stage) if stage == wanted => Ok(()),
        other => {
            let has = match other {
                Some(stage) => format!("it is authorised for `{stage}`"),
                None => format!("it has no `{AUTHORIZED_STAGE}` annotation"),
            };
            Err(format!(
                "refusing to touch Argo CD Application `{shown}`: {has}, not `{wanted}`; hint: \
                 annotate it with `{AUTHORIZED_STAGE}: {wanted}` if this Stage may deploy it"
            ))
        }
    }
}

/// The Application's sources as the config sees them.
pub(super) struct Sources<'a> {
    /// Whether the Application has `spec.sources` (else one `spec.source`).
    pub(super) multi: bool,
    /// Its sources, in order.
    pub(super) specs: Vec<Value>,
    /// Each configured source with the index of the Application's source it moves.
    pub(super) matched: Vec<(usize, &'a SourceConfig)>,
}

/// Matches each configured source to one of `app`'s by `repoURL`, or names the one
/// missing with the Application's own.
pub(super) fn sources<'a>(
    app: &Value,
    config: &'a AppConfig,
    shown: &str,
) -> Result<Sources<'a>, String> {
    let multi = app["spec"]["sources"].is_array();
    let specs: Vec<Value> = if multi {
        app["spec"]["sources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    } else {
        vec![app["spec"]["source"].clone()]
    };
    let mut matched = Vec::new();
    for source in &config.sources {
        let index = specs
            .iter()
            .position(|s| same_repo(s["repoURL"].as_str().unwrap_or(""), &source.repo_url))
            .ok_or_else(|| {
                let theirs: Vec<String> = specs
                    .iter()
                    .map(|s| format!("`{}`", s["repoURL"].as_str().unwrap_or("")))
                    .collect();
                format!(
                    "Application `{shown}` has no source with repoURL `{}` (its sources: {})",
                    source.repo_url,
                    theirs.join(", ")
                )
            })?;
        matched.push((index, source));
    }
    Ok(Sources {
        multi,
        specs,
        matched,
    })
}

/// A spec patch and the names of the fields it sets (empty: nothing to patch).
pub(super) struct SpecPatch {
    /// The merge patch of `spec`: `{"sources": [...]}` or `{"source": {...}}`.
    pub(super) spec: Value,
    /// The fields it changes, e.g. `` `targetRevision`, `kustomize.images` ``.
    pub(super) fields: Vec<&'static str>,
}

/// The patch that brings the matched sources to what the config asks.
pub(super) fn spec_patch(sources: &Sources) -> SpecPatch {
    let mut patched = sources.specs.clone();
    let mut single_delta = Map::new();
    let mut fields: Vec<&'static str> = Vec::new();
    for (index, source) in &sources.matched {
        let (delta, names) = source_changes(&patched[*index], source);
        for (key, value) in &delta {
            patched[*index][key] = if key == "targetRevision" {
                value.clone()
            } else {
                let mut merged = patched[*index][key].clone();
                for (k, v) in value.as_object().into_iter().flatten() {
                    merged[k] = v.clone();
                }
                merged
            };
        }
        single_delta.extend(delta);
        for name in names {
            if !fields.contains(&name) {
                fields.push(name);
            }
        }
    }
    let spec = if sources.multi {
        json!({"sources": patched})
    } else {
        json!({"source": single_delta})
    };
    SpecPatch { spec, fields }
}

/// The image an override is for: the part before `=`, else the reference without its
/// tag or digest (a `:` before the last `/` is a registry port).
pub(super) fn image_name(image: &str) -> &str {
    if let Some((name, _)) = image.split_once('=') {
        return name;
    }
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(colon) if colon > image.rfind('/').unwrap_or(0) => &image[..colon],
        _ => image,
    }
}

/// `current` with each of `images` replacing the entry for the same image, or appended.
fn merge_images(current: &Value, images: &[String]) -> Value {
    let mut list: Vec<Value> = current.as_array().cloned().unwrap_or_default();
    for image in images {
        let name = image_name(image);
        match list
            .iter_mut()
            .find(|v| v.as_str().is_some_and(|v| image_name(v) == name))
        {
            Some(slot) => *slot = json!(image),
            None => list.push(json!(image)),
        }
    }
    Value::Array(list)
}

/// `current` Helm parameters with each of `images` set by name, or appended.
fn merge_parameters(current: &Value, images: &[HelmImage]) -> Value {
    let mut list: Vec<Value> = current.as_array().cloned().unwrap_or_default();
    for image in images {
        match list
            .iter_mut()
            .find(|p| p["name"].as_str() == Some(image.key.as_str()))
        {
            Some(slot) => slot["value"] = json!(image.value),
            None => list.push(json!({"name": image.key, "value": image.value})),
        }
    }
    Value::Array(list)
}

/// The changes `source` asks of the Application's source `spec`: the changed fields
/// (for a merge patch) and their names.
fn source_changes(spec: &Value, source: &SourceConfig) -> (Map<String, Value>, Vec<&'static str>) {
    let mut delta = Map::new();
    let mut names = Vec::new();
    if source.update_target_revision
        && spec["targetRevision"].as_str() != Some(source.desired_revision.as_str())
    {
        delta.insert("targetRevision".into(), json!(source.desired_revision));
        names.push("`targetRevision`");
    }
    if let Some(kustomize) = &source.kustomize {
        let current = &spec["kustomize"]["images"];
        let merged = merge_images(current, &kustomize.images);
        if merged != *current {
            delta.insert("kustomize".into(), json!({"images": merged}));
            names.push("`kustomize.images`");
        }
    }
    if let Some(helm) = &source.helm {
        let current = &spec["helm"]["parameters"];
        let merged = merge_parameters(current, &helm.images);
        if merged != *current {
            delta.insert("helm".into(), json!({"parameters": merged}));
            names.push("`helm.parameters`");
        }
    }
    (delta, names)
}

/// Whether two repository URLs name the same repository (case, a trailing `/` or `.git`
/// aside).
pub(super) fn same_repo(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        u.trim_end_matches('/')
            .trim_end_matches(".git")
            .to_ascii_lowercase()
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_config(sources: Value) -> AppConfig {
        serde_json::from_value(json!({"name": "shop", "sources": sources})).unwrap()
    }

    #[test]
    fn commits_and_repos_compare_loosely() {
        use crate::argocd::{is_commit, same_commit};
        assert!(is_commit("4b825dc") && !is_commit("main") && !is_commit("abc"));
        assert!(same_commit(
            "4B825DC642CB6EB9A060E54BF8D69288FBEE4904",
            "4b825dc6"
        ));
        assert!(!same_commit("", "4b825dc6"));
        assert!(same_repo(
            "https://git.example.com/cd.git/",
            "https://git.example.com/cd"
        ));
    }

    #[test]
    fn image_overrides_replace_the_same_image_and_are_idempotent() {
        assert_eq!(
            image_name("registry:5000/team/app:1.2"),
            "registry:5000/team/app"
        );
        assert_eq!(image_name("app@sha256:abc"), "app");
        assert_eq!(image_name("nginx=registry/nginx:1"), "nginx");
        assert_eq!(image_name("registry:5000/app"), "registry:5000/app");
        let current = json!(["registry/app:1.0", "other:2"]);
        let merged = merge_images(
            &current,
            &["registry/app:1.1".to_owned(), "new@sha256:ff".to_owned()],
        );
        assert_eq!(
            merged,
            json!(["registry/app:1.1", "other:2", "new@sha256:ff"])
        );
        assert_eq!(
            merge_images(&merged, &["registry/app:1.1".to_owned()]),
            merged
        );
        let images = [HelmImage {
            key: "image.tag".into(),
            value: "1.1".into(),
        }];
        let params = merge_parameters(
            &json!([{"name": "image.tag", "value": "1.0", "forceString": true}]),
            &images,
        );
        assert_eq!(
            params,
            json!([{"name": "image.tag", "value": "1.1", "forceString": true}])
        );
        assert_eq!(
            merge_parameters(&Value::Null, &images),
            json!([{"name": "image.tag", "value": "1.1"}])
        );
    }

    #[test]
    fn only_the_authorised_stage_may_touch_an_application() {
        let app = json!({"metadata": {"annotations": {AUTHORIZED_STAGE: "demo:dev"}}});
        assert!(authorised(&app, "shop", "demo:dev").is_ok());
        let refused = authorised(&app, "shop", "demo:prod").unwrap_err();
        assert!(
            refused.contains("it is authorised for `demo:dev`, not `demo:prod`"),
            "{refused}"
        );
        let refused = authorised(&json!({}), "shop", "demo:prod").unwrap_err();
        assert!(
            refused.contains("it has no `dray.dev/authorized-stage` annotation"),
            "{refused}"
        );
    }

    #[test]
    fn a_patch_sets_only_what_differs_and_a_missing_source_is_named() {
        let rev = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let config = app_config(json!([{
            "repoURL": "https://git.example.com/cd.git", "desiredRevision": rev,
            "updateTargetRevision": true, "kustomize": {"images": ["app:1.1"]}
        }]));
        let app = json!({"spec": {"source": {
            "repoURL": "https://git.example.com/cd", "targetRevision": "stage/dev",
            "kustomize": {"images": ["app:1.0"]}
        }}});
        let found = sources(&app, &config, "shop").unwrap();
        assert!(!found.multi);
        let patch = spec_patch(&found);
        assert_eq!(patch.fields, ["`targetRevision`", "`kustomize.images`"]);
        assert_eq!(
            patch.spec,
            json!({"source": {"targetRevision": rev, "kustomize": {"images": ["app:1.1"]}}})
        );
        let done = json!({"spec": {"source": {
            "repoURL": "https://git.example.com/cd", "targetRevision": rev,
            "kustomize": {"images": ["app:1.1"]}
        }}});
        assert!(
            spec_patch(&sources(&done, &config, "shop").unwrap())
                .fields
                .is_empty()
        );
        let other = json!({"spec": {"sources": [{"repoURL": "https://git.example.com/other"}]}});
        let missing = sources(&other, &config, "shop").err().unwrap();
        assert!(
            missing.contains("has no source with repoURL `https://git.example.com/cd.git` (its sources: `https://git.example.com/other`)"),
            "{missing}"
        );
    }
}
