//! `kustomize-build`: renders a kustomization to plain manifests, as Argo CD does
//! (`kubectl kustomize DIR`, or `kustomize build DIR` when a standalone kustomize is set),
//! into one file or one file per resource.
//!
//! Owns the command line; running the tool is `tool.rs`, writing the output `files.rs`.

use std::ffi::OsString;
use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::files::{OutPath, resolve};
use super::tool::{TIMEOUT, Tool, render};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "kustomize-build";

/// Configuration of `kustomize-build`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The directory holding `kustomization.yaml`, relative to the work directory.
    path: String,
    /// Where to write the manifests: a file, or, when it ends with `/` or is an existing
    /// directory, one file per resource named `<kind>-<name>.yaml` (lowercase). Files of
    /// resources that are no longer rendered are not removed: clear the directory first
    /// (`delete`) when resources can disappear.
    out_path: String,
}

/// The `kustomize-build` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KustomizeBuild;

#[async_trait]
impl TypedStep for KustomizeBuild {
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
    let dir = resolve(ctx, &config.path, true)?;
    if !dir.is_dir() {
        return Err(StepOutcome::failed(format!(
            "`{}` is not a directory in the work directory; point `path` at the directory that \
             holds kustomization.yaml",
            config.path
        )));
    }
    let out = OutPath::resolve(ctx, &config.out_path)?;
    let (tool, args) = command(ctx, &dir);
    let rendered = render(ctx, &tool, &args, TIMEOUT).await?;
    let files = out.write(&rendered)?;
    ctx.log(&format!(
        "rendered `{}` into `{}` ({})",
        config.path,
        config.out_path,
        crate::count::count(files, "file")
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// `kustomize build DIR` with a standalone kustomize, else `kubectl kustomize DIR`.
fn command<'a>(ctx: &'a StepContext, dir: &Path) -> (Tool<'a>, Vec<OsString>) {
    match &ctx.tools.kustomize {
        Some(kustomize) => (
            Tool {
                name: "kustomize",
                product: "kustomize",
                program: kustomize,
            },
            vec!["build".into(), dir.into()],
        ),
        None => (
            Tool {
                name: "kubectl",
                product: "kubectl",
                program: &ctx.tools.kubectl,
            },
            vec!["kustomize".into(), dir.into()],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, errored, failed, outputs};
    use serde_json::json;
    use std::path::PathBuf;

    /// A kustomization with a Deployment and a Service, and an image override.
    fn app(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("kustomization.yaml"),
            "resources:\n- deployment.yaml\n- service.yaml\nnamespace: staging\nimages:\n- name: app\n  newTag: \"1.2.0\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("deployment.yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("service.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n",
        )
        .unwrap();
    }

    /// `kubectl kustomize` must run here: a test that silently skipped would pass with the
    /// step broken. e2e/test.sh installs it.
    fn require_kubectl() {
        let ok = std::process::Command::new("kubectl")
            .args(["version", "--client"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "`kubectl` is not installed (kustomize-build runs `kubectl kustomize`); install \
             Debian's kubernetes-client, or run e2e/test.sh, which does"
        );
    }

    #[tokio::test]
    async fn renders_into_one_file() {
        require_kubectl();
        let work = tempfile::tempdir().unwrap();
        app(&work.path().join("src/app"));
        let ctx = context(work.path());
        let config = json!({"path": "src/app", "outPath": "out/staging/manifests.yaml"});
        outputs(KustomizeBuild.run(&ctx, config).await);
        let out = std::fs::read_to_string(work.path().join("out/staging/manifests.yaml")).unwrap();
        assert!(out.contains("kind: Service"), "{out}");
        assert!(out.contains("image: app:1.2.0"), "{out}");
        assert!(out.contains("namespace: staging"), "{out}");
    }

    #[tokio::test]
    async fn renders_one_file_per_resource_into_a_directory() {
        require_kubectl();
        let work = tempfile::tempdir().unwrap();
        app(&work.path().join("app"));
        let ctx = context(work.path());
        outputs(
            KustomizeBuild
                .run(&ctx, json!({"path": "app", "outPath": "out/"}))
                .await,
        );
        let mut names: Vec<_> = std::fs::read_dir(work.path().join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["deployment-web.yaml", "service-web.yaml"]);
        let deployment =
            std::fs::read_to_string(work.path().join("out/deployment-web.yaml")).unwrap();
        assert!(
            deployment.starts_with("apiVersion: apps/v1\nkind: Deployment\n"),
            "{deployment}"
        );
        assert!(!deployment.contains("---"), "{deployment}");
    }

    #[tokio::test]
    async fn a_broken_kustomization_fails_with_kustomize_s_words() {
        require_kubectl();
        let work = tempfile::tempdir().unwrap();
        std::fs::write(
            work.path().join("kustomization.yaml"),
            "resources:\n- missing.yaml\n",
        )
        .unwrap();
        let ctx = context(work.path());
        let reason = failed(
            KustomizeBuild
                .run(&ctx, json!({"path": ".", "outPath": "out.yaml"}))
                .await,
        );
        assert!(reason.contains("failed with exit code 1"), "{reason}");
        assert!(reason.contains("missing.yaml"), "{reason}");
        assert!(!work.path().join("out.yaml").exists());
    }

    #[tokio::test]
    async fn a_missing_tool_is_an_error_naming_its_path() {
        let work = tempfile::tempdir().unwrap();
        app(work.path());
        let mut ctx = context(work.path());
        ctx.tools.kustomize = Some(PathBuf::from("/opt/none/kustomize"));
        let reason = errored(
            KustomizeBuild
                .run(&ctx, json!({"path": ".", "outPath": "o.yaml"}))
                .await,
        );
        assert_eq!(
            reason,
            "kustomize not found at `/opt/none/kustomize`: install kustomize or set the kustomize path"
        );
        ctx.tools.kustomize = None;
        ctx.tools.kubectl = PathBuf::from("/opt/none/kubectl");
        let reason = errored(
            KustomizeBuild
                .run(&ctx, json!({"path": ".", "outPath": "o.yaml"}))
                .await,
        );
        assert_eq!(
            reason,
            "kubectl not found at `/opt/none/kubectl`: install kubectl or set the kubectl path"
        );
        let reason = failed(
            KustomizeBuild
                .run(&ctx, json!({"path": "../x", "outPath": "o.yaml"}))
                .await,
        );
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
    }
}
