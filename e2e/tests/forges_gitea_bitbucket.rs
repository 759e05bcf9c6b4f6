//! Pull requests on Gitea/Forgejo and Bitbucket Cloud, against their doubles backed by real
//! git repositories: `git-open-pr`, `git-merge-pr` and `git-wait-for-pr` run directly with
//! a `StepContext`, as the engine runs them (the scenarios of `forges.rs`, per forge).
//!
//! For each forge: open → merge (a real merge commit) → wait returns the merge commit,
//! which is the target branch's head; a squash merge → the squash commit; closed without
//! merge (Gitea) / declined (Bitbucket) → Failed naming who closed it; a resumed open-pr
//! adopts the pull request it opened; a rate limit → Running saying so; a refused merge →
//! Failed with the forge's message; a push after the review → the merge is refused. Gitea
//! also refuses a push racing the merge itself (`head_commit_id`); Bitbucket's merge cannot
//! be pinned, so Dray checks the head right before it (see the module doc of
//! `promotion-steps/src/forge/bitbucket.rs`).

mod forge_steps;

use anyhow::Result;
use dray_e2e::bitbucket::BitbucketDouble;
use dray_e2e::gitea::GiteaDouble;
use dray_steps::StepOutcome;
use forge_steps::*;
use serde_json::{Value, json};

/// Asserts `outcome` is `Running` with a wait that starts with `said`; returns the wait.
#[track_caller]
fn running(outcome: StepOutcome, said: &str) -> std::time::Duration {
    match outcome {
        StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        } => {
            assert!(waiting_for.starts_with(said), "{waiting_for}");
            retry_after
        }
        other => panic!("expected Running ({said}…), got {other:?}"),
    }
}

// ---------------------------------------------------------------- Gitea / Forgejo

fn gitea(s: &Setup) -> Result<GiteaDouble> {
    let gt = GiteaDouble::start(&s.world, Some(TOKEN))?;
    gt.add_repo("acme/config", s.git.repo_path("acme/config"));
    Ok(gt)
}

fn gt_config(s: &Setup, gt: &GiteaDouble, extra: Value) -> Value {
    forge_config(s, "gitea", &gt.api_url(), extra)
}

#[tokio::test]
async fn gitea_open_merge_wait_lands_a_merge_commit() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    let label = gt.add_label("acme/config", "promotion");
    let head = s.promotion_branch("prod-1", "image: app:1.2.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-1")?;
    let open = gt_config(
        &s,
        &gt,
        json!({"targetBranch": "main", "labels": ["promotion"]}),
    );
    let (outputs, state) = succeeded(run(&ctx, "git-open-pr", open).await);
    let number = outputs["pr"]["id"].as_u64().unwrap_or_default();
    let url = outputs["pr"]["url"].as_str().unwrap_or_default();
    assert!(
        url.ends_with(&format!("/acme/config/pulls/{number}")),
        "{url}"
    );
    assert_eq!(state.unwrap_or_default()["number"], json!(number));
    let pulls = gt.pulls("acme/config");
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["head"]["sha"], json!(head));
    assert_eq!(pulls[0]["labels"][0]["id"], json!(label));
    let body = pulls[0]["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("registry.example.com/app:1.2.0@sha256:abc"),
        "{body}"
    );

    let wait = gt_config(&s, &gt, json!({"prNumber": number, "pollInterval": "5s"}));
    let poll = running(
        run(&ctx, "git-wait-for-pr", wait.clone()).await,
        &format!("pull request #{number}"),
    );
    assert_eq!(poll.as_secs(), 5);
    let merge = gt_config(&s, &gt, json!({"prNumber": number}));
    let commit = merge_then_wait(&ctx, merge.clone(), wait).await;
    assert_eq!(
        s.main_head()?,
        commit,
        "the merge commit is the head of main"
    );
    let parents = s.parents(&commit)?;
    assert_eq!(parents.len(), 2, "a real merge commit");
    assert_eq!(parents[1], head);
    let subject = s.work.git(["log", "-1", "--format=%s", &commit])?;
    assert!(subject.starts_with("Merge pull request '"), "{subject}");
    // Merging again is idempotent.
    let (again, _) = succeeded(run(&ctx, "git-merge-pr", merge).await);
    assert_eq!(again["commit"], json!(commit));
    Ok(())
}

#[tokio::test]
async fn gitea_squash_merge_lands_the_squash_commit() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    s.promotion_branch("prod-2", "image: app:2.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-2")?;
    let open = gt_config(
        &s,
        &gt,
        json!({"targetBranch": "main", "title": "Ship 2.0"}),
    );
    let number = open_pr(&ctx, open).await?;
    let merge = gt_config(
        &s,
        &gt,
        json!({"prNumber": number, "mergeMethod": "squash"}),
    );
    let commit =
        merge_then_wait(&ctx, merge, gt_config(&s, &gt, json!({"prNumber": number}))).await;
    assert_eq!(s.main_head()?, commit);
    assert_eq!(
        s.parents(&commit)?.len(),
        1,
        "a squash commit has one parent"
    );
    let subject = s.work.git(["log", "-1", "--format=%s", &commit])?;
    assert_eq!(subject.trim(), format!("Ship 2.0 (#{number})"));
    Ok(())
}

#[tokio::test]
async fn gitea_closed_without_merge_fails_naming_who_closed_it() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    s.promotion_branch("prod-3", "image: app:3.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-3")?;
    let number = open_pr(&ctx, gt_config(&s, &gt, json!({"targetBranch": "main"}))).await?;
    let before = s.main_head()?;
    gt.close_without_merge("acme/config", number, "bob")?;
    let closed = StepOutcome::failed(format!(
        "pull request #{number} was closed without merging by bob"
    ));
    for kind in ["git-wait-for-pr", "git-merge-pr"] {
        let outcome = run(&ctx, kind, gt_config(&s, &gt, json!({"prNumber": number}))).await;
        assert_eq!(outcome, closed, "{kind}");
    }
    assert_eq!(s.main_head()?, before, "nothing landed");
    Ok(())
}

#[tokio::test]
async fn gitea_resumed_open_pr_adopts_the_existing_pull_request() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    s.promotion_branch("prod-4", "image: app:4.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-4")?;
    let config = gt_config(&s, &gt, json!({"targetBranch": "main"}));
    open_pr_resumed(&ctx, &config).await;
    assert_eq!(gt.pulls("acme/config").len(), 1, "no second pull request");
    let creates = gt
        .requests()
        .iter()
        .filter(|r| r.as_str() == "POST /api/v1/repos/acme/config/pulls")
        .count();
    assert_eq!(creates, 1);
    Ok(())
}

#[tokio::test]
async fn forgejo_rate_limits_are_waited_out_and_reported() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    s.promotion_branch("prod-5", "image: app:5.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-5")?;
    let config = forge_config(
        &s,
        "forgejo",
        &gt.api_url(),
        json!({"targetBranch": "main"}),
    );
    gt.rate_limit_next(1, 7);
    let wait = running(
        run(&ctx, "git-open-pr", config.clone()).await,
        "rate limited by Forgejo, retrying at ",
    );
    assert_eq!(wait.as_secs(), 7, "the proxy's Retry-After");
    assert!(gt.pulls("acme/config").is_empty());
    let (outputs, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(outputs["pr"]["id"], json!(1));
    Ok(())
}

#[tokio::test]
async fn gitea_bad_gateway_is_waited_out_not_a_failure() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    s.promotion_branch("prod-7", "image: app:7.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-7")?;
    let number = open_pr(&ctx, gt_config(&s, &gt, json!({"targetBranch": "main"}))).await?;
    let wait = gt_config(&s, &gt, json!({"prNumber": number}));
    gt.bad_gateway_next(1);
    waits_out_a_bad_gateway(run(&ctx, "git-wait-for-pr", wait.clone()).await, "Gitea");
    merge_then_wait(&ctx, gt_config(&s, &gt, json!({"prNumber": number})), wait).await;
    Ok(())
}

#[tokio::test]
async fn gitea_refused_merges_fail_with_giteas_message_and_unmergeable_waits() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    gt.checking_reads(0);
    s.promotion_branch("prod-6", "image: app:6.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-6")?;
    let number = open_pr(&ctx, gt_config(&s, &gt, json!({"targetBranch": "main"}))).await?;
    let merge = gt_config(&s, &gt, json!({"prNumber": number}));
    gt.refuse_next_merge("acme/config", number)?;
    assert_eq!(
        drive(&mut ctx.clone(), "git-merge-pr", &merge).await.0,
        StepOutcome::failed(format!(
            "Gitea refused to merge pull request #{number}: User not allowed to merge PR"
        ))
    );
    // A conflict with main: Gitea says `mergeable: false`, which the step waits on.
    s.work.switch("main")?;
    s.work.write("app.yaml", "image: app:hotfix\n")?;
    s.work.commit("hotfix")?;
    s.work.push("main")?;
    let outcome = run(&ctx, "git-merge-pr", merge).await;
    running(
        outcome,
        &format!("pull request #{number} to be mergeable: Gitea merge status `not_mergeable`"),
    );
    Ok(())
}

#[tokio::test]
async fn gitea_a_push_after_the_review_is_not_merged() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    let reviewed = s.promotion_branch("prod-9", "image: app:9.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-9")?;
    let number = open_pr(&ctx, gt_config(&s, &gt, json!({"targetBranch": "main"}))).await?;
    let merge = gt_config(&s, &gt, json!({"prNumber": number}));
    let before = s.main_head()?;
    // While Gitea checks the pull request, the step waits, holding the head it saw.
    merge_until_waiting_for(&mut ctx, &merge, "`not_mergeable`").await;
    assert_eq!(
        ctx.saved_state.as_ref().map(|s| s["headCommit"].clone()),
        Some(json!(reviewed))
    );
    let unreviewed = s.promotion_branch("prod-9", "image: app:9.0.0-evil\n")?;
    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(number, &reviewed, &unreviewed));
    s.assert_not_on_main(&before, &unreviewed)?;
    assert_no_merge_asked(&gt.requests());
    Ok(())
}

#[tokio::test]
async fn gitea_refuses_a_push_racing_the_merge() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    // Checked at once, the merge meets `head_commit_id` (409 `head out of date`); still
    // checking the pushed head, it meets `Please try again later` (405). Either way the
    // step names the new head.
    for (checking, promotion) in [(0, "prod-10"), (1, "prod-10b")] {
        gt.checking_reads(checking);
        let reviewed = s.promotion_branch(promotion, "image: app:10.0.0\n")?;
        let mut ctx = context(&s.world, &s.url, promotion)?;
        let number = open_pr(&ctx, gt_config(&s, &gt, json!({"targetBranch": "main"}))).await?;
        let before = s.main_head()?;
        let racing = s.commit_on_top(promotion, "image: app:10.0.0-late\n")?;
        gt.push_before_next_merge("acme/config", number, &racing)?;
        let merge = gt_config(&s, &gt, json!({"prNumber": number}));
        let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
        assert_eq!(
            outcome,
            head_moved(number, &reviewed, &racing),
            "checking {checking}"
        );
        let asked = format!("POST /api/v1/repos/acme/config/pulls/{number}/merge");
        assert!(gt.requests().contains(&asked), "{:?}", gt.requests());
        s.assert_not_on_main(&before, &racing)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- Bitbucket Cloud

fn bitbucket(s: &Setup) -> Result<BitbucketDouble> {
    let bb = BitbucketDouble::start(&s.world, Some(TOKEN))?;
    bb.add_repo("acme/config", s.git.repo_path("acme/config"));
    Ok(bb)
}

fn bb_config(s: &Setup, bb: &BitbucketDouble, extra: Value) -> Value {
    forge_config(s, "bitbucket", &bb.api_url(), extra)
}

#[tokio::test]
async fn bitbucket_open_merge_wait_lands_a_merge_commit() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    let head = s.promotion_branch("prod-1", "image: app:1.2.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-1")?;
    let (outputs, _) = succeeded(
        run(
            &ctx,
            "git-open-pr",
            bb_config(&s, &bb, json!({"targetBranch": "main"})),
        )
        .await,
    );
    let number = outputs["pr"]["id"].as_u64().unwrap_or_default();
    let url = outputs["pr"]["url"].as_str().unwrap_or_default();
    assert!(
        url.ends_with(&format!("/acme/config/pull-requests/{number}")),
        "{url}"
    );
    let pulls = bb.pulls("acme/config");
    assert_eq!(pulls.len(), 1);
    // Bitbucket abbreviates hashes in pull requests; Dray reads the full one.
    assert_eq!(pulls[0]["source"]["commit"]["hash"], json!(head[..12]));

    let wait = bb_config(&s, &bb, json!({"prNumber": number}));
    running(
        run(&ctx, "git-wait-for-pr", wait.clone()).await,
        &format!("pull request #{number}"),
    );
    let merge = bb_config(&s, &bb, json!({"prNumber": number}));
    let merged = drive_ok(&ctx, "git-merge-pr", &merge).await;
    assert_eq!(merged["headCommit"], json!(head), "the full reviewed head");
    let (waited, _) = succeeded(run(&ctx, "git-wait-for-pr", wait).await);
    assert_eq!(waited["commit"], merged["commit"]);
    let commit = waited["commit"].as_str().unwrap_or_default();
    assert_eq!(commit.len(), 40, "a full hash: {commit}");
    assert_eq!(s.main_head()?, commit);
    assert_eq!(
        s.parents(commit)?[1],
        head,
        "a real merge commit of the head"
    );
    let (again, _) = succeeded(run(&ctx, "git-merge-pr", merge).await);
    assert_eq!(again["commit"], json!(commit), "idempotent");
    Ok(())
}

#[tokio::test]
async fn bitbucket_squash_merge_lands_the_squash_commit() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-2", "image: app:2.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-2")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    let merge = bb_config(
        &s,
        &bb,
        json!({"prNumber": number, "mergeMethod": "squash"}),
    );
    let commit =
        merge_then_wait(&ctx, merge, bb_config(&s, &bb, json!({"prNumber": number}))).await;
    assert_eq!(s.main_head()?, commit);
    assert_eq!(
        s.parents(&commit)?.len(),
        1,
        "a squash commit has one parent"
    );
    assert_eq!(s.work.show("main", "app.yaml")?, "image: app:2.0.0\n");
    Ok(())
}

#[tokio::test]
async fn bitbucket_declined_fails_naming_who_declined_it() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-3", "image: app:3.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-3")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    let before = s.main_head()?;
    bb.decline_as("acme/config", number, "Carol Danvers")?;
    let declined = StepOutcome::failed(format!(
        "pull request #{number} was closed without merging by Carol Danvers"
    ));
    for kind in ["git-wait-for-pr", "git-merge-pr"] {
        let outcome = run(&ctx, kind, bb_config(&s, &bb, json!({"prNumber": number}))).await;
        assert_eq!(outcome, declined, "{kind}");
    }
    assert_eq!(s.main_head()?, before, "nothing landed");
    Ok(())
}

#[tokio::test]
async fn bitbucket_resumed_open_pr_adopts_the_existing_pull_request() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-4", "image: app:4.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-4")?;
    let config = bb_config(&s, &bb, json!({"targetBranch": "main"}));
    open_pr_resumed(&ctx, &config).await;
    assert_eq!(bb.pulls("acme/config").len(), 1, "no second pull request");
    let searched = bb
        .requests()
        .iter()
        .any(|r| r.starts_with("GET /2.0/repositories/acme/config/pullrequests?state=OPEN&q="));
    assert!(searched, "{:?}", bb.requests());
    Ok(())
}

#[tokio::test]
async fn bitbucket_rate_limits_are_waited_out_and_reported() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-5", "image: app:5.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-5")?;
    let config = bb_config(&s, &bb, json!({"targetBranch": "main"}));
    bb.rate_limit_next(1);
    let wait = running(
        run(&ctx, "git-open-pr", config.clone()).await,
        "rate limited by Bitbucket, retrying at ",
    );
    // Bitbucket sends no Retry-After: a minute, then ask again.
    assert_eq!(wait.as_secs(), 60);
    assert!(bb.pulls("acme/config").is_empty());
    let (outputs, _) = succeeded(run(&ctx, "git-open-pr", config).await);
    assert_eq!(outputs["pr"]["id"], json!(1));
    Ok(())
}

#[tokio::test]
async fn bitbucket_refused_merges_fail_with_bitbuckets_message() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-6", "image: app:6.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-6")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    let merge = bb_config(&s, &bb, json!({"prNumber": number}));
    let before = s.main_head()?;
    bb.refuse_next_merge("acme/config", number)?;
    assert_eq!(
        drive(&mut ctx.clone(), "git-merge-pr", &merge).await.0,
        StepOutcome::failed(format!(
            "Bitbucket refused to merge pull request #{number}: You can't merge until you \
             resolve all merge checks."
        ))
    );
    assert_eq!(s.main_head()?, before, "nothing landed");
    // Labels do not exist on Bitbucket: said at once, with the fix.
    s.promotion_branch("prod-6b", "image: app:6.1.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-6b")?;
    let labelled = bb_config(&s, &bb, json!({"targetBranch": "main", "labels": ["prod"]}));
    let reason = match run(&ctx, "git-open-pr", labelled).await {
        StepOutcome::Failed { reason } => reason,
        other => panic!("expected Failed, got {other:?}"),
    };
    assert!(
        reason.contains("have no labels") && reason.contains("leave `labels` out"),
        "{reason}"
    );
    Ok(())
}

#[tokio::test]
async fn bitbucket_a_long_merge_is_followed_to_its_end() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    let head = s.promotion_branch("prod-8", "image: app:8.0.0\n")?;
    let ctx = context(&s.world, &s.url, "prod-8")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    bb.slow_next_merge(1);
    let merge = bb_config(&s, &bb, json!({"prNumber": number}));
    let commit =
        merge_then_wait(&ctx, merge, bb_config(&s, &bb, json!({"prNumber": number}))).await;
    assert_eq!(s.main_head()?, commit);
    assert!(s.on_main(&head)?);
    let polls = bb
        .requests()
        .iter()
        .filter(|r| r.contains(&format!("/pullrequests/{number}/merge/task-status/")))
        .count();
    assert_eq!(polls, 2, "PENDING once, then SUCCESS: {:?}", bb.requests());
    Ok(())
}

#[tokio::test]
async fn bitbucket_a_push_after_the_review_is_not_merged() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    let reviewed = s.promotion_branch("prod-9", "image: app:9.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-9")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    let merge = bb_config(&s, &bb, json!({"prNumber": number}));
    let before = s.main_head()?;
    merge_until_waiting_for(&mut ctx, &merge, "at its checked head").await;
    let unreviewed = s.promotion_branch("prod-9", "image: app:9.0.0-evil\n")?;
    let (outcome, _) = drive(&mut ctx, "git-merge-pr", &merge).await;
    assert_eq!(outcome, head_moved(number, &reviewed, &unreviewed));
    s.assert_not_on_main(&before, &unreviewed)?;
    assert_no_merge_asked(&bb.requests());
    Ok(())
}

#[tokio::test]
async fn the_token_comes_from_the_projects_credentials() -> Result<()> {
    let s = setup()?;
    let gt = gitea(&s)?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-7", "image: app:7.0.0\n")?;
    // Credentials for another repository only: no token reaches the forge.
    let ctx = context(&s.world, "https://elsewhere.example.com/x/y.git", "prod-7")?;
    for config in [
        gt_config(&s, &gt, json!({"targetBranch": "main"})),
        bb_config(&s, &bb, json!({"targetBranch": "main"})),
    ] {
        let reason = match run(&ctx, "git-open-pr", config).await {
            StepOutcome::Errored { reason } => reason,
            other => panic!("expected Errored, got {other:?}"),
        };
        assert!(reason.contains("401 Unauthorized"), "{reason}");
    }
    assert!(gt.pulls("acme/config").is_empty());
    assert!(bb.pulls("acme/config").is_empty());
    Ok(())
}

#[tokio::test]
async fn bitbucket_a_push_racing_the_merge_is_reported_not_hidden() -> Result<()> {
    // Bitbucket's merge takes no head commit: a push between Dray's last look and the merge
    // lands. The merged pull request says which head landed, and the step fails naming it.
    let s = setup()?;
    let bb = bitbucket(&s)?;
    let reviewed = s.promotion_branch("prod-10", "image: app:10.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-10")?;
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    let racing = s.commit_on_top("prod-10", "image: app:10.0.0-late\n")?;
    bb.push_before_next_merge("acme/config", number, &racing)?;
    let merge = bb_config(&s, &bb, json!({"prNumber": number}));
    let reason = match drive(&mut ctx, "git-merge-pr", &merge).await.0 {
        StepOutcome::Failed { reason } => reason,
        other => panic!("expected Failed, got {other:?}"),
    };
    assert!(
        reason.starts_with(&format!(
            "Bitbucket merged pull request #{number} at source {}, not at the checked head \
             {reviewed}: a push raced the merge",
            &racing[..12]
        )),
        "{reason}"
    );
    assert!(s.on_main(&racing)?, "Bitbucket did land the racing commit");
    Ok(())
}

/// The project's credential for Bitbucket as `username:app-password`.
struct AppPassword(String);

impl dray_steps::CredentialProvider for AppPassword {
    fn git(&self, _: &str) -> Option<dray_steps::GitCredentials> {
        None
    }
    fn token(&self, url: &str) -> Option<String> {
        (url == self.0).then(|| format!("dray-bot:{TOKEN}"))
    }
}

#[tokio::test]
async fn bitbucket_takes_an_app_password_as_basic_auth() -> Result<()> {
    let s = setup()?;
    let bb = bitbucket(&s)?;
    s.promotion_branch("prod-11", "image: app:11.0.0\n")?;
    let mut ctx = context(&s.world, &s.url, "prod-11")?;
    ctx.credentials = std::sync::Arc::new(AppPassword(s.url.clone()));
    let number = open_pr(&ctx, bb_config(&s, &bb, json!({"targetBranch": "main"}))).await?;
    assert_eq!(bb.pulls("acme/config")[0]["id"], json!(number));
    Ok(())
}
