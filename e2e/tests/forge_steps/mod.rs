//! What the pull-request scenarios against the forge doubles share (`forges.rs` for
//! GitHub and GitLab, `forges_gitea_bitbucket.rs` for Gitea/Forgejo and Bitbucket): a step
//! context with the forge token in the project's credentials, running the PR steps as the
//! engine does (a `Running` state carried into the next run), and a config repository on a
//! real git server with a promotion branch.
#![allow(dead_code)] // each test file uses its own part

use std::sync::Arc;

use anyhow::{Context, Result};
use dray::discovery::git::MirrorCache;
use dray::promotion::SharedMirrors;
use dray_e2e::{GitRepo, GitServer, TestWorld};
use dray_steps::{
    CredentialProvider, GitCredentials, NoExprs, StepContext, StepOutcome, TargetFreight,
    ToolPaths, builtin_steps,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) const TOKEN: &str = "forge-token-123";

pub(crate) struct Creds {
    repo_url: String,
}

impl CredentialProvider for Creds {
    fn git(&self, _: &str) -> Option<GitCredentials> {
        None
    }
    fn token(&self, url: &str) -> Option<String> {
        (url == self.repo_url).then(|| TOKEN.to_owned())
    }
}

pub(crate) fn context(world: &TestWorld, repo_url: &str, promotion: &str) -> Result<StepContext> {
    Ok(StepContext {
        work_dir: world.path().to_path_buf(),
        warm_dir: None,
        project: "demo".into(),
        stage: "prod".into(),
        promotion: promotion.into(),
        actor: "ada".into(),
        alias: "pr".into(),
        freight: TargetFreight {
            id: "f00d".into(),
            alias: "brave-otter".into(),
            origin: "app".into(),
            images: vec![dray_steps::FreightImage {
                repo_url: "registry.example.com/app".into(),
                tag: "1.2.0".into(),
                digest: "sha256:abc".into(),
            }],
            commits: vec![],
            charts: vec![],
        },
        approved_by: None,
        window_override: None,
        signed_off_by: Vec::new(),
        freeze_override: None,
        credentials: Arc::new(Creds {
            repo_url: repo_url.to_owned(),
        }),
        repos: Arc::new(SharedMirrors(Arc::new(MirrorCache::new(
            world.path().join("mirrors"),
        )))),
        http: dray_e2e::http_client()?,
        exprs: Arc::new(NoExprs),
        tools: ToolPaths::default(),
        cancel: CancellationToken::new(),
        log: Arc::new(|_| {}),
        saved_state: None,
        argocd: None,
    })
}

pub(crate) async fn run(ctx: &StepContext, kind: &str, config: Value) -> StepOutcome {
    let step = builtin_steps().get(kind).expect("a built-in step");
    step.run(ctx, config).await
}

/// Runs a step once as the engine does: a `Running` outcome's state is what the next run
/// of the step gets (`ctx.saved_state`).
pub(crate) async fn step(ctx: &mut StepContext, kind: &str, config: &Value) -> StepOutcome {
    let outcome = run(ctx, kind, config.clone()).await;
    if let StepOutcome::Running {
        state: Some(state), ..
    } = &outcome
    {
        ctx.saved_state = Some(state.clone());
    }
    outcome
}

/// How many times [`drive`] runs a step at most before the test fails.
pub(crate) const MAX_RUNS: usize = 20;

/// Runs a step again and again as the engine does (without its waits: the doubles count
/// reads, not time) until it ends; returns the end and what it said it waited for.
pub(crate) async fn drive(
    ctx: &mut StepContext,
    kind: &str,
    config: &Value,
) -> (StepOutcome, Vec<String>) {
    let mut waited = Vec::new();
    for _ in 0..MAX_RUNS {
        match step(ctx, kind, config).await {
            StepOutcome::Running { waiting_for, .. } => waited.push(waiting_for),
            done => return (done, waited),
        }
    }
    panic!("`{kind}` still running after {MAX_RUNS} runs: {waited:#?}");
}

/// [`drive`] from a fresh state, which must succeed.
pub(crate) async fn drive_ok(
    ctx: &StepContext,
    kind: &str,
    config: &Value,
) -> serde_json::Map<String, Value> {
    let mut ctx = ctx.clone();
    ctx.saved_state = None;
    let (outcome, _) = drive(&mut ctx, kind, config).await;
    succeeded(outcome).0
}

#[track_caller]
pub(crate) fn succeeded(outcome: StepOutcome) -> (serde_json::Map<String, Value>, Option<Value>) {
    match outcome {
        StepOutcome::Succeeded { outputs, state, .. } => (outputs, state),
        other => panic!("expected Succeeded, got {other:?}"),
    }
}

/// Runs `git-open-pr` with `config`, which must succeed; returns the opened PR's number.
/// Merges with `merge`, then waits with `wait`: both succeed, and the wait's commit is the
/// merge's. Returns the commit.
pub(crate) async fn merge_then_wait(ctx: &StepContext, merge: Value, wait: Value) -> String {
    let merged = drive_ok(ctx, "git-merge-pr", &merge).await;
    let (waited, _) = succeeded(run(ctx, "git-wait-for-pr", wait).await);
    assert_eq!(waited["commit"], merged["commit"]);
    waited["commit"].as_str().unwrap_or_default().to_owned()
}

pub(crate) async fn open_pr(ctx: &StepContext, config: Value) -> Result<u64> {
    let (outputs, _) = succeeded(run(ctx, "git-open-pr", config).await);
    outputs["pr"]["id"]
        .as_u64()
        .with_context(|| format!("`git-open-pr` gave no PR number in `pr.id`: {outputs:?}"))
}

/// A config repository `acme/config` on a real git server: `main` with one commit, and
/// `dray/promotion/<promotion>` one commit ahead (what `git-push` would have pushed).
pub(crate) struct Setup {
    pub(crate) world: TestWorld,
    pub(crate) git: GitServer,
    pub(crate) url: String,
    pub(crate) work: GitRepo,
}

pub(crate) fn setup() -> Result<Setup> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, Default::default())?;
    let url = git.create_repo("acme/config")?;
    let work = GitRepo::clone_from_url(&world, &url)?;
    work.write("app.yaml", "image: app:1.0.0\n")?;
    work.commit("init")?;
    work.push("main")?;
    Ok(Setup {
        world,
        git,
        url,
        work,
    })
}

impl Setup {
    /// Pushes a promotion branch for `promotion` with one change; returns its head.
    pub(crate) fn promotion_branch(&self, promotion: &str, content: &str) -> Result<String> {
        self.work.switch("main")?;
        let branch = format!("dray/promotion/{promotion}");
        self.work.switch(&branch)?;
        self.work.write("app.yaml", content)?;
        let sha = self.work.commit(&format!("Promote {promotion}"))?;
        self.work.push(&branch)?;
        Ok(sha)
    }

    pub(crate) fn main_head(&self) -> Result<String> {
        self.work.head("main")
    }

    pub(crate) fn parents(&self, sha: &str) -> Result<Vec<String>> {
        Ok(self
            .work
            .git(["rev-list", "--parents", "-n", "1", sha])?
            .split_whitespace()
            .skip(1)
            .map(str::to_owned)
            .collect())
    }
}

/// A proxy's 502 while a step waits on a review is waited out and named, never a failure.
#[track_caller]
pub(crate) fn waits_out_a_bad_gateway(outcome: StepOutcome, forge: &str) {
    match outcome {
        StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } => {
            assert_eq!(retry_after.as_secs(), 15, "{waiting_for}");
            assert!(
                waiting_for.starts_with(&format!(
                    "the forge to answer again ({forge} answered 502 Bad Gateway"
                )),
                "{waiting_for}"
            );
            assert!(waiting_for.contains("asking again at "), "{waiting_for}");
            assert!(!waiting_for.contains("<html>"), "{waiting_for}");
        }
        other => panic!("expected Running, got {other:?}"),
    }
}

/// Whether a recorded request (`METHOD /path?query`) asks for a merge.
pub(crate) fn is_merge(request: &str) -> bool {
    let path = request.split('?').next().unwrap_or_default();
    (request.starts_with("PUT ") || request.starts_with("POST ")) && path.ends_with("/merge")
}

/// Asserts that none of a double's recorded `requests` asked to merge.
pub(crate) fn assert_no_merge_asked(requests: &[String]) {
    assert!(
        !requests.iter().any(|r| is_merge(r)),
        "no merge was asked for: {requests:?}"
    );
}

/// What `git-merge-pr` says when the head it checked is no longer the pull request's head.
pub(crate) fn head_moved(number: u64, old: &str, new: &str) -> StepOutcome {
    StepOutcome::failed(format!(
        "pull request #{number}'s head moved from {old} to {new} after it was checked; Dray \
         merges only what was reviewed — review the new commit and promote again"
    ))
}

impl Setup {
    /// Whether `sha` is in the history of `main` in the served (bare) repository.
    pub(crate) fn on_main(&self, sha: &str) -> Result<bool> {
        let out = dray_e2e::git(&self.world)
            .arg("--git-dir")
            .arg(self.git.repo_path("acme/config"))
            .args(["merge-base", "--is-ancestor", sha, "refs/heads/main"])
            .output()?;
        Ok(out.status.success())
    }

    /// Asserts that main is still at `before` and `unmerged` is not in its history.
    pub(crate) fn assert_not_on_main(&self, before: &str, unmerged: &str) -> Result<()> {
        assert_eq!(self.main_head()?, before, "nothing landed on main");
        assert!(
            !self.on_main(unmerged)?,
            "the unreviewed commit {unmerged} is not on main"
        );
        Ok(())
    }

    /// A commit on top of `dray/promotion/<promotion>`, pushed to another branch
    /// (`unreviewed/<promotion>`) so that the server has it; returns it.
    pub(crate) fn commit_on_top(&self, promotion: &str, content: &str) -> Result<String> {
        self.work.switch(&format!("dray/promotion/{promotion}"))?;
        self.work.write("app.yaml", content)?;
        let sha = self.work.commit("an unreviewed change")?;
        self.work.push(&format!("unreviewed/{promotion}"))?;
        Ok(sha)
    }
}

/// Runs `git-merge-pr` until it says it waits for `status`; the state it pinned stays in
/// `ctx`.
pub(crate) async fn merge_until_waiting_for(ctx: &mut StepContext, config: &Value, status: &str) {
    let mut said = Vec::new();
    for _ in 0..MAX_RUNS {
        match step(ctx, "git-merge-pr", config).await {
            StepOutcome::Running { waiting_for, .. } if waiting_for.contains(status) => return,
            StepOutcome::Running { waiting_for, .. } => said.push(waiting_for),
            other => panic!("expected Running until `{status}`, got {other:?} after {said:?}"),
        }
    }
    panic!("`git-merge-pr` never waited for `{status}`: {said:#?}");
}

/// A PR step's config for the repository of `s` on the forge `provider` at `api_url`,
/// with `extra` fields.
pub(crate) fn forge_config(s: &Setup, provider: &str, api_url: &str, extra: Value) -> Value {
    let mut config = serde_json::json!({"repoURL": s.url, "provider": provider, "apiURL": api_url});
    if let (Some(c), Value::Object(extra)) = (config.as_object_mut(), extra) {
        c.extend(extra);
    }
    config
}

/// Runs `git-open-pr` with `config` three times, as a resumed promotion would: fresh, again
/// with the state it saved (the pull request is reused), and again without it (a crash
/// before the state was saved: the open pull request for the same branches is adopted).
/// Asserts all three name the same pull request.
pub(crate) async fn open_pr_resumed(ctx: &StepContext, config: &Value) {
    let mut ctx = ctx.clone();
    let (first, state) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    ctx.saved_state = state;
    let (second, _) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    ctx.saved_state = None;
    let (third, _) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    assert_eq!(first, second, "reused from the saved state");
    assert_eq!(first, third, "adopted without it");
}
