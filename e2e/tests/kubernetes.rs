//! Kubernetes mode end to end, against the e2e Kubernetes API double (no real API server
//! can run here; the double's fidelity is proved with the real kubectl in `kube_api.rs`):
//! the CRDs and the quickstart project applied with the real `kubectl`, `dray controller`
//! replicas on a Lease, and `dray serve --kubernetes` for the CLI.

use anyhow::{Context, Result, ensure};
use dray_e2e::kube_pipeline::{KubeOptions, KubePipeline};
use dray_e2e::pipeline::text;

/// The quickstart as in embedded mode: a pushed image reaches dev by auto-promotion,
/// then staging and (approved) prod by `dray promote`, from the same YAML applied with
/// `kubectl apply`; status reaches the cluster through the `status` subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_runs_through_dray_controller_from_the_same_yaml() -> Result<()> {
    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let stages = tokio::task::block_in_place(|| k.kubectl_ok(&["get", "stages", "-n", "demo"]))?;
    for stage in ["dev", "staging", "prod"] {
        ensure!(stages.contains(stage), "kubectl get stages: {stages}");
    }
    let (_, alias) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        k.q.wait_for_stage("dev", &alias)?;
        k.q.promote_ok("staging", &alias)?;
        let approved = k.q.cli(&["approve", "--stage", "prod", "--alias", &alias])?;
        ensure!(approved.status.success(), "{}", text(&approved));
        k.q.promote_ok("prod", &alias)?;
        k.q.wait_for_stage("prod", &alias)?;
        Ok(())
    })?;
    // What kubectl shows is what Dray wrote.
    let prod = tokio::task::block_in_place(|| {
        k.kubectl_ok(&["get", "stage", "prod", "-n", "demo", "-o", "json"])
    })?;
    let prod: serde_json::Value = serde_json::from_str(&prod)?;
    assert_eq!(prod["status"]["currentFreight"]["alias"], alias.as_str(), "{prod:#}");
    let status_writes = k
        .api
        .requests()
        .iter()
        .filter(|(verb, path, user)| {
            path.contains("/stages/")
                && path.ends_with("/status")
                && verb == "update"
                && user.as_deref() == Some("system:serviceaccount:dray:dray")
        })
        .count();
    ensure!(status_writes > 0, "no Stage status went through /status");
    let head = k.q.config.log("stage/prod")?;
    let commit = head.first().context("stage/prod has a commit")?;
    ensure!(
        commit.trailer("Dray-Freight").is_some(),
        "stage/prod's commit carries the trailers: {commit:?}"
    );
    Ok(())
}
