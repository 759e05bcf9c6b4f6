//! Self-tests of the e2e harness against the real services (no `dray` needed, except
//! the ignored `dray_*` test).

use std::time::Duration;

use anyhow::Result;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use dray_e2e::oci::{self, ImageOptions};
use dray_e2e::{
    Credentials, Dray, DrayOptions, GitRepo, GitServer, GitServerOptions, Notifications, Registry,
    RegistryOptions, TestWorld, ls_remote,
};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

fn creds() -> Credentials {
    Credentials::new("alice", "s3cret-pass")
}

#[tokio::test]
async fn registry_push_image_then_head_returns_its_digest() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;

    let first = oci::push_image(&registry, "team/app", "1.0.0").await?;
    assert!(first.starts_with("sha256:"), "{first}");
    assert_eq!(
        oci::head_digest(&registry, "team/app", "1.0.0").await?,
        Some(first.clone())
    );

    // Every push is a new image, even with identical options.
    let second = oci::push_image(&registry, "team/app", "1.0.0").await?;
    assert_ne!(first, second);
    assert_eq!(
        oci::head_digest(&registry, "team/app", "1.0.0").await?,
        Some(second)
    );
    assert_eq!(
        oci::head_digest(&registry, "team/app", "9.9.9").await?,
        None
    );
    Ok(())
}

#[tokio::test]
async fn registry_image_config_carries_created_and_labels() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let options = ImageOptions {
        created: Some("2024-01-02T03:04:05Z".into()),
        labels: [(
            "org.opencontainers.image.version".to_owned(),
            "1.2.3".to_owned(),
        )]
        .into(),
        ..ImageOptions::default()
    };
    let digest = oci::push_image_with(&registry, "app", "v1", &options).await?;

    let http = dray_e2e::http_client()?;
    let manifest: serde_json::Value = http
        .get(format!("{}/v2/app/manifests/{digest}", registry.url()))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let config_digest = manifest["config"]["digest"].as_str().unwrap_or_default();
    let config: serde_json::Value = http
        .get(format!("{}/v2/app/blobs/{config_digest}", registry.url()))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(config["created"], "2024-01-02T03:04:05Z");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        "1.2.3"
    );
    Ok(())
}

#[tokio::test]
async fn registry_multi_arch_index_lists_each_platform_manifest() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;

    let (index, manifests) = oci::push_index(
        &registry,
        "team/multi",
        "2.0.0",
        &[("linux", "amd64"), ("linux", "arm64")],
    )
    .await?;
    assert_eq!(
        oci::head_digest(&registry, "team/multi", "2.0.0").await?,
        Some(index.clone())
    );
    assert_eq!(manifests.len(), 2);
    assert_eq!(manifests[0].0.to_string(), "linux/amd64");
    assert_eq!(manifests[1].0.to_string(), "linux/arm64");
    assert_ne!(manifests[0].1, manifests[1].1);
    for (_, digest) in &manifests {
        assert_eq!(
            oci::head_digest(&registry, "team/multi", digest).await?,
            Some(digest.clone())
        );
    }

    let body: serde_json::Value = dray_e2e::http_client()?
        .get(format!("{}/v2/team/multi/manifests/2.0.0", registry.url()))
        .header("Accept", "application/vnd.oci.image.index.v1+json")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let listed: Vec<(String, String)> = body["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let arch = m["platform"]["architecture"].as_str().unwrap_or_default();
            (
                arch.to_owned(),
                m["digest"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            ("amd64".to_owned(), manifests[0].1.clone()),
            ("arm64".to_owned(), manifests[1].1.clone())
        ]
    );
    Ok(())
}

#[tokio::test]
async fn registry_with_htpasswd_rejects_anonymous_and_wrong_credentials() -> Result<()> {
    let world = TestWorld::new()?;
    let options = RegistryOptions {
        auth: Some(creds()),
        ..RegistryOptions::default()
    };
    let registry = Registry::start(&world, options)?;

    let digest = oci::push_image(&registry, "private/app", "1.0.0").await?;

    let anonymous = oci::head_manifest(&registry, "private/app", "1.0.0", None).await?;
    assert_eq!(anonymous.status, 401);
    let wrong = Credentials::new("alice", "wrong");
    let rejected = oci::head_manifest(&registry, "private/app", "1.0.0", Some(&wrong)).await?;
    assert_eq!(rejected.status, 401);
    let accepted = oci::head_manifest(&registry, "private/app", "1.0.0", Some(&creds())).await?;
    assert_eq!(accepted.status, 200);
    assert_eq!(accepted.digest, Some(digest));

    let options = ImageOptions {
        credentials: Some(wrong),
        ..ImageOptions::default()
    };
    let push = oci::push_image_with(&registry, "private/app", "2.0.0", &options).await;
    assert!(push.is_err(), "a push with a wrong password must fail");
    Ok(())
}

#[tokio::test]
async fn registry_stopped_refuses_connections_and_restarts_with_its_images() -> Result<()> {
    let world = TestWorld::new()?;
    let mut registry = Registry::start(&world, RegistryOptions::default())?;
    let digest = oci::push_image(&registry, "app", "1.0.0").await?;
    let port = registry.port();

    registry.stop()?;
    assert!(!registry.is_running());
    let err = dray_e2e::http_client()?
        .get(format!("{}/v2/", registry.url()))
        .send()
        .await
        .expect_err("stopped");
    assert!(err.is_connect(), "{err:#}");

    registry.restart()?;
    assert_eq!(registry.port(), port);
    assert_eq!(
        oci::head_digest(&registry, "app", "1.0.0").await?,
        Some(digest)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_notifies_the_webhook_of_a_push_with_the_bearer_token() -> Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Option<String>, serde_json::Value)>();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
                let json = serde_json::from_str(&body).unwrap_or_default();
                let _ = tx.send((auth.map(str::to_owned), json));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/hook", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let world = TestWorld::new()?;
    let notifications = Notifications {
        bearer_token: Some("hook-token".into()),
        ignored_actions: vec!["pull".into()],
        ..Notifications::to(hook)
    };
    let options = RegistryOptions {
        notifications: Some(notifications),
        ..Default::default()
    };
    let registry = Registry::start(&world, options)?;
    let digest = oci::push_image(&registry, "notified/app", "3.0.0").await?;

    let pushed = tokio::time::timeout(WAIT, async {
        while let Some((auth, envelope)) = rx.recv().await {
            let events = envelope["events"].as_array().cloned().unwrap_or_default();
            let manifest_push = events.iter().find(|e| {
                e["action"] == "push"
                    && e["target"]["tag"] == "3.0.0"
                    && e["target"]["digest"] == digest
            });
            if let Some(event) = manifest_push {
                return Some((auth, event.clone()));
            }
        }
        None
    })
    .await
    .expect("the registry did not notify the webhook of the push in time")
    .expect("webhook channel closed");
    assert_eq!(pushed.0.as_deref(), Some("Bearer hook-token"));
    assert_eq!(pushed.1["target"]["repository"], "notified/app");
    server.abort();
    Ok(())
}

#[test]
fn git_server_clone_push_ls_remote_with_basic_auth() -> Result<()> {
    let world = TestWorld::new()?;
    let git = GitServer::start(
        &world,
        GitServerOptions {
            auth: Some(creds()),
        },
    )?;
    let url = git.create_repo("team/config")?;
    assert_eq!(url, format!("{}/team/config.git", git.base_url()));
    let authed = git.url_with_credentials("team/config");
    assert!(authed.contains("alice:s3cret-pass@127.0.0.1"), "{authed}");

    let repo = GitRepo::clone_from_url(&world, &authed)?;
    repo.write("apps/guestbook/values.yaml", "image: nginx:1.27\n")?;
    let sha = repo.commit("Add guestbook")?;
    repo.push("main")?;

    let refs = ls_remote(&world, &authed)?;
    assert!(
        refs.contains(&(sha.clone(), "refs/heads/main".to_owned())),
        "{refs:?}"
    );
    assert_eq!(repo.head("main")?, sha);

    // A second working copy sees the push.
    let other = GitRepo::clone_from_url(&world, &authed)?;
    assert_eq!(
        other.show("main", "apps/guestbook/values.yaml")?,
        "image: nginx:1.27\n"
    );

    let wrong = url.replace("http://", "http://alice:wrong@");
    let failed = GitRepo::clone_from_url(&world, &wrong).expect_err("wrong password");
    assert!(
        format!("{failed:#}").contains("Authentication failed"),
        "{failed:#}"
    );
    assert!(
        ls_remote(&world, &url).is_err(),
        "anonymous access must fail"
    );

    let requests = git.requests();
    assert!(requests.iter().any(|r| r.status == 401 && r.user.is_none()));
    assert!(
        requests
            .iter()
            .any(|r| r.query == "service=git-receive-pack" && r.status == 200)
    );
    assert!(
        requests.iter().all(|r| r.status != 500),
        "{requests:?}\n{}",
        git.log()
    );
    Ok(())
}

#[test]
fn git_server_accepts_gzipped_requests() -> Result<()> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, GitServerOptions::default())?;
    let url = git.create_repo("many")?;
    let repo = GitRepo::clone_from_url(&world, &url)?;
    repo.write("README.md", "many branches\n")?;
    repo.commit("Initial")?;
    repo.push("main")?;
    // Enough `want` lines that git gzips the upload-pack request body (> 1 KiB).
    for i in 0..40 {
        repo.git([
            "checkout",
            "--quiet",
            "-B",
            &format!("branch-{i:02}"),
            "main",
        ])?;
        repo.write("n.txt", &i.to_string())?;
        repo.commit(&format!("Branch {i}"))?;
    }
    repo.git([
        "push",
        "--quiet",
        "origin",
        "refs/heads/branch-*:refs/heads/branch-*",
    ])?;

    let copy = GitRepo::clone_from_url(&world, &url)?;
    assert_eq!(copy.branches()?.len(), 41);
    assert_eq!(copy.show("branch-39", "n.txt")?, "39");
    let gzipped = git
        .requests()
        .into_iter()
        .filter(|r| r.content_encoding.as_deref() == Some("gzip") && r.status == 200)
        .count();
    assert!(gzipped > 0, "no gzipped request: {:?}", git.requests());
    Ok(())
}

#[test]
fn git_repo_log_parses_subject_body_trailers_and_author() -> Result<()> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, GitServerOptions::default())?;
    let url = git.create_repo("config")?;

    let source = world.unique_dir("source")?;
    std::fs::create_dir_all(source.join("stages/prod"))?;
    std::fs::write(
        source.join("stages/prod/kustomization.yaml"),
        "resources: []\n",
    )?;
    let (repo, seed) = GitRepo::seed(&world, &url, &source)?;

    repo.write("stages/prod/image.txt", "sha256:abc\n")?;
    let message =
        "Promote to prod\n\nFreight abc to prod.\n\nDray-Freight: abc\nDray-Stage: prod\n";
    let sha = repo.commit_as(message, "Promoter", "promoter@dray.invalid")?;
    repo.push("main")?;

    let log = repo.log("main")?;
    assert_eq!(log.len(), 2);
    let top = &log[0];
    assert_eq!(top.sha, sha);
    assert_eq!(top.parents, vec![seed.clone()]);
    assert_eq!(top.subject, "Promote to prod");
    assert!(
        top.body.starts_with("Freight abc to prod."),
        "{:?}",
        top.body
    );
    assert_eq!(top.trailer("dray-freight"), Some("abc"));
    assert_eq!(top.trailer("Dray-Stage"), Some("prod"));
    assert_eq!(
        (top.author_name.as_str(), top.author_email.as_str()),
        ("Promoter", "promoter@dray.invalid")
    );
    assert_eq!(log[1].sha, seed);
    assert_eq!(
        repo.show("main", "stages/prod/kustomization.yaml")?,
        "resources: []\n"
    );
    Ok(())
}

#[test]
fn git_server_hook_rejects_a_push_and_the_branch_is_unchanged() -> Result<()> {
    let world = TestWorld::new()?;
    let git = GitServer::start(&world, GitServerOptions::default())?;
    let url = git.create_repo("guarded")?;
    let repo = GitRepo::clone_from_url(&world, &url)?;
    repo.write("a.txt", "a\n")?;
    let first = repo.commit("First")?;
    repo.push("main")?;

    git.install_hook(
        "guarded",
        "pre-receive",
        "#!/bin/sh\necho 'protected branch' >&2\nexit 1\n",
    )?;
    repo.write("a.txt", "b\n")?;
    repo.commit("Second")?;
    let output = repo.try_git(["push", "origin", "HEAD:refs/heads/main"])?;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("protected branch"));
    assert_eq!(repo.head("main")?, first);
    Ok(())
}

#[test]
fn dray_serves_healthz_survives_kill9_and_restarts_on_the_same_port() -> Result<()> {
    let world = TestWorld::new()?;
    let mut dray = Dray::start(&world, DrayOptions::default())?;
    let port = dray.port();
    dray.kill9()?;
    assert!(!dray.is_running());
    dray.restart()?;
    assert_eq!(dray.port(), port);
    let output = dray.cli(["--help"])?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!dray.log().is_empty() || dray.is_running());
    Ok(())
}

/// A page whose button replaces a paragraph's text from JavaScript.
const CLICK_PAGE: &str = r#"<!doctype html>
<html><head><title>harness</title></head>
<body>
  <p id="message">not clicked</p>
  <button id="go" onclick="document.getElementById('message').textContent = 'clicked by ' + this.id">Go</button>
</body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_clicks_a_button_sees_the_new_text_saves_a_screenshot_and_leaves_no_process()
-> Result<()> {
    use axum::response::Html;
    use dray_e2e::browser::{Browser, profile_processes};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route("/", axum::routing::get(|| async { Html(CLICK_PAGE) }));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let browser = Browser::start().await?;
    let profile = browser.profile_dir();
    let driver = browser.driver_pid().expect("chromedriver runs");
    assert!(
        !profile_processes(&profile).is_empty(),
        "Chromium runs with the profile `{}`",
        profile.display()
    );

    browser.goto(&format!("http://{addr}/")).await?;
    let message = browser.wait_for("#message", "the message").await?;
    assert_eq!(message.text().await?, "not clicked");
    browser
        .wait_for("button#go", "the Go button")
        .await?
        .click()
        .await?;
    browser.wait_for_text("#message", "clicked by go").await?;
    assert_eq!(message.text().await?, "clicked by go");

    let path = browser.screenshot("harness-click").await?;
    assert!(
        path.ends_with("e2e-artifacts/harness-click.png"),
        "{}",
        path.display()
    );
    let png = std::fs::read(&path)?;
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "`{}` is not a PNG",
        path.display()
    );

    // A wait that cannot succeed names what it waited for and where.
    let mut browser = browser;
    browser.set_wait_timeout(Duration::from_millis(300));
    let err = browser
        .wait_for("#nowhere", "the missing panel")
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("the missing panel"), "{message}");
    assert!(message.contains("#nowhere"), "{message}");
    assert!(message.contains(&format!("http://{addr}/")), "{message}");
    let err = browser
        .wait_for_text("#message", "never shown")
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("never shown"), "{message}");
    assert!(message.contains("clicked by go"), "{message}");

    drop(browser);
    assert_eq!(
        profile_processes(&profile),
        Vec::<u32>::new(),
        "Chromium processes of the profile outlived the Browser"
    );
    let alive = std::process::Command::new("sh")
        .args([
            "-c",
            "kill -0 \"$1\" 2>/dev/null",
            "sh",
            &driver.to_string(),
        ])
        .status()?;
    assert!(
        !alive.success(),
        "chromedriver (pid {driver}) outlived the Browser"
    );
    server.abort();
    Ok(())
}
