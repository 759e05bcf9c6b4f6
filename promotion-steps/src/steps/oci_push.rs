//! `oci-push`: copies or retags an OCI artifact (an image, a multi-arch index, a Helm
//! chart) to a tag of another or the same repository (Kargo's `oci-push`).
//!
//! The source manifest is read by tag or digest (checked), annotations are added as
//! Kargo scopes them (`index:`, `manifest:`, unprefixed = image manifests), and every
//! blob the destination lacks is mounted from the source repository when both are in one
//! registry, else streamed across and checked against its digest and size before the
//! upload is completed. Image manifests of an index are pushed by digest, then the top
//! manifest under the tag. A tag that already points elsewhere is moved, as Kargo does
//! (and logged); one that already holds the same digest is left as it is. Across
//! repositories the artifact may be at most [`MAX_ARTIFACT`] bytes (compressed), as in
//! Kargo. What was pushed is the effect [`Effect::PushedArtifact`] and the outputs
//! `image`, `digest` and `tag`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::oci::{Access, Descriptor, Manifest, MediaKind, OciError, Reference, Repository};
use crate::{Effect, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "oci-push";

/// The largest artifact (config and layers, compressed, summed over an index's images)
/// copied across repositories: Kargo's default.
const MAX_ARTIFACT: u64 = 1 << 30;

/// Configuration of `oci-push`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The source: `registry/repository:tag` or `registry/repository@sha256:…`;
    /// `oci://…` for a Helm chart (then `helm` Credentials are used). `imageRef`, the
    /// field's earlier name in Kargo, is read too.
    #[serde(alias = "imageRef")]
    src_ref: String,
    /// The destination, with its tag: `registry/repository:tag` (`oci://…` for a chart).
    /// The source's repository with another tag retags in place.
    dest_ref: String,
    /// Annotations to set on the pushed manifests: `index:<key>` on an index only,
    /// `manifest:<key>` or `<key>` on image manifests. The source's are kept.
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    /// Skip TLS certificate verification for both registries. Discouraged.
    #[serde(default, rename = "insecureSkipTLSVerify")]
    insecure_skip_tls_verify: bool,
}

/// The `oci-push` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OciPush;

#[async_trait]
impl TypedStep for OciPush {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Registry;
    type Config = Config;

    fn check(&self, config: &Value) -> Vec<crate::ConfigProblem> {
        [
            crate::oci::check_reference(config, "srcRef", false),
            crate::oci::check_reference(config, "destRef", true),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match push(ctx, &config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

/// Annotations split by where they go.
#[derive(Default, Debug, PartialEq)]
struct Scoped {
    index: Map<String, Value>,
    manifest: Map<String, Value>,
}

fn scoped(annotations: &BTreeMap<String, String>) -> Scoped {
    let mut scoped = Scoped::default();
    for (key, value) in annotations {
        let value = Value::String(value.clone());
        if let Some(key) = key.strip_prefix("index:") {
            scoped.index.insert(key.to_owned(), value);
        } else {
            let key = key.strip_prefix("manifest:").unwrap_or(key);
            scoped.manifest.insert(key.to_owned(), value);
        }
    }
    scoped
}

/// What will be pushed: image manifests by digest (an index's), then `top` by tag.
struct Plan {
    blobs: Vec<Descriptor>,
    children: Vec<Manifest>,
    top: Manifest,
}

async fn push(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let src = Reference::parse("srcRef", &config.src_ref).map_err(|e| e.outcome())?;
    let dst = Reference::parse("destRef", &config.dest_ref).map_err(|e| e.outcome())?;
    let Some(tag) = dst.tag.clone().filter(|_| dst.digest.is_none()) else {
        return Err(StepOutcome::failed(format!(
            "invalid `destRef` `{}`: name the tag to push to (`registry/repository:tag`), \
             without a digest",
            config.dest_ref
        )));
    };
    let http = crate::oci::http_client(ctx, config.insecure_skip_tls_verify, &src)?;
    let (src_credentials, src_kind) = crate::oci::credentials(ctx, &src);
    let (dst_credentials, dst_kind) = crate::oci::credentials(ctx, &dst);
    let mut from = Repository::new(&http, &src, src_credentials, src_kind, Access::Pull)
        .map_err(|e| e.outcome())?;
    let mut to = Repository::new(&http, &dst, dst_credentials, dst_kind, Access::Push)
        .map_err(|e| e.outcome())?;
    to.mounting_from(&src);
    let annotations = scoped(&config.annotations);
    let work = async {
        let plan = plan(&mut from, &src, &annotations).await?;
        let digest = plan.top.digest.clone();
        let image = format!("{}:{tag}", dst.repository_url());
        match to.manifest_digest(&tag).await? {
            Some(held) if held.eq_ignore_ascii_case(&digest) => {
                ctx.log(&format!(
                    "`{image}` already holds `{digest}`; nothing to push"
                ));
                return Ok((image, digest));
            }
            Some(held) => ctx.log(&format!(
                "`{image}` points at `{held}`; moving it to `{digest}`"
            )),
            None => {}
        }
        if src.repository_url() != dst.repository_url() {
            let total: u64 = plan.blobs.iter().map(|b| b.size).sum();
            if total > MAX_ARTIFACT {
                return Err(OciError::TooLarge {
                    what: format!("`{src}` ({total} bytes compressed)"),
                    repo: src.repository_url(),
                    limit: MAX_ARTIFACT >> 20,
                    step: KIND,
                    hint: "retag within the source repository, or copy it with a registry tool",
                });
            }
        }
        let (mut copied, mut mounted) = (0usize, 0usize);
        for blob in &plan.blobs {
            if to.has_blob(&blob.digest).await? {
                continue;
            }
            let mut session = None;
            if to.same_registry(&src) && src.repository != dst.repository {
                match to.mount(&blob.digest, &src.repository).await? {
                    None => {
                        mounted += 1;
                        continue;
                    }
                    Some(opened) => session = Some(opened),
                }
            }
            let mut stream = from.blob(blob, MAX_ARTIFACT, KIND).await?;
            to.upload(&mut stream, session).await?;
            copied += 1;
        }
        for child in &plan.children {
            to.put_manifest(&child.digest, child).await?;
        }
        to.put_manifest(&tag, &plan.top).await?;
        ctx.log(&format!(
            "pushed `{src}` to `{image}` as `{digest}` ({copied} blobs copied, {mounted} \
             mounted, {} already there)",
            plan.blobs.len() - copied - mounted
        ));
        Ok((image, digest))
    };
    let (image, digest) = tokio::select! {
        result = work => result.map_err(|e| e.outcome())?,
        () = ctx.cancel.cancelled() => {
            return Err(StepOutcome::failed(format!("aborted while pushing `{src}` to `{dst}`")));
        }
    };
    let mut outputs = Map::new();
    outputs.insert("image".into(), Value::String(image.clone()));
    outputs.insert("digest".into(), Value::String(digest.clone()));
    outputs.insert("tag".into(), Value::String(tag));
    Ok(StepOutcome::wrote(
        outputs,
        vec![Effect::PushedArtifact { image, digest }],
    ))
}

/// Reads the source's manifests and annotates them.
async fn plan(
    from: &mut Repository,
    src: &Reference,
    annotations: &Scoped,
) -> Result<Plan, OciError> {
    let invalid = |reason: String| OciError::InvalidResponse {
        operation: "fetch the manifest of".into(),
        repo: src.to_string(),
        reason,
    };
    let top = from.manifest(src.manifest_reference()).await?;
    if top.kind == MediaKind::Image {
        let blobs = top.blobs().cloned().collect();
        let top = top.annotated(&annotations.manifest).map_err(invalid)?;
        return Ok(Plan {
            blobs,
            children: Vec::new(),
            top,
        });
    }
    let mut blobs: Vec<Descriptor> = Vec::new();
    let mut children = Vec::new();
    let mut index = top;
    for entry in index.manifests.clone() {
        let child = from.manifest(&entry.digest).await?;
        if child.kind != MediaKind::Image {
            return Err(invalid(format!(
                "its entry `{}` is itself an index; Dray copies one level of index",
                entry.digest
            )));
        }
        for blob in child.blobs() {
            if !blobs.iter().any(|b| b.digest == blob.digest) {
                blobs.push(blob.clone());
            }
        }
        let annotated = child.annotated(&annotations.manifest).map_err(invalid)?;
        if annotated.digest != entry.digest {
            index = index
                .replacing(&entry.digest, &annotated)
                .map_err(invalid)?;
        }
        children.push(annotated);
    }
    let top = index.annotated(&annotations.index).map_err(invalid)?;
    Ok(Plan {
        blobs,
        children,
        top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};
    use serde_json::json;

    #[test]
    fn annotations_are_scoped_as_kargo_scopes_them() {
        let annotations = BTreeMap::from([
            ("index:rev".to_owned(), "abc".to_owned()),
            ("manifest:desc".to_owned(), "app".to_owned()),
            ("org.opencontainers.image.source".to_owned(), "s".to_owned()),
        ]);
        let scoped = scoped(&annotations);
        assert_eq!(scoped.index, *json!({"rev": "abc"}).as_object().unwrap());
        assert_eq!(
            scoped.manifest,
            *json!({"desc": "app", "org.opencontainers.image.source": "s"})
                .as_object()
                .unwrap()
        );
    }

    #[test]
    fn apply_refuses_a_destination_without_a_tag_and_skips_expressions() {
        let problems = OciPush.check_config(&json!({
            "srcRef": "ghcr.io/App:1", "destRef": "ghcr.io/app"
        }));
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["srcRef", "destRef"], "{problems:?}");
        assert!(problems[1].message.contains("names no tag"), "{problems:?}");
        assert!(
            OciPush
                .check_config(&json!({
                    "srcRef": "r/app@${{ imageFrom('r/app').digest }}",
                    "destRef": "r/app:${{ ctx.stage }}"
                }))
                .is_empty()
        );
    }

    #[tokio::test]
    async fn bad_config_is_refused_before_any_request() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let d = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
        for (config, why) in [
            (
                json!({"srcRef": "127.0.0.1:9/app:1", "destRef": "127.0.0.1:9/app"}),
                "name the tag to push to",
            ),
            (
                json!({"srcRef": "127.0.0.1:9/app:1", "destRef": format!("127.0.0.1:9/app:2@{d}")}),
                "without a digest",
            ),
            (
                json!({"srcRef": "127.0.0.1:9/App:1", "destRef": "127.0.0.1:9/app:2"}),
                "invalid `srcRef`",
            ),
            (
                json!({"destRef": "127.0.0.1:9/app:2"}),
                "missing field `srcRef`",
            ),
        ] {
            let reason = failed(OciPush.run(&ctx, config.clone()).await);
            assert!(reason.contains(why), "{config}: {reason}");
        }
    }
}
