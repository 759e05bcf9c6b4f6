//! Kubernetes mode end to end, against the e2e Kubernetes API double (no real API server
//! can run here; the double's fidelity is proved with the real kubectl in `kube_api.rs`):
//! the CRDs and the quickstart project applied with the real `kubectl`, `dray controller`
//! replicas on a Lease, and `dray serve --kubernetes` for the CLI.

use std::time::Duration;

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

/// One active controller: two replicas share a Lease; the leader is SIGKILLed in the
/// middle of a promotion (its push landed, its outcome not recorded: the engine's step
/// barrier holds it there), the standby takes the Lease once it expires, resumes the
/// promotion from its status, and `stage/dev` gets exactly one commit for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_in_the_middle_of_a_promotion_neither_repeats_nor_loses_it() -> Result<()> {
    use dray::promotion::engine::STEP_BARRIER_ENV;
    const PUSH: usize = 5;
    let barriers = tempfile::tempdir()?;
    let mut k = KubePipeline::start(KubeOptions {
        controllers: 2,
        lease_duration: Some(4),
        controller_env: vec![(STEP_BARRIER_ENV.into(), barriers.path().display().to_string())],
        ..Default::default()
    })
    .await?;
    let first = tokio::task::block_in_place(|| k.wait_for_leader(Duration::from_secs(60)))?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let arm = barriers.path().join(format!("arm-ran-{PUSH}"));
    std::fs::write(&arm, b"")?;
    let (_, alias) = k.q.release("1.0.0").await?;
    let promotion = tokio::task::block_in_place(|| {
        k.q.wait_until("dev's auto-promotion to hold after its push", || {
            Ok(std::fs::read_dir(barriers.path())?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .find_map(|n| {
                    n.strip_prefix("reached-")?
                        .strip_suffix(&format!("-ran-{PUSH}"))
                        .map(str::to_owned)
                }))
        })
    })?;
    let pushed = k.q.config.log("stage/dev")?;
    let ours = |log: &[dray_e2e::Commit]| {
        log.iter()
            .filter(|c| c.trailer("Dray-Promotion") == Some(promotion.as_str()))
            .count()
    };
    assert_eq!(ours(&pushed), 1, "the held promotion's push landed: {pushed:#?}");

    k.controllers[first].kill9()?;
    std::fs::remove_file(&arm)?;
    let second = tokio::task::block_in_place(|| k.wait_for_leader(Duration::from_secs(60)))?;
    assert_ne!(first, second, "the standby took over");
    let holder = tokio::task::block_in_place(|| {
        k.kubectl_ok(&["get", "lease", "dray-controller", "-n", "dray", "-o", "jsonpath={.spec.holderIdentity}"])
    })?;
    assert_eq!(holder, format!("replica-{second}"));
    tokio::task::block_in_place(|| -> Result<()> {
        let phase = k.q.wait_until(&format!("{promotion} to end on the new leader"), || {
            let p = k.q.promotion(&promotion)?;
            let phase = p["status"]["phase"].as_str().unwrap_or_default().to_owned();
            Ok((!matches!(phase.as_str(), "" | "Pending" | "Running")).then_some(phase))
        })?;
        assert_eq!(phase, "Succeeded", "{:#}", k.q.promotion(&promotion)?);
        k.q.wait_for_stage("dev", &alias)
    })?;
    let log = k.q.config.log("stage/dev")?;
    assert_eq!(ours(&log), 1, "exactly one commit for {promotion}: {log:#?}");
    Ok(())
}
