//! Reject and stop the line from a real headless Chromium, against the quickstart pipeline
//! with real git, registry and kustomize: choose a Freight, click Reject on the `dev` node,
//! say why, and see "rejected by …" on the Freight — and promote refuse it with those
//! words; click Freeze project, say why, see the red banner — and promote refuse with
//! `frozen by …`; Unfreeze, and the banner goes. Screenshots land in
//! `target/e2e-artifacts/`.

use anyhow::{Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, text};

async fn log_in(browser: &Browser, base: &str, token: &str) -> Result<()> {
    browser.log_in(base, token).await?;
    browser.wait_for("#user", "the logged-in user").await?;
    Ok(())
}

/// Clicks the button `css`, waits for the dialog to say `says`, types `reason` and
/// confirms.
async fn pull(browser: &Browser, css: &str, says: &str, reason: &str) -> Result<()> {
    browser
        .wait_for(css, "the lever's button, enabled")
        .await?
        .click()
        .await?;
    browser.wait_for_text("#confirm", says).await?;
    if !reason.is_empty() {
        browser
            .wait_for("#confirm-reason", "the reason field")
            .await?
            .send_keys(reason)
            .await?;
    }
    browser
        .wait_for("#confirm-go:not([disabled])", "the Confirm button, enabled")
        .await?
        .click()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_and_freeze_are_clicked_in_the_browser_and_gate_promote() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let (id, alias) = tokio::task::block_in_place(|| -> Result<(String, String)> {
        p.refresh()?;
        p.newest_freight()
    })?;
    let base = p.dray.url();
    let browser = Browser::start().await?;
    log_in(&browser, &base, p.dray.token()).await?;
    browser
        .goto(&format!("{base}/projects/demo?freight={id}"))
        .await?;
    browser
        .wait_for(
            &format!("#live[data-selected=\"{id}\"]"),
            "the chosen Freight",
        )
        .await?;

    // Reject it for dev, from dev's node.
    pull(
        &browser,
        "button[data-action=\"reject\"][data-stage=\"dev\"]:not([disabled])",
        "Reject",
        "leaks memory",
    )
    .await?;
    browser
        .wait_for_text(
            &format!("[data-freight=\"{id}\"] .badge.rejected"),
            "rejected by admin: leaks memory (for dev)",
        )
        .await?;
    browser.screenshot("freight-rejected").await?;
    let refused = tokio::task::block_in_place(|| p.promote("dev", &alias))?;
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("rejected by admin: leaks memory"),
        "{}",
        text(&refused)
    );
    pull(
        &browser,
        "button[data-action=\"unreject\"][data-stage=\"dev\"]:not([disabled])",
        "Unreject",
        "",
    )
    .await?;
    browser
        .wait_for(
            "button[data-action=\"reject\"][data-stage=\"dev\"]",
            "Reject again, once unrejected",
        )
        .await?;

    // Stop the whole line: the red banner, and promote refuses.
    pull(
        &browser,
        ".project-actions button[data-action=\"freeze\"]:not([disabled])",
        "Freeze project demo",
        "release week",
    )
    .await?;
    browser
        .wait_for_text(
            ".banner.frozen[role=\"alert\"]",
            "frozen by admin: release week",
        )
        .await?;
    browser
        .wait_for_text(
            "#availability [data-stage=\"dev\"]",
            "frozen by admin: release week (project demo)",
        )
        .await?;
    browser.screenshot("project-frozen").await?;
    let refused = tokio::task::block_in_place(|| p.promote("dev", &alias))?;
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("frozen by admin: release week"),
        "{}",
        text(&refused)
    );

    // And a Stage from its own page: its banner says which Stage.
    pull(
        &browser,
        ".project-actions button[data-action=\"unfreeze\"]:not([disabled])",
        "Unfreeze project demo",
        "",
    )
    .await?;
    browser
        .wait_for(
            ".project-actions button[data-action=\"freeze\"]",
            "Freeze project again, once unfrozen",
        )
        .await?;
    browser
        .goto(&format!("{base}/projects/demo/stages/staging"))
        .await?;
    pull(
        &browser,
        ".stage-actions button[data-action=\"freeze\"][data-stage=\"staging\"]:not([disabled])",
        "Freeze Stage staging",
        "db migration",
    )
    .await?;
    tokio::task::block_in_place(|| {
        p.wait_until("staging to be frozen", || {
            let stage = p.stage("staging")?;
            Ok((stage["status"]["freeze"]["reason"] == "db migration").then_some(()))
        })
    })?;
    browser
        .goto(&format!("{base}/projects/demo/stages/staging"))
        .await?;
    browser
        .wait_for_text(
            ".banner.frozen[role=\"alert\"]",
            "Stage staging frozen by admin: db migration",
        )
        .await?;
    browser.screenshot("stage-frozen").await?;
    tokio::task::block_in_place(|| p.promote_ok("dev", &alias))?;
    Ok(())
}
