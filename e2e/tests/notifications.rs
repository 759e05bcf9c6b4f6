//! Feedback to CI (issue #17, item 6) and notifications (item 5), end to end: a Freight
//! whose app commits come from a GitHub repository and a GitLab project (git
//! subscriptions with `commitStatuses: true`, each with a `git` Credential) is promoted
//! into `dev`, deployed through the Argo CD double and verified against the Prometheus
//! double; the GitHub and GitLab doubles then hold, for each commit, `pending` and then
//! `success` statuses named `dray/demo/dev` linking to the Stage's page. A webhook
//! notification to a receiver that refuses everything shows its failures on the
//! ProjectConfig's status and in `dray get projectconfig`. Images do the same for the
//! commit their `org.opencontainers.image.source`/`.revision` labels name (image
//! subscriptions with `commitStatuses: true`).

use anyhow::{Context, Result};
use dray_e2e::GitRepo;
use dray_e2e::deploy::{Deploy, DeployOptions};
use dray_e2e::github::GitHubDouble;
use dray_e2e::gitlab::{self, GitLabDouble};
use dray_e2e::oci::{self, ImageOptions};
use dray_e2e::pipeline::{alias, id, text};
use serde_json::Value;

const TOKEN: &str = "forge-status-token-123";

/// A repository `name` on the git server with one commit on `main`; its URL and commit.
fn app_repo(d: &Deploy, name: &str) -> Result<(String, String)> {
    let url = d.p.git.create_repo(name)?;
    let work = GitRepo::clone_from_url(&d.p.world, &d.p.git.url_with_credentials(name))?;
    work.write("main.go", &format!("package main // {name}\n"))?;
    let sha = work.commit("the app")?;
    work.push("main")?;
    Ok((url, sha))
}

fn states(statuses: &[Value], field: &str) -> Vec<String> {
    statuses
        .iter()
        .map(|s| s[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A deployment with the GitHub and GitLab doubles, each holding one app repository
/// (`acme/app`, `group/lib`) with one commit: their URLs and commits.
#[allow(clippy::type_complexity)]
fn forges() -> Result<(
    Deploy,
    GitHubDouble,
    GitLabDouble,
    (String, String),
    (String, String),
)> {
    let d = Deploy::start(DeployOptions::default())?;
    let gh = GitHubDouble::start(&d.p.world, Some(TOKEN))?;
    let gl = GitLabDouble::start(&d.p.world, Some(TOKEN))?;
    let github = app_repo(&d, "acme/app")?;
    let lab = app_repo(&d, "group/lib")?;
    gh.add_repo("acme/app", d.p.git.repo_path("acme/app"));
    gl.add_project(
        "group/lib",
        d.p.git.repo_path("group/lib"),
        gitlab::MergeMethod::Merge,
    );
    Ok((d, gh, gl, github, lab))
}

/// Waits until the last of the statuses `read` gives has `field` = `success`; them all.
fn until_success(
    d: &Deploy,
    what: &str,
    field: &str,
    read: impl Fn() -> Vec<Value>,
) -> Result<Vec<Value>> {
    d.p.wait_until(what, || {
        let statuses = read();
        Ok(
            (states(&statuses, field).last().map(String::as_str) == Some("success"))
                .then_some(statuses),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_promotion_posts_pending_then_success_to_github_and_gitlab() -> Result<()> {
    let (d, gh, gl, (gh_url, gh_sha), (gl_url, gl_sha)) = tokio::task::block_in_place(forges)?;
    let warehouse = d.p.localise(&dray_e2e::pipeline::Pipeline::quickstart_file(
        "warehouse.yaml",
    )?);
    let warehouse = format!(
        "{warehouse}\n    - git:\n        repoURL: {gh_url}\n        branch: main\n        \
         commitStatuses: true\n        forge: {{provider: github, apiURL: \"{gh_api}\"}}\n    \
         - git:\n        repoURL: {gl_url}\n        branch: main\n        commitStatuses: true\n        \
         forge: {{provider: gitlab, apiURL: \"{gl_api}\"}}\n",
        gh_api = gh.api_url(),
        gl_api = gl.api_url(),
    );
    let credentials = format!(
        "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: gh, namespace: demo}}\n\
         spec: {{type: git, repoURL: \"{gh_url}\", token: {TOKEN}}}\n---\n\
         apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: gl, namespace: demo}}\n\
         spec: {{type: git, repoURL: \"{gl_url}\", token: {TOKEN}}}\n---\n\
         apiVersion: dray.dev/v1alpha1\nkind: ProjectConfig\nmetadata: {{name: demo, namespace: demo}}\n\
         spec:\n  notifications:\n  - name: ci\n    webhook: {{url: \"{refusing}/hook\"}}\n    \
         events: [PromotionSucceeded]\n",
        // The GitHub double wants its token, which a notification never sends: every
        // delivery there is refused with a 401.
        refusing = gh.api_url(),
    );
    tokio::task::block_in_place(|| d.p.apply(&format!("{warehouse}---\n{credentials}")))?;
    let (freight, alias) = d.p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let minted = d.p.freight_named(&freight)?;
        let commits: Vec<&str> = minted["commits"]
            .as_array()
            .context("commits")?
            .iter()
            .filter_map(|c| c["id"].as_str())
            .collect();
        assert!(
            commits.contains(&gh_sha.as_str()) && commits.contains(&gl_sha.as_str()),
            "{minted:#}"
        );
        d.p.promote_ok("dev", &alias)?;
        let run = d.verification_of(&freight)?;
        assert_eq!(run["phase"], "Successful", "{run:#}");

        let stage_url = "/projects/demo/stages/dev";
        let on_github = until_success(
            &d,
            "GitHub to hold `success` for the app commit",
            "state",
            || gh.statuses("acme/app", &gh_sha),
        )?;
        assert_eq!(states(&on_github, "state"), vec!["pending", "success"]);
        assert_eq!(states(&on_github, "context"), vec!["dray/demo/dev"; 2]);
        assert!(
            on_github[1]["target_url"]
                .as_str()
                .unwrap_or_default()
                .ends_with(stage_url),
            "{on_github:#?}"
        );
        assert_eq!(on_github[1]["description"], "verified in dev");

        let on_gitlab = until_success(
            &d,
            "GitLab to hold `success` for the lib commit",
            "status",
            || gl.statuses("group/lib", &gl_sha),
        )?;
        assert_eq!(states(&on_gitlab, "status"), vec!["pending", "success"]);
        assert_eq!(states(&on_gitlab, "name"), vec!["dray/demo/dev"; 2]);
        assert!(
            on_gitlab[0]["target_url"]
                .as_str()
                .unwrap_or_default()
                .ends_with(stage_url),
            "{on_gitlab:#?}"
        );

        // The refused notification: retried, then given up and shown on the status
        // (the default backoff is about a minute, so this looks at the attempts so far).
        let config =
            d.p.wait_until("the notification's first failed attempt", || {
                let config = d.p.json(&["get", "projectconfig", "demo", "-o", "json"])?;
                let tried = config["status"]["outbox"]["pending"]
                    .as_array()
                    .and_then(|p| p.first())
                    .is_some_and(|p| p["attempts"].as_u64() >= Some(1));
                Ok(tried.then_some(config))
            })?;
        let pending = &config["status"]["outbox"]["pending"][0];
        assert_eq!(pending["notification"], "ci", "{config:#}");
        assert_eq!(pending["event"]["event"], "PromotionSucceeded");
        assert!(
            pending["lastError"]
                .as_str()
                .unwrap_or_default()
                .ends_with("answered 401"),
            "{pending:#}"
        );
        let listed = d.p.cli(&["get", "projectconfig"])?;
        assert!(
            text(&listed).contains("1 pending"),
            "dray get projectconfig: {}",
            text(&listed)
        );
        Ok(())
    })
}

/// An image built from `(source, revision)`: its labels name them.
fn built_from(source: &str, revision: &str) -> ImageOptions {
    ImageOptions {
        labels: [
            ("org.opencontainers.image.source", source),
            ("org.opencontainers.image.revision", revision),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect(),
        ..ImageOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_post_statuses_to_the_commit_their_labels_name() -> Result<()> {
    let (d, gh, gl, (gh_url, gh_sha), (gl_url, gl_sha)) = tokio::task::block_in_place(forges)?;
    let registry = d.p.registry.host();
    let quickstart = d.p.localise(&dray_e2e::pipeline::Pipeline::quickstart_file(
        "warehouse.yaml",
    )?);
    // The quickstart's image (`demo/app`) posts to GitHub; a second one, `demo/lib`, to
    // GitLab; `demo/plain` has `commitStatuses` but no labels, and posts nothing;
    // `demo/stray`'s labels name a repository no Credential covers: refused, never sent.
    let warehouse = quickstart.replacen(
        "        insecure: true\n",
        &format!(
            "        insecure: true\n        commitStatuses: true\n        \
             forge: {{provider: github, apiURL: \"{gh_api}\"}}\n    \
             - image:\n        repoURL: {registry}/demo/lib\n        insecure: true\n        \
             commitStatuses: true\n        forge: {{provider: gitlab, apiURL: \"{gl_api}\"}}\n    \
             - image:\n        repoURL: {registry}/demo/plain\n        insecure: true\n        \
             commitStatuses: true\n    \
             - image:\n        repoURL: {registry}/demo/stray\n        insecure: true\n        \
             commitStatuses: true\n        forge: {{provider: github, apiURL: \"{gh_api}\"}}\n",
            gh_api = gh.api_url(),
            gl_api = gl.api_url(),
        ),
        1,
    );
    assert_ne!(
        warehouse, quickstart,
        "the image subscription is where it was"
    );
    let credentials = format!(
        "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: gh, namespace: demo}}\n\
         spec: {{type: git, repoURL: \"{gh_url}\", token: {TOKEN}}}\n---\n\
         apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: gl, namespace: demo}}\n\
         spec: {{type: git, repoURL: \"{gl_url}\", token: {TOKEN}}}\n---\n\
         apiVersion: dray.dev/v1alpha1\nkind: ProjectConfig\nmetadata: {{name: demo, namespace: demo}}\n\
         spec: {{}}\n",
    );
    tokio::task::block_in_place(|| d.p.apply(&format!("{warehouse}---\n{credentials}")))?;
    oci::push_image_with(
        &d.p.registry,
        "demo/lib",
        "1.0.0",
        &built_from(&gl_url, &gl_sha),
    )
    .await?;
    oci::push_image(&d.p.registry, "demo/plain", "1.0.0").await?;
    let stray = "https://github.com/elsewhere/tool";
    oci::push_image_with(
        &d.p.registry,
        "demo/stray",
        "1.0.0",
        &built_from(stray, &gh_sha),
    )
    .await?;
    oci::push_image_with(
        &d.p.registry,
        "demo/app",
        "1.0.0",
        &built_from(&gh_url, &gh_sha),
    )
    .await?;
    tokio::task::block_in_place(|| -> Result<()> {
        d.p.refresh()?;
        let minted = d.p.wait_until("a Freight of the four images", || {
            Ok(d.p
                .freight()?
                .into_iter()
                .find(|f| f["images"].as_array().is_some_and(|i| i.len() == 4)))
        })?;
        let image = |repo: &str| -> Result<Value> {
            minted["images"]
                .as_array()
                .and_then(|i| {
                    i.iter()
                        .find(|i| i["repoURL"] == format!("{registry}/{repo}"))
                })
                .cloned()
                .with_context(|| format!("no {repo} in {minted:#}"))
        };
        let app = image("demo/app")?;
        assert_eq!(
            (&app["source"], &app["revision"]),
            (&gh_url.clone().into(), &gh_sha.clone().into())
        );
        let plain = image("demo/plain")?;
        assert!(
            plain.get("source").is_none() && plain.get("revision").is_none(),
            "{plain:#}"
        );
        let shown = d.p.cli(&["get", "freight", &alias(&minted)])?;
        assert!(shown.status.success(), "dray get freight: {}", text(&shown));

        d.p.promote_ok("dev", &alias(&minted))?;
        let run = d.verification_of(&id(&minted))?;
        assert_eq!(run["phase"], "Successful", "{run:#}");

        let stage_url = "/projects/demo/stages/dev";
        let on_github = until_success(
            &d,
            "GitHub to hold `success` for the image's commit",
            "state",
            || gh.statuses("acme/app", &gh_sha),
        )?;
        assert_eq!(states(&on_github, "state"), vec!["pending", "success"]);
        assert_eq!(states(&on_github, "context"), vec!["dray/demo/dev"; 2]);
        assert!(
            on_github.iter().all(|s| s["target_url"]
                .as_str()
                .unwrap_or_default()
                .ends_with(stage_url)),
            "{on_github:#?}"
        );
        assert_eq!(on_github[1]["description"], "verified in dev");

        let on_gitlab = until_success(
            &d,
            "GitLab to hold `success` for the lib image's commit",
            "status",
            || gl.statuses("group/lib", &gl_sha),
        )?;
        assert_eq!(states(&on_gitlab, "status"), vec!["pending", "success"]);
        assert_eq!(states(&on_gitlab, "name"), vec!["dray/demo/dev"; 2]);

        // What is left is the stray image's status, refused for want of a Credential
        // without a request (the unlabelled image asked for none).
        let config =
            d.p.wait_until("only the stray image's status to be left", || {
                let config = d.p.json(&["get", "projectconfig", "demo", "-o", "json"])?;
                let pending = config["status"]["outbox"]["pending"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let only_stray = !pending.is_empty()
                    && pending.iter().all(|p| {
                        p["commitStatus"]["repoUrl"] == stray
                            && p["lastError"]
                                .as_str()
                                .is_some_and(|e| e.contains("no `git` Credential"))
                    });
                Ok(only_stray.then_some(pending))
            })?;
        assert_eq!(
            config[0]["commitStatus"]["image"],
            format!("{registry}/demo/stray"),
            "{config:#?}"
        );
        assert!(
            !gh.requests().iter().any(|r| r.contains("elsewhere")),
            "{:#?}",
            gh.requests()
        );
        Ok(())
    })
}
