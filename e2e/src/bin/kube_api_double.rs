//! The Kubernetes API-server double (`dray_e2e::kube_api`) as its own process, for trying
//! `kubectl` or `dray controller` against it by hand. Test tooling only, never shipped.
//!
//! ```text
//! kube_api_double --kubeconfig PATH [--crds DIR]
//! ```
//!
//! Writes an admin kubeconfig (CA data inline, a `system:masters` token) to PATH, applies
//! the CRD files in DIR when given, prints the URL and serves until stdin closes or the
//! process is interrupted.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;
use dray_e2e::kube_api::KubeApi;

/// Serve the in-memory Kubernetes API-server double on 127.0.0.1.
#[derive(Debug, Parser)]
struct Args {
    /// Where to write the admin kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// A directory of CRD manifests to apply with kubectl at start (e.g. the repo's `crds/`).
    #[arg(long)]
    crds: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let api = KubeApi::start().await?;
    api.write_kubeconfig(&args.kubeconfig, &api.admin_token())?;
    if let Some(crds) = &args.crds {
        let output = api
            .kubectl(&args.kubeconfig)
            .arg("apply")
            .arg("-f")
            .arg(crds)
            .output()
            .context("Failed to run kubectl")?;
        if !output.status.success() {
            bail!(
                "kubectl apply -f {} failed: {}\nhint: check that the directory holds CRD manifests",
                crds.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    println!("{}", api.url());
    println!("kubeconfig: {}", args.kubeconfig.display());
    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .is_ok_and(|read| read > 0)
        {
            sink.clear();
        }
    });
    tokio::select! {
        _ = stdin_closed => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
