//! `kustomize-set-image`: points a kustomization's `images:` at the Freight's image (tag and
//! digest), as `kustomize edit set image` would, editing `kustomization.yaml` in place and
//! keeping the rest of it exactly as written.
//!
//! Owns choosing the tag and digest and the `images:` entry; lossless editing is in
//! `yaml_doc.rs`. It does not render: `kustomize-build` does.

use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use serde_yaml_ng::{Mapping as PlainMap, Value};
use yaml_edit::{Mapping, MappingBuilder, ScalarValue, SequenceBuilder, YamlNode};

use super::files::{read_text, resolve, write_if_changed};
use super::typed::TypedStep;
use super::yaml_doc::{YamlEdit, as_str, string_like};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "kustomize-set-image";

/// The file names kustomize looks for, in its order.
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Configuration of `kustomize-set-image`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The directory holding `kustomization.yaml`, relative to the work directory.
    path: String,
    /// The images to set.
    #[schemars(length(min = 1))]
    images: Vec<Image>,
}

/// One image to set.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Image {
    /// The image repository as the manifests name it, e.g. `registry.example.com/team/app`.
    image: String,
    /// The tag. With neither `tag` nor `digest`, both come from the Freight's image whose
    /// repository is `image`.
    #[serde(default)]
    tag: Option<String>,
    /// The digest (`sha256:…`).
    #[serde(default)]
    digest: Option<String>,
    /// A new repository name to use instead of `image`.
    #[serde(default)]
    new_name: Option<String>,
    /// Pin the Freight's digest as well as its tag (the default), so the Stage runs exactly
    /// the promoted image. Only used when the tag and digest come from the Freight.
    #[serde(default = "yes")]
    use_digest: bool,
}

fn yes() -> bool {
    true
}

/// The `kustomize-set-image` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KustomizeSetImage;

#[async_trait]
impl TypedStep for KustomizeSetImage {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

/// What one `images:` entry must say.
struct Target {
    name: String,
    new_name: Option<String>,
    tag: Option<String>,
    digest: Option<String>,
}

impl Target {
    /// The entry's fields this step owns: (key, value, whether to remove it when unset).
    /// `newName` is left alone when unset; a tag or digest left over would pin the wrong
    /// image, so those are removed.
    fn fields(&self) -> [(&'static str, Option<&str>, bool); 3] {
        [
            ("newName", self.new_name.as_deref(), false),
            ("newTag", self.tag.as_deref(), true),
            ("digest", self.digest.as_deref(), true),
        ]
    }

    fn describe(&self) -> String {
        let mut to = self
            .new_name
            .clone()
            .map(|n| format!("{n}:"))
            .unwrap_or_default();
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => to.push_str(&format!("{tag}@{digest}")),
            (Some(tag), None) => to.push_str(tag),
            (None, Some(digest)) => to.push_str(digest),
            (None, None) => {}
        }
        format!("set image {} to {to}", self.name)
    }
}

fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    if config.images.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `images`: list at least one image to set"
        )));
    }
    let targets = config
        .images
        .iter()
        .map(|image| target(ctx, image))
        .collect::<Result<Vec<_>, _>>()?;
    let dir = resolve(ctx, &config.path, true)?;
    let Some(file_name) = KUSTOMIZATION_FILES.iter().find(|f| dir.join(f).is_file()) else {
        return Err(StepOutcome::failed(format!(
            "no kustomization.yaml in `{}`; point `path` at the directory that holds it",
            config.path
        )));
    };
    let shown = Path::new(&config.path)
        .join(file_name)
        .to_string_lossy()
        .into_owned();
    let file = resolve(ctx, &shown, true)?;
    let text = read_text(&file, &shown)?;
    let edit = YamlEdit::parse(&text, &shown)?;
    let Some(root) = edit.doc.as_mapping() else {
        return Err(StepOutcome::failed(format!(
            "`{shown}` is not a kustomization (no map at its top level)"
        )));
    };
    let mut expected = edit.before.clone();
    for target in &targets {
        set(&root, target, &shown)?;
        set_plain(&mut expected, target);
    }
    let edited = edit.finish(&expected, &shown)?;
    if write_if_changed(&file, &edited)? {
        ctx.log(&format!("updated images in `{shown}`"));
    }
    let message = targets
        .iter()
        .map(Target::describe)
        .collect::<Vec<_>>()
        .join("\n");
    let mut outputs = Map::new();
    outputs.insert("commitMessage".to_owned(), Json::from(message));
    Ok(StepOutcome::succeeded(outputs))
}

/// The tag and digest for `image`: from the config, or else from the Freight.
fn target(ctx: &StepContext, image: &Image) -> Result<Target, StepOutcome> {
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let (mut tag, mut digest) = (non_empty(&image.tag), non_empty(&image.digest));
    // The Freight's image is the one `newName` points at, else the one named `image`
    // (so `newName` may also send the Freight's image through a mirror).
    let new_name = non_empty(&image.new_name);
    if tag.is_none() && digest.is_none() {
        let by_new_name = new_name
            .as_deref()
            .and_then(|name| ctx.freight.images.iter().find(|i| i.repo_url == name));
        let by_image = || {
            ctx.freight
                .images
                .iter()
                .find(|i| i.repo_url == image.image)
        };
        let Some(found) = by_new_name.or_else(by_image) else {
            let repos = ctx
                .freight
                .images
                .iter()
                .map(|i| format!("`{}`", i.repo_url))
                .collect::<Vec<_>>();
            let held = if repos.is_empty() {
                "no images".to_owned()
            } else {
                repos.join(", ")
            };
            return Err(StepOutcome::failed(format!(
                "Freight `{}` has no image `{}` (it holds {held}); set `tag` or `digest`, or fix \
                 `image`",
                ctx.freight.alias, image.image
            )));
        };
        tag = Some(found.tag.clone()).filter(|t| !t.is_empty());
        digest = Some(found.digest.clone()).filter(|d| image.use_digest && !d.is_empty());
        if tag.is_none() && digest.is_none() {
            return Err(StepOutcome::failed(format!(
                "Freight `{}` image `{}` has no tag{}; set `tag` or `digest`",
                ctx.freight.alias,
                image.image,
                if image.use_digest {
                    " or digest"
                } else {
                    " (and `useDigest` is false)"
                }
            )));
        }
    }
    Ok(Target {
        name: image.image.clone(),
        new_name: non_empty(&image.new_name),
        tag,
        digest,
    })
}

/// Makes the `images:` entry named `target.name` say what `target` says.
fn set(root: &Mapping, target: &Target, shown: &str) -> Result<(), StepOutcome> {
    let images = match root.get("images") {
        Some(YamlNode::Sequence(seq)) => seq,
        Some(YamlNode::Scalar(s)) if s.is_null() => return add_images(root, target),
        None => return add_images(root, target),
        Some(_) => {
            return Err(StepOutcome::failed(format!(
                "`images` in `{shown}` is not a list"
            )));
        }
    };
    let existing = images.values().find_map(|node| match node {
        YamlNode::Mapping(m)
            if m.get("name").as_ref().and_then(as_str).as_deref() == Some(&target.name) =>
        {
            Some(m)
        }
        _ => None,
    });
    let Some(entry) = existing else {
        images.push(entry_for(target)?);
        return Ok(());
    };
    for (key, value, clear) in target.fields() {
        match value {
            Some(v) => {
                let old = entry.get(key);
                entry.set(key, string_like(old.as_ref(), v));
            }
            None if clear => {
                entry.remove(key);
            }
            None => {}
        }
    }
    Ok(())
}

/// The same change as [`set`], on the plain data the file must hold afterwards.
fn set_plain(expected: &mut Value, target: &Target) {
    let Value::Mapping(root) = expected else {
        return;
    };
    let images = root.entry(Value::from("images")).or_insert(Value::Null);
    if !images.is_sequence() {
        *images = Value::Sequence(Vec::new());
    }
    let Value::Sequence(list) = images else {
        return;
    };
    let named = |e: &Value| e.get("name").and_then(Value::as_str) == Some(&target.name);
    let index = list.iter().position(named).unwrap_or_else(|| {
        let mut entry = PlainMap::new();
        entry.insert(Value::from("name"), Value::from(target.name.as_str()));
        list.push(Value::Mapping(entry));
        list.len() - 1
    });
    let Value::Mapping(entry) = &mut list[index] else {
        return;
    };
    for (key, value, clear) in target.fields() {
        match value {
            Some(v) => {
                entry.insert(Value::from(key), Value::from(v));
            }
            None if clear => {
                entry.remove(key);
            }
            None => {}
        }
    }
}

/// Adds an `images:` list holding one entry for `target`.
fn add_images(root: &Mapping, target: &Target) -> Result<(), StepOutcome> {
    let list = SequenceBuilder::new()
        .item(entry_for(target)?)
        .build_document();
    match list.as_sequence() {
        Some(seq) => {
            root.set("images", seq);
            Ok(())
        }
        None => Err(StepOutcome::errored("could not build the `images:` list")),
    }
}

/// A new `images:` entry for `target`.
fn entry_for(target: &Target) -> Result<Mapping, StepOutcome> {
    let mut builder = MappingBuilder::new().pair("name", ScalarValue::string(&target.name));
    for (key, value, _) in target.fields() {
        if let Some(v) = value {
            builder = builder.pair(key, ScalarValue::string(v));
        }
    }
    builder
        .build_document()
        .as_mapping()
        .ok_or_else(|| StepOutcome::errored("could not build an `images:` entry"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{DIGEST, IMAGE, TAG, context, failed, outputs};
    use serde_json::json;

    const KUSTOMIZATION: &str = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
# The app, deployed as is.
resources:
  - deployment.yaml
images:
  - name: registry.example.com/team/other # not promoted here
    newTag: \"2.0.0\"
  - name: registry.example.com/team/app
    newTag: \"1.0.0\"
    digest: sha256:old
";

    const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
        - name: app
          image: registry.example.com/team/app
";

    async fn set_image(dir: &Path, config: Json) -> StepOutcome {
        KustomizeSetImage.run(&context(dir), config).await
    }

    fn kubectl_kustomize(dir: &Path) -> Option<String> {
        let out = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .ok()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(String::from_utf8(out.stdout).unwrap())
    }

    #[tokio::test]
    async fn the_freight_image_is_set_and_the_rest_kept() {
        let work = tempfile::tempdir().unwrap();
        let app = work.path().join("env/staging");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(app.join("kustomization.yaml"), KUSTOMIZATION).unwrap();
        std::fs::write(app.join("deployment.yaml"), DEPLOYMENT).unwrap();
        let config = json!({"path": "env/staging", "images": [{"image": IMAGE}]});
        let out = outputs(set_image(work.path(), config.clone()).await);
        assert_eq!(
            out["commitMessage"],
            format!("set image {IMAGE} to {TAG}@{DIGEST}")
        );
        let written = std::fs::read_to_string(app.join("kustomization.yaml")).unwrap();
        let want = KUSTOMIZATION
            .replace("newTag: \"1.0.0\"", &format!("newTag: \"{TAG}\""))
            .replace("digest: sha256:old", &format!("digest: {DIGEST}"));
        assert_eq!(written, want);
        outputs(set_image(work.path(), config).await);
        assert_eq!(
            std::fs::read_to_string(app.join("kustomization.yaml")).unwrap(),
            want
        );
        // What kustomize renders is the promoted image, pinned by digest.
        if let Some(rendered) = kubectl_kustomize(&app) {
            assert!(
                rendered.contains(&format!("image: {IMAGE}:{TAG}@{DIGEST}")),
                "{rendered}"
            );
        }
    }

    #[tokio::test]
    async fn an_images_list_is_added_when_missing() {
        let work = tempfile::tempdir().unwrap();
        let original = "resources:\n- deployment.yaml # the app\n";
        std::fs::write(work.path().join("kustomization.yaml"), original).unwrap();
        std::fs::write(work.path().join("deployment.yaml"), DEPLOYMENT).unwrap();
        let config = json!({"path": ".", "images": [
            {"image": IMAGE, "useDigest": false, "newName": "mirror.example.com/app"},
        ]});
        let out = outputs(set_image(work.path(), config).await);
        assert_eq!(
            out["commitMessage"],
            format!("set image {IMAGE} to mirror.example.com/app:{TAG}")
        );
        let written = std::fs::read_to_string(work.path().join("kustomization.yaml")).unwrap();
        assert!(written.starts_with(original), "{written}");
        let parsed: Value = serde_yaml_ng::from_str(&written).unwrap();
        assert_eq!(parsed["images"][0]["name"], Value::from(IMAGE));
        assert_eq!(
            parsed["images"][0]["newName"],
            Value::from("mirror.example.com/app")
        );
        assert_eq!(parsed["images"][0]["newTag"], Value::from(TAG));
        assert!(parsed["images"][0].get("digest").is_none());
        if let Some(rendered) = kubectl_kustomize(work.path()) {
            assert!(
                rendered.contains(&format!("image: mirror.example.com/app:{TAG}\n")),
                "{rendered}"
            );
        }
    }

    #[tokio::test]
    async fn an_empty_images_key_is_filled_where_it_stands() {
        let work = tempfile::tempdir().unwrap();
        for (original, want) in [
            (
                "images:\nresources:\n- deployment.yaml\n",
                format!(
                    "images:\n  - name: {IMAGE}\n    newTag: {TAG}\nresources:\n- deployment.yaml\n"
                ),
            ),
            (
                "images: [] # none yet\nresources: [deployment.yaml]\n",
                format!(
                    "images: [{{name: {IMAGE}, newTag: {TAG}}}] # none yet\nresources: [deployment.yaml]\n"
                ),
            ),
        ] {
            std::fs::write(work.path().join("kustomization.yaml"), original).unwrap();
            let config = json!({"path": ".", "images": [{"image": IMAGE, "useDigest": false}]});
            outputs(set_image(work.path(), config).await);
            let written = std::fs::read_to_string(work.path().join("kustomization.yaml")).unwrap();
            assert_eq!(written, want);
        }
    }

    #[tokio::test]
    async fn an_explicit_tag_drops_a_stale_digest() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("kustomization.yaml"), KUSTOMIZATION).unwrap();
        let config = json!({"path": "", "images": [{"image": IMAGE, "tag": "1.20"}]});
        let out = outputs(set_image(work.path(), config).await);
        assert_eq!(out["commitMessage"], format!("set image {IMAGE} to 1.20"));
        let written = std::fs::read_to_string(work.path().join("kustomization.yaml")).unwrap();
        assert!(
            written.ends_with(&format!("  - name: {IMAGE}\n    newTag: \"1.20\"\n")),
            "{written}"
        );
    }

    #[tokio::test]
    async fn an_image_missing_from_the_freight_lists_what_it_holds() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("kustomization.yaml"), KUSTOMIZATION).unwrap();
        let config = json!({"path": ".", "images": [{"image": "registry.example.com/team/web"}]});
        let reason = failed(set_image(work.path(), config).await);
        assert_eq!(
            reason,
            format!(
                "Freight `tidy-otter` has no image `registry.example.com/team/web` (it holds \
                 `{IMAGE}`); set `tag` or `digest`, or fix `image`"
            )
        );
        let reason = failed(
            set_image(
                work.path(),
                json!({"path": "nowhere", "images": [{"image": IMAGE}]}),
            )
            .await,
        );
        assert!(
            reason.starts_with("no kustomization.yaml in `nowhere`"),
            "{reason}"
        );
        let reason = failed(
            set_image(
                work.path(),
                json!({"path": ".", "images": [{"image": IMAGE, "tags": "1"}]}),
            )
            .await,
        );
        assert!(reason.contains("unknown field `tags`"), "{reason}");
    }
}
