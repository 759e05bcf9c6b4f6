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

/// A fixture with the CRDs applied and namespace `demo` created.
async fn with_crds() -> Result<Fixture> {
    let f = fixture().await?;
    kubectl_ok(&f.api, &f.admin, &["apply", "-f", &crds_dir()])?;
    create_namespace(&f, "demo")?;
    Ok(f)
}

fn write(f: &Fixture, name: &str, body: &str) -> Result<String> {
    let path = f.dir.path().join(name);
    std::fs::write(&path, body)?;
    Ok(path.display().to_string())
}

const WAREHOUSE: &str = "apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: app
  namespace: demo
spec:
  subscriptions:
    - image:
        repoURL: 127.0.0.1:5000/demo/app
";

#[tokio::test]
async fn kubectl_server_side_apply_patch_and_delete() -> Result<()> {
    let f = with_crds().await?;
    let file = write(&f, "warehouse.yaml", WAREHOUSE)?;
    let out = kubectl_ok(&f.api, &f.admin, &["apply", "--server-side", "-f", &file])?;
    assert!(
        out.contains("warehouse.dray.dev/app serverside-applied"),
        "{out}"
    );
    let again = kubectl_ok(&f.api, &f.admin, &["apply", "--server-side", "-f", &file])?;
    assert!(again.contains("serverside-applied"), "{again}");
    let path = "/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app";
    let stored = f.api.get(path).context("the warehouse is stored")?;
    assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(stored["metadata"]["generation"], 1);

    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"interval":"10m"}}"#,
        ],
    )?;
    let stored = f.api.get(path).context("the warehouse is stored")?;
    assert_eq!(stored["spec"]["interval"], "10m");
    assert_eq!(stored["metadata"]["generation"], 2);
    kubectl_ok(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/interval","value":"1m"}]"#,
        ],
    )?;
    assert_eq!(f.api.get(path).context("stored")?["spec"]["interval"], "1m");
    let out = kubectl_fails(
        &f.api,
        &f.admin,
        &[
            "patch",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"interval":"2m"}}"#,
        ],
    )?;
    assert!(
        out.contains("UnsupportedMediaType") || out.contains("unknown format"),
        "{out}"
    );

    let out = kubectl_ok(
        &f.api,
        &f.admin,
        &["delete", "warehouse", "app", "-n", "demo"],
    )?;
    assert!(out.contains("warehouse.dray.dev \"app\" deleted"), "{out}");
    assert!(f.api.get(path).is_none());
    let out = kubectl_fails(&f.api, &f.admin, &["get", "warehouse", "app", "-n", "demo"])?;
    assert!(
        out.contains("Error from server (NotFound): warehouses.dray.dev \"app\" not found"),
        "{out}"
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_shows_invalid_objects_and_prunes_unknown_fields() -> Result<()> {
    let f = with_crds().await?;
    let invalid = write(
        &f,
        "invalid.yaml",
        "apiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata:\n  name: bad\n  namespace: demo\nspec:\n  interval: 5\n",
    )?;
    let out = kubectl_fails(&f.api, &f.admin, &["apply", "-f", &invalid])?;
    assert!(out.contains("is invalid"), "{out}");
    assert!(out.contains("spec.interval"), "{out}");

    let unknown = write(&f, "unknown.yaml", &format!("{WAREHOUSE}  foo: bar\n"))?;
    let out = kubectl_ok(
        &f.api,
        &f.admin,
        &["apply", "--validate=warn", "-f", &unknown],
    )?;
    assert!(
        out.contains(r#"Warning: unknown field "spec.foo""#),
        "{out}"
    );
    let stored = f
        .api
        .get("/apis/dray.dev/v1alpha1/namespaces/demo/warehouses/app")
        .context("stored")?;
    assert!(stored["spec"].get("foo").is_none(), "pruned: {stored}");
    let out = kubectl_fails(
        &f.api,
        &f.admin,
        &["create", "--validate=strict", "-f", &unknown],
    )?;
    assert!(out.contains(r#"unknown field "spec.foo""#), "{out}");
    Ok(())
}
