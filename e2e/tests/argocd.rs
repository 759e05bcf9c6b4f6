//! `argocd-update` against the Argo CD double, backed by a real git server, through both
//! doors (Argo CD's API server, and the Kubernetes API with the double's simulated
//! controller): the happy path, image overrides, and each cause it must name while it waits
//! (KARGO-LESSONS 8 and 9). `argocd-wait` through both doors: a sync someone else started,
//! a selector, and an Application that degrades while it is watched.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use dray::discovery::git::MirrorCache;
use dray::expr::ExprContext;
use dray::promotion::{SharedMirrors, StepExprs};
use dray_e2e::argocd::{AppSpec, ArgoCd, SyncWindow};
use dray_e2e::{GitRepo, GitServer, TestWorld};
use dray_steps::argocd::{AppHealth, ArgocdTarget, KubeAccess, judge};
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

/// How the step reaches the double.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    /// The step's own `apiServer`.
    ApiServer,
    /// The project's `spec.argocd.kubernetes` (no `apiServer` in the step).
    Kubernetes,
}

const DOORS: [Door; 2] = [Door::ApiServer, Door::Kubernetes];

/// A git server with `stage/prod` at a commit, and Argo CD with `shop-prod` following it.
struct Setup {
    door: Door,
    _git: GitServer,
    repo: GitRepo,
    url: String,
    commit: String,
    argocd: ArgoCd,
    _dir: tempfile::TempDir,
    ctx: StepContext,
}

fn setup(annotation: Option<&str>) -> Result<Setup> {
    setup_through(annotation, Door::ApiServer)
}

fn setup_through(annotation: Option<&str>, door: Door) -> Result<Setup> {
    setup_with(annotation, door, false)
}

/// As [`setup_through`]; with `tls`, the double also serves HTTPS with its own CA.
fn setup_with(annotation: Option<&str>, door: Door, tls: bool) -> Result<Setup> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, Default::default())?;
    let url = git.create_repo("cd")?;
    let repo = GitRepo::clone_from_url(&world, &url)?;
    repo.write("app.yaml", "image: app:1.0\n")?;
    let commit = repo.commit("Promote app 1.0 to prod")?;
    repo.push("stage/prod")?;
    let argocd = if tls {
        ArgoCd::start_tls(&world, TOKEN, "dray")?
    } else {
        ArgoCd::start(&world, TOKEN, "dray")?
    };
    argocd.add_app(&AppSpec::new("shop-prod", &url, "stage/prod", annotation));
    let dir = tempfile::tempdir()?;
    let ctx = StepContext {
        work_dir: dir.path().to_path_buf(),
        warm_dir: None,
        project: "shop".into(),
        stage: "prod".into(),
        promotion: "prod-1".into(),
        actor: "ann".into(),
        alias: "deploy".into(),
        freight: Default::default(),
        approved_by: None,
        window_override: None,
        signed_off_by: Vec::new(),
        freeze_override: None,
        credentials: Arc::new(Token(argocd.base_url())),
        repos: Arc::new(SharedMirrors(Arc::new(MirrorCache::new(
            dir.path().join("mirrors"),
        )))),
        http: dray_e2e::http_client()?,
        exprs: Arc::new(StepExprs::new(
            dray::promotion::exprs::Exprs::new(),
            dray::expr::exprlang::ExprLanguage::Cel,
            ExprContext::default(),
        )),
        tools: ToolPaths::default(),
        cancel: CancellationToken::new(),
        log: Arc::new(|_| {}),
        saved_state: None,
        argocd: (door == Door::Kubernetes).then(|| ArgocdTarget::Kubernetes {
            access: KubeAccess::Server {
                url: argocd.kubernetes_url(),
                certificate_authority_data: None,
            },
            namespace: "argocd".into(),
        }),
    };
    Ok(Setup {
        door,
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
        self.with_door(json!({
            "apps": [{"name": "shop-prod", "sources": [{"repoURL": self.url, "desiredRevision": revision}]}],
            "pollInterval": "1s",
        }))
    }

    /// `config` with `apiServer` when the door is the API server (the Kubernetes door comes
    /// from the context, as the engine fills it from the ProjectConfig).
    fn with_door(&self, mut config: Value) -> Value {
        if self.door == Door::ApiServer {
            config["apiServer"] = json!(self.argocd.base_url());
        }
        config
    }

    /// Runs until the step succeeds (at most `runs` times), returning its outputs.
    async fn run_to_success(
        &mut self,
        config: &Value,
        runs: usize,
    ) -> serde_json::Map<String, Value> {
        let mut last = None;
        for _ in 0..runs {
            match self.run(config).await {
                StepOutcome::Succeeded { outputs, .. } => return outputs,
                other => last = Some(other),
            }
        }
        panic!(
            "{:?}: expected Succeeded within {runs} runs, last {last:?}",
            self.door
        )
    }

    /// Request lines that went through the door not chosen.
    fn requests_through_the_other_door(&self) -> Vec<String> {
        let other = match self.door {
            Door::ApiServer => " /apis/",
            Door::Kubernetes => " /api/v1/",
        };
        self.argocd
            .requests()
            .into_iter()
            .filter(|r| r.contains(other))
            .collect()
    }

    /// Runs the step once, carrying its saved state forward as the engine does.
    async fn run(&mut self, config: &Value) -> StepOutcome {
        self.run_step("argocd-update", config).await
    }

    /// Runs the step `kind` once, carrying its saved state forward as the engine does.
    async fn run_step(&mut self, kind: &str, config: &Value) -> StepOutcome {
        let step = builtin_steps().get(kind).expect("registered");
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

fn deny_window() -> SyncWindow {
    SyncWindow {
        kind: "deny".into(),
        schedule: "0 22 * * *".into(),
        duration: "8h".into(),
        manual_sync: false,
    }
}

#[tokio::test]
async fn syncs_to_the_pushed_commit_and_succeeds_only_when_argocd_reports_it() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.argocd.set_sync_polls("shop-prod", 2);
        let config = s.config(&s.commit);
        let short = s.commit[..12].to_owned();
        // First look: sync requested; written to git, waiting for Argo CD.
        let first = waiting_for(&s.run(&config).await);
        assert_eq!(
            first,
            format!("Argo CD to sync `shop-prod` to `{short}` (the change is written to git)")
        );
        assert_eq!(s.argocd.syncs_started("shop-prod"), 1, "{door:?}");
        // The slow sync runs; a re-run never requests a second sync.
        let second = waiting_for(&s.run(&config).await);
        assert!(
            second.contains("Argo CD to finish syncing `shop-prod`"),
            "{door:?}: {second}"
        );
        let outputs = s.run_to_success(&config, 4).await;
        assert_eq!(s.argocd.syncs_started("shop-prod"), 1, "{door:?}");
        // Registered for the Stage's health, with how to reach it.
        let registered = &outputs["apps"][0];
        assert_eq!(registered["name"], "shop-prod");
        assert_eq!(registered["revision"], json!(s.commit));
        assert_eq!(registered["desiredRevisions"], json!([s.commit]));
        let app = s.argocd.app("shop-prod").unwrap();
        assert_eq!(app["status"]["sync"]["revision"], json!(s.commit));
        assert_eq!(
            app["status"]["operationState"]["syncResult"]["revision"],
            json!(s.commit)
        );
        assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
        let user = &app["status"]["operationState"]["operation"]["initiatedBy"]["username"];
        match door {
            Door::ApiServer => {
                assert_eq!(*user, "dray");
                assert_eq!(registered["apiServer"], json!(s.argocd.base_url()));
                assert!(registered.get("kubernetes").is_none());
            }
            Door::Kubernetes => {
                // The operation Dray wrote, as Argo CD's controller ran it.
                assert_eq!(*user, "dray:shop/prod");
                assert_eq!(registered["kubernetes"], json!(s.argocd.kubernetes_url()));
                assert_eq!(registered["namespace"], "argocd");
                assert!(registered.get("apiServer").is_none());
                let patches = s.argocd.patches("shop-prod");
                assert_eq!(patches.len(), 1, "{patches:?}");
                let patch = &patches[0];
                assert_eq!(patch["operation"]["sync"]["revision"], json!(s.commit));
                assert_eq!(
                    patch["operation"]["initiatedBy"]["username"],
                    "dray:shop/prod"
                );
                assert_eq!(
                    patch["metadata"]["annotations"]["argocd.argoproj.io/refresh"],
                    "hard"
                );
                assert!(patch["metadata"]["resourceVersion"].is_string(), "{patch}");
                assert_eq!(patch["operation"]["info"][0]["name"], "Reason");
                // The controller took the refresh annotation away, and cleared `operation`.
                assert!(app.get("operation").is_none(), "{app}");
                assert!(
                    app["metadata"]["annotations"]
                        .get("argocd.argoproj.io/refresh")
                        .is_none()
                );
            }
        }
        assert_eq!(
            s.requests_through_the_other_door(),
            Vec::<String>::new(),
            "{door:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_sync_to_a_commit_the_branch_does_not_hold_is_not_success() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        // A newer commit somewhere else: Argo CD applies it, but compares with `stage/prod`.
        s.repo.write("app.yaml", "image: app:2.0\n")?;
        let other = s.repo.commit("elsewhere")?;
        s.repo.push("elsewhere")?;
        let config = s.config(&other);
        waiting_for(&s.run(&config).await);
        let waiting = waiting_for(&s.run(&config).await);
        assert!(
            waiting.contains("the sync succeeded, but it compares against"),
            "{door:?}: {waiting}"
        );
        assert!(waiting.contains(&s.commit), "{waiting}");
        // With updateTargetRevision the source follows the commit, and then it is done.
        let mut config = config;
        config["apps"][0]["sources"][0]["updateTargetRevision"] = json!(true);
        let outcome = s.run(&config).await;
        assert!(
            matches!(outcome, StepOutcome::Succeeded { .. }),
            "{door:?}: {outcome:?}"
        );
        let app = s.argocd.app("shop-prod").unwrap();
        assert_eq!(app["spec"]["source"]["targetRevision"], json!(other));
    }
    Ok(())
}

#[tokio::test]
async fn a_closed_sync_window_is_named() -> Result<()> {
    // The API server refuses the sync request itself.
    let mut s = setup(Some("shop:prod"))?;
    s.argocd.deny_sync_window("shop-prod", Some(deny_window()));
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
async fn a_sync_window_holding_the_operation_is_named_from_the_appproject() -> Result<()> {
    // Through Kubernetes the operation is written; Argo CD's controller holds it `Running`
    // with "Sync operation blocked by sync window", and the AppProject names the window.
    let mut s = setup_through(Some("shop:prod"), Door::Kubernetes)?;
    s.argocd.deny_sync_window("shop-prod", Some(deny_window()));
    let config = s.config(&s.commit);
    let first = waiting_for(&s.run(&config).await);
    assert!(first.ends_with("(the change is written to git)"), "{first}");
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    let waiting = waiting_for(&s.run(&config).await);
    assert_eq!(
        waiting,
        format!(
            "a sync window to open: Argo CD blocks syncing `shop-prod` to `{}` (AppProject \
             `default`: `deny` window `0 22 * * *` for 8h)",
            &s.commit[..12]
        )
    );
    let app = s.argocd.app("shop-prod").unwrap();
    assert_eq!(
        app["status"]["operationState"]["message"],
        "Sync operation blocked by sync window"
    );
    assert!(s.argocd.requests().contains(
        &"GET /apis/argoproj.io/v1alpha1/namespaces/argocd/appprojects/default 200".to_owned()
    ));
    // Still held on the next look, and never requested twice.
    waiting_for(&s.run(&config).await);
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    // The window opens: the held operation completes.
    s.argocd.deny_sync_window("shop-prod", None);
    s.run_to_success(&config, 2).await;
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    Ok(())
}

#[tokio::test]
async fn another_users_operation_is_named_with_the_user() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.argocd
            .start_foreign_operation("shop-prod", "bob@example.com", 10);
        let config = s.config(&s.commit);
        let waiting = waiting_for(&s.run(&config).await);
        assert!(
            waiting.contains("an operation on `shop-prod` started by `bob@example.com`"),
            "{door:?}: {waiting}"
        );
        assert_eq!(s.argocd.syncs_started("shop-prod"), 0, "{door:?}");
        if door == Door::Kubernetes {
            // Bob's operation was never replaced.
            assert!(s.argocd.patches("shop-prod").is_empty());
            let app = s.argocd.app("shop-prod").unwrap();
            assert_eq!(
                app["operation"]["initiatedBy"]["username"],
                "bob@example.com"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_sync_refused_while_busy_names_argocds_reason() -> Result<()> {
    let s = setup(Some("shop:prod"))?;
    s.argocd
        .start_foreign_operation("shop-prod", "bob@example.com", 10);
    // The API itself refuses a second operation as Argo CD does.
    let response = dray_e2e::http_client()?
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
async fn the_kubernetes_door_answers_with_status_objects() -> Result<()> {
    let s = setup_through(Some("shop:prod"), Door::Kubernetes)?;
    let client = dray_e2e::http_client()?;
    let app_url = format!(
        "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/shop-prod",
        s.argocd.kubernetes_url()
    );
    let unauthorised = client.get(&app_url).send().await?;
    assert_eq!(unauthorised.status().as_u16(), 401);
    let body: Value = unauthorised.json().await?;
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Unauthorized");
    let elsewhere = client
        .get(app_url.replace("/argocd/", "/team-a/"))
        .bearer_auth(TOKEN)
        .send()
        .await?;
    assert_eq!(elsewhere.status().as_u16(), 404);
    let body: Value = elsewhere.json().await?;
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(
        body["message"],
        "applications.argoproj.io \"shop-prod\" not found"
    );
    // A JSON patch body sent as plain JSON is refused; a stale resourceVersion conflicts.
    let wrong_type = client
        .patch(&app_url)
        .bearer_auth(TOKEN)
        .json(&json!({"spec": {}}))
        .send()
        .await?;
    assert_eq!(wrong_type.status().as_u16(), 415);
    let stale = client
        .patch(&app_url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/merge-patch+json")
        .body(json!({"metadata": {"resourceVersion": "0"}, "operation": {"sync": {}}}).to_string())
        .send()
        .await?;
    assert_eq!(stale.status().as_u16(), 409);
    let body: Value = stale.json().await?;
    assert_eq!(body["reason"], "Conflict");
    assert!(
        s.argocd
            .app("shop-prod")
            .unwrap()
            .get("operation")
            .is_none()
    );
    Ok(())
}

#[tokio::test]
async fn degraded_after_sync_succeeds_and_judge_says_unhealthy() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        let why = "Deployment \"app\" exceeded its progress deadline";
        s.argocd.degrade_after_sync("shop-prod", why);
        let config = s.config(&s.commit);
        waiting_for(&s.run(&config).await);
        // Synced to the desired revision: the step is done; health is the Stage's business.
        let outputs = s.run_to_success(&config, 1).await;
        let app = s.argocd.app("shop-prod").unwrap();
        assert_eq!(app["status"]["health"]["status"], "Degraded");
        let desired: Vec<String> =
            serde_json::from_value(outputs["apps"][0]["desiredRevisions"].clone())?;
        let (verdict, health, revision, message) = judge(&app, &desired);
        assert_eq!(verdict, AppHealth::Unhealthy, "{door:?}");
        assert_eq!(health, "Degraded");
        assert_eq!(revision, s.commit);
        assert_eq!(message, format!("`shop-prod` is Degraded: {why}"));
    }
    Ok(())
}

#[tokio::test]
async fn read_application_reads_through_either_door() -> Result<()> {
    for door in DOORS {
        let s = setup_through(Some("shop:prod"), door)?;
        let target = match door {
            Door::ApiServer => ArgocdTarget::ApiServer {
                url: s.argocd.base_url(),
            },
            Door::Kubernetes => s.ctx.argocd.clone().unwrap(),
        };
        let app = dray_steps::argocd::ApplicationRef {
            name: "shop-prod".into(),
            namespace: None,
        };
        let http = dray_e2e::http_client()?;
        let read =
            dray_steps::argocd::read_application(&http, Some(TOKEN.into()), &target, &app).await;
        let read = read.map_err(anyhow::Error::msg)?.expect("it exists");
        assert_eq!(read["metadata"]["name"], "shop-prod");
        let (verdict, ..) = judge(&read, std::slice::from_ref(&s.commit));
        assert_eq!(verdict, AppHealth::Progressing, "never synced yet");
        let missing = dray_steps::argocd::ApplicationRef {
            name: "nope".into(),
            namespace: None,
        };
        let none =
            dray_steps::argocd::read_application(&http, Some(TOKEN.into()), &target, &missing)
                .await;
        assert_eq!(none, Ok(None));
        let refused = dray_steps::argocd::read_application(&http, None, &target, &app)
            .await
            .unwrap_err();
        assert!(refused.contains("401"), "{refused}");
        assert!(refused.contains(&s.argocd.base_url()), "{refused}");
    }
    Ok(())
}

#[tokio::test]
async fn a_comparison_error_and_a_failed_sync_are_named() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.argocd.set_comparison_error(
            "shop-prod",
            Some("rpc error: code = Unknown desc = kustomize build failed"),
        );
        let config = s.config(&s.commit);
        let waiting = waiting_for(&s.run(&config).await);
        assert!(
            waiting.contains("Argo CD cannot compare `shop-prod`: ComparisonError: rpc error"),
            "{door:?}: {waiting}"
        );
        if door == Door::Kubernetes {
            // The controller starts the written operation on its next reconciliation.
            let waiting = waiting_for(&s.run(&config).await);
            assert!(
                waiting.contains("after Argo CD's sync error: ComparisonError: rpc error"),
                "{waiting}"
            );
        }
        s.argocd.set_comparison_error("shop-prod", None);
        if door == Door::ApiServer {
            let waiting = waiting_for(&s.run(&config).await);
            assert!(
                waiting.contains("after Argo CD's sync error: ComparisonError: rpc error"),
                "{waiting}"
            );
        }
        // The sync was requested again, and now it goes through.
        assert_eq!(s.argocd.syncs_started("shop-prod"), 2, "{door:?}");
        s.run_to_success(&config, 1).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_missing_application_is_named() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.argocd.remove_app("shop-prod");
        let waiting = waiting_for(&s.run(&s.config(&s.commit)).await);
        assert!(
            waiting.contains(&format!(
                "Application `shop-prod` is missing in {} at `{}`",
                if door == Door::ApiServer {
                    "Argo CD"
                } else {
                    "the Kubernetes API"
                },
                s.argocd.base_url()
            )),
            "{waiting}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn argocd_answering_503_is_waited_out_and_named_not_a_failure() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        let config = s.config(&s.commit);
        s.argocd.answer_unavailable(1);
        let waiting = waiting_for(&s.run(&config).await);
        assert!(
            waiting.contains("Argo CD to answer again"),
            "{door:?}: {waiting}"
        );
        assert!(waiting.contains("answered 503"), "{door:?}: {waiting}");
        assert!(
            waiting.contains(&s.argocd.base_url()),
            "{door:?}: {waiting}"
        );
        assert!(
            !waiting.contains("upstream connect error"),
            "a proxy's page is not quoted: {waiting}"
        );
        assert_eq!(s.argocd.syncs_started("shop-prod"), 0, "{door:?}");
        // Argo CD is back: the same step goes on to sync and succeed.
        s.run_to_success(&config, 4).await;
        assert_eq!(s.argocd.syncs_started("shop-prod"), 1, "{door:?}");
    }
    Ok(())
}

#[tokio::test]
async fn an_unauthorised_application_is_refused_by_name() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:staging"), door)?;
        let config = s.config(&s.commit);
        let StepOutcome::Failed { reason } = s.run(&config).await else {
            panic!("expected Failed")
        };
        assert!(
            reason.contains("refusing to touch Argo CD Application `shop-prod`: it is authorised for `shop:staging`, not `shop:prod`"),
            "{reason}"
        );
        assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
        assert!(s.argocd.patches("shop-prod").is_empty());

        let mut s = setup_through(None, door)?;
        let StepOutcome::Failed { reason } = s.run(&s.config(&s.commit)).await else {
            panic!("expected Failed")
        };
        assert!(
            reason.contains("it has no `dray.dev/authorized-stage` annotation"),
            "{reason}"
        );
        assert!(
            !s.argocd
                .requests()
                .iter()
                .any(|r| r.starts_with("PATCH") || r.starts_with("POST")),
            "{:?}",
            s.argocd.requests()
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_missing_token_is_an_error_with_a_hint() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.ctx.credentials = Arc::new(Token("http://elsewhere".into()));
        let outcome = s.run(&s.config(&s.commit)).await;
        let StepOutcome::Errored { reason } = outcome else {
            panic!("expected Errored, got {outcome:?}")
        };
        assert!(reason.contains("401"), "{reason}");
        assert!(reason.contains("has no token"), "{reason}");
        assert!(reason.contains("Credential of type `argocd`"), "{reason}");
    }
    Ok(())
}

#[tokio::test]
async fn a_label_selector_moves_every_application_it_matches() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        let mut spec = AppSpec::new("shop-prod-eu", &s.url, "stage/prod", Some("shop:prod"));
        spec.labels.insert("team".into(), "shop".into());
        s.argocd.add_app(&spec);
        let mut other = AppSpec::new("other", &s.url, "stage/prod", None);
        other.labels.insert("team".into(), "other".into());
        s.argocd.add_app(&other);
        let config = s.with_door(json!({
            "apps": [{"selector": "team=shop", "sources": [{"repoURL": s.url, "desiredRevision": s.commit}]}],
            "pollInterval": "1s",
        }));
        let waiting = waiting_for(&s.run(&config).await);
        assert!(waiting.contains("`shop-prod-eu`"), "{waiting}");
        let outcome = s.run(&config).await;
        let StepOutcome::Succeeded { outputs, .. } = outcome else {
            panic!("expected Succeeded, got {outcome:?}")
        };
        assert_eq!(outputs["apps"][0]["name"], "shop-prod-eu");
        assert_eq!(outputs["apps"].as_array().map(Vec::len), Some(1));
        assert_eq!(s.argocd.syncs_started("shop-prod-eu"), 1);
        assert_eq!(s.argocd.syncs_started("other"), 0);
        let listed = match door {
            Door::ApiServer => "GET /api/v1/applications?selector=team=shop 200",
            Door::Kubernetes => {
                "GET /apis/argoproj.io/v1alpha1/namespaces/argocd/applications?labelSelector=team=shop 200"
            }
        };
        assert!(
            s.argocd.requests().iter().any(|r| r == listed),
            "{:?}",
            s.argocd.requests()
        );
        // Nothing matches: it says so while it waits.
        let none = s.with_door(json!({
            "apps": [{"selector": "team=nobody", "sources": [{"repoURL": s.url, "desiredRevision": s.commit}]}],
            "pollInterval": "1s",
        }));
        let waiting = waiting_for(&s.run(&none).await);
        assert!(
            waiting.contains("an Application matching `team=nobody`"),
            "{waiting}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn kustomize_and_helm_images_are_patched_once() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        // The Application already overrides two images and one Helm parameter.
        let response = dray_e2e::http_client()?
            .patch(format!(
                "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/shop-prod",
                s.argocd.kubernetes_url()
            ))
            .bearer_auth(TOKEN)
            .header("content-type", "application/merge-patch+json")
            .body(
                json!({"spec": {"source": {
                    "kustomize": {"images": ["registry.example.com/shop/app:1.0", "redis:7"]},
                    "helm": {"parameters": [{"name": "image.tag", "value": "1.0"}, {"name": "replicas", "value": "2"}]},
                }}})
                .to_string(),
            )
            .send()
            .await?;
        assert_eq!(response.status().as_u16(), 200);
        let mut config = s.config(&s.commit);
        config["apps"][0]["sources"][0]["kustomize"] = json!({"images": ["registry.example.com/shop/app:1.1", "registry.example.com/shop/worker@sha256:abcd"]});
        config["apps"][0]["sources"][0]["helm"] =
            json!({"images": [{"key": "image.tag", "value": "1.1"}]});
        s.run_to_success(&config, 3).await;
        let app = s.argocd.app("shop-prod").unwrap();
        let source = &app["spec"]["source"];
        assert_eq!(
            source["kustomize"]["images"],
            json!([
                "registry.example.com/shop/app:1.1",
                "redis:7",
                "registry.example.com/shop/worker@sha256:abcd"
            ])
        );
        assert_eq!(
            source["helm"]["parameters"],
            json!([{"name": "image.tag", "value": "1.1"}, {"name": "replicas", "value": "2"}])
        );
        assert_eq!(source["targetRevision"], "stage/prod");
        let spec_patches = |s: &Setup| -> usize {
            s.argocd
                .requests()
                .iter()
                .filter(|r| {
                    r.starts_with("PATCH /api/v1/applications/shop-prod 200")
                        || (r.starts_with("PATCH /apis/") && !r.contains("(operation)"))
                })
                .count()
        };
        // One patch by the test, one by the step.
        assert_eq!(spec_patches(&s), 2, "{door:?}: {:?}", s.argocd.requests());
        if door == Door::Kubernetes {
            let patch = &s.argocd.patches("shop-prod")[1];
            assert_eq!(
                patch["metadata"]["annotations"]["argocd.argoproj.io/refresh"],
                "hard"
            );
            assert!(patch["spec"]["source"].get("repoURL").is_none(), "{patch}");
        }
        // A second promotion of the same images changes nothing.
        s.ctx.saved_state = None;
        s.run_to_success(&config, 1).await;
        assert_eq!(spec_patches(&s), 2, "{door:?}");
    }
    Ok(())
}

/// A promotion through `dray serve`: the quickstart project plus `extra` (YAML with the
/// Stage `prod` and what it needs), Freight discovered, `prod` promoted with `--wait`.
/// Answers whether `dray promote` succeeded, and what it said.
async fn promote_through_dray(extra: &str) -> Result<(bool, String)> {
    use anyhow::ensure;
    use dray_e2e::oci;
    use dray_e2e::pipeline::{BASE_FILES, Pipeline, text};

    let p = tokio::task::block_in_place(Pipeline::start)?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<(bool, String)> {
        let base = BASE_FILES
            .iter()
            .map(|f| Pipeline::quickstart_file(f))
            .collect::<Result<Vec<_>>>()?;
        p.apply(&format!("{}\n---\n{extra}", base.join("\n---\n")))?;
        p.refresh()?;
        let alias = p.newest_alias()?;
        ensure!(!alias.is_empty(), "the newest Freight has no alias");
        let promoted = p.promote("prod", &alias)?;
        Ok((promoted.status.success(), text(&promoted)))
    })
}

/// The Stage `prod` deploying `shop-prod` with `argocd-update` (`step_extra`: more of the
/// step's config, indented as its keys), and the Credential for `server`.
fn prod_stage(s: &Setup, server: &str, step_extra: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: argocd, namespace: demo}}
spec: {{type: argocd, repoURL: "{server}", token: {TOKEN}}}
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
            pollInterval: 500ms
{step_extra}            apps:
              - name: shop-prod
                sources:
                  - repoURL: "{url}"
                    desiredRevision: "{commit}"
"#,
        url = s.url,
        commit = s.commit,
    )
}

/// KARGO-LESSONS 8 through `dray serve`: a promotion whose `argocd-update` meets a closed
/// sync window fails at its `retry.timeout` naming the window, not a bare "timed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_blocked_by_a_sync_window_times_out_naming_the_window() -> Result<()> {
    let s = setup(Some("demo:prod"))?;
    s.argocd.deny_sync_window("shop-prod", Some(deny_window()));
    let api = s.argocd.base_url();
    let stage = prod_stage(&s, &api, &format!("            apiServer: \"{api}\"\n"));
    let (succeeded, said) = promote_through_dray(&stage).await?;
    assert!(!succeeded, "{said}");
    assert!(
        said.contains("timed out after 3s waiting for a sync window to open"),
        "{said}"
    );
    assert!(said.contains("`deny` window `0 22 * * *` for 8h"), "{said}");
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    Ok(())
}

/// The engine hands the step the project's ProjectConfig `spec.argocd`: a step without
/// `apiServer` reaches Argo CD through the Kubernetes API, and its operation is Dray's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_reaches_argocd_through_the_projectconfigs_kubernetes() -> Result<()> {
    let s = setup(Some("demo:prod"))?;
    let k8s = s.argocd.kubernetes_url();
    let stage = prod_stage(&s, &k8s, "");
    let config = format!(
        "---\napiVersion: dray.dev/v1alpha1\nkind: ProjectConfig\nmetadata: {{name: demo, namespace: demo}}\nspec:\n  argocd:\n    kubernetes: {{server: \"{k8s}\"}}\n"
    );
    let (succeeded, said) = promote_through_dray(&format!("{stage}{config}")).await?;
    assert!(succeeded, "{said}");
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    assert!(
        !s.argocd.requests().iter().any(|r| r.contains(" /api/v1/")),
        "{:?}",
        s.argocd.requests()
    );
    let app = s.argocd.app("shop-prod").unwrap();
    assert_eq!(
        app["status"]["operationState"]["operation"]["initiatedBy"]["username"],
        "dray:demo/prod"
    );
    assert_eq!(
        app["status"]["operationState"]["syncResult"]["revision"],
        json!(s.commit)
    );
    Ok(())
}

/// Without a transport anywhere, the promotion fails naming ProjectConfig `spec.argocd`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_without_a_transport_names_the_projectconfig_field() -> Result<()> {
    let s = setup(Some("demo:prod"))?;
    let stage = prod_stage(&s, &s.argocd.base_url(), "");
    let (succeeded, said) = promote_through_dray(&stage).await?;
    assert!(!succeeded, "{said}");
    assert!(
        said.contains("set `spec.argocd` in the project's ProjectConfig"),
        "{said}"
    );
    assert!(s.argocd.requests().is_empty());
    Ok(())
}

/// The user of a kubeconfig (YAML, indented for `users[].user`): a static token.
fn token_user(token: &str) -> String {
    format!("      token: {token}\n")
}

/// The user of a kubeconfig: an `exec` credential plugin, a shell script in `dir` that
/// prints a `client.authentication.k8s.io/v1` ExecCredential with `token` (and checks
/// that kube handed it `KUBERNETES_EXEC_INFO`, as client-go does).
fn exec_user(dir: &std::path::Path, token: &str) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join(format!("credential-{token}.sh"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             case \"$KUBERNETES_EXEC_INFO\" in\n\
             *ExecCredential*) ;;\n\
             *) echo 'no KUBERNETES_EXEC_INFO' >&2; exit 3 ;;\n\
             esac\n\
             printf '%s' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    Ok(format!(
        "      exec:\n        apiVersion: client.authentication.k8s.io/v1\n        command: {}\n        interactiveMode: Never\n",
        script.display()
    ))
}

/// Writes a kubeconfig for `server` trusting `ca_pem`, with context `argocd-double` whose
/// user is `user` (from [`token_user`] or [`exec_user`]), and a `current-context` that
/// points elsewhere (so the context must be chosen).
fn kubeconfig(
    dir: &std::path::Path,
    server: &str,
    ca_pem: &str,
    user: &str,
) -> Result<std::path::PathBuf> {
    write_kubeconfig(dir, server, ca_pem, user, "elsewhere")
}

/// As [`kubeconfig`], with `current-context: current`.
fn write_kubeconfig(
    dir: &std::path::Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    current: &str,
) -> Result<std::path::PathBuf> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n- name: elsewhere\n  cluster:\n    server: https://127.0.0.1:1\nusers:\n- name: dray\n  user:\n{user}contexts:\n- name: argocd-double\n  context: {{cluster: double, user: dray, namespace: argocd}}\n- name: elsewhere\n  context: {{cluster: elsewhere, user: dray}}\ncurrent-context: {current}\n"
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The Kubernetes door through a kubeconfig file and context.
fn through_kubeconfig(path: std::path::PathBuf) -> Option<ArgocdTarget> {
    Some(ArgocdTarget::Kubernetes {
        access: KubeAccess::Kubeconfig {
            path: Some(path),
            context: Some("argocd-double".into()),
        },
        namespace: "argocd".into(),
    })
}

/// A kubeconfig with the cluster's `certificate-authority-data` and an `exec` plugin as
/// its user: the CA is verified for real over HTTPS, the plugin's token is the one the
/// double accepts, and the Application is registered under the cluster's URL.
#[tokio::test]
async fn a_kubeconfig_with_the_ca_and_an_exec_plugin_reaches_argocd_over_https() -> Result<()> {
    let mut s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let user = exec_user(dir.path(), TOKEN)?;
    s.ctx.argocd = through_kubeconfig(kubeconfig(dir.path(), &https, &ca, &user)?);
    // No Credential is needed: the kubeconfig's user authenticates.
    s.ctx.credentials = Arc::new(Token("http://nowhere".into()));
    let config = s.config(&s.commit);
    let outputs = s.run_to_success(&config, 4).await;
    assert_eq!(outputs["apps"][0]["kubernetes"], json!(https));
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    let app = s.argocd.app("shop-prod").unwrap();
    assert_eq!(
        app["status"]["operationState"]["syncResult"]["revision"],
        json!(s.commit)
    );
    Ok(())
}

/// The same kubeconfig whose plugin prints a token the double does not accept: the 401 is
/// an error naming the kubeconfig's user, not a wait.
#[tokio::test]
async fn a_wrong_token_from_the_exec_plugin_is_a_401_naming_the_kubeconfig_user() -> Result<()> {
    let mut s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let user = exec_user(dir.path(), "not-the-token")?;
    s.ctx.argocd = through_kubeconfig(kubeconfig(dir.path(), &https, &ca, &user)?);
    let outcome = s.run(&s.config(&s.commit)).await;
    let StepOutcome::Errored { reason } = outcome else {
        panic!("expected Errored, got {outcome:?}")
    };
    assert!(
        reason.starts_with(&format!("the Kubernetes API at `{https}` refused `GET ")),
        "{reason}"
    );
    assert!(reason.contains("401"), "{reason}");
    assert!(
        reason.contains("the kubeconfig's user (token, client certificate or `exec` plugin)"),
        "{reason}"
    );
    assert!(!reason.contains("not-the-token"), "{reason}");
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    Ok(())
}

/// A kubeconfig trusting another CA: the TLS handshake fails, and the error names the
/// server and what to fix; nothing reaches the double.
#[tokio::test]
async fn a_ca_that_does_not_match_is_a_tls_error_naming_the_server_and_the_fix() -> Result<()> {
    let mut s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let dir = tempfile::tempdir()?;
    let other = dray_e2e::argocd::unrelated_ca_pem()?;
    s.ctx.argocd = through_kubeconfig(kubeconfig(dir.path(), &https, &other, &token_user(TOKEN))?);
    let outcome = s.run(&s.config(&s.commit)).await;
    let StepOutcome::Errored { reason } = outcome else {
        panic!("expected Errored, got {outcome:?}")
    };
    assert!(
        reason.starts_with(&format!(
            "the Kubernetes API at `{https}` failed the TLS handshake"
        )),
        "{reason}"
    );
    assert!(reason.contains("certificate"), "{reason}");
    assert!(
        reason.contains("hint: give Dray the CA that signed the server's certificate"),
        "{reason}"
    );
    assert!(s.argocd.requests().is_empty(), "{:?}", s.argocd.requests());
    Ok(())
}

/// A server URL with `certificateAuthorityData` and the project's token (the ProjectConfig
/// `server` form over HTTPS): the health check's read succeeds; without the CA, the system
/// trust store refuses the double's certificate.
#[tokio::test]
async fn a_server_url_with_certificate_authority_data_is_verified() -> Result<()> {
    use base64::Engine as _;
    let s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS");
    let app = dray_steps::argocd::ApplicationRef {
        name: "shop-prod".into(),
        namespace: None,
    };
    let target = |ca: Option<String>| ArgocdTarget::Kubernetes {
        access: KubeAccess::Server {
            url: https.clone(),
            certificate_authority_data: ca,
        },
        namespace: "argocd".into(),
    };
    let http = dray_e2e::http_client()?;
    let with_ca = target(Some(base64::engine::general_purpose::STANDARD.encode(ca)));
    let read =
        dray_steps::argocd::read_application(&http, Some(TOKEN.into()), &with_ca, &app).await;
    let read = read.map_err(anyhow::Error::msg)?.expect("it exists");
    assert_eq!(read["metadata"]["name"], "shop-prod");
    let refused =
        dray_steps::argocd::read_application(&http, Some(TOKEN.into()), &target(None), &app)
            .await
            .unwrap_err();
    assert!(refused.contains("failed the TLS handshake"), "{refused}");
    assert!(refused.contains(&https), "{refused}");
    Ok(())
}

/// Through `dray serve` (with `env`): Stage `prod` and the ProjectConfig whose
/// `spec.argocd.kubernetes` is `kubernetes` (YAML flow); promotes the newest Freight, then
/// waits until the Stage's health check says Healthy. Answers the Stage's status.
async fn promote_until_healthy(
    s: &Setup,
    kubernetes: &str,
    env: Vec<(String, String)>,
) -> Result<Value> {
    use dray_e2e::DrayOptions;
    use dray_e2e::oci;
    use dray_e2e::pipeline::{BASE_FILES, Pipeline, text};

    let stage = prod_stage(s, "http://no-credential-needed", "");
    let config = format!(
        "---\napiVersion: dray.dev/v1alpha1\nkind: ProjectConfig\nmetadata: {{name: demo, namespace: demo}}\nspec:\n  argocd:\n    kubernetes: {kubernetes}\n"
    );
    let options = DrayOptions {
        env,
        ..Default::default()
    };
    let p = tokio::task::block_in_place(|| Pipeline::start_with(options))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<Value> {
        let base = BASE_FILES
            .iter()
            .map(|f| Pipeline::quickstart_file(f))
            .collect::<Result<Vec<_>>>()?;
        p.apply(&format!("{}\n---\n{stage}{config}", base.join("\n---\n")))?;
        p.refresh()?;
        let alias = p.newest_alias()?;
        let promoted = p.promote("prod", &alias)?;
        anyhow::ensure!(promoted.status.success(), "{}", text(&promoted));
        p.wait_until("`prod` to be Healthy", || {
            let status = p.stage("prod")?["status"].clone();
            Ok((status["health"]["status"] == "Healthy").then_some(status))
        })
    })
}

/// Through `dray serve`: a ProjectConfig `spec.argocd.kubernetes: {kubeconfig, context}`
/// whose user is an `exec` plugin, over HTTPS with the kubeconfig's CA. The promotion syncs
/// through it, and the Stage's health check reads the Application the same way until it
/// says Healthy (no Credential anywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projectconfig_kubeconfig_serves_the_promotion_and_the_stages_health() -> Result<()> {
    let s = setup_with(Some("demo:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let user = exec_user(dir.path(), TOKEN)?;
    let path = kubeconfig(dir.path(), &https, &ca, &user)?;
    let kubernetes = format!(
        "{{kubeconfig: \"{}\", context: argocd-double}}",
        path.display()
    );
    let status = promote_until_healthy(&s, &kubernetes, Vec::new()).await?;
    // Registered under the cluster's URL as the kubeconfig resolved it.
    assert_eq!(
        status["applications"][0]["kubernetes"],
        json!(https),
        "{status:#}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    assert!(
        !s.argocd.requests().iter().any(|r| r.contains(" 401")),
        "{:?}",
        s.argocd.requests()
    );
    Ok(())
}

/// `kubernetes: {}` infers the cluster as kubectl does: here `$KUBECONFIG` (its
/// current context), which `dray serve` finds in its environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_kubernetes_section_infers_the_cluster_from_kubeconfig() -> Result<()> {
    let s = setup_with(Some("demo:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let path = write_kubeconfig(dir.path(), &https, &ca, &token_user(TOKEN), "argocd-double")?;
    let env = vec![("KUBECONFIG".to_owned(), path.display().to_string())];
    let status = promote_until_healthy(&s, "{}", env).await?;
    assert_eq!(status["applications"][0]["kubernetes"], json!(https));
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    Ok(())
}

/// Fidelity with a real client: kubectl (client-go) reads the Application through the same
/// kubeconfig — the double's HTTPS door, its CA and the `exec` plugin — and gets the
/// double's `Status` for a missing one; with another CA it refuses the certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_through_the_same_kubeconfig() -> Result<()> {
    let s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let user = exec_user(dir.path(), TOKEN)?;
    let path = kubeconfig(dir.path(), &https, &ca, &user)?;
    let kubectl = |kubeconfig: &std::path::Path, raw: &str| {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--context", "argocd-double", "--request-timeout", "10s"])
            .args(["get", "--raw", raw])
            .env_remove("KUBECONFIG")
            .output()
    };
    let apps = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications";
    let got = tokio::task::block_in_place(|| kubectl(&path, &format!("{apps}/shop-prod")))?;
    let stderr = String::from_utf8_lossy(&got.stderr).into_owned();
    assert!(got.status.success(), "{stderr}");
    let app: Value = serde_json::from_slice(&got.stdout)?;
    assert_eq!(app["metadata"]["name"], "shop-prod");
    assert!(app["metadata"]["resourceVersion"].is_string(), "{app}");
    let missing = tokio::task::block_in_place(|| kubectl(&path, &format!("{apps}/nope")))?;
    let said = String::from_utf8_lossy(&missing.stderr).into_owned();
    assert!(!missing.status.success());
    assert!(said.contains("(NotFound)"), "{said}");
    let other = tempfile::tempdir()?;
    let wrong = kubeconfig(
        other.path(),
        &https,
        &dray_e2e::argocd::unrelated_ca_pem()?,
        &user,
    )?;
    let refused = tokio::task::block_in_place(|| kubectl(&wrong, &format!("{apps}/shop-prod")))?;
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success());
    assert!(
        said.contains("certificate signed by unknown authority"),
        "{said}"
    );
    Ok(())
}

/// Through `kube::Client`, the sync patch carries the `resourceVersion` last read; when
/// someone else wrote the Application in between, the API server's 409 is a wait that
/// quotes it, and the next look syncs.
#[tokio::test]
async fn a_conflicting_write_is_a_409_and_the_next_look_syncs() -> Result<()> {
    let mut s = setup_through(Some("shop:prod"), Door::Kubernetes)?;
    s.argocd.modify_before_next_patch("shop-prod");
    let config = s.config(&s.commit);
    let waiting = waiting_for(&s.run(&config).await);
    assert!(
        waiting.contains("Application `shop-prod` changed while Dray asked for a sync to"),
        "{waiting}"
    );
    assert!(
        waiting.contains(
            "Operation cannot be fulfilled on applications.argoproj.io \"shop-prod\": the object \
             has been modified; please apply your changes to the latest version and try again"
        ),
        "{waiting}"
    );
    assert_eq!(s.argocd.syncs_started("shop-prod"), 0);
    assert!(
        s.argocd
            .requests()
            .iter()
            .any(|r| r.starts_with("PATCH ") && r.ends_with(" 409")),
        "{:?}",
        s.argocd.requests()
    );
    s.run_to_success(&config, 4).await;
    assert_eq!(s.argocd.syncs_started("shop-prod"), 1);
    Ok(())
}

/// An `exec` plugin that fails (expired login): an error with its exit status and the last
/// line of its stderr, never its stdout, and a hint about the kubeconfig's user.
#[tokio::test]
async fn a_failing_exec_plugin_is_named_with_its_stderr_not_its_stdout() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut s = setup_with(Some("shop:prod"), Door::Kubernetes, true)?;
    let https = s.argocd.https_url().expect("started with TLS");
    let ca = s.argocd.ca_pem().expect("started with TLS").to_owned();
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("expired.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'partial-secret-on-stdout'\necho 'refreshing the session' >&2\necho 'error: the login has expired; run `sso login`' >&2\nexit 1\n",
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    let user = format!(
        "      exec:\n        apiVersion: client.authentication.k8s.io/v1\n        command: {}\n        interactiveMode: Never\n",
        script.display()
    );
    s.ctx.argocd = through_kubeconfig(kubeconfig(dir.path(), &https, &ca, &user)?);
    let outcome = s.run(&s.config(&s.commit)).await;
    let StepOutcome::Errored { reason } = outcome else {
        panic!("expected Errored, got {outcome:?}")
    };
    assert!(
        reason.starts_with(&format!(
            "cannot authenticate to the Kubernetes API at `{https}`"
        )),
        "{reason}"
    );
    assert!(
        reason.contains(
            "the kubeconfig's `exec` credential plugin failed (exit status: 1): error: the login \
             has expired; run `sso login`"
        ),
        "{reason}"
    );
    assert!(!reason.contains("partial-secret-on-stdout"), "{reason}");
    assert!(
        reason.contains("hint: check the user of the kubeconfig"),
        "{reason}"
    );
    assert!(s.argocd.requests().is_empty(), "{:?}", s.argocd.requests());
    Ok(())
}

#[tokio::test]
async fn argocd_wait_waits_out_an_operation_someone_else_started_and_needs_no_annotation()
-> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        let update = s.config(&s.commit);
        s.run_to_success(&update, 3).await;
        let syncs = s.argocd.syncs_started("shop-prod");
        s.argocd.start_foreign_operation("shop-prod", "carol", 2);
        let config = s.with_door(json!({"apps": [{"name": "shop-prod"}], "pollInterval": "1s"}));
        let first = waiting_for(&s.run_step("argocd-wait", &config).await);
        assert!(
            first.starts_with("Application `shop-prod` to be ")
                && first.ends_with("idle (an operation is running)"),
            "{door:?}: {first}"
        );
        let mut outcome = s.run_step("argocd-wait", &config).await;
        for _ in 0..4 {
            if !matches!(outcome, StepOutcome::Running { .. }) {
                break;
            }
            outcome = s.run_step("argocd-wait", &config).await;
        }
        let StepOutcome::Succeeded { outputs, .. } = outcome else {
            panic!("{door:?}: expected Succeeded, got {outcome:?}");
        };
        assert_eq!(outputs["apps"][0]["name"], "shop-prod", "{door:?}");
        assert_eq!(outputs["apps"][0]["health"], "Healthy", "{door:?}");
        assert_eq!(outputs["apps"][0]["sync"], "Synced", "{door:?}");
        assert_eq!(
            s.argocd.syncs_started("shop-prod"),
            syncs,
            "{door:?}: it never syncs"
        );
        // It only reads: an Application without `dray.dev/authorized-stage` is fine.
        s.argocd
            .add_app(&AppSpec::new("other", &s.url, "stage/prod", None));
        let other = s.with_door(json!({"apps": [{"name": "other", "waitFor": ["operation"]}]}));
        let outcome = s.run_step("argocd-wait", &other).await;
        assert!(
            matches!(outcome, StepOutcome::Succeeded { .. }),
            "{door:?}: {outcome:?}"
        );
        assert!(
            s.argocd.patches("other").is_empty(),
            "{door:?}: it never patches"
        );
        // A selector that matches nothing waits, naming it; an unknown name too.
        let none = s.with_door(
            json!({"apps": [{"selector": "team=nobody"}, {"name": "gone"}], "pollInterval": "1s"}),
        );
        let cause = waiting_for(&s.run_step("argocd-wait", &none).await);
        assert!(
            cause.contains("an Application matching `team=nobody`"),
            "{door:?}: {cause}"
        );
        assert!(
            cause.contains("Application `gone` to exist"),
            "{door:?}: {cause}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn argocd_wait_fails_at_once_when_a_watched_application_degrades() -> Result<()> {
    for door in DOORS {
        let mut s = setup_through(Some("shop:prod"), door)?;
        s.argocd.set_sync_polls("shop-prod", 1);
        s.argocd
            .degrade_after_sync("shop-prod", "Deployment app: CrashLoopBackOff");
        let update = s.config(&s.commit);
        waiting_for(&s.run(&update).await);
        let wait = s.with_door(json!({"apps": [{"name": "shop-prod"}], "pollInterval": "1s"}));
        // Missing while it syncs (a new Application), then the sync ends Degraded: a
        // failure, not a wait.
        let first = waiting_for(&s.run_step("argocd-wait", &wait).await);
        assert!(
            first.contains("idle (an operation is running)"),
            "{door:?}: {first}"
        );
        let mut outcome = s.run_step("argocd-wait", &wait).await;
        for _ in 0..3 {
            if !matches!(outcome, StepOutcome::Running { .. }) {
                break;
            }
            outcome = s.run_step("argocd-wait", &wait).await;
        }
        let StepOutcome::Failed { reason } = outcome else {
            panic!("{door:?}: expected Failed, got {outcome:?}");
        };
        assert!(
            reason.contains("Application `shop-prod` turned Degraded (it was Missing)")
                && reason.ends_with("Deployment app: CrashLoopBackOff"),
            "{door:?}: {reason}"
        );
        // Waiting for `degraded` itself is satisfied by it.
        let degraded =
            s.with_door(json!({"apps": [{"name": "shop-prod", "waitFor": ["degraded"]}]}));
        s.ctx.saved_state = None;
        assert!(
            matches!(
                s.run_step("argocd-wait", &degraded).await,
                StepOutcome::Succeeded { .. }
            ),
            "{door:?}"
        );
    }
    Ok(())
}
