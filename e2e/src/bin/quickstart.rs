//! The quickstart driver behind `examples/quickstart/run.sh`: a local registry, a config
//! repository served over HTTP, and `dray serve` with the example project, all on random
//! loopback ports. It pushes two builds of a sample image, fires the CI webhook, waits
//! until `dev` holds the newest Freight (auto-promotion), and prints where Dray serves.
//!
//! With `--smoke` it goes on without a person — promote to `staging`, approve and promote
//! to `prod` — and exits 0 only when `stage/prod` holds the newest image's digest.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::pipeline::text;
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use serde_json::Value;

const WEBHOOK_TOKEN: &str = "quickstart-ci-token";

fn run(dray: &Dray, args: &[&str]) -> Result<String> {
    let mut all = vec!["-p", "demo"];
    all.extend_from_slice(args);
    let output = dray.cli(&all)?;
    let text = text(&output);
    if !output.status.success() {
        bail!("`dray {}` failed:\n{text}", all.join(" "));
    }
    Ok(text)
}

fn stage_alias(dray: &Dray, stage: &str) -> Result<String> {
    let json = run(dray, &["get", "stage", stage, "-o", "json"])?;
    let value: Value = serde_json::from_str(&json)?;
    Ok(value
        .pointer("/status/currentFreight/alias")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned())
}

#[tokio::main]
async fn main() -> Result<()> {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("config")?;
    let (config, _) = GitRepo::seed(
        &world,
        &config_url,
        &workspace_root().join("examples/quickstart/config-repo"),
    )?;

    let project = world.unique_dir("project")?;
    std::fs::create_dir_all(&project)?;
    for entry in std::fs::read_dir(workspace_root().join("examples/quickstart/project"))? {
        let path = entry?.path();
        let yaml = std::fs::read_to_string(&path)?
            .replace("127.0.0.1:5000", &registry.host())
            .replace("http://127.0.0.1:8080/config.git", &config_url);
        std::fs::write(project.join(path.file_name().context("file name")?), yaml)?;
    }
    let dray = Dray::start(
        &world,
        DrayOptions {
            config: vec![project],
            ..Default::default()
        },
    )?;

    println!("==> pushing two builds of {}/demo/app", registry.host());
    oci::push_image(&registry, "demo/app", "1.0.0").await?;
    let newest = oci::push_image(&registry, "demo/app", "1.1.0").await?;
    println!("==> CI fires the webhook");
    let hook = format!("{}/webhooks/demo/ci/{WEBHOOK_TOKEN}", dray.url());
    let body = serde_json::json!({"repoURL": format!("{}/demo/app", registry.host())});
    let answer: Value = dray_e2e::http_client()?
        .post(&hook)
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!("    refreshed {} warehouse(s)", answer["refreshed"]);

    // Wait (at most 60 s) until `dev` holds the newest Freight, 1.1.0.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut dev = String::new();
    let mut reached = false;
    while Instant::now() < deadline {
        let freight: Value = serde_json::from_str(&run(&dray, &["get", "freight", "-o", "json"])?)?;
        let newest_alias = freight
            .pointer("/0/alias")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let newest_tag = freight
            .pointer("/0/images/0/tag")
            .and_then(Value::as_str)
            .unwrap_or_default();
        dev = stage_alias(&dray, "dev")?;
        if newest_tag == "1.1.0" && dev == newest_alias {
            reached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !reached {
        bail!(
            "dev did not receive the newest Freight (1.1.0) within 60s (it holds `{dev}`); \
             Dray's log:\n{}",
            dray.log()
        );
    }
    println!("==> dev holds {dev} (1.1.0@{newest}), promoted by auto-promotion");
    print!("{}", run(&dray, &["get", "freight", "--stage", "staging"])?);

    if smoke {
        print!(
            "{}",
            run(
                &dray,
                &["promote", "--stage", "staging", "--alias", &dev, "--wait"]
            )?
        );
        print!(
            "{}",
            run(
                &dray,
                &[
                    "approve",
                    "--stage",
                    "prod",
                    "--alias",
                    &dev,
                    "--reason",
                    "quickstart smoke"
                ]
            )?
        );
        print!(
            "{}",
            run(
                &dray,
                &["promote", "--stage", "prod", "--alias", &dev, "--wait"]
            )?
        );
        let manifests = config.show("stage/prod", "manifests.yaml")?;
        if !manifests.contains(&newest) {
            bail!("stage/prod does not hold {newest}:\n{manifests}");
        }
        print!("{}", run(&dray, &["audit", "prod"])?);
        let login = dray_e2e::http_client()?
            .get(format!("{}/login", dray.url()))
            .send()
            .await?;
        let status = login.status();
        if !status.is_success() || !login.text().await?.contains("id=\"token\"") {
            bail!(
                "the web UI's login page did not answer at {}/login ({status})",
                dray.url()
            );
        }
        println!("smoke: ok — stage/prod holds demo/app:1.1.0@{newest}");
        return Ok(());
    }

    let token_file = dray.data_dir().join(dray_e2e::BOOTSTRAP_TOKEN_FILE);
    println!();
    println!("Web UI: {}/projects/demo", dray.url());
    println!("  dev holds {dev}; staging awaits a click: select {dev}, then Promote on staging");
    println!(
        "  log in with the admin token kept (mode 0600) in {}",
        token_file.display()
    );
    println!("  (copy it with: cat {})", token_file.display());
    println!("Dray is serving at {}", dray.url());
    println!("  export DRAY_SERVER={}", dray.url());
    println!(
        "  export DRAY_TOKEN=\"$(cat {})\"",
        dray.data_dir()
            .join(dray_e2e::BOOTSTRAP_TOKEN_FILE)
            .display()
    );
    println!("  {} get stages -p demo", Dray::binary().display());
    println!(
        "  {} promote -p demo --stage staging --alias {dev} --wait",
        Dray::binary().display()
    );
    println!(
        "Press Ctrl-C to stop (everything runs in {}).",
        world.path().display()
    );
    // Return (and so stop the registry, git server and Dray on drop) on Ctrl-C, SIGTERM
    // or SIGHUP alike.
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
        _ = hangup.recv() => {}
    }
    println!("stopping");
    Ok(())
}
