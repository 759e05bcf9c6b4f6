//! Pull requests as gates (KARGO-LESSONS 16), against the GitHub and GitLab doubles backed
//! by real git repositories: `git-open-pr`, `git-merge-pr` and `git-wait-for-pr` run
//! directly with a `StepContext`, as the engine runs them.
//!
//! For each forge: open → merge (a merge commit) → wait returns the merge commit, which
//! is the target branch's head; a squash merge → the squash commit; closed without merge
//! → Failed naming who closed it; a resumed open-pr adopts the pull request it opened (no
//! second one); a rate-limited answer → Running saying so, then success; a refused merge
//! → Failed with the forge's message.
//!
//! Reviewed means merged: `git-merge-pr` merges the head it saw first and no other — a push
//! to the pull request's branch afterwards (or racing the merge) fails the step, and the
//! target branch never gets the new commit. The doubles answer as the real APIs do: 409
//! only to a merge whose `sha` is not the head, 405 to one that cannot merge, and
//! mergeability unknown (`mergeable: null`, `checking`) for the first reads after a create
//! or a push, which the step waits out.

use std::sync::Arc;

use anyhow::{Context, Result};
use dray::discovery::git::MirrorCache;
use dray::promotion::SharedMirrors;
use dray_e2e::github::{GitHubDouble, MergeRefusal, RateLimit};
use dray_e2e::gitlab::{self, GitLabDouble};
use dray_e2e::{GitRepo, GitServer, TestWorld};
use dray_steps::{
    CredentialProvider, GitCredentials, NoExprs, StepContext, StepOutcome, TargetFreight,
    ToolPaths, builtin_steps,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "forge-token-123";

struct Creds {
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

fn context(world: &TestWorld, repo_url: &str, promotion: &str) -> Result<StepContext> {
    Ok(StepContext {
        work_dir: world.path().to_path_buf(),
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

async fn run(ctx: &StepContext, kind: &str, config: Value) -> StepOutcome {
    let step = builtin_steps().get(kind).expect("a built-in step");
    step.run(ctx, config).await
}

/// Runs a step once as the engine does: a `Running` outcome's state is what the next run
/// of the step gets (`ctx.saved_state`).
async fn step(ctx: &mut StepContext, kind: &str, config: &Value) -> StepOutcome {
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
const MAX_RUNS: usize = 20;

/// Runs a step again and again as the engine does (without its waits: the doubles count
/// reads, not time) until it ends; returns the end and what it said it waited for.
async fn drive(ctx: &mut StepContext, kind: &str, config: &Value) -> (StepOutcome, Vec<String>) {
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
async fn drive_ok(ctx: &StepContext, kind: &str, config: &Value) -> serde_json::Map<String, Value> {
    let mut ctx = ctx.clone();
    ctx.saved_state = None;
    let (outcome, _) = drive(&mut ctx, kind, config).await;
    succeeded(outcome).0
}

#[track_caller]
fn succeeded(outcome: StepOutcome) -> (serde_json::Map<String, Value>, Option<Value>) {
    match outcome {
        StepOutcome::Succeeded { outputs, state, .. } => (outputs, state),
        other => panic!("expected Succeeded, got {other:?}"),
    }
}

/// Runs `git-open-pr` with `config`, which must succeed; returns the opened PR's number.
/// Merges with `merge`, then waits with `wait`: both succeed, and the wait's commit is the
/// merge's. Returns the commit.
async fn merge_then_wait(ctx: &StepContext, merge: Value, wait: Value) -> String {
    let merged = drive_ok(ctx, "git-merge-pr", &merge).await;
    let (waited, _) = succeeded(run(ctx, "git-wait-for-pr", wait).await);
    assert_eq!(waited["commit"], merged["commit"]);
    waited["commit"].as_str().unwrap_or_default().to_owned()
}

async fn open_pr(ctx: &StepContext, config: Value) -> Result<u64> {
    let (outputs, _) = succeeded(run(ctx, "git-open-pr", config).await);
    outputs["pr"]["id"]
        .as_u64()
        .with_context(|| format!("`git-open-pr` gave no PR number in `pr.id`: {outputs:?}"))
}

/// A config repository `acme/config` on a real git server: `main` with one commit, and
/// `dray/promotion/<promotion>` one commit ahead (what `git-push` would have pushed).
struct Setup {
    world: TestWorld,
    git: GitServer,
    url: String,
    work: GitRepo,
}

fn setup() -> Result<Setup> {
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
    fn promotion_branch(&self, promotion: &str, content: &str) -> Result<String> {
        self.work.switch("main")?;
        let branch = format!("dray/promotion/{promotion}");
        self.work.switch(&branch)?;
        self.work.write("app.yaml", content)?;
        let sha = self.work.commit(&format!("Promote {promotion}"))?;
        self.work.push(&branch)?;
        Ok(sha)
    }

    fn main_head(&self) -> Result<String> {
        self.work.head("main")
    }

    fn parents(&self, sha: &str) -> Result<Vec<String>> {
        Ok(self
            .work
            .git(["rev-list", "--parents", "-n", "1", sha])?
            .split_whitespace()
            .skip(1)
            .map(str::to_owned)
            .collect())
    }
}

// ---------------------------------------------------------------- GitHub

fn github(s: &Setup) -> Result<GitHubDouble> {
    let gh = GitHubDouble::start(&s.world, Some(TOKEN))?;
    gh.add_repo("acme/config", s.git.repo_path("acme/config"));
    Ok(gh)
}

fn gh_config(s: &Setup, gh: &GitHubDouble, extra: Value) -> Value {
    let mut config = json!({"repoURL": s.url, "provider": "github", "apiURL": gh.api_url()});
    if let (Some(c), Value::Object(extra)) = (config.as_object_mut(), extra) {
        c.extend(extra);
    }
    config
}

#[tokio::test]
async fn github_open_merge_wait_lands_a_merge_commit() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let head = s.promotion_branch("prod-1", "image: app:1.2.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-1")?;

    let open = run(
        &ctx,
        "git-open-pr",
        gh_config(
            &s,
            &gh,
            json!({"targetBranch": "main", "labels": ["promotion"]}),
        ),
    )
    .await;
    let (outputs, state) = succeeded(open);
    let number = outputs["pr"]["id"].as_u64().unwrap();
    assert!(
        outputs["pr"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/acme/config/pull/{number}"))
    );
    assert_eq!(state.unwrap()["number"], json!(number));
    let pulls = gh.pulls("acme/config");
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["head"]["ref"], json!("dray/promotion/prod-1"));
    assert_eq!(pulls[0]["head"]["sha"], json!(head));
    assert_eq!(pulls[0]["labels"][0]["name"], json!("promotion"));
    let body = pulls[0]["body"].as_str().unwrap();
    assert!(
        body.contains("registry.example.com/app:1.2.0@sha256:abc"),
        "{body}"
    );
    assert!(body.contains("promoted by ada"), "{body}");

    // Not merged yet: waiting, and saying for what.
    let wait_config = gh_config(&s, &gh, json!({"prNumber": number, "pollInterval": "5s"}));
    match run(&ctx, "git-wait-for-pr", wait_config.clone()).await {
        StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } => {
            assert_eq!(retry_after.as_secs(), 5);
            assert!(waiting_for.contains(&format!("#{number}")), "{waiting_for}");
        }
        other => panic!("expected Running, got {other:?}"),
    }

    let merged = drive_ok(
        &ctx,
        "git-merge-pr",
        &gh_config(&s, &gh, json!({"prNumber": number})),
    )
    .await;
    let commit = merged["commit"].as_str().unwrap().to_owned();
    assert_eq!(
        merged["headCommit"],
        json!(head),
        "the reviewed head is output"
    );
    let (waited, _) = succeeded(run(&ctx, "git-wait-for-pr", wait_config).await);
    assert_eq!(waited["commit"], json!(commit));
    assert_eq!(
        s.main_head()?,
        commit,
        "the merge commit is the head of main"
    );
    let parents = s.parents(&commit)?;
    assert_eq!(parents.len(), 2, "a real merge commit");
    assert_eq!(parents[1], head);
    assert_eq!(s.work.show("main", "app.yaml")?, "image: app:1.2.0\n");

    // Merging again is idempotent.
    let (again, _) = succeeded(
        run(
            &ctx,
            "git-merge-pr",
            gh_config(&s, &gh, json!({"prNumber": number})),
        )
        .await,
    );
    assert_eq!(again["commit"], json!(commit));
    Ok(())
}

#[tokio::test]
async fn github_squash_merge_lands_the_squash_commit() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-2", "image: app:2.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-2")?;
    let (outputs, _) = succeeded(
        run(
            &ctx,
            "git-open-pr",
            gh_config(
                &s,
                &gh,
                json!({"targetBranch": "main", "title": "Ship 2.0"}),
            ),
        )
        .await,
    );
    let number = outputs["pr"]["id"].clone();
    drive_ok(
        &ctx,
        "git-merge-pr",
        &gh_config(
            &s,
            &gh,
            json!({"prNumber": number, "mergeMethod": "squash"}),
        ),
    )
    .await;
    let (waited, _) = succeeded(
        run(
            &ctx,
            "git-wait-for-pr",
            gh_config(&s, &gh, json!({"prNumber": number})),
        )
        .await,
    );
    let commit = waited["commit"].as_str().unwrap();
    assert_eq!(s.main_head()?, commit);
    assert_eq!(
        s.parents(commit)?.len(),
        1,
        "a squash commit has one parent"
    );
    let subject = s.work.git(["log", "-1", "--format=%s", commit])?;
    assert_eq!(subject.trim(), format!("Ship 2.0 (#{number})"));
    Ok(())
}

#[tokio::test]
async fn github_closed_without_merge_fails_naming_who_closed_it() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-3", "image: app:3.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-3")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let before = s.main_head()?;
    gh.close_without_merge("acme/config", number, "bob")?;
    let outcome = run(
        &ctx,
        "git-wait-for-pr",
        gh_config(&s, &gh, json!({"prNumber": number})),
    )
    .await;
    assert_eq!(
        outcome,
        StepOutcome::failed(format!(
            "pull request #{number} was closed without merging by bob"
        ))
    );
    let outcome = run(
        &ctx,
        "git-merge-pr",
        gh_config(&s, &gh, json!({"prNumber": number})),
    )
    .await;
    assert_eq!(
        outcome,
        StepOutcome::failed(format!(
            "pull request #{number} was closed without merging by bob"
        ))
    );
    assert_eq!(s.main_head()?, before, "nothing landed");
    Ok(())
}

#[tokio::test]
async fn github_resumed_open_pr_adopts_the_existing_pull_request() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-4", "image: app:4.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-4")?;
    let config = gh_config(&s, &gh, json!({"targetBranch": "main"}));
    let (first, state) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    // A re-run with the saved state reuses it; a re-run that lost its state (a crash
    // before the state was saved) adopts the open pull request for the same branches.
    ctx.saved_state = state;
    let (second, _) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    ctx.saved_state = None;
    let (third, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(first, second);
    assert_eq!(first, third);
    assert_eq!(gh.pulls("acme/config").len(), 1, "no second pull request");
    let creates = gh
        .requests()
        .iter()
        .filter(|r| r.as_str() == "POST /repos/acme/config/pulls")
        .count();
    assert_eq!(creates, 1);
    Ok(())
}

#[tokio::test]
async fn github_rate_limits_are_waited_out_and_reported() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-5", "image: app:5.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-5")?;
    let config = gh_config(&s, &gh, json!({"targetBranch": "main"}));
    for limit in [
        RateLimit::Primary403 { reset_in: 42 },
        RateLimit::Secondary429 { retry_after: 7 },
    ] {
        gh.rate_limit_next(1, limit);
        match run(&ctx, "git-open-pr", config.clone()).await {
            StepOutcome::Running {
                retry_after,
                waiting_for,
                ..
            } => {
                assert!(
                    waiting_for.starts_with("rate limited by GitHub, retrying at "),
                    "{waiting_for}"
                );
                let want = match limit {
                    RateLimit::Primary403 { .. } => 40..=42,
                    RateLimit::Secondary429 { .. } => 7..=7,
                };
                assert!(want.contains(&retry_after.as_secs()), "{retry_after:?}");
            }
            other => panic!("expected Running, got {other:?}"),
        }
        assert!(gh.pulls("acme/config").is_empty());
    }
    let (outputs, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(outputs["pr"]["id"], json!(1));
    Ok(())
}

/// A proxy's 502 while a step waits on a review is waited out and named, never a failure.
#[track_caller]
fn waits_out_a_bad_gateway(outcome: StepOutcome, forge: &str) {
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

#[tokio::test]
async fn github_bad_gateway_is_waited_out_not_a_failure() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-7", "image: app:7.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-7")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let wait = gh_config(&s, &gh, json!({"prNumber": number}));
    gh.bad_gateway_next(1);
    waits_out_a_bad_gateway(run(&ctx, "git-wait-for-pr", wait.clone()).await, "GitHub");
    let merge = gh_config(&s, &gh, json!({"prNumber": number}));
    gh.bad_gateway_next(1);
    waits_out_a_bad_gateway(run(&ctx, "git-merge-pr", merge.clone()).await, "GitHub");
    merge_then_wait(&ctx, merge, wait).await;
    Ok(())
}

#[tokio::test]
async fn github_refused_merges_fail_with_githubs_message() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    // Mergeability known at once: this test is about what GitHub says once it knows.
    gh.unknown_mergeability_reads(0);
    s.promotion_branch("prod-6", "image: app:6.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-6")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let merge = gh_config(&s, &gh, json!({"prNumber": number}));

    // Checks pending: waits, naming GitHub's status.
    gh.set_mergeable_state("acme/config", number, Some("blocked"))?;
    match run(&ctx, "git-merge-pr", merge.clone()).await {
        StepOutcome::Running { waiting_for, .. } => {
            assert!(waiting_for.contains("`blocked`"), "{waiting_for}")
        }
        other => panic!("expected Running, got {other:?}"),
    }
    gh.set_mergeable_state("acme/config", number, None)?;

    gh.refuse_next_merge("acme/config", number, MergeRefusal::NotMergeable)?;
    assert_eq!(
        drive(&mut ctx.clone(), "git-merge-pr", &merge).await.0,
        StepOutcome::failed(format!(
            "GitHub refused to merge pull request #{number}: Pull Request is not mergeable"
        ))
    );
    // A conflict with main fails before trying.
    s.work.switch("main")?;
    s.work.write("app.yaml", "image: app:hotfix\n")?;
    s.work.commit("hotfix")?;
    s.work.push("main")?;
    let reason = match run(&ctx, "git-merge-pr", merge).await {
        StepOutcome::Failed { reason } => reason,
        other => panic!("expected Failed, got {other:?}"),
    };
    assert!(
        reason.contains("cannot be merged") && reason.contains("`dirty`"),
        "{reason}"
    );
    Ok(())
}

// ---------------------------------------------------------------- GitLab

fn gitlab(s: &Setup, method: gitlab::MergeMethod) -> Result<GitLabDouble> {
    let gl = GitLabDouble::start(&s.world, Some(TOKEN))?;
    gl.add_project("acme/config", s.git.repo_path("acme/config"), method);
    Ok(gl)
}

fn gl_config(s: &Setup, gl: &GitLabDouble, extra: Value) -> Value {
    let mut config = json!({"repoURL": s.url, "provider": "gitlab", "apiURL": gl.api_url()});
    if let (Some(c), Value::Object(extra)) = (config.as_object_mut(), extra) {
        c.extend(extra);
    }
    config
}

#[tokio::test]
async fn gitlab_open_merge_wait_lands_a_merge_commit() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    let head = s.promotion_branch("prod-1", "image: app:1.2.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-1")?;
    let (outputs, _) = succeeded(
        run(
            &ctx,
            "git-open-pr",
            gl_config(
                &s,
                &gl,
                json!({"targetBranch": "main", "labels": ["promotion", "prod"]}),
            ),
        )
        .await,
    );
    let iid = outputs["pr"]["id"].as_u64().unwrap();
    assert!(
        outputs["pr"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/acme/config/-/merge_requests/{iid}"))
    );
    let mrs = gl.merge_requests("acme/config");
    assert_eq!(mrs.len(), 1);
    assert_eq!(mrs[0]["labels"], json!(["promotion", "prod"]));
    assert_eq!(mrs[0]["sha"], json!(head));

    let wait = gl_config(&s, &gl, json!({"prNumber": iid}));
    assert!(matches!(
        run(&ctx, "git-wait-for-pr", wait.clone()).await,
        StepOutcome::Running { .. }
    ));
    let commit = merge_then_wait(&ctx, gl_config(&s, &gl, json!({"prNumber": iid})), wait).await;
    let commit = commit.as_str();
    assert_eq!(s.main_head()?, commit);
    assert_eq!(
        s.parents(commit)?,
        vec![s.parents(commit)?[0].clone(), head]
    );
    Ok(())
}

#[tokio::test]
async fn gitlab_squash_merge_lands_the_squash_commit() -> Result<()> {
    // A fast-forward project: the squash commit is what lands, and GitLab reports
    // `merge_commit_sha: null` with `squash_commit_sha` set.
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::FastForward)?;
    s.promotion_branch("prod-2", "image: app:2.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-2")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    drive_ok(
        &ctx,
        "git-merge-pr",
        &gl_config(&s, &gl, json!({"prNumber": iid, "mergeMethod": "squash"})),
    )
    .await;
    let mr = &gl.merge_requests("acme/config")[0];
    assert_eq!(mr["state"], json!("merged"));
    assert_eq!(mr["merge_commit_sha"], Value::Null);
    let (waited, _) = succeeded(
        run(
            &ctx,
            "git-wait-for-pr",
            gl_config(&s, &gl, json!({"prNumber": iid})),
        )
        .await,
    );
    let commit = waited["commit"].as_str().unwrap();
    assert_eq!(mr["squash_commit_sha"], json!(commit));
    assert_eq!(s.main_head()?, commit);
    assert_eq!(s.parents(commit)?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn gitlab_squash_with_a_merge_commit_lands_the_merge_commit() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-2b", "image: app:2.1.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-2b")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    let merged = drive_ok(
        &ctx,
        "git-merge-pr",
        &gl_config(&s, &gl, json!({"prNumber": iid, "mergeMethod": "squash"})),
    )
    .await;
    let commit = merged["commit"].as_str().unwrap();
    assert_eq!(s.main_head()?, commit);
    let mr = &gl.merge_requests("acme/config")[0];
    assert_eq!(mr["merge_commit_sha"], json!(commit));
    assert_eq!(
        s.parents(commit)?[1],
        mr["squash_commit_sha"].as_str().unwrap()
    );
    Ok(())
}

#[tokio::test]
async fn gitlab_closed_without_merge_fails_naming_who_closed_it() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-3", "image: app:3.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-3")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    gl.close_without_merge("acme/config", iid, "carol")?;
    assert_eq!(
        run(
            &ctx,
            "git-wait-for-pr",
            gl_config(&s, &gl, json!({"prNumber": iid}))
        )
        .await,
        StepOutcome::failed(format!(
            "pull request #{iid} was closed without merging by carol"
        ))
    );
    Ok(())
}

#[tokio::test]
async fn gitlab_resumed_open_pr_adopts_the_existing_merge_request() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-4", "image: app:4.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-4")?;
    let config = gl_config(&s, &gl, json!({"targetBranch": "main"}));
    let (first, state) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    ctx.saved_state = state;
    let (second, _) = succeeded(run(&ctx, "git-open-pr", config.clone()).await);
    ctx.saved_state = None;
    let (third, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(first, second);
    assert_eq!(first, third);
    assert_eq!(
        gl.merge_requests("acme/config").len(),
        1,
        "no second merge request"
    );
    Ok(())
}

#[tokio::test]
async fn gitlab_rate_limits_are_waited_out_and_reported() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-5", "image: app:5.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-5")?;
    let config = gl_config(&s, &gl, json!({"targetBranch": "main"}));
    // On the connection check (`GET /api/v4/user`): the gitlab crate drops the 429's
    // headers there, so the default wait applies; on a later call, GitLab's Retry-After.
    gl.rate_limit_next(1, 9);
    match run(&ctx, "git-open-pr", config.clone()).await {
        StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } => {
            assert!(
                waiting_for.starts_with("rate limited by GitLab, retrying at "),
                "{waiting_for}"
            );
            assert_eq!(retry_after.as_secs(), 60);
        }
        other => panic!("expected Running, got {other:?}"),
    }
    gl.rate_limit_after(1, 1, 9);
    match run(&ctx, "git-open-pr", config.clone()).await {
        StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } => {
            assert!(
                waiting_for.starts_with("rate limited by GitLab, retrying at "),
                "{waiting_for}"
            );
            assert_eq!(retry_after.as_secs(), 9);
        }
        other => panic!("expected Running, got {other:?}"),
    }
    assert!(gl.merge_requests("acme/config").is_empty());
    let (outputs, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(outputs["pr"]["id"], json!(1));
    Ok(())
}

#[tokio::test]
async fn gitlab_bad_gateway_is_waited_out_not_a_failure() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-7", "image: app:7.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-7")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    let wait = gl_config(&s, &gl, json!({"prNumber": iid}));
    // The first request of a step is the gitlab crate's connection check.
    gl.bad_gateway_next(1);
    waits_out_a_bad_gateway(run(&ctx, "git-wait-for-pr", wait.clone()).await, "GitLab");
    merge_then_wait(&ctx, gl_config(&s, &gl, json!({"prNumber": iid})), wait).await;
    Ok(())
}

#[tokio::test]
async fn gitlab_refused_merges_fail_with_gitlabs_message() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    // Mergeability checked at once: this test is about what GitLab says once it knows.
    gl.checking_reads(0);
    s.promotion_branch("prod-6", "image: app:6.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-6")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    let merge = gl_config(&s, &gl, json!({"prNumber": iid}));
    gl.set_merge_status("acme/config", iid, Some("ci_still_running"))?;
    match run(&ctx, "git-merge-pr", merge.clone()).await {
        StepOutcome::Running { waiting_for, .. } => {
            assert!(waiting_for.contains("`ci_still_running`"), "{waiting_for}")
        }
        other => panic!("expected Running, got {other:?}"),
    }
    gl.set_merge_status("acme/config", iid, None)?;
    gl.refuse_next_merge("acme/config", iid, gitlab::MergeRefusal::MethodNotAllowed)?;
    assert_eq!(
        drive(&mut ctx.clone(), "git-merge-pr", &merge).await.0,
        StepOutcome::failed(format!(
            "GitLab refused to merge pull request #{iid}: 405 Method Not Allowed"
        ))
    );
    gl.refuse_next_merge("acme/config", iid, gitlab::MergeRefusal::Unprocessable)?;
    assert_eq!(
        drive(&mut ctx.clone(), "git-merge-pr", &merge).await.0,
        StepOutcome::failed(format!(
            "GitLab refused to merge pull request #{iid}: Branch cannot be merged"
        ))
    );
    Ok(())
}

#[tokio::test]
async fn the_token_comes_from_the_projects_credentials() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    s.promotion_branch("prod-7", "image: app:7.0.0\n")?;
    // Credentials for another repository only: no token reaches the forge.
    let ctx = context(&s.world, "https://elsewhere.example.com/x/y.git", "prod-7")?;
    let reason = match run(
        &ctx,
        "git-open-pr",
        gh_config(&s, &gh, json!({"targetBranch": "main"})),
    )
    .await
    {
        StepOutcome::Errored { reason } => reason,
        other => panic!("expected Errored, got {other:?}"),
    };
    assert!(
        reason.contains("401") && reason.contains("Bad credentials"),
        "{reason}"
    );
    let reason = match run(
        &ctx,
        "git-open-pr",
        gl_config(&s, &gl, json!({"targetBranch": "main"})),
    )
    .await
    {
        StepOutcome::Errored { reason } => reason,
        other => panic!("expected Errored, got {other:?}"),
    };
    assert!(reason.contains("401"), "{reason}");
    assert!(gh.pulls("acme/config").is_empty());
    assert!(gl.merge_requests("acme/config").is_empty());
    Ok(())
}

#[tokio::test]
async fn github_enterprise_api_paths_keep_their_prefix() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    s.promotion_branch("prod-8", "image: app:8.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-8")?;
    let config = json!({"repoURL": s.url, "provider": "github",
        "apiURL": format!("{}/api/v3", gh.api_url()), "targetBranch": "main"});
    let (outputs, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(outputs["pr"]["id"], json!(1));
    assert!(
        gh.requests()
            .iter()
            .any(|r| r == "POST /api/v3/repos/acme/config/pulls"),
        "{:?}",
        gh.requests()
    );
    Ok(())
}

// ------------------------------------------------- reviewed means merged

/// Whether a recorded request (`METHOD /path?query`) asks for a merge.
fn is_merge(request: &str) -> bool {
    let path = request.split('?').next().unwrap_or_default();
    request.starts_with("PUT ") && path.ends_with("/merge")
}

/// Asserts that none of a double's recorded `requests` asked to merge.
fn assert_no_merge_asked(requests: &[String]) {
    assert!(
        !requests.iter().any(|r| is_merge(r)),
        "no merge was asked for: {requests:?}"
    );
}

/// What `git-merge-pr` says when the head it checked is no longer the pull request's head.
fn head_moved(number: u64, old: &str, new: &str) -> StepOutcome {
    StepOutcome::failed(format!(
        "pull request #{number}'s head moved from {old} to {new} after it was checked; Dray \
         merges only what was reviewed — review the new commit and promote again"
    ))
}

impl Setup {
    /// Whether `sha` is in the history of `main` in the served (bare) repository.
    fn on_main(&self, sha: &str) -> Result<bool> {
        let out = dray_e2e::git(&self.world)
            .arg("--git-dir")
            .arg(self.git.repo_path("acme/config"))
            .args(["merge-base", "--is-ancestor", sha, "refs/heads/main"])
            .output()?;
        Ok(out.status.success())
    }

    /// Asserts that main is still at `before` and `unmerged` is not in its history.
    fn assert_not_on_main(&self, before: &str, unmerged: &str) -> Result<()> {
        assert_eq!(self.main_head()?, before, "nothing landed on main");
        assert!(
            !self.on_main(unmerged)?,
            "the unreviewed commit {unmerged} is not on main"
        );
        Ok(())
    }

    /// A commit on top of `dray/promotion/<promotion>`, pushed to another branch
    /// (`unreviewed/<promotion>`) so that the server has it; returns it.
    fn commit_on_top(&self, promotion: &str, content: &str) -> Result<String> {
        self.work.switch(&format!("dray/promotion/{promotion}"))?;
        self.work.write("app.yaml", content)?;
        let sha = self.work.commit("an unreviewed change")?;
        self.work.push(&format!("unreviewed/{promotion}"))?;
        Ok(sha)
    }
}

/// Runs `git-merge-pr` until it says it waits for `status`; the state it pinned stays in
/// `ctx`.
async fn merge_until_waiting_for(ctx: &mut StepContext, config: &Value, status: &str) {
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

#[tokio::test]
async fn github_a_push_after_approval_is_not_merged() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let reviewed = s.promotion_branch("prod-9", "image: app:9.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-9")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let merge = gh_config(&s, &gh, json!({"prNumber": number}));
    let before = s.main_head()?;

    // Waiting for the review of the head it saw.
    gh.set_mergeable_state("acme/config", number, Some("blocked"))?;
    merge_until_waiting_for(&mut ctx, &merge, "`blocked`").await;
    assert_eq!(
        ctx.saved_state.as_ref().map(|s| s["headCommit"].clone()),
        Some(json!(reviewed)),
        "the checked head is kept in the step's state"
    );
    // Approved; then someone pushes to the pull request's branch.
    gh.set_mergeable_state("acme/config", number, None)?;
    let unreviewed = s.promotion_branch("prod-9", "image: app:9.0.0-evil\n")?;

    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(number, &reviewed, &unreviewed));
    s.assert_not_on_main(&before, &unreviewed)?;
    assert_no_merge_asked(&gh.requests());
    Ok(())
}

#[tokio::test]
async fn github_a_push_before_the_first_look_is_refused_when_the_pushed_commit_is_pinned()
-> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let pushed = s.promotion_branch("prod-11", "image: app:11.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-11")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let before = s.main_head()?;
    // Someone pushes to the branch before git-merge-pr has looked at the pull request.
    let unreviewed = s.promotion_branch("prod-11", "image: app:11.0.0-evil\n")?;
    let merge = gh_config(&s, &gh, json!({"prNumber": number, "headCommit": pushed}));

    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(number, &pushed, &unreviewed));
    s.assert_not_on_main(&before, &unreviewed)?;
    assert_no_merge_asked(&gh.requests());
    Ok(())
}

#[tokio::test]
async fn github_a_push_racing_the_merge_is_refused_by_github() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let reviewed = s.promotion_branch("prod-10", "image: app:10.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-10")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let before = s.main_head()?;
    // Lands on the branch between the step's last look and its merge request.
    let racing = s.commit_on_top("prod-10", "image: app:10.0.0-late\n")?;
    gh.push_before_next_merge("acme/config", number, &racing)?;

    let merge = gh_config(&s, &gh, json!({"prNumber": number}));
    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(number, &reviewed, &racing));
    assert!(
        gh.requests()
            .iter()
            .any(|r| r == &format!("PUT /repos/acme/config/pulls/{number}/merge")),
        "the merge was asked for, pinned, and refused: {:?}",
        gh.requests()
    );
    s.assert_not_on_main(&before, &racing)?;
    Ok(())
}

#[tokio::test]
async fn github_answers_409_only_to_a_stale_sha_and_405_to_an_unmergeable_pull() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let head = s.promotion_branch("prod-11", "image: app:11.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-11")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let client = dray_e2e::http_client()?;
    let url = format!("{}/repos/acme/config/pulls/{number}/merge", gh.api_url());
    let put = |body: Value| client.put(&url).bearer_auth(TOKEN).json(&body).send();

    // A conflict with main: no `sha` sent → 405, never 409.
    s.work.switch("main")?;
    s.work.write("app.yaml", "image: app:hotfix\n")?;
    s.work.commit("hotfix")?;
    s.work.push("main")?;
    let answer = put(json!({"merge_method": "merge"})).await?;
    assert_eq!(answer.status().as_u16(), 405);
    let body: Value = answer.json().await?;
    assert_eq!(body["message"], "Pull Request is not mergeable");
    // A `sha` that is not the head → 409, GitHub's message.
    let answer = put(json!({"sha": "0000000000000000000000000000000000000000"})).await?;
    assert_eq!(answer.status().as_u16(), 409);
    let body: Value = answer.json().await?;
    assert_eq!(
        body["message"],
        "Head branch was modified. Review and try the merge again."
    );
    // The right `sha` on a conflicting pull request → 405 again.
    let answer = put(json!({"sha": head})).await?;
    assert_eq!(answer.status().as_u16(), 405);
    Ok(())
}

#[tokio::test]
async fn github_unknown_mergeability_is_waited_for_then_merged() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    gh.unknown_mergeability_reads(3);
    let head = s.promotion_branch("prod-12", "image: app:12.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-12")?;
    let number = open_pr(&ctx, gh_config(&s, &gh, json!({"targetBranch": "main"}))).await?;
    let pull = format!("GET /repos/acme/config/pulls/{number}");
    let reads_before = gh.requests().iter().filter(|r| **r == pull).count();
    let merge = gh_config(&s, &gh, json!({"prNumber": number}));

    let (outcome, waited) = drive(&mut ctx, "git-merge-pr", &merge).await;
    let (outputs, _) = succeeded(outcome);
    let computing = waited
        .iter()
        .filter(|w| w.contains("GitHub to finish computing whether it can be merged"))
        .count();
    assert_eq!(computing, 3 - reads_before.min(3), "{waited:#?}");
    let requests = gh.requests();
    let merged_at = requests
        .iter()
        .position(|r| is_merge(r))
        .context("a merge request")?;
    let reads = requests[..merged_at].iter().filter(|r| **r == pull).count();
    assert!(reads > 3, "merged only once GitHub knew: {requests:?}");
    assert_eq!(outputs["headCommit"], json!(head));
    assert_eq!(
        s.main_head()?,
        outputs["commit"].as_str().unwrap_or_default()
    );
    assert!(s.on_main(&head)?);
    Ok(())
}

#[tokio::test]
async fn gitlab_a_push_after_approval_is_not_merged() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    let reviewed = s.promotion_branch("prod-9", "image: app:9.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-9")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    let merge = gl_config(&s, &gl, json!({"prNumber": iid}));
    let before = s.main_head()?;

    gl.set_merge_status("acme/config", iid, Some("not_approved"))?;
    merge_until_waiting_for(&mut ctx, &merge, "`not_approved`").await;
    gl.set_merge_status("acme/config", iid, None)?;
    let unreviewed = s.promotion_branch("prod-9", "image: app:9.0.0-evil\n")?;

    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(iid, &reviewed, &unreviewed));
    s.assert_not_on_main(&before, &unreviewed)?;
    assert_no_merge_asked(&gl.requests());
    Ok(())
}

#[tokio::test]
async fn gitlab_a_push_racing_the_merge_is_refused_by_gitlab() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    // GitLab checks mergeability before `sha`: a push it has already seen makes the merge a
    // 405 (still checking); one it has not, a 409. Either way the step names the new head.
    for (checking, promotion) in [(1, "prod-10"), (0, "prod-10b")] {
        gl.checking_reads(checking);
        let reviewed = s.promotion_branch(promotion, "image: app:10.0.0\n")?;
        let mut ctx = context(&s.world, &s.url, promotion)?;
        let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
        let before = s.main_head()?;
        let racing = s.commit_on_top(promotion, "image: app:10.0.0-late\n")?;
        gl.push_before_next_merge("acme/config", iid, &racing)?;

        let merge = gl_config(&s, &gl, json!({"prNumber": iid}));
        let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
        assert_eq!(
            outcome,
            head_moved(iid, &reviewed, &racing),
            "checking {checking}"
        );
        let path = format!("PUT /api/v4/projects/acme%2Fconfig/merge_requests/{iid}/merge?");
        assert!(
            gl.requests().contains(&path),
            "checking {checking}: {:?}",
            gl.requests()
        );
        s.assert_not_on_main(&before, &racing)?;
    }
    Ok(())
}

#[tokio::test]
async fn gitlab_answers_409_only_to_a_stale_sha_and_405_to_an_unmergeable_request() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    gl.checking_reads(0);
    let head = s.promotion_branch("prod-11", "image: app:11.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-11")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    let client = dray_e2e::http_client()?;
    let url = format!(
        "{}/api/v4/projects/acme%2Fconfig/merge_requests/{iid}/merge",
        gl.api_url()
    );
    let put = |body: Value| {
        client
            .put(&url)
            .header("PRIVATE-TOKEN", TOKEN)
            .json(&body)
            .send()
    };

    // Mergeable, a stale `sha` → 409 with GitLab's message.
    let answer = put(json!({"sha": "0000000000000000000000000000000000000000"})).await?;
    assert_eq!(answer.status().as_u16(), 409);
    let body: Value = answer.json().await?;
    assert_eq!(body["message"], "SHA does not match HEAD of source branch");
    // A conflict with main: no `sha` → 405, never 409; with the right `sha` → 405 too.
    s.work.switch("main")?;
    s.work.write("app.yaml", "image: app:hotfix\n")?;
    s.work.commit("hotfix")?;
    s.work.push("main")?;
    for body in [json!({}), json!({"sha": head})] {
        let answer = put(body).await?;
        assert_eq!(answer.status().as_u16(), 405);
        let body: Value = answer.json().await?;
        assert_eq!(body["message"], "405 Method Not Allowed");
    }
    Ok(())
}

#[tokio::test]
async fn gitlab_checking_is_waited_for_then_merged() -> Result<()> {
    let s = setup()?;
    let gl = gitlab(&s, gitlab::MergeMethod::Merge)?;
    gl.checking_reads(3);
    let head = s.promotion_branch("prod-12", "image: app:12.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-12")?;
    let iid = open_pr(&ctx, gl_config(&s, &gl, json!({"targetBranch": "main"}))).await?;
    assert_eq!(
        gl.merge_requests("acme/config")[0]["detailed_merge_status"],
        "unchecked",
        "not checked right after the create"
    );
    let merge = gl_config(&s, &gl, json!({"prNumber": iid}));

    let (outcome, waited) = drive(&mut ctx, "git-merge-pr", &merge).await;
    let (outputs, _) = succeeded(outcome);
    let checking = waited
        .iter()
        .filter(|w| {
            w.contains("GitLab to finish computing whether it can be merged (it says `checking`)")
        })
        .count();
    assert_eq!(checking, 3, "{waited:#?}");
    // A merge asked for while GitLab was checking would have been a 405: there was one.
    assert_eq!(gl.requests().iter().filter(|r| is_merge(r)).count(), 1);
    assert_eq!(outputs["headCommit"], json!(head));
    assert_eq!(
        s.main_head()?,
        outputs["commit"].as_str().unwrap_or_default()
    );
    Ok(())
}
