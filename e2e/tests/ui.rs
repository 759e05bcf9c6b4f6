//! The web UI in a real headless Chromium (fantoccini over chromedriver), against the
//! quickstart pipeline with real git, registry and kustomize: log in with a token, see
//! the pipeline, open a Freight and read why `prod` may not take it, promote it to
//! `staging` from the UI, watch the Promotion succeed, find the new commit on
//! `stage/staging` in git and on the Stage page; then a viewer finds Promote disabled
//! with the reason. Screenshots land in `target/e2e-artifacts/`.

use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use fantoccini::Locator;
use serde_json::Value;

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The quickstart project without its auto-promotion policy; `prod` soaks for an hour.
struct Pipeline {
    world: TestWorld,
    registry: Registry,
    _git: GitServer,
    config: GitRepo,
    config_url: String,
    dray: Dray,
}

impl Pipeline {
    fn start() -> Result<Self> {
        let world = TestWorld::new()?;
        let registry = Registry::start(&world, Default::default())?;
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        let (config, _) = GitRepo::seed(
            &world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )?;
        let dray = Dray::start(&world, DrayOptions::default())?;
        let p = Pipeline {
            world,
            registry,
            _git: git,
            config,
            config_url,
            dray,
        };
        let dir = p.world.unique_dir("project")?;
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(workspace_root().join("examples/quickstart/project"))? {
            let path = entry?.path();
            if path.file_name().is_some_and(|n| n == "config.yaml") {
                continue;
            }
            let yaml = std::fs::read_to_string(&path)?
                .replace("127.0.0.1:5000", &p.registry.host())
                .replace("http://127.0.0.1:8080/config.git", &p.config_url)
                .replace("interval: 5m", "interval: 1h")
                .replace("requiredSoakTime: 1m", "requiredSoakTime: 1h");
            std::fs::write(dir.join(path.file_name().context("name")?), yaml)?;
        }
        let applied = p
            .dray
            .cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
        if !applied.status.success() {
            bail!("apply failed: {}", text(&applied));
        }
        Ok(p)
    }

    fn cli(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["-p", "demo"];
        all.extend_from_slice(args);
        self.dray.cli(all)
    }

    /// The newest Freight: (id, alias).
    fn newest_freight(&self) -> Result<(String, String)> {
        let freight: Vec<Value> =
            serde_json::from_slice(&self.cli(&["get", "freight", "-o", "json"])?.stdout)?;
        let newest = freight.first().context("no freight")?;
        Ok((
            newest["metadata"]["name"]
                .as_str()
                .context("id")?
                .to_owned(),
            newest["alias"].as_str().context("alias")?.to_owned(),
        ))
    }
}

async fn log_in(browser: &Browser, base: &str, token: &str) -> Result<()> {
    browser.goto(&format!("{base}/login")).await?;
    let field = browser.wait_for("#token", "the token field").await?;
    field.send_keys(token).await?;
    browser
        .wait_for("#login", "the Log in button")
        .await?
        .click()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_manager_promotes_from_the_browser_and_a_viewer_may_not() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let p = tokio::task::block_in_place(Pipeline::start)?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let (id, alias) = tokio::task::block_in_place(|| -> Result<(String, String)> {
        let refreshed = p.cli(&["refresh", "warehouse", "app", "--wait"])?;
        if !refreshed.status.success() {
            bail!("refresh failed: {}", text(&refreshed));
        }
        let (id, alias) = p.newest_freight()?;
        let promoted = p.cli(&[
            "promote",
            "--stage",
            "dev",
            "--alias",
            &alias,
            "--wait",
            "--timeout",
            "2m",
        ])?;
        if !promoted.status.success() {
            bail!("promote to dev failed: {}", text(&promoted));
        }
        Ok((id, alias))
    })?;
    let base = p.dray.url();

    let mut browser = Browser::start().await?;
    log_in(&browser, &base, p.dray.token()).await?;

    // The pipeline, drawn: the Warehouse and the three Stages, dev holding the Freight.
    browser
        .wait_for("[data-warehouse=\"app\"]", "the Warehouse node")
        .await?;
    for stage in ["dev", "staging", "prod"] {
        browser
            .wait_for(&format!(".graph [data-stage=\"{stage}\"]"), "a Stage node")
            .await?;
    }
    browser
        .wait_for_text("[data-stage=\"dev\"] .current", &alias)
        .await?;
    browser.wait_for_text("#user", "admin").await?;

    // Open the Freight and read why prod may not take it.
    browser
        .wait_for(
            &format!("[data-freight=\"{id}\"] a"),
            "the Freight in the timeline",
        )
        .await?
        .click()
        .await?;
    browser
        .wait_for(
            &format!("#availability[data-freight=\"{id}\"]"),
            "its availability",
        )
        .await?;
    browser
        .wait_for_text(
            "#availability [data-stage=\"prod\"]",
            "not verified in `staging`",
        )
        .await?;
    browser
        .wait_for_text("#availability [data-stage=\"staging\"]", "available")
        .await?;
    browser.screenshot("project-page").await?;

    // Promote it to staging: the confirmation says what changes and who you are.
    browser
        .wait_for(
            "button[data-action=\"promote\"][data-stage=\"staging\"]",
            "Promote on staging",
        )
        .await?
        .click()
        .await?;
    browser.wait_for_text("#confirm", "you are admin").await?;
    browser.wait_for_text("#confirm", "1.0.0@sha256:").await?;
    browser
        .wait_for_text("#confirm .gates", "available to staging")
        .await?;
    browser.screenshot("promote-confirmation").await?;
    browser
        .wait_for("#confirm-go:not([disabled])", "the Confirm button, enabled")
        .await?
        .click()
        .await?;

    // Live progress until it succeeds.
    browser.set_wait_timeout(Duration::from_secs(120));
    browser
        .wait_for(
            "#promotion[data-phase=\"Succeeded\"]",
            "the Promotion to succeed",
        )
        .await?;
    browser.set_wait_timeout(dray_e2e::browser::WAIT_TIMEOUT);
    browser
        .wait_for(
            "#promotion li[data-status=\"Succeeded\"]",
            "a succeeded step",
        )
        .await?;
    browser
        .wait_for_text("[data-stage=\"staging\"] .current", &alias)
        .await?;
    browser.screenshot("promotion-succeeded").await?;

    // The new commit is on stage/staging in git, made for this Freight by admin.
    let head = tokio::task::block_in_place(|| p.config.log("stage/staging"))?
        .into_iter()
        .next()
        .context("stage/staging has no commit")?;
    let freight_trailer = head.trailer("Dray-Freight").unwrap_or_default();
    assert!(freight_trailer.contains(&id), "{head:?}");
    assert_eq!(head.trailer("Dray-Actor"), Some("admin"), "{head:?}");

    // The Promotion view names that commit too.
    browser
        .wait_for(
            &format!("#promotion .pushed[data-commit=\"{}\"]", head.sha),
            "the pushed commit in the Promotion view",
        )
        .await?;

    // The Stage page shows it in the audit trail, and the promotion in its history.
    browser
        .goto(&format!("{base}/projects/demo/stages/staging"))
        .await?;
    browser
        .wait_for(
            &format!("#audit [data-commit=\"{}\"]", head.sha),
            "the new commit in the audit trail",
        )
        .await?;
    browser.wait_for_text("#promotions", "Succeeded").await?;
    browser.screenshot("stage-page").await?;

    // A viewer finds Promote disabled, with the reason.
    let made = tokio::task::block_in_place(|| {
        p.dray
            .cli(["token", "create", "--user", "vic", "--role", "dray-viewer"])
    })?;
    if !made.status.success() {
        bail!("token create failed: {}", text(&made));
    }
    let viewer_token = String::from_utf8(made.stdout)?.trim().to_owned();
    browser.goto(&format!("{base}/projects/demo")).await?;
    browser
        .wait_for("#logout", "the Log out button")
        .await?
        .click()
        .await?;
    browser.wait_for("#token", "the login form again").await?;
    log_in(&browser, &base, &viewer_token).await?;
    browser.wait_for_text("#user", "vic").await?;
    let promote = browser
        .client()
        .find(Locator::Css(
            "button[data-action=\"promote\"][data-stage=\"staging\"]",
        ))
        .await?;
    assert!(
        !promote.is_enabled().await?,
        "a viewer's Promote must be disabled"
    );
    assert_eq!(
        promote.attr("title").await?.as_deref(),
        Some("user `vic` may not promote stages/staging")
    );
    browser
        .wait_for_text(
            "[data-stage=\"staging\"] .why",
            "user `vic` may not promote stages/staging",
        )
        .await?;
    browser.screenshot("project-page-viewer").await?;
    Ok(())
}
