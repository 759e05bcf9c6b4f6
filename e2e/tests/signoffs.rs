//! Sign-offs end to end (issue #17, item 4): a Stage with `spec.signoff` takes Freight only
//! once enough distinct people in its groups ran `dray signoff`; the promoter's own does
//! not count; the stage branch commit carries one `Dray-Signed-Off-By` trailer per person,
//! read back with real git and by `dray audit`. Real binary, real git, real registry; and
//! in a real headless Chromium, a release manager clicks Sign off and the confirmation
//! lists the gate and who signed.

use std::process::Output;

use anyhow::{Result, bail};
use dray_e2e::browser::Browser;
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, text};

/// `prod` straight from the Warehouse, asking for two sign-offs from group `release`.
fn prod_with_signoffs(yaml: &str) -> String {
    yaml.replace(
        "  requestedFreight:
    - origin:
        kind: Warehouse
        name: app
      sources:
        stages:
          - staging
        requiredSoakTime: 1m",
        "  signoff:
    required: 2
    groups: [release]
  requestedFreight:
    - origin:
        kind: Warehouse
        name: app
      sources:
        direct: true",
    )
}

/// A token for `user` (role `role` in `demo`, in `groups`).
fn token(p: &Pipeline, user: &str, role: &str, groups: &[&str]) -> Result<String> {
    let mut args = vec!["token", "create", "--user", user, "--role", role];
    for group in groups {
        args.extend(["--group", group]);
    }
    let made = p.cli(&args)?;
    anyhow::ensure!(made.status.success(), "token for {user}: {}", text(&made));
    Ok(String::from_utf8(made.stdout)?.trim().to_owned())
}

/// `dray -p demo ARGS` as the holder of `token`.
fn as_user(p: &Pipeline, token: &str, args: &[&str]) -> Result<Output> {
    let mut command = p.dray.cli_command();
    command
        .env("DRAY_TOKEN", token)
        .args(["-p", "demo"])
        .args(args);
    Ok(command.output()?)
}

fn signoff(p: &Pipeline, token: &str, alias: &str, reason: &str) -> Result<Output> {
    as_user(
        p,
        token,
        &["signoff", alias, "--stage", "prod", "--reason", reason],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_sign_off_a_third_promotes_and_the_commit_names_both() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(prod_with_signoffs)?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        let ann = token(&p, "ann", "dray-promoter", &["release"])?;
        let bob = token(&p, "bob", "dray-promoter", &["release", "qa"])?;
        let cy = token(&p, "cy", "dray-promoter", &[])?;
        let vic = token(&p, "vic", "dray-viewer", &["release"])?;

        // A viewer has no `signoff`; someone outside `release` does not count.
        let refused = signoff(&p, &vic, &alias, "")?;
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("user `vic` may not signoff stages/prod"),
            "{}",
            text(&refused)
        );
        let outside = signoff(&p, &cy, &alias, "")?;
        assert!(!outside.status.success(), "{}", text(&outside));
        assert!(
            text(&outside)
                .contains("only members of group `release` count, and `cy` is in no group"),
            "{}",
            text(&outside)
        );

        // Nobody signed: promoting is refused, saying how many and who.
        let refused = as_user(&p, &cy, &["promote", "--stage", "prod", "--alias", &alias])?;
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("needs sign-offs from 2 people in `release`, has none"),
            "{}",
            text(&refused)
        );

        let signed = signoff(&p, &ann, &alias, "tested in staging")?;
        assert!(signed.status.success(), "{}", text(&signed));
        assert!(
            text(&signed).contains(&format!("freight {alias} signed off for prod")),
            "{}",
            text(&signed)
        );
        let listed = text(&p.cli(&["get", "freight", "--stage", "prod"])?);
        assert!(
            listed.contains("SIGN-OFFS") && listed.contains("1/2 (ann)"),
            "{listed}"
        );
        let refused = as_user(&p, &cy, &["promote", "--stage", "prod", "--alias", &alias])?;
        assert!(
            text(&refused).contains("needs sign-offs from 2 people in `release`, has 1 (`ann`)"),
            "{}",
            text(&refused)
        );

        assert!(signoff(&p, &bob, &alias, "")?.status.success());
        // ann signed herself: her own sign-off does not count when she promotes.
        let own = as_user(&p, &ann, &["promote", "--stage", "prod", "--alias", &alias])?;
        assert!(!own.status.success(), "{}", text(&own));
        assert!(
            text(&own).contains("your own sign-off does not count"),
            "{}",
            text(&own)
        );

        let promoted = as_user(
            &p,
            &cy,
            &[
                "promote",
                "--stage",
                "prod",
                "--alias",
                &alias,
                "--wait",
                "--timeout",
                "2m",
            ],
        )?;
        assert!(promoted.status.success(), "{}", text(&promoted));
        let head = &p.config.log("stage/prod")?[0];
        let signers: Vec<&str> = head
            .trailers
            .iter()
            .filter(|(k, _)| k == "Dray-Signed-Off-By")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(signers, ["ann (tested in staging)", "bob"], "{head:#?}");
        assert_eq!(head.trailer("Dray-Actor"), Some("cy"));
        let audit = text(&p.cli(&["audit", "--stage", "prod"])?);
        assert!(
            audit.contains("signed off by ann (tested in staging), bob"),
            "{audit}"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_manager_clicks_sign_off_and_the_freight_may_go() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(prod_with_signoffs)?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let (id, alias, bob) = tokio::task::block_in_place(|| -> Result<(String, String, String)> {
        p.refresh()?;
        let (id, alias) = p.newest_freight()?;
        let ann = token(&p, "ann", "dray-promoter", &["release"])?;
        let signed = signoff(&p, &ann, &alias, "tested")?;
        anyhow::ensure!(signed.status.success(), "{}", text(&signed));
        Ok((id, alias, token(&p, "bob", "dray-promoter", &["release"])?))
    })?;
    let base = p.dray.url();
    let browser = Browser::start().await?;
    browser.log_in(&base, &bob).await?;
    browser.wait_for_text("#user", "bob").await?;
    browser
        .wait_for(
            &format!("[data-freight=\"{id}\"] a"),
            "the Freight in the timeline",
        )
        .await?
        .click()
        .await?;
    browser
        .wait_for_text(
            "#availability [data-stage=\"prod\"]",
            "needs sign-offs from 2 people in release, has 1 (ann)",
        )
        .await?;
    browser
        .wait_for(
            "button[data-action=\"signoff\"][data-stage=\"prod\"]:not([disabled])",
            "Sign off on prod, enabled",
        )
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("#confirm h2", &format!("Sign off {alias}"))
        .await?;
    browser
        .wait_for_text(
            "#confirm .gates .signoffs",
            "sign-offs: 1 of 2 (members of release); the promoter's own does not count, signed off by ann (tested)",
        )
        .await?;
    browser.screenshot("signoff-confirmation").await?;
    browser
        .wait_for("#confirm-reason", "the reason field")
        .await?
        .send_keys("canary looked fine")
        .await?;
    browser
        .wait_for("#confirm-go:not([disabled])", "the Confirm button, enabled")
        .await?
        .click()
        .await?;
    // Two sign-offs now: prod may take it (the page reloads its availability).
    browser
        .wait_for_text("#availability [data-stage=\"prod\"]", "available")
        .await?;
    browser.screenshot("signoff-done").await?;
    let listed = tokio::task::block_in_place(|| p.cli(&["get", "freight", "--stage", "prod"]))?;
    assert!(
        text(&listed).contains("2/2 (ann, bob)"),
        "{}",
        text(&listed)
    );
    let freight = tokio::task::block_in_place(|| p.freight_named(&id))?;
    assert_eq!(
        freight["status"]["signedOffFor"]["prod"][1]["reason"], "canary looked fine",
        "{freight:#}"
    );
    Ok(())
}
