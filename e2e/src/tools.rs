//! Where the real tools the tests run are: `e2e/tools/build.sh --print-path TOOL` names the
//! cached build of the version pinned in `e2e/tools/versions.env` (building it first when
//! the cache has none), so a test run alone (`cargo test -p dray-e2e --test kubernetes`)
//! finds the same binaries `e2e/test.sh` puts first on `PATH`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::world::workspace_root;

/// How long one `kubectl` request of a test may take.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// A tool `e2e/tools/build.sh` builds, and the programs its directory must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `kube-apiserver`, `kube-controller-manager`, `kubectl`, `etcd`, `etcd-compact`.
    Kubernetes,
    /// `helm` (v4).
    Helm,
    /// `kustomize` (v5).
    Kustomize,
    /// `cosign`.
    Cosign,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Kubernetes => "kubernetes",
            Tool::Helm => "helm",
            Tool::Kustomize => "kustomize",
            Tool::Cosign => "cosign",
        }
    }

    fn programs(self) -> &'static [&'static str] {
        match self {
            Tool::Kubernetes => &[
                "kube-apiserver",
                "kube-controller-manager",
                "kubectl",
                "etcd",
            ],
            Tool::Helm => &["helm"],
            Tool::Kustomize => &["kustomize"],
            Tool::Cosign => &["cosign"],
        }
    }
}

/// The directory holding `tool`'s programs.
pub fn tool_dir(tool: Tool) -> Result<PathBuf> {
    static DIRS: Mutex<Option<HashMap<Tool, PathBuf>>> = Mutex::new(None);
    let mut dirs = DIRS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(dir) = dirs.get_or_insert_with(HashMap::new).get(&tool) {
        return Ok(dir.clone());
    }
    let dir = locate(tool)?;
    dirs.get_or_insert_with(HashMap::new)
        .insert(tool, dir.clone());
    Ok(dir)
}

/// The path of one program of `tool` (e.g. `program(Tool::Helm, "helm")`).
pub fn program(tool: Tool, name: &str) -> Result<PathBuf> {
    Ok(tool_dir(tool)?.join(name))
}

/// The pinned `helm`.
pub fn helm() -> Result<PathBuf> {
    program(Tool::Helm, "helm")
}

/// The directory of the pinned Kubernetes release's programs.
pub fn kubernetes_bin() -> Result<PathBuf> {
    tool_dir(Tool::Kubernetes)
}

fn locate(tool: Tool) -> Result<PathBuf> {
    let script = workspace_root().join("e2e/tools/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--print-path", tool.name()])
        .output()
        .with_context(|| format!("cannot run `{}`", script.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --print-path {}` failed:\n{}\nhint: the tests build their tools from Go \
             modules and need Go 1.26; run e2e/test.sh, which installs what is missing",
            script.display(),
            tool.name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    for program in tool.programs() {
        if !dir.join(program).is_file() {
            bail!(
                "`{}` has no `{program}`; remove it and run e2e/tools/build.sh {} again",
                dir.display(),
                tool.name()
            );
        }
    }
    Ok(dir)
}

/// `kubectl` of the pinned release with `--kubeconfig`, a discovery cache of the cluster's
/// own, `--request-timeout` and a `HOME` of the test's (no user config leaks in).
pub(crate) fn kubectl(kubeconfig: &Path, cache: &Path, home: &Path) -> Command {
    let program = program(Tool::Kubernetes, "kubectl").unwrap_or_else(|_| PathBuf::from("kubectl"));
    let mut command = Command::new(program);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .arg(format!("--request-timeout={}s", KUBECTL_TIMEOUT.as_secs()))
        .env_remove("KUBECONFIG")
        .env("HOME", home);
    command
}
