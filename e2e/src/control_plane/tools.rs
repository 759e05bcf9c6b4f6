//! Where the control plane's programs are: `e2e/tools/build.sh --print-path kubernetes`
//! names the cached build of the pinned release (building it first when the cache has
//! none), so a test run alone (`cargo test -p dray-e2e --test kubernetes`) finds the same
//! binaries `e2e/test.sh` puts on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::world::workspace_root;

/// How long one `kubectl` request of a test may take.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// The directory holding `kube-apiserver`, `kube-controller-manager`, `kubectl` and `etcd`.
pub fn kubernetes_bin() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| locate().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn locate() -> Result<PathBuf> {
    let script = workspace_root().join("e2e/tools/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--print-path", "kubernetes"])
        .output()
        .with_context(|| format!("cannot run `{}`", script.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --print-path kubernetes` failed, so there is no control plane to test on:\n{}\n\
             hint: the tests build Kubernetes from its Go modules and need Go 1.26; run e2e/test.sh, \
             which installs what is missing",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let dir = PathBuf::from(dir);
    for bin in ["kube-apiserver", "kube-controller-manager", "kubectl", "etcd"] {
        if !dir.join(bin).is_file() {
            bail!("`{}` has no `{bin}`; remove it and run e2e/tools/build.sh again", dir.display());
        }
    }
    Ok(dir)
}

/// `kubectl` of the pinned release with `--kubeconfig`, a discovery cache of the cluster's
/// own, `--request-timeout` and a `HOME` of the test's (no user config leaks in).
pub(super) fn kubectl(kubeconfig: &Path, cache: &Path, home: &Path) -> Command {
    let program = kubernetes_bin()
        .map(|dir| dir.join("kubectl"))
        .unwrap_or_else(|_| PathBuf::from("kubectl"));
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
