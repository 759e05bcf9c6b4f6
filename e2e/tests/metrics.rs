//! Numbers (issue #17, item 8) with the real binary, registry, git and Chromium: `dray
//! serve --metrics-listen ADDR` serves `/metrics` there without a token and 404 on the main
//! listener; after a real promotion into `dev` the page counts it
//! (`dray_promotions_total`), times it, and shows `dev`'s DORA gauges, the lead time
//! measured from the image config's `created`; `GET /api/v1/projects/demo/dora` answers
//! the same; and the project page's DORA panel, seen in Chromium, draws the deployment as a
//! bar with the numbers beside it.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};
use dray_e2e::DrayOptions;
use dray_e2e::browser::Browser;
use dray_e2e::oci::{self, ImageOptions};
use dray_e2e::pipeline::Pipeline;
use dray_e2e::{free_port, loopback};

/// How long before the push the image was built: the lead time's floor.
const BUILT_AGO_SECONDS: i64 = 3600;

/// The samples of a scraped page, `name{labels}` → value (labels as written).
fn samples(page: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, series: &str, page: &str) -> Result<f64> {
    samples
        .get(series)
        .copied()
        .with_context(|| format!("no `{series}` on the page:\n{page}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_their_own_address_count_a_promotion_and_the_project_page_charts_it()
-> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let metrics_port = free_port()?;
    let metrics_addr = loopback(metrics_port).to_string();
    let p = tokio::task::block_in_place(|| {
        let p = Pipeline::start_with(DrayOptions {
            args: vec!["--metrics-listen".into(), metrics_addr.clone()],
            ..Default::default()
        })?;
        // The quickstart as written (SemVer): discovery reads the newest image's config,
        // so the Freight records its `created` whatever the strategy.
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        anyhow::Ok(p)
    })?;
    let built = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(BUILT_AGO_SECONDS);
    oci::push_image_with(
        &p.registry,
        "demo/app",
        "1.0.0",
        &ImageOptions {
            created: Some(built.to_string()),
            ..Default::default()
        },
    )
    .await?;
    tokio::task::block_in_place(|| {
        p.refresh()?;
        let alias = p.newest_alias()?;
        p.promote_ok("dev", &alias)
    })?;
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?;

    // The metrics address: no token, every family, the promotion counted.
    let page = http
        .get(format!("http://{metrics_addr}/metrics"))
        .send()
        .await?;
    ensure!(
        page.status() == 200,
        "GET /metrics on --metrics-listen: {}",
        page.status()
    );
    let page = page.text().await?;
    let scraped = samples(&page);
    let dev = r#"{project="demo",stage="dev"}"#;
    ensure!(
        value(
            &scraped,
            r#"dray_promotions_total{project="demo",stage="dev",phase="Succeeded"}"#,
            &page
        )? == 1.0,
        "one Succeeded promotion into dev:\n{page}"
    );
    ensure!(
        value(
            &scraped,
            &format!("dray_promotion_duration_seconds_count{dev}"),
            &page
        )? == 1.0,
        "{page}"
    );
    ensure!(
        value(
            &scraped,
            r#"dray_discovery_duration_seconds_count{project="demo",warehouse="app"}"#,
            &page
        )? >= 1.0,
        "{page}"
    );
    ensure!(
        value(
            &scraped,
            &format!("dray_dora_deployment_frequency{dev}"),
            &page
        )? == 1.0 / 30.0,
        "{page}"
    );
    let lead = value(
        &scraped,
        &format!("dray_dora_lead_time_seconds{dev}"),
        &page,
    )?;
    ensure!(
        lead >= BUILT_AGO_SECONDS as f64 && lead < (BUILT_AGO_SECONDS + 600) as f64,
        "the lead time runs from the image's build an hour ago: {lead}"
    );
    ensure!(
        value(
            &scraped,
            &format!("dray_promotion_queue_length{dev}"),
            &page
        )? == 0.0,
        "{page}"
    );
    ensure!(
        !page.contains(p.dray.token()),
        "the token is not on the page"
    );

    // The main listener no longer serves it.
    let main = http.get(format!("{}/metrics", p.dray.url())).send().await?;
    ensure!(
        main.status() == 404,
        "GET /metrics on --listen: {}",
        main.status()
    );

    // The API answers the same numbers, to a caller with a token.
    let dora: serde_json::Value = http
        .get(format!("{}/api/v1/projects/demo/dora?days=7", p.dray.url()))
        .bearer_auth(p.dray.token())
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let stages = dora["stages"].as_array().context("stages")?;
    let dev_numbers = stages
        .iter()
        .find(|s| s["stage"] == "dev")
        .with_context(|| format!("no dev in {dora}"))?;
    ensure!(dev_numbers["deployments"] == 1, "{dora}");
    ensure!(dev_numbers["daily"][13] == 1, "today's bar: {dora}");
    let unauthenticated = http
        .get(format!("{}/api/v1/projects/demo/dora", p.dray.url()))
        .send()
        .await?;
    ensure!(
        unauthenticated.status() == 401,
        "{}",
        unauthenticated.status()
    );

    // The project page's panel, in Chromium: dev's bar for today and its numbers.
    let browser = Browser::start().await?;
    let base = p.dray.url();
    browser.log_in(&base, p.dray.token()).await?;
    browser
        .wait_for("[data-warehouse=\"app\"]", "the pipeline after logging in")
        .await?;
    browser.goto(&format!("{base}/projects/demo")).await?;
    browser
        .wait_for("#dora", "the DORA panel on the project page")
        .await?;
    let row = "#dora tr[data-dora-stage=\"dev\"]";
    browser
        .wait_for_text(&format!("{row} .frequency"), "(1)")
        .await?;
    let bar = browser
        .wait_for(
            &format!("{row} svg.dora-chart rect.bar"),
            "dev's bar for today",
        )
        .await?;
    ensure!(
        bar.attr("data-count").await?.as_deref() == Some("1"),
        "one deployment today"
    );
    let chart = browser
        .wait_for(&format!("{row} svg.dora-chart"), "dev's chart")
        .await?;
    let label = chart.attr("aria-label").await?.unwrap_or_default();
    ensure!(
        label.starts_with("1 deployments to dev in the last 14 days"),
        "the chart says what it shows: {label:?}"
    );
    browser
        .wait_for_text(&format!("{row} .lead-time"), "1h")
        .await?;
    browser
        .wait_for_text(&format!("{row} .change-failure"), "0%")
        .await?;
    browser.screenshot("dora-panel").await?;
    Ok(())
}
