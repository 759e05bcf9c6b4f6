//! Gates end to end: refusals that name their reason, soak, approval, auto-promotion and
//! holds, against the quickstart pipeline with real git, registry and kustomize.

use anyhow::{Context, Result};
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, text};
use serde_json::Value;

/// The quickstart pipeline with `prod`'s soak set to `soak`, and `extra` YAML applied.
fn start(soak: &str, extra: &str) -> Result<Pipeline> {
    let p = Pipeline::start()?;
    p.apply_quickstart(|yaml| {
        yaml.replace("requiredSoakTime: 1m", &format!("requiredSoakTime: {soak}"))
    })?;
    if !extra.is_empty() {
        p.apply(extra)?;
    }
    Ok(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unverified_and_soaking_freight_is_refused_with_its_reason() -> Result<()> {
    let p = tokio::task::block_in_place(|| start("3s", ""))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;

        let refused = p.promote("staging", &alias)?;
        assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
        assert!(
            text(&refused).contains("not verified in `dev`"),
            "{}",
            text(&refused)
        );
        let listed = text(&p.cli(&["get", "freight", "--stage", "staging"])?);
        assert!(listed.contains("not verified in `dev`"), "{listed}");

        assert!(p.promote("dev", &alias)?.status.success());
        assert!(
            p.promote("staging", &alias)?.status.success(),
            "verified in dev, so staging may take it"
        );

        // prod requires 3s in staging: refused with the time left, then accepted.
        let refused = p.promote("prod", &alias)?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("soaking in `staging`") && said.contains("left"),
            "{said}"
        );
        let gates: Vec<Value> = serde_json::from_slice(
            &p.cli(&["get", "freight", "--stage", "prod", "-o", "json"])?
                .stdout,
        )?;
        let ends = gates[0]["availability"]["soakEndsAt"]
            .as_str()
            .context("soakEndsAt")?;
        let ends: jiff::Timestamp = ends.parse()?;
        let wait = ends
            .duration_since(jiff::Timestamp::now())
            .as_millis()
            .max(0) as u64
            + 200;
        std::thread::sleep(std::time::Duration::from_millis(wait));
        let promoted = p.promote("prod", &alias)?;
        assert!(
            promoted.status.success(),
            "after the soak: {}",
            text(&promoted)
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_bypasses_the_gates_on_the_record() -> Result<()> {
    let p = tokio::task::block_in_place(|| start("1h", ""))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        let made = p.cli(&[
            "token",
            "create",
            "--user",
            "ann",
            "--role",
            "dray-promoter",
        ])?;
        assert!(made.status.success(), "{}", text(&made));
        let ann = String::from_utf8(made.stdout)?.trim().to_owned();
        let mut approve = p.dray.cli_command();
        approve.env("DRAY_TOKEN", &ann).args([
            "-p",
            "demo",
            "approve",
            "--alias",
            &alias,
            "--stage",
            "prod",
            "--reason",
            "CVE hotfix",
        ]);
        let approved = approve.output()?;
        assert!(approved.status.success(), "{}", text(&approved));
        assert!(
            text(&approved).contains("approved for prod by ann"),
            "{}",
            text(&approved)
        );

        let listed = text(&p.cli(&["get", "freight", "--stage", "prod"])?);
        assert!(listed.contains("available (approved by ann)"), "{listed}");
        p.promote_ok("prod", &alias)?;
        let head = &p.config.log("stage/prod")?[0];
        assert_eq!(head.trailer("Dray-Approved-By"), Some("ann (CVE hotfix)"));
        let audit = text(&p.cli(&["audit", "--stage", "prod"])?);
        assert!(audit.contains("approved by ann (CVE hotfix)"), "{audit}");
        Ok(())
    })
}

const AUTO: &str = "apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionPolicies:
    - stageSelector: {name: dev}
      autoPromotionEnabled: true
    - stageSelector: {name: staging}
      autoPromotionEnabled: true
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_promotion_follows_new_freight_and_a_rollback_holds_it() -> Result<()> {
    let p = tokio::task::block_in_place(|| start("1h", AUTO))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let first = tokio::task::block_in_place(|| -> Result<String> {
        p.refresh()?;
        let first = p.newest_alias()?;
        p.wait_for_stage("dev", &first)?;
        p.wait_for_stage("staging", &first)?;
        Ok(first)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.1.0").await?;
    let second = tokio::task::block_in_place(|| -> Result<String> {
        p.refresh()?;
        let second = p.newest_alias()?;
        assert_ne!(first, second);
        p.wait_for_stage("dev", &second)?;

        // A person rolls dev back: a hold keeps auto-promotion from undoing it.
        let rollback = p.promote("dev", &first)?;
        assert!(rollback.status.success(), "{}", text(&rollback));
        let dev = p.stage("dev")?;
        let hold = &dev["status"]["hold"];
        assert_eq!(
            hold["freight"].as_str().map(|f| f.len()),
            Some(40),
            "{hold}"
        );
        // `promote --wait` returns once the Stage shows what it promoted.
        assert_eq!(
            dev["status"]["currentFreight"]["alias"],
            first.as_str(),
            "{dev:#}"
        );
        Ok(second)
    })?;

    // Make auto-promotion look at dev again, with a reason to move: approving the newer
    // Freight for dev wakes it. Once it has looked, nothing may have moved.
    let looked = auto_promotion_looks(&p).await?;
    let approved =
        tokio::task::block_in_place(|| p.cli(&["approve", "--stage", "dev", "--alias", &second]))?;
    assert!(approved.status.success(), "{}", text(&approved));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while auto_promotion_looks(&p).await? <= looked {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "auto-promotion did not look at dev within 60 s of the approval"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::task::block_in_place(|| -> Result<()> {
        assert_eq!(
            p.stage("dev")?["status"]["currentFreight"]["alias"],
            first.as_str()
        );
        let promotions: Vec<Value> = serde_json::from_slice(
            &p.cli(&["get", "promotions", "--stage", "dev", "-o", "json"])?
                .stdout,
        )?;
        assert!(
            promotions
                .iter()
                .all(|pr| pr["status"]["phase"] != "Pending" && pr["status"]["phase"] != "Running"),
            "{promotions:#?}"
        );

        let lifted = p.cli(&["hold", "lift", "--stage", "dev"])?;
        assert!(lifted.status.success(), "{}", text(&lifted));
        p.wait_for_stage("dev", &second)?;
        Ok(())
    })
}

/// How many times the auto-promotion controller has reconciled (`/metrics`).
async fn auto_promotion_looks(p: &Pipeline) -> Result<f64> {
    let page = reqwest::Client::new()
        .get(format!("{}/metrics", p.dray.url()))
        .bearer_auth(p.dray.token())
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    page.lines()
        .find_map(|line| line.strip_prefix("dray_reconciles_total{controller=\"auto-promotion\"} "))
        .and_then(|count| count.parse().ok())
        .with_context(|| format!("no auto-promotion reconcile count on /metrics:\n{page}"))
}

/// A Deny window for `dev` that started an hour ago and lasts two hours.
fn freeze() -> String {
    dray_e2e::pipeline::deny_window_now("holiday-freeze", "dev")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_window_refuses_before_git_and_an_override_is_recorded() -> Result<()> {
    let p = tokio::task::block_in_place(|| start("1h", &freeze()))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        let refused = p.promote("dev", &alias)?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("frozen by window `holiday-freeze` until"),
            "{said}"
        );
        assert!(
            p.config
                .branches()?
                .iter()
                .all(|b| !b.ends_with("stage/dev")),
            "nothing may reach git"
        );
        let promotions: Vec<Value> =
            serde_json::from_slice(&p.cli(&["get", "promotions", "-o", "json"])?.stdout)?;
        assert!(
            promotions.is_empty(),
            "a refused promotion is not even created"
        );

        // The Stage shows its window: closed, which one, and until when.
        let stage = p.stage("dev")?;
        assert_eq!(stage["status"]["window"]["open"], false, "{stage:#}");
        assert_eq!(
            stage["status"]["window"]["blockedBy"]["window"],
            "holiday-freeze"
        );
        assert!(
            stage["status"]["window"]["nextChange"].is_string(),
            "{stage:#}"
        );
        let table = text(&p.cli(&["get", "stages"])?);
        assert!(
            table.contains("frozen by window `holiday-freeze` until"),
            "{table}"
        );

        let overridden = p.cli(&[
            "promote",
            "--stage",
            "dev",
            "--alias",
            &alias,
            "--override-window",
            "incident 42",
            "--wait",
        ])?;
        assert!(overridden.status.success(), "{}", text(&overridden));
        let head = &p.config.log("stage/dev")?[0];
        let trailer = head
            .trailer("Dray-Window-Override")
            .unwrap_or_default()
            .to_owned();
        assert!(
            trailer.contains("incident 42") && trailer.contains("holiday-freeze"),
            "{trailer}"
        );
        Ok(())
    })
}
