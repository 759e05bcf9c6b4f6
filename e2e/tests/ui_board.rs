//! The release board and the project page's Stage search, through the real `dray serve`
//! with the quickstart pipeline (real git, registry and kustomize) beside a second
//! project: `dray get board` in the terminal (table, JSON, `--attention`), then in a real
//! headless Chromium the board at `/` (a compact cell's Freight and what differs
//! downstream, the column paging and the "stuck only" filter as plain links and a plain
//! form) and the Stage search on the project page.
//! Screenshots land in `target/e2e-artifacts/`.

use anyhow::{Context, Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::pipeline::{Pipeline, text};
use fantoccini::Locator;
use serde_json::Value;

/// A second project: `shop`, dev → qa, nothing promoted; its `qa` gets a hold.
const SHOP: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: shop}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: cart, namespace: shop}
spec:
  interval: 1h
  subscriptions:
    - image: {repoURL: 127.0.0.1:1/shop/cart, insecure: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: shop}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: cart}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: shop}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: cart}
      sources: {stages: [dev]}
";

/// The quickstart with `1.0.0` in `dev`, and `shop` with a hold on `qa`; the alias.
async fn two_projects() -> Result<(Pipeline, String)> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        p.apply(SHOP)?;
        Ok(p)
    })?;
    let (_, alias) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.promote_ok("dev", &alias)?;
        let held = p.dray.cli([
            "-p",
            "shop",
            "hold",
            "set",
            "--stage",
            "qa",
            "--reason",
            "board test",
        ])?;
        if !held.status.success() {
            bail!("hold set failed: {}", text(&held));
        }
        Ok(())
    })?;
    Ok((p, alias))
}

fn board(p: &Pipeline, extra: &[&str]) -> Result<Value> {
    let mut args = vec!["get", "board", "-o", "json"];
    args.extend_from_slice(extra);
    let out = p.dray.cli(args)?;
    if !out.status.success() {
        bail!("dray get board failed: {}", text(&out));
    }
    serde_json::from_slice(&out.stdout).with_context(|| text(&out))
}

fn rows(board: &Value) -> Vec<String> {
    board["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["project"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_shows_what_runs_where_in_the_terminal() -> Result<()> {
    let (p, alias) = two_projects().await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let all = board(&p, &[])?;
        assert_eq!(rows(&all), ["demo", "shop"], "{all:#}");
        assert_eq!(
            all["columns"],
            serde_json::json!(["dev", "qa", "staging", "prod"])
        );
        let dev = &all["rows"][0]["cells"][0];
        assert_eq!(dev["stage"], "dev");
        assert_eq!(dev["freight"]["alias"], alias.as_str());
        assert_eq!(dev["freight"]["images"][0], "app:1.0.0");
        assert_eq!(dev["differsFrom"], serde_json::json!(["staging"]));
        let qa = &all["rows"][1]["cells"][1];
        assert_eq!(qa["attention"], serde_json::json!(["held"]), "{all:#}");

        let stuck = board(&p, &["--attention"])?;
        assert_eq!(rows(&stuck), ["shop"]);
        let by_name = board(&p, &["dem"])?;
        assert_eq!(rows(&by_name), ["demo"]);

        let table = p.dray.cli(["get", "board"])?;
        assert!(table.status.success(), "{}", text(&table));
        let table = String::from_utf8_lossy(&table.stdout).into_owned();
        let header = table.lines().next().unwrap_or_default();
        assert!(
            header.starts_with("PROJECT") && header.contains("STAGING"),
            "{table}"
        );
        assert!(
            table.contains(&alias) && table.contains("≠staging"),
            "{table}"
        );
        assert!(table.contains("!held"), "{table}");

        let refused = p.dray.cli(["get", "board", "--stage", "dev"])?;
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(text(&refused).contains("neither --stage nor --watch"));
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_and_the_stage_search_work_in_the_browser() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let (p, alias) = two_projects().await?;
    let base = p.dray.url();
    let browser = Browser::start().await?;
    browser.log_in(&base, p.dray.token()).await?;

    // Two projects: login lands on the board, one row each, dev holding the Freight.
    browser
        .wait_for_text(
            "tr[data-project=\"demo\"] td[data-stage=\"dev\"] .alias",
            &alias,
        )
        .await?;
    browser
        .wait_for_text(
            "tr[data-project=\"demo\"] td[data-stage=\"dev\"] .differs",
            "staging",
        )
        .await?;
    browser
        .wait_for_text(
            "tr[data-project=\"shop\"] td[data-stage=\"qa\"] [data-attention]",
            "held",
        )
        .await?;
    // Compact: each cell two lines, the row well under 40 px.
    let height = browser
        .client()
        .execute(
            "return document.querySelector('tr[data-project=\"demo\"]').getBoundingClientRect().height;",
            vec![],
        )
        .await?
        .as_f64()
        .context("the row's height")?;
    assert!(height <= 40.0, "demo's row is {height} px high");
    browser.screenshot("release-board").await?;

    // Column paging by plain links: two Stage names a page, the rest said hidden.
    browser.goto(&format!("{base}/?cols=2")).await?;
    browser
        .wait_for_text("#board-colpages", "Stage names 1–2 of 4 · 2 hidden")
        .await?;
    browser
        .wait_for("#board-colpages a.next", "the next Stage names link")
        .await?
        .click()
        .await?;
    browser
        .wait_for("th[data-column=\"prod\"]", "the prod column")
        .await?;
    let dev = browser
        .client()
        .find_all(Locator::Css("th[data-column=\"dev\"]"))
        .await?;
    assert!(dev.is_empty(), "dev is on the first column page");
    assert!(browser.current_url().await.contains("colpage=2"));
    browser.goto(&format!("{base}/")).await?;

    // "Stuck only", as a plain form: only shop is left.
    browser
        .wait_for("#board-attention", "the Stuck only box")
        .await?
        .click()
        .await?;
    browser
        .wait_for("#board-filter", "the Filter button")
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("#board-summary", "1 of 2 projects")
        .await?;
    browser
        .wait_for("tr[data-project=\"shop\"]", "shop's row")
        .await?;
    let demo = browser
        .client()
        .find_all(Locator::Css("tr[data-project=\"demo\"]"))
        .await?;
    assert!(demo.is_empty(), "demo needs no attention");
    assert!(browser.current_url().await.contains("stuck=1"));

    // The Stage search on the project page.
    browser.goto(&format!("{base}/projects/demo")).await?;
    browser
        .wait_for("#stage-q", "the Stage search")
        .await?
        .send_keys("prod")
        .await?;
    browser
        .wait_for("#stage-search", "the Find button")
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("#scope", "Showing 1 of 3 Stages")
        .await?;
    browser
        .wait_for(".graph [data-stage=\"prod\"]", "prod's node")
        .await?;
    let dev = browser
        .client()
        .find_all(Locator::Css(".graph .node.stage[data-stage=\"dev\"]"))
        .await?;
    assert!(dev.is_empty(), "only the Stage found is drawn");
    browser.screenshot("stage-search").await?;
    browser.check_page().await?;
    Ok(())
}
