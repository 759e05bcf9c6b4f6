//! `git-tag` (with `git-push`'s `tag:`) against a real git server (git http-backend) and
//! Dray's real shared mirrors, and `github-push` against the GitHub double backed by the
//! same bare repository. The steps run with a `StepContext`, as the engine runs them.
//!
//! `git-tag`: a promotion clones, commits, tags and pushes; the remote holds the annotated
//! tag at the commit; the shared mirror holds no tag before the push, and an abandoned
//! promotion's tag never reaches it; a second promotion that tags another commit with the
//! same name is refused naming the commit the tag is at.
//!
//! Through `dray serve` (the quickstart's registry, git server and Warehouse): a Stage whose
//! promotion commits, pushes, tags and pushes the tag; the next promotion with the same tag
//! name fails at `git-tag` naming the commit the tag is at.
//!
//! `github-push`: the commits are made again through GitHub's API; Dray's own commit is
//! made by GitHub (verified, attributed to the App), an outsider's keeps its author and is
//! not verified; a push to the branch in between is rebased onto; the staging ref is gone.

mod forge_steps;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dray_e2e::github::{APP_NAME, GitHubDouble};
use dray_e2e::{git, ls_remote};
use dray_steps::{StepContext, StepOutcome};
use forge_steps::*;
use serde_json::{Value, json};

/// A context for `promotion` with a work directory of its own (the mirrors are shared).
fn promotion(s: &Setup, name: &str) -> Result<StepContext> {
    let mut ctx = context(&s.world, &s.url, name)?;
    ctx.work_dir = s.world.path().join("work").join(name);
    std::fs::create_dir_all(&ctx.work_dir)?;
    Ok(ctx)
}

/// `git-clone` of `branch` into `out`, a change to `file`, and `git-commit`: the commit.
async fn clone_and_commit(
    s: &Setup,
    ctx: &StepContext,
    branch: &str,
    file: &str,
) -> Result<String> {
    let clone = json!({"repoURL": s.url, "checkout": [{"branch": branch, "path": "out"}]});
    succeeded(run(ctx, "git-clone", clone).await);
    std::fs::write(
        ctx.work_dir.join("out").join(file),
        format!("{}\n", ctx.promotion),
    )?;
    let commit = json!({"path": "out", "message": format!("promote {}", ctx.promotion)});
    let (outputs, _) = succeeded(run(ctx, "git-commit", commit).await);
    outputs["commit"]
        .as_str()
        .map(str::to_owned)
        .context("`git-commit` gave no `commit`")
}

/// Every ref of every mirror, and every file whose path names `needle` under the mirrors.
fn in_mirrors(s: &Setup, needle: &str) -> Result<Vec<String>> {
    let root = s.world.path().join("mirrors");
    let mut found = Vec::new();
    fn walk(dir: &Path, needle: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path: PathBuf = entry.path();
            if path.to_string_lossy().contains(needle) {
                found.push(path.display().to_string());
            }
            if path.is_dir() {
                walk(&path, needle, found);
            }
        }
    }
    walk(&root, needle, &mut found);
    for entry in std::fs::read_dir(&root)?.flatten() {
        let out = git(&s.world)
            .arg("--git-dir")
            .arg(entry.path())
            .args(["for-each-ref", "--format=%(refname)"])
            .output()?;
        for name in String::from_utf8_lossy(&out.stdout).lines() {
            if name.contains(needle) {
                found.push(name.to_owned());
            }
        }
    }
    Ok(found)
}

fn remote_ref(s: &Setup, name: &str) -> Result<Option<String>> {
    Ok(ls_remote(&s.world, &s.url)?
        .into_iter()
        .find(|(_, r)| r == name)
        .map(|(sha, _)| sha))
}

#[track_caller]
fn failed(outcome: StepOutcome) -> String {
    match outcome {
        StepOutcome::Failed { reason } => reason,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_promotion_tags_its_commit_and_pushes_the_tag_and_the_mirror_keeps_no_stray_tag()
-> Result<()> {
    let s = setup()?;
    let p1 = promotion(&s, "prod-1")?;
    let commit = clone_and_commit(&s, &p1, "main", "app.yaml").await?;
    let tag = json!({"path": "out", "tag": "v1.0.0", "message": "release 1.0.0"});
    let (tagged, _) = succeeded(run(&p1, "git-tag", tag).await);
    assert_eq!(tagged["commit"], json!(commit));
    // Made, not yet pushed: in no mirror, not on the remote.
    assert_eq!(in_mirrors(&s, "refs/tags/v1.0.0")?, Vec::<String>::new());
    assert_eq!(remote_ref(&s, "refs/tags/v1.0.0")?, None);

    let branch = json!({"path": "out", "targetBranch": "main"});
    succeeded(run(&p1, "git-push", branch).await);
    let (pushed, _) =
        succeeded(run(&p1, "git-push", json!({"path": "out", "tag": "v1.0.0"})).await);
    assert_eq!(pushed["commit"], json!(commit));
    assert_eq!(pushed["tag"], json!("v1.0.0"));
    assert_eq!(remote_ref(&s, "refs/tags/v1.0.0^{}")?, Some(commit.clone()));
    let bare = s.git.repo_path("acme/config");
    let object = git(&s.world)
        .arg("--git-dir")
        .arg(&bare)
        .args(["cat-file", "-p", "refs/tags/v1.0.0"])
        .output()?;
    let object = String::from_utf8_lossy(&object.stdout).into_owned();
    assert!(
        object.starts_with(&format!("object {commit}\ntype commit\ntag v1.0.0\n")),
        "{object}"
    );
    assert!(object.trim_end().ends_with("release 1.0.0"), "{object}");

    // A second promotion tagging another commit with the same name is refused, naming
    // the commit the tag is at; the remote's tag is untouched.
    let p2 = promotion(&s, "prod-2")?;
    let second = clone_and_commit(&s, &p2, "main", "app.yaml").await?;
    assert_ne!(second, commit);
    let again = json!({"path": "out", "tag": "v1.0.0", "message": "release 1.0.0 again"});
    let reason = failed(run(&p2, "git-tag", again).await);
    assert!(reason.contains("tag `v1.0.0` already exists"), "{reason}");
    assert!(reason.contains(&commit[..7]), "{reason}");
    assert!(reason.contains("hint:"), "{reason}");
    assert_eq!(remote_ref(&s, "refs/tags/v1.0.0^{}")?, Some(commit.clone()));

    // An abandoned promotion's tag never reaches the mirror, nor survives its work dir.
    let p3 = promotion(&s, "prod-3")?;
    clone_and_commit(&s, &p3, "main", "other.yaml").await?;
    let unpushed = json!({"path": "out", "tag": "v9.9.9", "message": "never pushed"});
    succeeded(run(&p3, "git-tag", unpushed).await);
    std::fs::remove_dir_all(&p3.work_dir)?;
    // The next clone prunes the abandoned worktree.
    let p4 = promotion(&s, "prod-4")?;
    clone_and_commit(&s, &p4, "main", "app.yaml").await?;
    assert_eq!(in_mirrors(&s, "v9.9.9")?, Vec::<String>::new());
    assert_eq!(remote_ref(&s, "refs/tags/v9.9.9")?, None);
    Ok(())
}

fn github(s: &Setup) -> Result<GitHubDouble> {
    let gh = GitHubDouble::start(&s.world, Some(TOKEN))?;
    gh.add_repo("acme/config", s.git.repo_path("acme/config"));
    Ok(gh)
}

/// `git log -1 --format=FORMAT SHA` in the bare repository.
fn show(s: &Setup, format: &str, sha: &str) -> Result<String> {
    let out = git(&s.world)
        .arg("--git-dir")
        .arg(s.git.repo_path("acme/config"))
        .args(["log", "-1", &format!("--format={format}"), sha])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[tokio::test]
async fn github_push_makes_dray_s_commits_again_through_the_api_signed_by_github() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let ctx = promotion(&s, "prod-1")?;
    let ours = clone_and_commit(&s, &ctx, "main", "app.yaml").await?;
    // Someone pushes to `main` meanwhile: the step rebases onto it.
    s.work.switch("main")?;
    s.work.write("README", "outside\n")?;
    let outside = s.work.commit("outside edit")?;
    s.work.push("main")?;

    let config: Value = json!({"path": "out", "apiURL": gh.api_url()});
    let (outputs, _) = succeeded(run(&ctx, "github-push", config.clone()).await);
    let head = remote_ref(&s, "refs/heads/main")?.context("main")?;
    assert_eq!(outputs["commit"], json!(head));
    assert_eq!(outputs["branch"], json!("main"));
    assert!(
        outputs["commitURL"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/acme/config/commit/{head}"))),
        "{outputs:?}"
    );
    assert_ne!(head, ours, "the commit was made again by GitHub");
    assert!(gh.verified(&head), "GitHub signs the commit Dray made");
    assert_eq!(show(&s, "%P", &head)?, outside);
    assert_eq!(show(&s, "%an", &head)?, APP_NAME);
    assert_eq!(show(&s, "%s", &head)?, "promote prod-1");
    assert_eq!(
        show(&s, "%(trailers:key=Dray-Promotion,valueonly)", &head)?,
        "prod-1"
    );
    let listed = ls_remote(&s.world, &s.url)?;
    assert!(
        listed.iter().all(|(_, r)| !r.starts_with("refs/dray/")),
        "the staging ref is left: {listed:?}"
    );
    let requests = gh.requests();
    assert!(
        requests
            .iter()
            .any(|r| r == "POST /repos/acme/config/git/commits"),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r == "PATCH /repos/acme/config/git/refs/heads/main"),
        "{requests:?}"
    );
    // The worktree is at the new head; a re-run pushes nothing more.
    let (again, _) = succeeded(run(&ctx, "github-push", config).await);
    assert_eq!(again["commit"], json!(head));
    assert_eq!(remote_ref(&s, "refs/heads/main")?, Some(head));
    Ok(())
}

#[tokio::test]
async fn github_push_creates_a_branch_and_keeps_an_outsider_s_commit_as_it_is() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    // `feature` has an outsider's commit that `main` lacks.
    s.work.switch("feature")?;
    s.work.write("feature.yaml", "on: true\n")?;
    let theirs = s.work.commit_as("feature flag", "Ada", "ada@example.com")?;
    s.work.push("feature")?;

    // A new branch starts from the cloned one: only Dray's commit is made again.
    let p1 = promotion(&s, "prod-1")?;
    clone_and_commit(&s, &p1, "feature", "app.yaml").await?;
    let config = json!({"path": "out", "targetBranch": "stage/prod", "apiURL": gh.api_url()});
    let (outputs, _) = succeeded(run(&p1, "github-push", config).await);
    let head = remote_ref(&s, "refs/heads/stage/prod")?.context("stage/prod")?;
    assert_eq!(outputs["commit"], json!(head));
    assert_eq!(outputs["branch"], json!("stage/prod"));
    assert!(gh.verified(&head));
    assert_eq!(show(&s, "%P", &head)?, theirs);
    assert!(
        gh.requests()
            .iter()
            .any(|r| r == "POST /repos/acme/config/git/refs"),
        "{:?}",
        gh.requests()
    );

    // To `main`, the outsider's commit is made again too: with its author, unverified.
    let p2 = promotion(&s, "prod-2")?;
    clone_and_commit(&s, &p2, "feature", "app.yaml").await?;
    let config = json!({"path": "out", "targetBranch": "main", "apiURL": gh.api_url()});
    let (outputs, _) = succeeded(run(&p2, "github-push", config).await);
    let head = remote_ref(&s, "refs/heads/main")?.context("main")?;
    assert_eq!(outputs["commit"], json!(head));
    assert!(gh.verified(&head));
    let replayed = show(&s, "%P", &head)?;
    assert_ne!(replayed, theirs);
    assert!(
        !gh.verified(&replayed),
        "GitHub does not vouch for the outsider's commit"
    );
    assert_eq!(show(&s, "%an <%ae>", &replayed)?, "Ada <ada@example.com>");
    assert_eq!(show(&s, "%T", &replayed)?, show(&s, "%T", &theirs)?);

    // Without a token there is no API to push through.
    let mut tokenless = promotion(&s, "prod-3")?;
    tokenless.credentials = std::sync::Arc::new(dray_steps::NoCredentials);
    clone_and_commit(&s, &tokenless, "main", "app.yaml").await?;
    let reason = failed(
        run(
            &tokenless,
            "github-push",
            json!({"path": "out", "apiURL": gh.api_url()}),
        )
        .await,
    );
    assert!(reason.contains("no GitHub token"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn github_push_retries_when_the_branch_moves_under_its_ref_update() -> Result<()> {
    let s = setup()?;
    let gh = github(&s)?;
    let ctx = promotion(&s, "prod-1")?;
    clone_and_commit(&s, &ctx, "main", "app.yaml").await?;
    // A commit on the server that lands on `main` between the step's compare and its
    // ref update: GitHub answers 422 `Update is not a fast forward`.
    s.work.switch("racer")?;
    s.work.write("README", "racing\n")?;
    let racing = s.work.commit("racing push")?;
    s.work.push("racer")?;
    gh.push_before_next_ref_update("acme/config", "main", &racing);

    let config = json!({"path": "out", "apiURL": gh.api_url()});
    let (outputs, _) = succeeded(run(&ctx, "github-push", config).await);
    let head = remote_ref(&s, "refs/heads/main")?.context("main")?;
    assert_eq!(outputs["commit"], json!(head));
    assert_eq!(
        show(&s, "%P", &head)?,
        racing,
        "rebased onto the racing push"
    );
    assert!(gh.verified(&head));
    let patches = gh
        .requests()
        .iter()
        .filter(|r| *r == "PATCH /repos/acme/config/git/refs/heads/main")
        .count();
    assert_eq!(patches, 2, "{:?}", gh.requests());
    Ok(())
}

/// A Stage whose promotion commits to `stage/release`, pushes, tags HEAD `release` and
/// pushes the tag.
const RELEASE_STAGE: &str = r#"apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: release, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
        - uses: git-clone
          config:
            repoURL: http://127.0.0.1:8080/config.git
            checkout:
              - branch: stage/release
                create: true
                path: ./out
        - uses: file-write
          config:
            path: ./out/release.txt
            contents: ${{ ctx.targetFreight.alias }}
            overwrite: true
        - uses: git-commit
          config:
            path: ./out
            message: release ${{ ctx.targetFreight.alias }}
        - uses: git-push
          config: {path: ./out, targetBranch: stage/release}
        - uses: git-tag
          as: tag
          config: {path: ./out, tag: release, message: "released ${{ ctx.targetFreight.alias }}"}
        - uses: git-push
          as: push-tag
          config: {path: ./out, tag: release}
"#;

/// Every `refs/tags/*` of every bare repository under `dir` (Dray's mirrors).
fn mirror_tags(world: &dray_e2e::TestWorld, dir: &Path) -> Vec<String> {
    let mut tags = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.join("HEAD").is_file() && path.join("objects").is_dir() {
            if let Ok(out) = git(world)
                .arg("--git-dir")
                .arg(&path)
                .args(["for-each-ref", "--format=%(refname)", "refs/tags"])
                .output()
            {
                tags.extend(
                    String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .map(str::to_owned),
                );
            }
        } else {
            tags.extend(mirror_tags(world, &path));
        }
    }
    tags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dray_serve_tags_a_promotion_and_refuses_the_same_tag_for_the_next() -> Result<()> {
    use dray_e2e::pipeline::{Pipeline, alias, promotion_name, text};
    let q = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let q = Pipeline::start()?;
        q.apply_quickstart(str::to_owned)?;
        q.apply(RELEASE_STAGE)?;
        Ok(q)
    })?;
    dray_e2e::oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    dray_e2e::oci::push_image(&q.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        q.refresh()?;
        let freight = q.freight()?;
        let (older, newer) = (alias(&freight[1]), alias(&freight[0]));

        let first = q.promote("release", &older)?;
        assert!(first.status.success(), "{}", text(&first));
        let head = q.config.head("stage/release")?;
        let listed = dray_e2e::ls_remote(&q.world, &q.config_url)?;
        let peeled = listed
            .iter()
            .find(|(_, r)| r == "refs/tags/release^{}")
            .map(|(sha, _)| sha.clone());
        assert_eq!(peeled, Some(head.clone()), "{listed:?}");
        let promotion = q.promotion(&promotion_name(&first))?;
        let steps = promotion["status"]["stepExecutionMetadata"]
            .as_array()
            .context("steps")?;
        assert!(
            steps.iter().all(|s| s["status"] == "Succeeded"),
            "{promotion:#}"
        );

        // The next Freight, the same tag name: refused at `git-tag`, naming the commit.
        let second = q.promote("release", &newer)?;
        let promotion = q.promotion(&promotion_name(&second))?;
        assert_eq!(promotion["status"]["phase"], "Failed", "{promotion:#}");
        let said = promotion.to_string();
        assert!(said.contains("tag `release` already exists"), "{said}");
        assert!(said.contains(&head[..7]), "{said}");
        // The remote's tag did not move, and no mirror holds a tag the remote lacks.
        let listed = dray_e2e::ls_remote(&q.world, &q.config_url)?;
        assert!(listed.contains(&(head.clone(), "refs/tags/release^{}".to_owned())));
        // (The mirror fetched the pushed tag for the second promotion: it is read here.)
        let tags = mirror_tags(&q.world, &q.dray.data_dir());
        assert!(tags.contains(&"refs/tags/release".to_owned()), "{tags:?}");
        for tag in tags {
            assert_eq!(tag, "refs/tags/release", "a stray tag in a mirror");
        }
        Ok(())
    })
}
