//! `argocd-update` against the Argo CD double, backed by a real git server: the happy path,
//! and each cause it must name while it waits (KARGO-LESSONS 8 and 9).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use dray::discovery::git::MirrorCache;
use dray::expr::{ExprCache, ExprContext};
use dray::promotion::{SharedMirrors, StepExprs};
use dray_e2e::argocd::{AppSpec, ArgoCd, SyncWindow};
use dray_e2e::{GitRepo, GitServer, TestWorld};
use dray_steps::{
    CredentialProvider, GitCredentials, StepContext, StepOutcome, ToolPaths, builtin_steps,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "argocd-token";

struct Token(String);

impl CredentialProvider for Token {
    fn git(&self, _: &str) -> Option<GitCredentials> {
        None
    }
    fn token(&self, url: &str) -> Option<String> {
        (url == self.0).then(|| TOKEN.to_owned())
    }
}

/// A git server with `stage/prod` at a commit, and Argo CD with `shop-prod` following it.
struct Setup {
    _git: GitServer,
    repo: GitRepo,
    url: String,
    commit: String,
    argocd: ArgoCd,
    _dir: tempfile::TempDir,
    ctx: StepContext,
}

fn setup(annotation: Option<&str>) -> Result<Setup> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, Default::default())?;
    let url = git.create_repo("cd")?;
    let repo = GitRepo::clone_from_url(&world, &url)?;
    repo.write("app.yaml", "image: app:1.0\n")?;
    let commit = repo.commit("Promote app 1.0 to prod")?;
    repo.push("stage/prod")?;
    let argocd = ArgoCd::start(&world, TOKEN, "dray")?;
    argocd.add_app(&AppSpec::new("shop-prod", &url, "stage/prod", annotation));
    let dir = tempfile::tempdir()?;
    let ctx = StepContext {
        work_dir: dir.path().to_path_buf(),
        project: "shop".into(),
        stage: "prod".into(),
        promotion: "prod-1".into(),
        actor: "ann".into(),
        alias: "deploy".into(),
        freight: Default::default(),
        approved_by: None,
        window_override: None,
        credentials: Arc::new(Token(argocd.base_url())),
        repos: Arc::new(SharedMirrors(Arc::new(MirrorCache::new(
            dir.path().join("mirrors"),
        )))),
        http: reqwest::Client::new(),
        exprs: Arc::new(StepExprs::new(ExprCache::new(), ExprContext::default())),
        tools: ToolPaths::default(),
        cancel: CancellationToken::new(),
        log: Arc::new(|_| {}),
        saved_state: None,
    };
    Ok(Setup {
        _git: git,
        repo,
        url,
        commit,
        argocd,
        _dir: dir,
        ctx,
    })
}

impl Setup {
    fn config(&self, revision: &str) -> Value {
        json!({
            "apiServer": self.argocd.base_url(),
            "apps": [{"name": "shop-prod", "sources": [{"repoURL": self.url, "desiredRevision": revision}]}],
            "pollInterval": "1s",
        })
    }

    /// Runs the step once, carrying its saved state forward as the engine does.
    async fn run(&mut self, config: &Value) -> StepOutcome {
        let step = builtin_steps().get("argocd-update").expect("registered");
        let outcome = step.run(&self.ctx, config.clone()).await;
        if let StepOutcome::Running {
            state: Some(state), ..
        } = &outcome
        {
            self.ctx.saved_state = Some(state.clone());
        }
        outcome
    }
}

#[track_caller]
fn waiting_for(outcome: &StepOutcome) -> String {
    match outcome {
        StepOutcome::Running {
            waiting_for,
            retry_after,
            ..
        } => {
            assert_eq!(*retry_after, Duration::from_secs(1));
            waiting_for.clone()
        }
        other => panic!("expected Running, got {other:?}"),
    }
}

#[tokio::test]
async fn syncs_to_the_pushed_commit_and_succeeds_only_when_argocd_reports_it() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.set_sync_polls("shop-prod", 2);
    let config = s.config(&s.commit);
    let short = s.commit[..12].to_owned();
    // First look: sync requested; written to git, waiting for Argo CD.
    let first = waiting_for(&s.run(&config).await);
    assert_eq!(
        first,
        format!("Argo CD to sync `shop-prod` to `{short}` (the change is written to git)")
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    // The slow sync runs; a re-run never requests a second sync.
    let second = waiting_for(&s.run(&config).await);
    assert!(
        second.contains("Argo CD to finish syncing `shop-prod`"),
        "{second}"
    );
    let mut outcome = s.run(&config).await;
    for _ in 0..3 {
        if matches!(outcome, StepOutcome::Succeeded { .. }) {
            break;
        }
        outcome = s.run(&config).await;
    }
    let StepOutcome::Succeeded { outputs, .. } = outcome else {
        panic!("expected Succeeded, got {outcome:?}")
    };
    assert_eq!(outputs["apps"][0]["revision"], json!(s.commit));
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    let app = s.argocd.app("shop-prod").unwrap();
    assert_eq!(app["status"]["sync"]["revision"], json!(s.commit));
    assert_eq!(
        app["status"]["operationState"]["syncResult"]["revision"],
        json!(s.commit)
    );
    assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
    assert_eq!(
        app["status"]["operationState"]["operation"]["initiatedBy"]["username"],
        "dray"
    );
    Ok(())
}

#[tokio::test]
async fn a_sync_to_a_commit_the_branch_does_not_hold_is_not_success() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    // A newer commit somewhere else: Argo CD applies it, but compares with `stage/prod`.
    s.repo.write("app.yaml", "image: app:2.0\n")?;
    let other = s.repo.commit("elsewhere")?;
    s.repo.push("elsewhere")?;
    let config = s.config(&other);
    waiting_for(&s.run(&config).await);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("the sync succeeded, but it compares against"),
        "{waiting}"
    );
    assert!(waiting.contains(&s.commit), "{waiting}");
    // With updateTargetRevision the source follows the commit, and then it is done.
    let mut config = config;
    config["apps"][0]["sources"][0]["updateTargetRevision"] = json!(true);
    let outcome = s.run(&config).await;
    assert!(
        matches!(outcome, StepOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    let app = s.argocd.app("shop-prod").unwrap();
    assert_eq!(app["spec"]["source"]["targetRevision"], json!(other));
    Ok(())
}

#[tokio::test]
async fn a_closed_sync_window_is_named() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.deny_sync_window(
        "shop-prod",
        Some(SyncWindow {
            kind: "deny".into(),
            schedule: "0 22 * * *".into(),
            duration: "8h".into(),
            manual_sync: false,
        }),
    );
    let config = s.config(&s.commit);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("a sync window to open: Argo CD blocks syncing `shop-prod`"),
        "{waiting}"
    );
    assert!(
        waiting.contains("`deny` window `0 22 * * *` for 8h"),
        "{waiting}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    // The window opens: the sync is requested then.
    s.argocd.deny_sync_window("shop-prod", None);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.ends_with("(the change is written to git)"),
        "{waiting}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    Ok(())
}

#[tokio::test]
async fn another_users_operation_is_named_with_the_user() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd
        .start_foreign_operation("shop-prod", "bob@example.com", 10);
    let config = s.config(&s.commit);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("an operation on `shop-prod` started by `bob@example.com`"),
        "{waiting}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    Ok(())
}

#[tokio::test]
async fn the_sync_refused_while_busy_names_argocds_reason() -> Result<()> {
    let s = setup(Some("shop:prod"))?;
    s.argocd
        .start_foreign_operation("shop-prod", "bob@example.com", 10);
    // The API itself refuses a second operation as Argo CD does.
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/applications/shop-prod/sync",
            s.argocd.base_url()
        ))
        .bearer_auth(TOKEN)
        .json(&json!({"revision": s.commit}))
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await?;
    assert_eq!(body["code"], 9);
    assert_eq!(body["message"], "another operation is already in progress");
    Ok(())
}

#[tokio::test]
async fn degraded_after_sync_fails_with_argocds_message() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.degrade_after_sync(
        "shop-prod",
        "Deployment \"app\" exceeded its progress deadline",
    );
    let config = s.config(&s.commit);
    waiting_for(&s.run(&config).await);
    let outcome = s.run(&config).await;
    let StepOutcome::Failed { reason } = outcome else {
        panic!("expected Failed, got {outcome:?}")
    };
    assert!(reason.contains("it is Degraded"), "{reason}");
    assert!(
        reason.contains("Deployment \"app\" exceeded its progress deadline"),
        "{reason}"
    );
    Ok(())
}

#[tokio::test]
async fn a_comparison_error_and_a_failed_sync_are_named() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.set_comparison_error(
        "shop-prod",
        Some("rpc error: code = Unknown desc = kustomize build failed"),
    );
    let config = s.config(&s.commit);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("Argo CD cannot compare `shop-prod`: ComparisonError: rpc error"),
        "{waiting}"
    );
    s.argocd.set_comparison_error("shop-prod", None);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("after Argo CD's sync error: ComparisonError: rpc error"),
        "{waiting}"
    );
    // The sync was requested again, and now it goes through.
    assert_eq!(s.argocd.syncs_started("shop-prod"), 2);
    let outcome = s.run(&config).await;
    assert!(
        matches!(outcome, StepOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_application_is_named() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.remove_app("shop-prod");
    let waiting = waiting_for(&s.run(&s.config(&s.commit)).await);
    assert!(
        waiting.contains("Application `shop-prod` is missing in Argo CD"),
        "{waiting}"
    );
    Ok(())
}

#[tokio::test]
async fn an_unauthorised_application_is_refused_by_name() -> Result<()> {
    let mut s = setup(Some("shop:staging"))?;
    let config = s.config(&s.commit);
    let StepOutcome::Failed { reason } = s.run(&config).await else {
        panic!("expected Failed")
    };
    assert!(
        reason.contains("refusing to touch Argo CD Application `shop-prod`: it is authorised for `shop:staging`, not `shop:prod`"),
        "{reason}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);

    let mut s = setup(None)?;
    let StepOutcome::Failed { reason } = s.run(&s.config(&s.commit)).await else {
        panic!("expected Failed")
    };
    assert!(
        reason.contains("it has no `dray.dev/authorized-stage` annotation"),
        "{reason}"
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_token_is_an_error_with_a_hint() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    s.ctx.credentials = Arc::new(Token("http://elsewhere".into()));
    let outcome = s.run(&s.config(&s.commit)).await;
    let StepOutcome::Errored { reason } = outcome else {
        panic!("expected Errored, got {outcome:?}")
    };
    assert!(reason.contains("401"), "{reason}");
    assert!(reason.contains("has no token"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn a_label_selector_moves_every_application_it_matches() -> Result<()> {
    let mut s = setup(Some("shop:prod"))?;
    let mut spec = AppSpec::new("shop-prod-eu", &s.url, "stage/prod", Some("shop:prod"));
    spec.labels.insert("team".into(), "shop".into());
    s.argocd.add_app(&spec);
    let mut other = AppSpec::new("other", &s.url, "stage/prod", None);
    other.labels.insert("team".into(), "other".into());
    s.argocd.add_app(&other);
    let config = json!({
        "apiServer": s.argocd.base_url(),
        "apps": [{"selector": "team=shop", "sources": [{"repoURL": s.url, "desiredRevision": s.commit}]}],
        "pollInterval": "1s",
    });
    let waiting = waiting_for(&s.run(&config).await);
    assert!(waiting.contains("`shop-prod-eu`"), "{waiting}");
    let outcome = s.run(&config).await;
    let StepOutcome::Succeeded { outputs, .. } = outcome else {
        panic!("expected Succeeded, got {outcome:?}")
    };
    assert_eq!(outputs["apps"][0]["name"], "shop-prod-eu");
    assert_eq!(s.argocd.syncs_started("shop-prod-eu"), 1);
    assert_eq!(s.argocd.syncs_started("other"), 0);
    // Nothing matches: it says so while it waits.
    let none = json!({
        "apiServer": s.argocd.base_url(),
        "apps": [{"selector": "team=nobody", "sources": [{"repoURL": s.url, "desiredRevision": s.commit}]}],
        "pollInterval": "1s",
    });
    let waiting = waiting_for(&s.run(&none).await);
    assert!(
        waiting.contains("an Application matching `team=nobody`"),
        "{waiting}"
    );
    Ok(())
}

/// KARGO-LESSONS 8 through `dray serve`: a promotion whose `argocd-update` meets a closed
/// sync window fails at its `retry.timeout` naming the window, not a bare "timed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_blocked_by_a_sync_window_times_out_naming_the_window() -> Result<()> {
    use anyhow::{Context, bail};
    use dray_e2e::{Dray, DrayOptions, Registry, oci, workspace_root};

    let s = setup(Some("demo:prod"))?;
    s.argocd.deny_sync_window(
        "shop-prod",
        Some(SyncWindow {
            kind: "deny".into(),
            schedule: "0 22 * * *".into(),
            duration: "8h".into(),
            manual_sync: false,
        }),
    );
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("config")?;
    GitRepo::seed(
        &world,
        &config_url,
        &workspace_root().join("examples/quickstart/config-repo"),
    )?;
    oci::push_image(&registry, "demo/app", "1.0.0").await?;
    let said = tokio::task::block_in_place(|| -> Result<String> {
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
        // The Argo CD token: a Credential whose `repoURL` is the API server.
        std::fs::write(
            dir.join("prod.yaml"),
            format!(
                r#"apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: argocd, namespace: demo}}
spec: {{type: argocd, repoURL: "{api}", token: {TOKEN}}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  promotionTemplate:
    spec:
      steps:
        - uses: argocd-update
          as: deploy
          retry: {{timeout: 3s}}
          config:
            apiServer: "{api}"
            pollInterval: 500ms
            apps:
              - name: shop-prod
                sources:
                  - repoURL: "{url}"
                    desiredRevision: "{commit}"
"#,
                api = s.argocd.base_url(),
                url = s.url,
                commit = s.commit,
            ),
        )?;
        let applied = dray.cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
        if !applied.status.success() {
            bail!("apply failed: {}", String::from_utf8_lossy(&applied.stderr));
        }
        let refreshed = dray.cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])?;
        if !refreshed.status.success() {
            bail!(
                "refresh failed: {}",
                String::from_utf8_lossy(&refreshed.stderr)
            );
        }
        let freight: Vec<Value> = serde_json::from_slice(
            &dray
                .cli(["get", "freight", "-p", "demo", "-o", "json"])?
                .stdout,
        )?;
        let alias = freight[0]["alias"].as_str().context("alias")?.to_owned();
        let promoted = dray.cli([
            "promote",
            "-p",
            "demo",
            "--stage",
            "prod",
            "--alias",
            &alias,
            "--wait",
            "--timeout",
            "2m",
        ])?;
        assert!(!promoted.status.success());
        Ok(format!(
            "{}{}",
            String::from_utf8_lossy(&promoted.stdout),
            String::from_utf8_lossy(&promoted.stderr)
        ))
    })?;
    assert!(
        said.contains("timed out after 3s waiting for a sync window to open"),
        "{said}"
    );
    assert!(said.contains("`deny` window `0 22 * * *` for 8h"), "{said}");
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    Ok(())
}
