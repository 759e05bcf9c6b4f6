//! `helm-template`: renders a Helm chart to plain manifests with `helm template`, as
//! Argo CD does, into one file or one file per resource. The chart is a directory in the
//! work directory (`path`), or a chart at an exact version in a chart repository
//! (`chart: {repoURL, name, version}`, typically `${{ chartFrom(…).version }}`), which is
//! downloaded into the work directory with the project's `helm` Credential for that
//! repository (`crate::helm`) and rendered from its archive. An OCI chart whose version is
//! the Freight's is pulled by the Freight's digest.
//!
//! Owns the command line; running the tool is `tool.rs`, writing the output `files.rs`.
//! It does not fetch chart dependencies: vendor them (`charts/`, e.g. with
//! `helm-update-chart`).

use std::ffi::OsString;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::files::{OutPath, resolve};
use super::tool::{TIMEOUT, Tool, render};
use super::typed::TypedStep;
use crate::helm::{ChartRef, fetch_chart, is_oci, oci_chart_name};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "helm-template";

/// Configuration of `helm-template`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The chart directory, relative to the work directory (or set `chart`).
    #[serde(default)]
    path: Option<String>,
    /// A chart in a chart repository, at an exact version (instead of `path`).
    #[serde(default)]
    chart: Option<RepoChart>,
    /// The release name (`.Release.Name`).
    release_name: String,
    /// The namespace (`.Release.Namespace`); Helm's default when unset.
    #[serde(default)]
    namespace: Option<String>,
    /// Values files, relative to the work directory, applied in order (`-f`).
    #[serde(default)]
    values_files: Vec<String>,
    /// Single values applied after the files, in order (`--set key=value`, with Helm's
    /// `--set` syntax for the value).
    #[serde(default)]
    set_values: Vec<SetValue>,
    /// Where to write the manifests: a file, or, when it ends with `/` or is an existing
    /// directory, one file per resource named `<kind>-<name>.yaml` (lowercase).
    out_path: String,
}

/// A chart in a classic chart repository or an OCI registry.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RepoChart {
    /// The repository: `https://…` (classic, with `name`) or `oci://host/path/chart`.
    #[serde(rename = "repoURL")]
    repo_url: String,
    /// The chart's name in a classic repository (for `oci://`, the last path segment).
    #[serde(default)]
    name: Option<String>,
    /// The exact version, e.g. `${{ chartFrom('oci://…').version }}`.
    version: String,
    /// Talk plain HTTP to an `oci://` registry (loopback registries in tests).
    #[serde(default)]
    insecure: bool,
}

/// One `--set`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SetValue {
    /// The dotted key, e.g. `image.tag`.
    key: String,
    /// The value.
    value: String,
}

/// The `helm-template` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HelmTemplate;

#[async_trait]
impl TypedStep for HelmTemplate {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

async fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    let (chart, shown) = match (&config.path, &config.chart) {
        (Some(path), None) => {
            let chart = resolve(ctx, path, true)?;
            if !chart.join("Chart.yaml").is_file() {
                return Err(StepOutcome::failed(format!(
                    "`{path}` is not a Helm chart (no Chart.yaml); point `path` at the chart's directory"
                )));
            }
            (chart, format!("`{path}`"))
        }
        (None, Some(repo_chart)) => download(ctx, repo_chart).await?,
        (Some(_), Some(_)) | (None, None) => {
            return Err(StepOutcome::failed(format!(
                "invalid `{KIND}` config: set exactly one of `path` (a chart directory) and \
                 `chart` (`{{repoURL, name, version}}` in a chart repository)"
            )));
        }
    };
    let mut args: Vec<OsString> = vec![
        "template".into(),
        config.release_name.clone().into(),
        chart.into(),
    ];
    if let Some(namespace) = &config.namespace {
        args.extend(["--namespace".into(), namespace.into()]);
    }
    for file in &config.values_files {
        let path = resolve(ctx, file, true)?;
        if !path.is_file() {
            return Err(StepOutcome::failed(format!(
                "values file `{file}` does not exist in the work directory"
            )));
        }
        args.extend(["--values".into(), path.into()]);
    }
    for set in &config.set_values {
        if set.key.is_empty() {
            return Err(StepOutcome::failed(format!(
                "invalid `{KIND}` config at `setValues`: a key is empty"
            )));
        }
        args.extend(["--set".into(), format!("{}={}", set.key, set.value).into()]);
    }
    let out = OutPath::resolve(ctx, &config.out_path)?;
    let tool = Tool {
        name: "helm",
        product: "Helm",
        program: &ctx.tools.helm,
    };
    let rendered = render(ctx, &tool, &args, TIMEOUT).await?;
    let files = out.write(&rendered)?;
    ctx.log(&format!(
        "rendered chart {shown} into `{}` ({})",
        config.out_path,
        crate::count::count(files, "file")
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// Where downloaded charts go in the work directory.
const DOWNLOADS: &str = ".dray/charts";

/// Downloads `chart` into the work directory; its archive path and how to name it.
async fn download(
    ctx: &StepContext,
    chart: &RepoChart,
) -> Result<(std::path::PathBuf, String), StepOutcome> {
    let repo_url = chart.repo_url.trim();
    let name = match (is_oci(repo_url), chart.name.as_deref().map(str::trim)) {
        (true, None | Some("")) => oci_chart_name(repo_url).to_owned(),
        (true, Some(name)) if name == oci_chart_name(repo_url) => name.to_owned(),
        (true, Some(name)) => {
            return Err(StepOutcome::failed(format!(
                "invalid `{KIND}` config at `chart.name`: `{name}` is not the chart of \
                 `{repo_url}` (`{}`); remove `name` for an `oci://` chart",
                oci_chart_name(repo_url)
            )));
        }
        (false, Some(name)) if !name.is_empty() => name.to_owned(),
        (false, _) => {
            return Err(StepOutcome::failed(format!(
                "invalid `{KIND}` config at `chart.name`: a classic chart repository needs the \
                 chart's name"
            )));
        }
    };
    let version = chart.version.trim();
    if version.is_empty() || version.contains(['/', '\\']) {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `chart.version`: `{version}` is not a chart version; \
             e.g. `${{{{ chartFrom('{repo_url}').version }}}}`"
        )));
    }
    // The Freight's own chart at this version: pull what the Freight pinned.
    let digest = ctx
        .freight
        .charts
        .iter()
        .find(|c| c.repo_url.trim() == repo_url && c.name == name && c.version == version)
        .and_then(|c| c.digest.as_deref());
    let reference = ChartRef {
        repo_url,
        name: &name,
        version,
        digest,
        insecure: chart.insecure,
    };
    let credentials = ctx.credentials.helm(repo_url);
    let shown = format!("`{name}` {version} from `{repo_url}`");
    let archive = fetch_chart(&ctx.http, &reference, credentials.as_ref())
        .await
        .map_err(|err| {
            let message = format!("cannot download chart {shown}: {err}");
            if err.is_retryable() {
                StepOutcome::errored(message)
            } else {
                StepOutcome::failed(message)
            }
        })?;
    let file = format!("{DOWNLOADS}/{name}-{version}.tgz");
    let path = ctx.path(&file).map_err(StepOutcome::failed)?;
    let written = async {
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        tokio::fs::write(&path, &archive).await
    };
    written.await.map_err(|err| {
        StepOutcome::errored(format!(
            "cannot write `{file}` in the work directory: {err}"
        ))
    })?;
    ctx.log(&format!(
        "downloaded chart {shown} ({} bytes)",
        archive.len()
    ));
    Ok((path, shown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, errored, failed, outputs};
    use serde_json::json;
    use std::path::{Path, PathBuf};

    /// The real `helm` (v4) the tests pin, built from its Go module by
    /// `e2e/tools/build.sh` (cached; e2e/test.sh builds it first). A test that silently
    /// skipped would pass with the step broken, so a missing helm fails with the fix.
    fn real_helm() -> PathBuf {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/tools/build.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .args(["--print-path", "helm"])
            .output()
            .expect("bash runs e2e/tools/build.sh");
        assert!(
            out.status.success(),
            "e2e/tools/build.sh could not build helm (it needs Go 1.26; e2e/test.sh installs \
             what is missing): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("helm")
    }

    fn chart(dir: &Path) {
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(
            dir.join("Chart.yaml"),
            "apiVersion: v2\nname: app\nversion: 0.1.0\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("values.yaml"),
            "image:\n  repository: registry.example.com/team/app\n  tag: 1.0.0\nreplicas: 1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("templates/deployment.yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  replicas: {{ .Values.replicas }}\n  template:\n    spec:\n      containers:\n        - name: app\n          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("templates/service.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("templates/NOTES.txt"),
            "Installed {{ .Release.Name }}.\n",
        )
        .unwrap();
    }

    #[tokio::test]
    async fn renders_a_chart_with_values_files_and_set_values() {
        let helm = real_helm();
        let work = tempfile::tempdir().unwrap();
        chart(&work.path().join("charts/app"));
        std::fs::write(
            work.path().join("staging.yaml"),
            "replicas: 2\nimage:\n  tag: 1.1.0\n",
        )
        .unwrap();
        let mut ctx = context(work.path());
        ctx.tools.helm = helm;
        let config = json!({
            "path": "charts/app", "releaseName": "web", "namespace": "staging",
            "valuesFiles": ["staging.yaml"],
            "setValues": [{"key": "image.tag", "value": "1.2.0"}],
            "outPath": "out/app.yaml",
        });
        outputs(HelmTemplate.run(&ctx, config).await);
        let out = std::fs::read_to_string(work.path().join("out/app.yaml")).unwrap();
        assert!(
            out.contains("image: \"registry.example.com/team/app:1.2.0\""),
            "{out}"
        );
        assert!(out.contains("replicas: 2"), "{out}");
        assert!(out.contains("namespace: staging"), "{out}");
        assert!(
            out.contains("# Source: app/templates/service.yaml"),
            "{out}"
        );
        assert!(!out.contains("Installed"), "{out}");

        outputs(
            HelmTemplate
                .run(
                    &ctx,
                    json!({"path": "charts/app", "releaseName": "web", "outPath": "split/"}),
                )
                .await,
        );
        let mut names: Vec<_> = std::fs::read_dir(work.path().join("split"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["deployment-web.yaml", "service-web.yaml"]);
    }

    #[tokio::test]
    async fn a_template_error_fails_with_helm_s_words() {
        let helm = real_helm();
        let work = tempfile::tempdir().unwrap();
        chart(work.path());
        std::fs::write(
            work.path().join("templates/bad.yaml"),
            "{{ .Values.nope.deeper }}\n",
        )
        .unwrap();
        let mut ctx = context(work.path());
        ctx.tools.helm = helm;
        let reason = failed(
            HelmTemplate
                .run(
                    &ctx,
                    json!({"path": ".", "releaseName": "web", "outPath": "o.yaml"}),
                )
                .await,
        );
        assert!(reason.contains("bad.yaml"), "{reason}");
        assert!(!work.path().join("o.yaml").exists());
    }

    #[tokio::test]
    async fn missing_helm_charts_and_values_are_explained() {
        let work = tempfile::tempdir().unwrap();
        chart(work.path());
        let mut ctx = context(work.path());
        let config = json!({"path": ".", "releaseName": "web", "outPath": "o.yaml"});
        if which("helm").is_none() {
            let reason = errored(HelmTemplate.run(&ctx, config.clone()).await);
            assert_eq!(
                reason,
                "helm not found at `helm`: install Helm or set the helm path"
            );
        }
        ctx.tools.helm = PathBuf::from("/opt/none/helm");
        let reason = errored(HelmTemplate.run(&ctx, config).await);
        assert_eq!(
            reason,
            "helm not found at `/opt/none/helm`: install Helm or set the helm path"
        );
        let reason = failed(
            HelmTemplate
                .run(
                    &ctx,
                    json!({"path": "templates", "releaseName": "web", "outPath": "o.yaml"}),
                )
                .await,
        );
        assert!(reason.contains("is not a Helm chart"), "{reason}");
        let reason = failed(HelmTemplate.run(&ctx, json!({"path": ".", "releaseName": "web", "valuesFiles": ["prod.yaml"], "outPath": "o.yaml"})).await);
        assert_eq!(
            reason,
            "values file `prod.yaml` does not exist in the work directory"
        );
        let reason = failed(
            HelmTemplate
                .run(&ctx, json!({"path": ".", "outPath": "o.yaml"}))
                .await,
        );
        assert!(reason.contains("missing field `releaseName`"), "{reason}");
    }

    #[tokio::test]
    async fn path_and_chart_are_exclusive_and_the_chart_is_checked_before_any_request() {
        let work = tempfile::tempdir().unwrap();
        chart(work.path());
        let ctx = context(work.path());
        for config in [
            json!({"releaseName": "web", "outPath": "o.yaml"}),
            json!({"path": ".", "chart": {"repoURL": "https://c", "name": "app", "version": "1.0.0"}, "releaseName": "web", "outPath": "o.yaml"}),
        ] {
            let reason = failed(HelmTemplate.run(&ctx, config).await);
            assert!(reason.contains("set exactly one of `path`"), "{reason}");
        }
        let reason = failed(HelmTemplate.run(&ctx, json!({"chart": {"repoURL": "https://c", "version": "1.0.0"}, "releaseName": "web", "outPath": "o.yaml"})).await);
        assert!(reason.contains("`chart.name`"), "{reason}");
        let reason = failed(HelmTemplate.run(&ctx, json!({"chart": {"repoURL": "oci://r/charts/app", "name": "web", "version": "1.0.0"}, "releaseName": "web", "outPath": "o.yaml"})).await);
        assert!(
            reason.contains("is not the chart of `oci://r/charts/app`"),
            "{reason}"
        );
        let reason = failed(HelmTemplate.run(&ctx, json!({"chart": {"repoURL": "oci://r/charts/app", "version": "../x"}, "releaseName": "web", "outPath": "o.yaml"})).await);
        assert!(reason.contains("`chart.version`"), "{reason}");
    }

    fn which(program: &str) -> Option<PathBuf> {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(program))
                .find(|p| p.is_file())
        })
    }
}
