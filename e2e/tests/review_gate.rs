//! A pull request as a gate, through `dray serve`: the promotion pushes its own branch,
//! opens a pull request on the GitHub double, waits for the review, and moves on the
//! moment GitHub's `pull_request` closed webhook arrives — long before its one-hour poll.

use anyhow::{Context, Result, bail};
use dray_e2e::github::{GitHubDouble, Landing};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

const TOKEN: &str = "ghp_review_gate_token";
const HOOK_SECRET: &str = "review-hook-secret";

fn project(registry: &str, config_url: &str, api: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: demo}}
spec:
  interval: 1h
  subscriptions:
    - image: {{repoURL: {registry}/demo/app, insecure: true}}
    - git: {{repoURL: {config_url}, branch: main}}
---
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: github, namespace: demo}}
spec: {{type: git, repoURL: {config_url}, username: dray, token: {TOKEN}}}
---
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: github-webhook, namespace: demo}}
spec: {{type: webhook, token: {HOOK_SECRET}}}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: demo, namespace: demo}}
spec:
  webhookReceivers:
    - name: github
      github: {{secretRef: github-webhook}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: prod, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  promotionTemplate:
    spec:
      steps:
        - uses: git-clone
          config:
            repoURL: {config_url}
            checkout:
              - commit: ${{{{ commitFrom("{config_url}").id }}}}
                path: ./src
              - branch: main
                path: ./out
        - uses: kustomize-set-image
          config:
            path: ./src/overlays/prod
            images: [{{image: app, newName: {registry}/demo/app}}]
        - uses: kustomize-build
          config: {{path: ./src/overlays/prod, outPath: ./out/prod/manifests.yaml}}
        - uses: git-commit
          config: {{path: ./out, message: "Promote ${{{{ ctx.targetFreight.alias }}}} to prod"}}
        - uses: git-push
          as: push
          config: {{path: ./out, generateTargetBranch: true}}
        - uses: git-open-pr
          as: open
          config:
            repoURL: {config_url}
            provider: github
            apiURL: {api}
            sourceBranch: ${{{{ outputs.push.branch }}}}
            targetBranch: main
        - uses: git-wait-for-pr
          as: review
          config:
            repoURL: {config_url}
            provider: github
            apiURL: {api}
            prNumber: ${{{{ outputs.open.pr.id }}}}
            pollInterval: 1h
"#
    )
}

fn signature(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(HOOK_SECRET.as_bytes()).expect("any key length");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// Applies `text`, refreshes the Warehouse and requests a promotion of the newest Freight
/// into `prod`; the Promotion's name.
fn promote_into_prod(world: &TestWorld, dray: &Dray, text: &str) -> Result<String> {
    let file = world.path().join("project.yaml");
    std::fs::write(&file, text)?;
    let applied = dray.cli(["apply", "-f", file.to_str().context("utf-8")?])?;
    if !applied.status.success() {
        bail!("apply: {}", String::from_utf8_lossy(&applied.stderr));
    }
    let refreshed = dray.cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])?;
    assert!(
        refreshed.status.success(),
        "{}",
        String::from_utf8_lossy(&refreshed.stderr)
    );
    let freight: Vec<Value> = serde_json::from_slice(
        &dray
            .cli(["get", "freight", "-p", "demo", "-o", "json"])?
            .stdout,
    )?;
    let alias = freight[0]["alias"].as_str().context("alias")?.to_owned();
    let requested = dray.cli([
        "promote", "-p", "demo", "--stage", "prod", "--alias", &alias,
    ])?;
    let out = String::from_utf8_lossy(&requested.stdout).into_owned();
    out.lines()
        .find_map(|l| {
            l.strip_prefix("promotion ")
                .and_then(|r| r.strip_suffix(" requested"))
        })
        .map(str::to_owned)
        .context(out.clone())
}

/// Polls Promotion `name` (every 100 ms, at most 60 s) until `ready` says yes of it; the
/// Promotion as it was then. Fails naming `what` it waited for and the last state.
async fn wait_for(
    dray: &Dray,
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let client = dray_e2e::http_client()?;
    let url = format!("{}/api/v1/projects/demo/promotions/{name}", dray.url());
    let mut promotion = Value::Null;
    for _ in 0..600 {
        promotion = client
            .get(&url)
            .bearer_auth(dray.token())
            .send()
            .await?
            .json()
            .await?;
        if ready(&promotion) {
            return Ok(promotion);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    bail!("waited 60s in vain for {what} of `{name}`: {promotion:#}")
}

/// The execution record of step `alias` in `promotion` (`null` before it has one).
fn step(promotion: &Value, alias: &str) -> Value {
    promotion["status"]["stepExecutionMetadata"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["alias"] == alias).cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_webhook_moves_a_waiting_promotion_on_at_once() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("acme/config")?;
    let (config, _) = tokio::task::block_in_place(|| {
        GitRepo::seed(
            &world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )
    })?;
    let github = GitHubDouble::start(&world, Some(TOKEN))?;
    github.add_repo("acme/config", git.repo_path("acme/config"));
    let dray = Dray::start(&world, DrayOptions::default())?;
    oci::push_image(&registry, "demo/app", "1.0.0").await?;

    let text = project(&registry.host(), &config_url, &github.api_url());
    let name = tokio::task::block_in_place(|| promote_into_prod(&world, &dray, &text))?;
    let waiting = wait_for(&dray, &name, "the review step to wait", |p| {
        let review = step(p, "review");
        review["status"] == "Running"
            && review["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("waiting for"))
    })
    .await?;
    assert_eq!(waiting["status"]["phase"], "Running", "{waiting:#}");
    let message = waiting["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("review"),
        "the promotion says it waits for the review: {message}"
    );

    // The Stage says it waits for the review, with the pull request's link.
    let stages = tokio::task::block_in_place(|| dray.cli(["get", "stages", "-p", "demo"]))?;
    let table = String::from_utf8_lossy(&stages.stdout).into_owned();
    assert!(
        table.contains("WAITING FOR") && table.contains("/acme/config/pull/"),
        "{table}"
    );

    let number = github.pulls("acme/config")[0]["number"]
        .as_u64()
        .context("a pull request")?;
    let merged = github.merge_as("acme/config", number, Landing::MergeCommit, "reviewer")?;
    let body = serde_json::to_vec(&json!({
        "action": "closed",
        "number": number,
        "pull_request": {"number": number, "merged": true},
        "repository": {"clone_url": config_url},
    }))?;
    let answer: Value = dray_e2e::http_client()?
        .post(format!("{}/webhooks/demo/github", dray.url()))
        .header("X-GitHub-Event", "pull_request")
        .header("X-Hub-Signature-256", signature(&body))
        .body(body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(answer["wokenPromotions"], 1, "{answer}");

    // The poll interval is an hour: only the webhook can finish this within the bound.
    let done = wait_for(&dray, &name, "the promotion to end", |p| {
        p["status"]["phase"] != "Running"
    })
    .await?;
    assert_eq!(done["status"]["phase"], "Succeeded", "{done:#}");
    assert_eq!(
        done["status"]["state"]["outputs"]["review"]["commit"],
        json!(merged)
    );
    let main = tokio::task::block_in_place(|| config.head("main"))?;
    assert_eq!(main, merged, "the merge commit is what landed on main");
    Ok(())
}

/// Reviewed means merged, through `dray serve`: the promotion's `git-merge-pr` saw the pull
/// request's head; someone pushes to the branch while it waits; the promotion fails saying
/// so, and the pushed commit never reaches `main`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_the_pull_request_after_it_was_checked_fails_the_promotion() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let config_url = git.create_repo("acme/config")?;
    let (config, _) = tokio::task::block_in_place(|| {
        GitRepo::seed(
            &world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )
    })?;
    let github = GitHubDouble::start(&world, Some(TOKEN))?;
    github.add_repo("acme/config", git.repo_path("acme/config"));
    // GitHub keeps computing mergeability until the test says: the step waits meanwhile.
    github.unknown_mergeability_reads(u32::MAX);
    let dray = Dray::start(&world, DrayOptions::default())?;
    oci::push_image(&registry, "demo/app", "1.0.0").await?;

    let wait_step = format!(
        r#"        - uses: git-wait-for-pr
          as: review
          config:
            repoURL: {config_url}
            provider: github
            apiURL: {api}
            prNumber: ${{{{ outputs.open.pr.id }}}}
            pollInterval: 1h
"#,
        api = github.api_url()
    );
    let merge_step = wait_step
        .replace("git-wait-for-pr", "git-merge-pr")
        .replace("as: review", "as: merge")
        .replace("pollInterval: 1h", "pollInterval: 200ms");
    let text = project(&registry.host(), &config_url, &github.api_url());
    assert!(text.contains(&wait_step), "the template has the wait step");
    let text = text.replace(&wait_step, &merge_step);

    let name = tokio::task::block_in_place(|| promote_into_prod(&world, &dray, &text))?;
    let waiting = wait_for(&dray, &name, "the merge step to wait for GitHub", |p| {
        step(p, "merge")["message"]
            .as_str()
            .is_some_and(|m| m.contains("GitHub to finish computing whether it can be merged"))
    })
    .await?;
    assert_eq!(waiting["status"]["phase"], "Running", "{waiting:#}");
    let pull = github.pulls("acme/config")[0].clone();
    let checked = pull["head"]["sha"].as_str().context("a head")?.to_owned();
    let branch = pull["head"]["ref"].as_str().context("a branch")?.to_owned();

    // Someone pushes to the pull request's branch; GitHub then knows mergeability at once.
    github.unknown_mergeability_reads(0);
    let pushed = tokio::task::block_in_place(|| -> Result<String> {
        let work = GitRepo::clone_from_url(&world, &config_url)?;
        work.switch(&branch)?;
        work.write("unreviewed.txt", "not what was reviewed\n")?;
        let sha = work.commit("an unreviewed change")?;
        work.push(&branch)?;
        Ok(sha)
    })?;

    let done = wait_for(&dray, &name, "the promotion to end", |p| {
        p["status"]["phase"] != "Running"
    })
    .await?;
    assert_eq!(done["status"]["phase"], "Failed", "{done:#}");
    let said = done.to_string();
    assert!(
        said.contains(&format!(
            "head moved from {checked} to {pushed} after it was checked"
        )),
        "the promotion says why: {done:#}"
    );
    let requests = github.requests();
    assert!(
        !requests.iter().any(|r| r.ends_with("/merge")),
        "no merge was asked for: {requests:?}"
    );
    let main = tokio::task::block_in_place(|| config.log("main"))?;
    assert!(
        main.iter().all(|c| c.sha != pushed && c.sha != checked),
        "neither the checked nor the pushed commit reached main"
    );
    Ok(())
}
