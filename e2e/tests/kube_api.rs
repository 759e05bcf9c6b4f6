//! The Kubernetes API-server double (`dray_e2e::kube_api`) proved with the real `kubectl`
//! 1.32 and the `kube` crate's own Client, runtime watcher and kube-lease-manager.

use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{Context, Result, bail};
use dray_e2e::kube_api::KubeApi;
use dray_e2e::workspace_root;

fn run(mut command: std::process::Command) -> Result<Output> {
    let output = command.output().context("Failed to run kubectl")?;
    Ok(output)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs kubectl with `args` and fails with its output when it fails.
fn kubectl_ok(api: &KubeApi, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let mut command = api.kubectl(kubeconfig);
    command.args(args);
    let output = run(command)?;
    if !output.status.success() {
        bail!("kubectl {args:?} failed: {}", text(&output));
    }
    Ok(text(&output))
}

fn kubectl_fails(api: &KubeApi, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let mut command = api.kubectl(kubeconfig);
    command.args(args);
    let output = run(command)?;
    if output.status.success() {
        bail!(
            "kubectl {args:?} succeeded, expected a failure: {}",
            text(&output)
        );
    }
    Ok(text(&output))
}

struct Fixture {
    api: KubeApi,
    dir: tempfile::TempDir,
    admin: PathBuf,
}

async fn fixture() -> Result<Fixture> {
    let api = KubeApi::start().await?;
    let dir = tempfile::tempdir()?;
    let admin = dir.path().join("admin.kubeconfig");
    api.write_kubeconfig(&admin, &api.admin_token())?;
    Ok(Fixture { api, dir, admin })
}

/// Creates a namespace from a manifest (kubectl's typed `create namespace` speaks protobuf).
fn create_namespace(f: &Fixture, name: &str) -> Result<()> {
    let path = f.dir.path().join(format!("ns-{name}.yaml"));
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"),
    )?;
    kubectl_ok(
        &f.api,
        &f.admin,
        &["apply", "-f", &path.display().to_string()],
    )?;
    Ok(())
}

fn crds_dir() -> String {
    workspace_root().join("crds").display().to_string()
}

#[tokio::test]
async fn kubectl_applies_crds_and_the_quickstart_project() -> Result<()> {
    let f = fixture().await?;
    let version = kubectl_ok(&f.api, &f.admin, &["version", "-o", "json"])?;
    assert!(version.contains("\"gitVersion\": \"v1.32.0\""), "{version}");
    let applied = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &crds_dir()])?;
    assert!(
        applied.contains("customresourcedefinition.apiextensions.k8s.io/stages.dray.dev created"),
        "{applied}"
    );
    let resources = kubectl_ok(
        &f.api,
        &f.admin,
        &["api-resources", "--api-group", "dray.dev"],
    )?;
    assert!(
        resources.contains("stages") && resources.contains("Stage"),
        "{resources}"
    );
    create_namespace(&f, "demo")?;
    let project = workspace_root()
        .join("examples/quickstart/project")
        .display()
        .to_string();
    let out = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &project])?;
    assert!(out.contains("stage.dray.dev/dev created"), "{out}");
    let again = kubectl_ok(&f.api, &f.admin, &["apply", "-f", &project])?;
    assert!(again.contains("stage.dray.dev/dev unchanged"), "{again}");
    let stages = kubectl_ok(&f.api, &f.admin, &["get", "stages", "-n", "demo"])?;
    let header = stages.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("FREIGHT") && header.contains("AGE"),
        "{stages}"
    );
    assert!(stages.contains("staging"), "{stages}");
    let _ = &f.dir;
    Ok(())
}
