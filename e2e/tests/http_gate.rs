//! The `http` gate inside a real promotion (`dray serve`): it passes on a response its CEL
//! accepts, with outputs, and a gate that never passes fails at `retry.timeout` naming the
//! last response — never waiting forever (KARGO-LESSONS 4).

use std::process::Output;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use serde_json::Value;

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A service on 127.0.0.1:0: `/never` is never ready, `/ready` is.
async fn service() -> Result<String> {
    let app = Router::new()
        .route(
            "/never",
            get(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("content-type", "application/json")],
                    r#"{"ready":false,"reason":"warming up"}"#,
                )
            }),
        )
        .route(
            "/ready",
            get(|| async {
                (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    r#"{"ready":true,"replicas":3}"#,
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

fn stage(name: &str, url: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: {name}
  namespace: demo
spec:
  requestedFreight:
    - origin:
        kind: Warehouse
        name: app
      sources:
        direct: true
  promotionTemplate:
    spec:
      steps:
        - uses: http
          as: check
          retry:
            timeout: 3s
          config:
            url: {url}
            successExpression: "response.status + 1 == 201 && response.body.ready && ctx.stage == '{name}'"
            pollInterval: 500ms
            outputs:
              - name: replicas
                fromExpression: response.body.replicas * 2
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_gate_passes_on_its_expression_and_times_out_naming_the_last_response() -> Result<()>
{
    let base = service().await?;
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("config")?;
    let (_config, _) = GitRepo::seed(
        &world,
        &config_url,
        &workspace_root().join("examples/quickstart/config-repo"),
    )?;
    oci::push_image(&registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let dray = Dray::start(&world, DrayOptions::default())?;
        let dir = world.unique_dir("project")?;
        std::fs::create_dir_all(&dir)?;
        let project = workspace_root().join("examples/quickstart/project");
        for file in ["project.yaml", "warehouse.yaml", "task.yaml"] {
            let yaml = std::fs::read_to_string(project.join(file))?
                .replace("127.0.0.1:5000", &registry.host())
                .replace("http://127.0.0.1:8080/config.git", &config_url)
                .replace("interval: 5m", "interval: 1h");
            std::fs::write(dir.join(file), yaml)?;
        }
        std::fs::write(
            dir.join("gates.yaml"),
            format!(
                "{}---\n{}",
                stage("open", &format!("{base}/ready")),
                stage("shut", &format!("{base}/never"))
            ),
        )?;
        let applied = dray.cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
        if !applied.status.success() {
            bail!("apply failed: {}", text(&applied));
        }
        let refreshed = dray.cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])?;
        if !refreshed.status.success() {
            bail!("refresh failed: {}", text(&refreshed));
        }
        let freight: Vec<Value> = serde_json::from_slice(
            &dray
                .cli(["get", "freight", "-p", "demo", "-o", "json"])?
                .stdout,
        )?;
        let alias = freight[0]["alias"].as_str().context("alias")?.to_owned();
        let promote = |stage: &str| {
            dray.cli([
                "promote",
                "-p",
                "demo",
                "--stage",
                stage,
                "--alias",
                &alias,
                "--wait",
                "--timeout",
                "2m",
            ])
        };

        let passed = promote("open")?;
        assert!(passed.status.success(), "{}", text(&passed));

        let shut = promote("shut")?;
        assert!(!shut.status.success(), "{}", text(&shut));
        let said = text(&shut);
        assert!(said.contains("timed out after 3s waiting for"), "{said}");
        assert!(
            said.contains(&format!("`GET {base}/never` to satisfy")),
            "{said}"
        );
        assert!(
            said.contains(
                r#"last response: status 503, body `{"ready":false,"reason":"warming up"}`"#
            ),
            "{said}"
        );
        Ok(())
    })
}
