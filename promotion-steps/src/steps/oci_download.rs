//! `oci-download`: saves one layer of an OCI artifact (a Helm chart, a configuration
//! bundle) into the work directory (Kargo's `oci-download`).
//!
//! The manifest is read by tag or digest (checked against the digest), the layer chosen
//! by `mediaType` (else the first), and streamed to `<outPath>.partial`, checked against
//! its descriptor's digest and size and at most [`MAX_DOWNLOAD`] bytes, then renamed into
//! place, so a refused or aborted download leaves no file. An image index resolves to its
//! `linux/amd64` image, as Kargo's client does. Credentials: an `image` Credential of the
//! repository, or a `helm` one for an `oci://` reference (as Kargo looks them up).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::files::resolve;
use super::typed::TypedStep;
use crate::oci::{Access, Descriptor, Manifest, MediaKind, OciError, Reference, Repository};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "oci-download";

/// The largest layer saved (Kargo's limit).
const MAX_DOWNLOAD: u64 = 100 << 20;

/// Configuration of `oci-download`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The artifact: `registry/repository:tag` or `registry/repository@sha256:…`;
    /// `oci://…` for a Helm chart (then a `helm` Credential is used).
    image_ref: String,
    /// Where to save the layer, relative to the work directory (directories are made).
    out_path: String,
    /// Replace a file that exists at `outPath` (default false: the step fails).
    #[serde(default)]
    allow_overwrite: bool,
    /// The media type of the layer to save: the first layer of that type. Default: the
    /// first layer.
    #[serde(default)]
    media_type: Option<String>,
    /// Skip TLS certificate verification. Discouraged: anyone on the path can answer.
    #[serde(default, rename = "insecureSkipTLSVerify")]
    insecure_skip_tls_verify: bool,
}

/// The `oci-download` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OciDownload;

#[async_trait]
impl TypedStep for OciDownload {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    fn check(&self, config: &serde_json::Value) -> Vec<crate::ConfigProblem> {
        let mut problems: Vec<_> = crate::oci::check_reference(config, "imageRef", false)
            .into_iter()
            .collect();
        if let Some(out) = config["outPath"].as_str().filter(|p| !p.contains("${{")) {
            let path = std::path::Path::new(out);
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                problems.push(crate::ConfigProblem {
                    field: "outPath",
                    message: format!("`{out}` leaves the promotion's work directory"),
                    hint: "use a relative path without `..`".into(),
                });
            }
        }
        problems
    }

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match download(ctx, &config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

async fn download(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let reference = Reference::parse("imageRef", &config.image_ref).map_err(|e| e.outcome())?;
    let out = resolve(ctx, &config.out_path, true)?;
    if out.is_dir() {
        return Err(StepOutcome::failed(format!(
            "`outPath` `{}` is a directory; name the file to save",
            config.out_path
        )));
    }
    if out.exists() && !config.allow_overwrite {
        return Err(StepOutcome::failed(format!(
            "`{}` exists already; set `allowOverwrite: true` to replace it",
            config.out_path
        )));
    }
    let http = crate::oci::http_client(ctx, config.insecure_skip_tls_verify, &reference)?;
    let (credentials, kind) = crate::oci::credentials(ctx, &reference);
    let mut repo = Repository::new(&http, &reference, credentials, kind, Access::Pull)
        .map_err(|e| e.outcome())?;
    let file_name = out
        .file_name()
        .map(|n| format!("{}.partial", n.to_string_lossy()))
        .unwrap_or_else(|| "download.partial".into());
    let partial = out.with_file_name(file_name);
    let fetch = async {
        let manifest = image_of(&mut repo, &reference).await?;
        let layer = layer(&manifest, config.media_type.as_deref(), &reference)?;
        let mut blob = repo.blob(&layer, MAX_DOWNLOAD, KIND).await?;
        if let Some(parent) = partial.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(&config.out_path, &e))?;
        }
        let mut file =
            std::fs::File::create(&partial).map_err(|e| io_error(&config.out_path, &e))?;
        let mut written = 0u64;
        while let Some(chunk) = blob.next_chunk().await? {
            use std::io::Write as _;
            written += chunk.len() as u64;
            file.write_all(&chunk)
                .map_err(|e| io_error(&config.out_path, &e))?;
        }
        file.sync_all()
            .map_err(|e| io_error(&config.out_path, &e))?;
        Ok::<_, OciError>((layer, written))
    };
    let result = tokio::select! {
        result = fetch => result.map_err(|e| e.outcome()),
        () = ctx.cancel.cancelled() => Err(StepOutcome::failed(format!(
            "aborted while downloading `{reference}`"
        ))),
    };
    let (layer, written) = match result {
        Ok(done) => done,
        Err(outcome) => {
            let _ = std::fs::remove_file(&partial);
            return Err(outcome);
        }
    };
    std::fs::rename(&partial, &out).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        StepOutcome::errored(format!(
            "cannot move the download into `{}`: {e}",
            config.out_path
        ))
    })?;
    ctx.log(&format!(
        "downloaded layer `{}` ({written} bytes) of `{reference}` to `{}`",
        layer.digest, config.out_path
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// The image manifest `reference` names; for an index, its `linux/amd64` image.
async fn image_of(repo: &mut Repository, reference: &Reference) -> Result<Manifest, OciError> {
    let manifest = repo.manifest(reference.manifest_reference()).await?;
    if manifest.kind == MediaKind::Image {
        return Ok(manifest);
    }
    let chosen = manifest.manifests.iter().find(|d| {
        d.platform
            .as_ref()
            .is_some_and(|p| p.os == "linux" && p.architecture == "amd64")
    });
    let Some(chosen) = chosen else {
        return Err(OciError::InvalidResponse {
            operation: "fetch the manifest of".into(),
            repo: reference.to_string(),
            reason: "it is an image index without a `linux/amd64` image; name one of its \
                     images by digest in `imageRef`"
                .into(),
        });
    };
    let image = repo.manifest(&chosen.digest).await?;
    if image.kind != MediaKind::Image {
        return Err(OciError::InvalidResponse {
            operation: "fetch the manifest of".into(),
            repo: reference.to_string(),
            reason: "its `linux/amd64` entry is itself an index; name an image by digest".into(),
        });
    }
    Ok(image)
}

/// The layer to save: the first of `media_type`, else the first.
fn layer(
    manifest: &Manifest,
    media_type: Option<&str>,
    reference: &Reference,
) -> Result<Descriptor, OciError> {
    let found = match media_type {
        Some(wanted) => manifest.layers.iter().find(|l| l.media_type == wanted),
        None => manifest.layers.first(),
    };
    found.cloned().ok_or_else(|| {
        let types: Vec<String> = manifest
            .layers
            .iter()
            .map(|l| format!("`{}`", l.media_type))
            .collect();
        OciError::InvalidResponse {
            operation: "fetch the manifest of".into(),
            repo: reference.to_string(),
            reason: match media_type {
                Some(wanted) => format!(
                    "no layer has media type `{wanted}` (its layers: {}); fix `mediaType`",
                    if types.is_empty() {
                        "none".to_owned()
                    } else {
                        types.join(", ")
                    }
                ),
                None => "the artifact has no layers".into(),
            },
        }
    })
}

fn io_error(path: &str, error: &std::io::Error) -> OciError {
    OciError::Io {
        path: path.to_owned(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed};
    use serde_json::json;

    #[test]
    fn apply_refuses_a_path_outside_the_work_dir_and_a_bad_reference() {
        let problems = OciDownload.check_config(&json!({
            "imageRef": "ghcr.io/app@sha256:1", "outPath": "../up"
        }));
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["imageRef", "outPath"], "{problems:?}");
        assert!(
            OciDownload
                .check_config(&json!({"imageRef": "ghcr.io/app:1", "outPath": "./x.tgz"}))
                .is_empty()
        );
    }

    #[tokio::test]
    async fn bad_config_is_refused_before_any_request() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        // Nothing listens on port 9: a request would be an `Errored` "unreachable".
        for (config, why) in [
            (
                json!({"imageRef": "127.0.0.1:9/app:1", "outPath": "../x"}),
                "leaves the promotion's work directory",
            ),
            (
                json!({"imageRef": "127.0.0.1:9/app:1", "outPath": "/etc/x"}),
                "leaves the promotion's work directory",
            ),
            (
                json!({"imageRef": "127.0.0.1:9/app@sha256:12", "outPath": "x"}),
                "invalid `imageRef`",
            ),
            (
                json!({"imageRef": "127.0.0.1:9/app:1", "outPath": "x", "mediatype": "a"}),
                "unknown field `mediatype`",
            ),
            (json!({"outPath": "x"}), "missing field `imageRef`"),
        ] {
            let reason = failed(OciDownload.run(&ctx, config.clone()).await);
            assert!(reason.contains(why), "{config}: {reason}");
        }
        std::fs::write(work.path().join("there"), "x").unwrap();
        let reason = failed(
            OciDownload
                .run(
                    &ctx,
                    json!({"imageRef": "127.0.0.1:9/app:1", "outPath": "there"}),
                )
                .await,
        );
        assert!(reason.contains("set `allowOverwrite: true`"), "{reason}");
    }
}
