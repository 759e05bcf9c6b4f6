//! `oci-download` and `oci-push` end to end against real registries (Debian's
//! `docker-registry`): a promotion of the quickstart's Freight downloads an OCI
//! artifact's layer into its work directory (read back by `json-parse`), copies the
//! Freight's image to another repository of the same registry (blobs mounted) and to a
//! second registry behind basic auth (blobs streamed, an `image` Credential, annotations),
//! and the registries then really hold those digests. Refusals: a destination without a
//! tag and an `outPath` outside the work directory at `dray apply`; a missing artifact, a
//! layer whose stored bytes were altered on the registry's disk, and a layer larger than
//! the download limit, each failing the promotion with its cause.

use anyhow::{Context, Result, bail};
use dray_e2e::pipeline::{Pipeline, promotion_name, text};
use dray_e2e::{Credentials, Registry, RegistryOptions, oci};
use serde_json::{Value, json};

const LAYER: &str = oci::HELM_CHART_LAYER_MEDIA_TYPE;

/// A Stage `name` of project `demo` taking the Warehouse `app`'s Freight and running
/// `steps` (YAML, indented for `steps:`).
fn stage(name: &str, steps: &str) -> String {
    format!(
        "apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: {name}, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  promotionTemplate:
    spec:
      steps:
{steps}"
    )
}

/// The manifest `repo:reference` of `registry`, read with its credentials.
async fn manifest(registry: &Registry, repo: &str, reference: &str) -> Result<Value> {
    let url = format!("{}/v2/{repo}/manifests/{reference}", registry.url());
    let mut request = dray_e2e::http_client()?
        .get(&url)
        .header("Accept", "application/vnd.oci.image.manifest.v1+json");
    if let Some(creds) = registry.credentials() {
        request = request.header("Authorization", creds.basic_header());
    }
    let response = request.send().await?;
    if !response.status().is_success() {
        bail!("GET {url} answered {}", response.status());
    }
    Ok(response.json().await?)
}

/// Promotes `alias` into `stage` and returns the Promotion, succeeded or not.
fn promote(p: &Pipeline, stage: &str, alias: &str) -> Result<(bool, Value)> {
    let output = p.promote(stage, alias)?;
    let name = promotion_name(&output);
    if name.is_empty() {
        bail!("no promotion started: {}", text(&output));
    }
    Ok((output.status.success(), p.promotion(&name)?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_downloads_an_artifact_and_copies_the_freights_image() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    let secret = "oci-push-secret-9f3";
    let mirror = Registry::start(
        &p.world,
        RegistryOptions {
            auth: Some(Credentials::new("pusher", secret)),
            ..Default::default()
        },
    )?;
    let reg = p.registry.host();
    let settings = br#"{"greeting": "hello from an OCI artifact"}"#;
    oci::push_chart(&p.registry, "demo/bundle", "bundle", "0.1.0", settings).await?;
    tokio::task::block_in_place(|| p.apply_base())?;
    let (_, alias) = p.release("1.0.0").await?;
    let freight_digest = oci::head_digest(&p.registry, "demo/app", "1.0.0")
        .await?
        .context("the released image")?;
    let steps = format!(
        r#"        - uses: oci-download
          as: fetch
          config:
            imageRef: {reg}/demo/bundle:0.1.0
            outPath: ./bundle/settings.json
            mediaType: {LAYER}
        - uses: json-parse
          as: settings
          config:
            path: ./bundle/settings.json
            outputs:
              - {{name: greeting, fromExpression: greeting}}
        - uses: oci-push
          as: copy
          config:
            srcRef: {reg}/demo/app@${{{{ imageFrom("{reg}/demo/app").digest }}}}
            destRef: {reg}/demo/app-${{{{ ctx.stage }}}}:${{{{ imageFrom("{reg}/demo/app").tag }}}}
        - uses: oci-push
          as: mirror
          config:
            srcRef: {reg}/demo/app:${{{{ imageFrom("{reg}/demo/app").tag }}}}
            destRef: {mirror}/mirror/app:${{{{ ctx.stage }}}}
            annotations:
              dev.dray.promotion: ${{{{ ctx.promotion }}}}
"#,
        mirror = mirror.host(),
    );
    let credential = format!(
        "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: mirror, namespace: demo}}\nspec:\n  type: image\n  repoURL: {}/mirror/app\n  username: pusher\n  password: {secret}\n",
        mirror.host()
    );
    let (ok, promotion) = tokio::task::block_in_place(|| {
        p.apply(&credential)?;
        p.apply(&stage("dev", &steps))?;
        promote(&p, "dev", &alias)
    })?;
    assert!(ok, "the promotion succeeds: {promotion:#}");
    let state = &promotion["status"]["state"];
    let outputs = &state["outputs"];
    assert_eq!(
        outputs["settings"]["greeting"], "hello from an OCI artifact",
        "the downloaded layer is the file json-parse read: {outputs:#}"
    );
    // Within one registry: the same manifest, under the new repository and tag.
    assert_eq!(outputs["copy"]["digest"], freight_digest.as_str());
    assert_eq!(outputs["copy"]["tag"], "1.0.0");
    assert_eq!(
        outputs["copy"]["image"],
        format!("{reg}/demo/app-dev:1.0.0")
    );
    assert_eq!(
        oci::head_digest(&p.registry, "demo/app-dev", "1.0.0").await?,
        Some(freight_digest.clone()),
        "the registry holds the Freight's image under the new tag"
    );
    // To another registry, annotated: a new manifest that the registry holds, with the
    // image's layers and the annotation.
    let pushed = outputs["mirror"]["digest"]
        .as_str()
        .context("mirror digest")?
        .to_owned();
    assert_ne!(pushed, freight_digest, "annotations make a new manifest");
    assert_eq!(
        oci::head_digest(&mirror, "mirror/app", "dev").await?,
        Some(pushed.clone())
    );
    let copied = manifest(&mirror, "mirror/app", "dev").await?;
    let source = manifest(&p.registry, "demo/app", "1.0.0").await?;
    assert_eq!(
        copied["annotations"]["dev.dray.promotion"],
        promotion["metadata"]["name"]
    );
    assert_eq!(copied["layers"], source["layers"]);
    assert_eq!(copied["config"], source["config"]);
    let effects: Vec<&Value> = state["effects"]
        .as_array()
        .context("effects")?
        .iter()
        .filter(|e| e["effect"] == "pushedArtifact")
        .collect();
    assert_eq!(
        effects,
        [
            &json!({"step": "copy", "effect": "pushedArtifact",
                    "image": format!("{reg}/demo/app-dev:1.0.0"), "digest": freight_digest}),
            &json!({"step": "mirror", "effect": "pushedArtifact",
                    "image": format!("{}/mirror/app:dev", mirror.host()), "digest": pushed}),
        ],
        "the record shows what was pushed"
    );
    Ok(())
}

/// Pushes an artifact whose one layer's descriptor claims `claimed` bytes (the registry
/// stores `data`); returns its manifest digest.
async fn push_claiming(registry: &Registry, repo: &str, data: &[u8], claimed: u64) -> Result<()> {
    let http = dray_e2e::http_client()?;
    let base = format!("{}/v2/{repo}", registry.url());
    let mut digests = Vec::new();
    for blob in [&b"{}"[..], data] {
        let digest = oci::sha256(blob);
        let started = http.post(format!("{base}/blobs/uploads/")).send().await?;
        let location = started
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .context("upload location")?
            .to_owned();
        let url = if location.starts_with("http") {
            location
        } else {
            format!("{}{location}", registry.url())
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        let put = http
            .put(format!("{url}{sep}digest={digest}"))
            .body(blob.to_vec())
            .send()
            .await?;
        if !put.status().is_success() {
            bail!("blob upload answered {}", put.status());
        }
        digests.push(digest);
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digests[0], "size": 2},
        "layers": [{"mediaType": LAYER, "digest": digests[1], "size": claimed}],
    });
    let put = http
        .put(format!("{base}/manifests/1.0"))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(serde_json::to_vec(&manifest)?)
        .send()
        .await?;
    if !put.status().is_success() {
        bail!(
            "manifest push answered {}: {}",
            put.status(),
            put.text().await?
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_downloads_and_pushes_name_the_cause() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    let reg = p.registry.host();
    tokio::task::block_in_place(|| p.apply_base())?;
    let (_, alias) = p.release("1.0.0").await?;

    // At `dray apply`: a destination without a tag, a path outside the work directory.
    let refused = tokio::task::block_in_place(|| {
        p.try_apply(&stage(
            "bad",
            &format!(
                "        - uses: oci-push\n          config: {{srcRef: {reg}/demo/app:1.0.0, destRef: {reg}/demo/copy}}\n        - uses: oci-download\n          config: {{imageRef: {reg}/demo/app:1.0.0, outPath: ../outside}}\n"
            ),
        ))
    })?;
    let said = text(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("destRef") && said.contains("names no tag"),
        "{said}"
    );
    assert!(
        said.contains("outPath") && said.contains("leaves the promotion's work directory"),
        "{said}"
    );

    // A missing artifact.
    let download = |image: &str| {
        format!(
            "        - uses: oci-download\n          config: {{imageRef: \"{image}\", outPath: ./a.tgz, mediaType: \"{LAYER}\"}}\n"
        )
    };
    let (ok, promotion) = tokio::task::block_in_place(|| {
        p.apply(&stage(
            "missing",
            &download(&format!("{reg}/demo/none:9.9.9")),
        ))?;
        promote(&p, "missing", &alias)
    })?;
    let message = promotion["status"]["message"].as_str().unwrap_or_default();
    assert!(!ok, "{promotion:#}");
    assert!(
        message.contains("HTTP 404") && message.contains("check the reference"),
        "{message}"
    );

    // A layer altered in the registry's storage: the bytes no longer hash to the digest.
    let archive = b"the chart archive as pushed".to_vec();
    oci::push_chart(&p.registry, "demo/tampered", "tampered", "0.1.0", &archive).await?;
    let hex = oci::sha256(&archive);
    let hex = hex.trim_start_matches("sha256:");
    let data = p
        .registry
        .storage_dir()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    std::fs::write(&data, b"the chart archive altered!!")
        .with_context(|| format!("cannot alter {}", data.display()))?;
    let (ok, promotion) = tokio::task::block_in_place(|| {
        p.apply(&stage(
            "tampered",
            &download(&format!("{reg}/demo/tampered:0.1.0")),
        ))?;
        promote(&p, "tampered", &alias)
    })?;
    let message = promotion["status"]["message"].as_str().unwrap_or_default();
    assert!(!ok, "{promotion:#}");
    assert!(
        message.contains("hashes to") && message.contains(hex),
        "{message}"
    );

    // A layer larger than the download limit is refused before a byte is read.
    push_claiming(&p.registry, "demo/huge", b"small", 200 << 20).await?;
    let (ok, promotion) = tokio::task::block_in_place(|| {
        p.apply(&stage("huge", &download(&format!("{reg}/demo/huge:1.0"))))?;
        promote(&p, "huge", &alias)
    })?;
    let message = promotion["status"]["message"].as_str().unwrap_or_default();
    assert!(!ok, "{promotion:#}");
    assert!(message.contains("larger than 100 MiB"), "{message}");
    Ok(())
}
