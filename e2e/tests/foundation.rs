//! The foundation end to end: `dray serve` with a real registry and a real git server
//! beside it, the quickstart project applied through the CLI, validation errors as a user
//! sees them, and durability of acknowledged writes across `kill -9`.

use std::process::Output;

use anyhow::{Context, Result};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, workspace_root};
use serde_json::{Value, json};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Copies the quickstart project, pointing it at this world's registry and git server.
fn quickstart_project(
    world: &TestWorld,
    registry: &Registry,
    config_url: &str,
) -> Result<std::path::PathBuf> {
    let source = workspace_root().join("examples/quickstart/project");
    let target = world.unique_dir("project")?;
    std::fs::create_dir_all(&target)?;
    for entry in std::fs::read_dir(&source)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?
            .replace("127.0.0.1:5000", &registry.host())
            .replace("http://127.0.0.1:8080/config.git", config_url);
        std::fs::write(target.join(path.file_name().context("file name")?), text)?;
    }
    Ok(target)
}

fn names(items: &Value) -> Vec<String> {
    let mut names: Vec<String> = items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn quickstart_project_applies_and_its_stages_are_listed() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("config")?;
    GitRepo::seed(
        &world,
        &config_url,
        &workspace_root().join("examples/quickstart/config-repo"),
    )?;
    let project = quickstart_project(&world, &registry, &config_url)?;
    let dray = Dray::start(&world, DrayOptions::default())?;

    let applied = dray.cli(["apply", "-f", project.to_str().context("utf-8 path")?])?;
    assert!(
        applied.status.success(),
        "apply failed: {}",
        stderr(&applied)
    );
    let out = stdout(&applied);
    for line in [
        "project demo created",
        "warehouse demo/app created",
        "promotiontask demo/render-to-stage-branch created",
        "stage demo/dev created",
        "stage demo/staging created",
        "stage demo/prod created",
        "projectconfig demo/demo created",
        "credential demo/ci-webhook created",
    ] {
        assert!(out.contains(line), "`{line}` missing from:\n{out}");
    }

    let listed = dray.cli(["get", "stages", "-o", "json"])?;
    assert!(listed.status.success(), "{}", stderr(&listed));
    let stages: Value = serde_json::from_slice(&listed.stdout)?;
    assert_eq!(names(&stages), ["dev", "prod", "staging"]);
    let staging = stages
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["metadata"]["name"] == "staging");
    let upstream =
        &staging.context("staging listed")?["spec"]["requestedFreight"][0]["sources"]["stages"];
    assert_eq!(upstream, &json!(["dev"]));

    let table = stdout(&dray.cli(["get", "stages"])?);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("app from dev"), "{table}");

    let again = dray.cli(["apply", "-f", project.to_str().context("utf-8 path")?])?;
    assert!(again.status.success(), "{}", stderr(&again));
    let out = stdout(&again);
    assert_eq!(out.lines().count(), 8, "{out}");
    assert!(out.lines().all(|l| l.ends_with(" unchanged")), "{out}");
    Ok(())
}

const BAD_FILE: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata:
  name: shop
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: app
  namespace: shop
spec:
  subscriptions:
    - image:
        repoURL: 127.0.0.1:5000/shop/app
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: dev
  namespace: shop
spec:
  requestedFrieght:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: Staging_1
  namespace: shop
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: shop
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources:
        stages: [qa]
";

#[test]
fn invalid_apply_reports_every_error_with_its_place_and_stores_nothing() -> Result<()> {
    let world = TestWorld::new()?;
    let dray = Dray::start(&world, DrayOptions::default())?;
    let file = world.path().join("bad.yaml");
    std::fs::write(&file, BAD_FILE)?;

    let applied = dray.cli(["apply", "-f", file.to_str().context("utf-8 path")?])?;
    let err = stderr(&applied);
    assert_eq!(
        applied.status.code(),
        Some(1),
        "stdout: {}\nstderr: {err}",
        stdout(&applied)
    );
    assert!(err.contains("3 errors"), "{err}");

    let misspelled = err
        .lines()
        .find(|l| l.contains("requestedFrieght"))
        .context(err.clone())?;
    assert!(misspelled.contains("bad.yaml:22"), "{misspelled}");
    assert!(misspelled.contains("document 3"), "{misspelled}");
    assert!(err.contains("did you mean `requestedFreight`"), "{err}");

    let bad_name = err
        .lines()
        .find(|l| l.contains("Staging_1"))
        .context(err.clone())?;
    assert!(bad_name.contains("bad.yaml:29"), "{bad_name}");
    assert!(bad_name.contains("document 4"), "{bad_name}");
    assert!(bad_name.contains("metadata.name"), "{bad_name}");

    let missing = err
        .lines()
        .find(|l| l.contains("`qa`"))
        .context(err.clone())?;
    assert!(missing.contains("bad.yaml:45"), "{missing}");
    assert!(missing.contains("document 5"), "{missing}");
    assert!(
        missing.contains("spec.requestedFreight[0].sources.stages[0]"),
        "{missing}"
    );
    assert!(
        err.matches("hint:").count() >= 3,
        "every error has a hint:\n{err}"
    );

    let projects = dray.cli(["get", "projects", "-o", "json"])?;
    assert!(projects.status.success(), "{}", stderr(&projects));
    let projects: Value = serde_json::from_slice(&projects.stdout)?;
    assert_eq!(
        projects,
        json!([]),
        "nothing may be stored when a document is invalid"
    );
    Ok(())
}

fn stage_document(name: &str) -> String {
    format!(
        "apiVersion: dray.dev/v1alpha1\nkind: Stage\nmetadata:\n  name: {name}\n  namespace: load\nspec:\n  requestedFreight:\n    - origin: {{kind: Warehouse, name: app}}\n      sources: {{direct: true}}\n"
    )
}

async fn apply_text(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    content: String,
) -> Result<reqwest::Response> {
    let body = json!({"files": [{"path": "stream.yaml", "content": content}]});
    Ok(client
        .post(format!("{url}/api/v1/apply"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() -> Result<()> {
    let world = TestWorld::new()?;
    let mut dray = Dray::start(&world, DrayOptions::default())?;
    let url = dray.url();
    let token = dray.token().to_owned();
    let client = dray_e2e::http_client()?;
    let setup = "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {name: load}\n---\napiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata: {name: app, namespace: load}\nspec:\n  subscriptions:\n    - image: {repoURL: 127.0.0.1:5000/load/app}\n";
    let response = apply_text(&client, &url, &token, setup.to_owned()).await?;
    assert!(response.status().is_success(), "{}", response.text().await?);

    let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer_client = client.clone();
    let writer_url = url.clone();
    let writer_token = token.clone();
    let writer = tokio::spawn(async move {
        for i in 0..10_000 {
            let name = format!("stage-{i}");
            match apply_text(
                &writer_client,
                &writer_url,
                &writer_token,
                stage_document(&name),
            )
            .await
            {
                Ok(response) if response.status().is_success() => {
                    if acked_tx.send(name).is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    });

    let mut acknowledged = Vec::new();
    while acknowledged.len() < 40 {
        let Some(name) = acked_rx.recv().await else {
            break;
        };
        acknowledged.push(name);
    }
    tokio::task::block_in_place(|| dray.kill9())?;
    writer.await?;
    while let Ok(name) = acked_rx.try_recv() {
        acknowledged.push(name);
    }
    assert!(
        acknowledged.len() >= 40,
        "the stream stopped early: {acknowledged:?}\n{}",
        dray.log()
    );

    tokio::task::block_in_place(|| dray.restart())?;
    let stages: Value = client
        .get(format!("{url}/api/v1/projects/load/stages"))
        .bearer_auth(&token)
        .send()
        .await?
        .json()
        .await?;
    let stored = names(&stages);
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|n| !stored.contains(n))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged but lost after kill -9: {lost:?}"
    );

    let after = apply_text(&client, &url, &token, stage_document("after-restart")).await?;
    assert!(
        after.status().is_success(),
        "the store must accept writes after the crash"
    );
    Ok(())
}

#[test]
fn server_log_and_cli_name_an_unreachable_server() -> Result<()> {
    let world = TestWorld::new()?;
    let mut dray = Dray::start(&world, DrayOptions::default())?;
    dray.kill9()?;
    let output = dray.cli(["get", "projects"])?;
    assert_eq!(output.status.code(), Some(3));
    let err = stderr(&output);
    assert!(err.contains("cannot reach the Dray server"), "{err}");
    assert!(err.contains(&dray.url()), "{err}");
    assert!(
        err.contains("hint: start the server with `dray serve`"),
        "{err}"
    );
    Ok(())
}
