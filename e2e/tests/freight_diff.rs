//! The Freight diff through the real `dray serve` with the quickstart pipeline (real git,
//! registry and kustomize): two Freight promoted into `dev` with a config change between
//! them, compared with `dray freight diff` (the image, the config commit's subject, the
//! rendered manifests' unified diff read from `stage/dev`), a Freight never promoted (the
//! manifests are not compared, and the answer says why), and the same page in a real
//! headless Chromium, reached from the project page's `diff` link in the Freight lanes (one
//! per Warehouse once there are two).

use anyhow::{Context, Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::pipeline::{Pipeline, text};
use fantoccini::Locator;
use serde_json::Value;

/// `1.0.0` then, after a config commit, `1.1.0` promoted into dev; `1.2.0` minted with dev
/// held, so it is never promoted. Returns the three aliases.
async fn three_freight() -> Result<(Pipeline, [String; 3])> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    let (_, first) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.promote_ok("dev", &first)?;
        let deployment = std::fs::read_to_string(p.config.path().join("base/deployment.yaml"))?;
        p.config.write(
            "base/deployment.yaml",
            &deployment.replace("replicas: 1", "replicas: 3"),
        )?;
        p.config.commit("raise replicas to 3")?;
        p.config.push("main")
    })?;
    let (_, second) = p.release("1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.promote_ok("dev", &second)?;
        let held = p.cli(&["hold", "set", "--stage", "dev", "--reason", "diff test"])?;
        if !held.status.success() {
            bail!("hold set failed: {}", text(&held));
        }
        Ok(())
    })?;
    let (_, third) = p.release("1.2.0").await?;
    Ok((p, [first, second, third]))
}

fn diff_json(p: &Pipeline, from: &str, to: &str) -> Result<Value> {
    p.json(&["freight", "diff", from, to, "-o", "json"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_promoted_freight_differ_in_image_commits_and_rendered_manifests() -> Result<()> {
    let (p, [first, second, third]) = three_freight().await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let diff = diff_json(&p, &first, &second)?;
        assert_eq!(diff["from"]["alias"], first.as_str());
        assert_eq!(diff["to"]["alias"], second.as_str());
        let image = &diff["images"][0];
        assert!(
            image["from"]
                .as_str()
                .unwrap_or_default()
                .starts_with("1.0.0@sha256:"),
            "{image}"
        );
        assert!(
            image["to"]
                .as_str()
                .unwrap_or_default()
                .starts_with("1.1.0@sha256:"),
            "{image}"
        );
        let commits = &diff["commits"][0];
        assert_eq!(
            commits["log"][0]["subject"], "raise replicas to 3",
            "{commits}"
        );
        assert_eq!(
            commits["log"].as_array().map(Vec::len),
            Some(1),
            "{commits}"
        );
        assert_eq!(commits["complete"], true, "{commits}");

        // The rendered manifests, as git has them in stage/dev.
        let manifests = &diff["manifests"];
        assert_eq!(manifests["state"], "compared", "{manifests}");
        assert_eq!(manifests["stage"], "dev");
        let patches: String = manifests["files"]
            .as_array()
            .context("no files")?
            .iter()
            .map(|f| f["patch"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(patches.contains("+  replicas: 3"), "{patches}");
        assert!(patches.contains("-  replicas: 1"), "{patches}");
        assert!(patches.contains("demo/app:1.1.0@sha256:"), "{patches}");
        let (from_commit, to_commit) = (
            manifests["fromCommit"].as_str().context("fromCommit")?,
            manifests["toCommit"].as_str().context("toCommit")?,
        );
        p.config.git(["fetch", "-q", "origin", "stage/dev"])?;
        let by_git = p.config.git(["diff", "--stat", from_commit, to_commit])?;
        for f in manifests["files"].as_array().context("no files")? {
            let path = f["path"].as_str().unwrap_or_default();
            assert!(
                by_git.contains(path),
                "git's diff does not name {path}: {by_git}"
            );
        }

        // The terminal form says the same.
        let shown = p.cli(&["freight", "diff", &first, &second])?;
        assert!(shown.status.success(), "{}", text(&shown));
        let shown = text(&shown);
        for want in [
            "raise replicas to 3",
            "MANIFESTS in the branch of Stage `dev`",
            "+  replicas: 3",
        ] {
            assert!(shown.contains(want), "{want} not in:\n{shown}");
        }

        // Never promoted: artifacts and commits only, and why not the manifests.
        let unpromoted = diff_json(&p, &second, &third)?;
        assert_eq!(
            unpromoted["manifests"]["state"], "notCompared",
            "{unpromoted}"
        );
        let reason = unpromoted["manifests"]["reason"]
            .as_str()
            .unwrap_or_default();
        assert!(reason.contains("never both in one Stage"), "{reason}");
        assert!(
            unpromoted["images"][0]["to"]
                .as_str()
                .unwrap_or_default()
                .starts_with("1.2.0@")
        );
        assert_eq!(
            unpromoted["commits"][0]["log"].as_array().map(Vec::len),
            Some(0)
        );

        // A name that names nothing is refused with a hint.
        let unknown = p.cli(&["freight", "diff", &first, "no-such-freight"])?;
        assert!(!unknown.status.success());
        assert!(
            text(&unknown).contains("does not exist"),
            "{}",
            text(&unknown)
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diff_page_opens_from_the_timeline_with_a_section_per_file() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let (p, [first, second, _]) = three_freight().await?;
    // A second Warehouse: the timeline becomes one lane per Warehouse.
    dray_e2e::oci::push_image(&p.registry, "demo/web", "2.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata: {{name: web, namespace: demo}}\n\
             spec:\n  interval: 1h\n  subscriptions:\n    - image: {{repoURL: {}/demo/web, insecure: true}}\n",
            p.registry.host()
        ))?;
        let refreshed = p.cli(&["refresh", "warehouse", "web", "--wait"])?;
        if !refreshed.status.success() {
            bail!("refresh of web failed: {}", text(&refreshed));
        }
        Ok(())
    })?;
    let base = p.dray.url();
    let browser = Browser::start().await?;
    browser.log_in(&base, p.dray.token()).await?;

    // The timeline row of the second Freight links to its diff with the first.
    browser.goto(&format!("{base}/projects/demo")).await?;
    let id_of = |alias: &str| -> Result<String> {
        let f = p.json(&["get", "freight", alias, "-o", "json"])?;
        Ok(f["metadata"]["name"].as_str().context("no id")?.to_owned())
    };
    let (first_id, second_id) =
        tokio::task::block_in_place(|| Ok::<_, anyhow::Error>((id_of(&first)?, id_of(&second)?)))?;
    browser
        .wait_for(
            "section.lane[data-lane=\"web\"] li[data-freight]",
            "web's lane and its Freight",
        )
        .await?;
    browser
        .wait_for_text("section.lane[data-lane=\"app\"] h3", "Warehouse app")
        .await?;
    let in_web = browser
        .client()
        .find_all(Locator::Css(&format!(
            "section.lane[data-lane=\"web\"] li[data-freight=\"{second_id}\"]"
        )))
        .await?;
    assert!(in_web.is_empty(), "app's Freight is in web's lane");
    browser
        .wait_for(
            &format!("li[data-freight=\"{second_id}\"] a.diff"),
            "the diff link",
        )
        .await?
        .click()
        .await?;
    browser.wait_for_text(".diff-sides", &second).await?;
    let url = browser.current_url().await;
    assert!(url.contains(&format!("from={first_id}")), "{url}");
    browser
        .wait_for_text("table.diff-artifacts tr.changed", "1.1.0@sha256:")
        .await?;
    browser
        .wait_for_text("ol.diff-commits", "raise replicas to 3")
        .await?;
    let files = browser
        .client()
        .find_all(Locator::Css("details.diff-file"))
        .await?;
    assert!(!files.is_empty(), "no per-file sections");
    browser
        .wait_for_text("details.diff-file pre.patch .add", "replicas: 3")
        .await?;
    browser.screenshot("freight-diff").await?;

    // The picker compares any two.
    browser.goto(&format!("{base}/projects/demo/diff")).await?;
    browser.wait_for("#diff-from", "the From picker").await?;
    browser
        .wait_for("form.diff-pick button", "Compare")
        .await?
        .click()
        .await?;
    browser
        .wait_for(".diff-sides", "the two Freight compared")
        .await?;
    browser.check_page().await?;
    Ok(())
}
