//! The web UI in a real headless Chromium (fantoccini over chromedriver), against the
//! quickstart pipeline with real git, registry and kustomize: log in with a token, see
//! the pipeline, open a Freight and read why `prod` may not take it, promote it to
//! `staging` from the UI, watch the Promotion succeed, find the new commit on
//! `stage/staging` in git and on the Stage page; then a viewer finds Promote disabled
//! with the reason. Then, in a world of its own with the Argo CD and Prometheus doubles,
//! deploy and verify seen from the browser: a promotion written to git and waiting for a
//! sync window, the dev node verifying to Successful and Healthy live, a re-verification
//! that fails and takes the Freight's way to staging away, and the Stage page's health and
//! verification history. Screenshots land in `target/e2e-artifacts/`.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::deploy::{Deploy, DeployOptions, QUERY};
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, text};
use fantoccini::Locator;
use serde_json::Value;

/// The quickstart project without its auto-promotion policy; `prod` soaks for an hour.
fn quickstart() -> Result<Pipeline> {
    let p = Pipeline::start()?;
    p.apply_quickstart(|yaml| yaml.replace("requiredSoakTime: 1m", "requiredSoakTime: 1h"))?;
    Ok(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_manager_promotes_from_the_browser_and_a_viewer_may_not() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let p = tokio::task::block_in_place(quickstart)?;
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
    browser.log_in(&base, p.dray.token()).await?;

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
            "not verified in staging",
        )
        .await?;
    // The reason's code span is code, not backticks (issue #17, item 9).
    browser
        .wait_for_text("#availability [data-stage=\"prod\"] li code", "staging")
        .await?;
    browser
        .wait_for_text("#availability [data-stage=\"staging\"]", "available")
        .await?;
    browser.screenshot("project-page").await?;

    // Promote it to prod, where a gate is red: Confirm is disabled, and what would unblock
    // it is offered to someone allowed to (issue #17, item 9).
    browser
        .wait_for(
            "button[data-action=\"promote\"][data-stage=\"prod\"]",
            "Promote on prod",
        )
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("#confirm .unblock", "What would unblock it")
        .await?;
    browser
        .wait_for(
            "#confirm .unblock button[data-action=\"approve\"][data-stage=\"prod\"]",
            "Approve offered as what would unblock prod",
        )
        .await?;
    let go = browser
        .wait_for("#confirm-go", "the Confirm button")
        .await?;
    assert!(
        !go.is_enabled().await?,
        "Confirm must be disabled while a gate is red"
    );
    browser.screenshot("promote-confirmation-red-gate").await?;
    browser
        .wait_for("#confirm-cancel", "the Cancel button")
        .await?
        .click()
        .await?;

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
    // And the diff of what would be committed, one collapsible section per file
    // (issue #17, item 1): collapsed until clicked.
    let file = browser
        .wait_for(
            "#confirm .preview details.file-diff[data-path=\"manifests.yaml\"][data-status=\"added\"] summary",
            "the preview's diff of manifests.yaml",
        )
        .await?;
    file.click().await?;
    browser
        .wait_for_text(
            "#confirm .preview details.file-diff[open] pre.diff .add",
            "1.0.0@sha256:",
        )
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
    browser.log_in(&base, &viewer_token).await?;
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
            "user vic may not promote stages/staging",
        )
        .await?;
    browser.screenshot("project-page-viewer").await?;
    Ok(())
}

async fn act(browser: &Browser, action: &str, stage: &str, says: &str) -> Result<()> {
    browser
        .wait_for(
            &format!("button[data-action=\"{action}\"][data-stage=\"{stage}\"]:not([disabled])"),
            "the action's button, enabled",
        )
        .await?
        .click()
        .await?;
    browser.wait_for_text("#confirm", says).await?;
    browser
        .wait_for("#confirm-go:not([disabled])", "the Confirm button, enabled")
        .await?
        .click()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_and_verify_show_live_and_a_failed_reverification_blocks_staging() -> Result<()> {
    use dray_e2e::argocd::SyncWindow;

    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let p = tokio::task::block_in_place(|| {
        Deploy::start(DeployOptions {
            health_timeout: "30s",
            sync_timeout: "2m",
            ..Default::default()
        })
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let (id, alias) = tokio::task::block_in_place(|| -> Result<(String, String)> {
        let refreshed = p.cli(&["refresh", "warehouse", "app", "--wait"])?;
        if !refreshed.status.success() {
            bail!("refresh failed: {}", text(&refreshed));
        }
        p.newest_freight()
    })?;
    // A deny window holds the sync, so "written to git, waiting for sync" lasts until the
    // test opens it.
    p.argocd.deny_sync_window(
        "shop-dev",
        Some(SyncWindow {
            kind: "deny".into(),
            schedule: "0 22 * * *".into(),
            duration: "8h".into(),
            manual_sync: false,
        }),
    );
    let base = p.dray.url();
    let mut browser = Browser::start().await?;
    browser.log_in(&base, p.dray.token()).await?;
    browser
        .wait_for(
            &format!("#availability[data-freight=\"{id}\"]"),
            "the newest Freight, selected",
        )
        .await?;
    // Everything after this happens without a reload: the marker would be gone.
    browser
        .client()
        .execute("window.drayNoReload = true; return true;", vec![])
        .await?;

    // Promote to dev from the UI: written to git, waiting for the sync — not a failure.
    act(&browser, "promote", "dev", "available to dev").await?;
    browser.set_wait_timeout(Duration::from_secs(60));
    let written = browser
        .wait_for_text(
            "[data-stage=\"dev\"] .written-to-git",
            "written to git, waiting for sync",
        )
        .await?;
    assert!(
        written.text().await?.contains("stage/dev"),
        "the written-to-git line names the branch"
    );
    let failed_on_node = browser
        .client()
        .find_all(Locator::Css(
            "[data-stage=\"dev\"] .failed, [data-stage=\"dev\"] .errored",
        ))
        .await?;
    assert!(
        failed_on_node.is_empty(),
        "waiting for sync is shown as a failure"
    );
    browser.screenshot("written-to-git").await?;

    // The window opens: synced, Healthy, verified — seen live.
    p.argocd.deny_sync_window("shop-dev", None);
    browser
        .wait_for(
            "#promotion[data-phase=\"Succeeded\"]",
            "the Promotion to succeed",
        )
        .await?;
    browser
        .wait_for(
            "[data-stage=\"dev\"] .verification[data-phase=\"Successful\"]",
            "dev's verification to succeed",
        )
        .await?;
    browser
        .wait_for(
            "[data-stage=\"dev\"] .health[data-health=\"Healthy\"]",
            "dev Healthy",
        )
        .await?;
    browser
        .wait_for_text("[data-stage=\"dev\"] .current", &alias)
        .await?;
    browser
        .wait_for_text("#availability [data-stage=\"staging\"]", "available")
        .await?;
    assert!(
        browser
            .client()
            .find_all(Locator::Css("[data-stage=\"dev\"] .written-to-git"))
            .await?
            .is_empty(),
        "still shown as waiting for sync after the promotion succeeded"
    );
    browser.screenshot("verification-successful").await?;

    // Prometheus answers badly; Verify again from the UI: Failed, and staging may not
    // take the Freight any more.
    p.prometheus.set_value(QUERY, 0.42);
    act(&browser, "verify", "dev", "Verify dev again").await?;
    browser
        .wait_for_text(
            "[data-stage=\"dev\"] .verification[data-phase=\"Failed\"]",
            "failed (2) > failureLimit (1)",
        )
        .await?;
    browser
        .wait_for_text(
            "#availability [data-stage=\"staging\"]",
            "not verified in dev",
        )
        .await?;
    browser
        .wait_for(
            "[data-stage=\"dev\"] .health[data-health=\"Healthy\"]",
            "dev still Healthy",
        )
        .await?;
    let no_reload = browser
        .client()
        .execute("return window.drayNoReload === true;", vec![])
        .await?;
    assert_eq!(no_reload, Value::Bool(true), "the page was reloaded");
    // Boxes are as tall as their content: none scrolls, none overlaps another, and the
    // drawing ends just below its lowest box.
    let drawn = browser
        .client()
        .execute(
            r#"const graph = document.querySelector(".graph").getBoundingClientRect();
               const nodes = Array.from(document.querySelectorAll(".graph .node"));
               const name = (n) => n.dataset.stage || n.dataset.warehouse;
               const rects = nodes.map((n) => [name(n), n.getBoundingClientRect()]);
               const overlaps = [];
               for (let i = 0; i < rects.length; i++) for (let j = i + 1; j < rects.length; j++) {
                 const [a, r] = rects[i], [b, s] = rects[j];
                 if (r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom) overlaps.push(a + "/" + b);
               }
               return {
                 scrolling: nodes.filter((n) => n.scrollHeight > n.clientHeight + 1).map(name),
                 overlaps: overlaps,
                 warehouse: document.querySelector("[data-warehouse]").getBoundingClientRect().height,
                 below: graph.bottom - Math.max(...rects.map(([, r]) => r.bottom)),
               };"#,
            vec![],
        )
        .await?;
    assert_eq!(drawn["scrolling"], serde_json::json!([]), "{drawn}");
    assert_eq!(drawn["overlaps"], serde_json::json!([]), "{drawn}");
    let warehouse = drawn["warehouse"].as_f64().context("warehouse height")?;
    assert!(warehouse < 80.0, "a three-line Warehouse box: {drawn}");
    let below = drawn["below"].as_f64().context("space below")?;
    assert!(
        (0.0..=40.0).contains(&below),
        "space under the lowest box: {drawn}"
    );
    browser.screenshot("verification-failed").await?;

    // The Stage page: the Application's health, both runs with alias, actor and counts.
    browser
        .goto(&format!("{base}/projects/demo/stages/dev"))
        .await?;
    browser
        .wait_for_text(
            "#health[data-health=\"Healthy\"] [data-application=\"shop-dev\"]",
            "Healthy",
        )
        .await?;
    let failed = browser
        .wait_for_text(
            "#verifications tr[data-phase=\"Failed\"]",
            "failed (2) > failureLimit (1)",
        )
        .await?
        .text()
        .await?;
    assert!(failed.contains(&alias), "{failed}");
    assert!(failed.contains("admin"), "{failed}");
    assert!(failed.contains("0/2/0/0"), "{failed}");
    assert!(failed.contains("0.42"), "the measured value: {failed}");
    let successful = browser
        .wait_for_text("#verifications tr[data-phase=\"Successful\"]", &alias)
        .await?
        .text()
        .await?;
    assert!(successful.contains("2/0/0/0"), "{successful}");
    browser.wait_for_text("#promotions", &alias).await?;
    browser.screenshot("stage-page-verification").await?;
    Ok(())
}

/// An open tab's live-update stream ends as soon as `dray serve` is asked to stop, so a
/// browser never holds a shutdown (or a restart) up; the server does not need its
/// fallback of closing requests that are still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_live_update_stream_ends_when_the_server_stops() -> Result<()> {
    let mut p = tokio::task::block_in_place(quickstart)?;
    let base = p.dray.url();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let login = http
        .post(format!("{base}/login"))
        .form(&[("token", p.dray.token())])
        .send()
        .await?;
    let cookie = login
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .find_map(|c| {
            c.split(';')
                .next()
                .filter(|kv| kv.starts_with("dray_session="))
        })
        .context("no session cookie after logging in")?
        .to_owned();
    let events = http
        .get(format!("{base}/ui/events?project=demo"))
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await?;
    assert_eq!(events.status(), 200);
    let mut events = events;
    let stopped = tokio::task::block_in_place(|| {
        p.dray
            .stop(Duration::from_secs(60))
            .map(|status| status.map(|s| s.success()))
    })?;
    assert_eq!(stopped, Some(true), "dray serve did not exit cleanly");
    // The stream ended (no error, no hang): every chunk read, then the end.
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        while events.chunk().await?.is_some() {}
        Ok::<_, reqwest::Error>(())
    })
    .await
    .context("the event stream did not end after the server stopped")?;
    drained?;
    let log = p.dray.log();
    assert!(
        !log.contains("requests still open"),
        "the stream held the shutdown up:\n{log}"
    );
    Ok(())
}
