//! Reject and stop the line (issue #17, items 2 and 3) end to end, with the real binary,
//! git, registry and kustomize: `dray freight reject` makes promote refuse the Freight with
//! `rejected by <user>: <reason>` until `dray freight unreject`; `dray freeze` makes it
//! refuse with `frozen by <user>: <reason>`, a person with `override` still promotes (the
//! commit says so in its `Dray-Override` trailer), and `dray unfreeze` lets everyone
//! through again. A promotion already running when the line stops waits before its first
//! writing step (held by the engine's step barrier so that the freeze lands in between),
//! and goes on once it is lifted.

use anyhow::{Result, ensure};
use dray::promotion::engine::STEP_BARRIER_ENV;
use dray_e2e::DrayOptions;
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, promotion_name, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_freight_is_refused_with_who_and_why_until_unrejected() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        let no_reason = p.cli(&[
            "freight", "reject", &alias, "--stage", "dev", "--reason", " ",
        ])?;
        assert_eq!(no_reason.status.code(), Some(1), "{}", text(&no_reason));
        assert!(
            text(&no_reason).contains("needs a reason"),
            "{}",
            text(&no_reason)
        );

        let rejected = p.cli(&[
            "freight",
            "reject",
            &alias,
            "--stage",
            "dev",
            "--reason",
            "leaks memory",
        ])?;
        assert!(rejected.status.success(), "{}", text(&rejected));
        assert!(
            text(&rejected).contains("rejected by admin: leaks memory (for Stage dev)"),
            "{}",
            text(&rejected)
        );

        let refused = p.promote("dev", &alias)?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(said.contains("rejected by admin: leaks memory"), "{said}");
        assert!(
            p.config
                .branches()?
                .iter()
                .all(|b| !b.ends_with("stage/dev")),
            "nothing may reach git"
        );
        let listed = text(&p.cli(&["get", "freight", "--stage", "dev"])?);
        assert!(
            listed.contains("rejected by admin: leaks memory"),
            "{listed}"
        );

        let lifted = p.cli(&["freight", "unreject", &alias, "--stage", "dev"])?;
        assert!(lifted.status.success(), "{}", text(&lifted));
        assert!(
            text(&lifted).contains("rejection lifted"),
            "{}",
            text(&lifted)
        );
        p.promote_ok("dev", &alias)?;
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_stage_refuses_promotion_and_an_override_is_in_the_trailers() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        let bad_until = p.cli(&[
            "freeze", "--stage", "dev", "--reason", "x", "--until", "soon",
        ])?;
        assert_eq!(bad_until.status.code(), Some(2), "{}", text(&bad_until));
        let frozen = p.cli(&[
            "freeze",
            "--stage",
            "dev",
            "--reason",
            "incident 42",
            "--until",
            "2h",
        ])?;
        assert!(frozen.status.success(), "{}", text(&frozen));
        assert!(
            text(&frozen).contains("frozen by admin: incident 42 until "),
            "{}",
            text(&frozen)
        );

        let refused = p.promote("dev", &alias)?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(said.contains("frozen by admin: incident 42"), "{said}");
        assert!(said.contains("dray unfreeze -p demo --stage dev"), "{said}");
        assert!(
            p.config
                .branches()?
                .iter()
                .all(|b| !b.ends_with("stage/dev")),
            "nothing may reach git"
        );

        let overridden = p.cli(&[
            "promote",
            "--stage",
            "dev",
            "--alias",
            &alias,
            "--override-window",
            "hotfix",
            "--wait",
        ])?;
        assert!(overridden.status.success(), "{}", text(&overridden));
        let head = &p.config.log("stage/dev")?[0];
        let trailer = head.trailer("Dray-Override").unwrap_or_default();
        assert!(
            trailer.starts_with("frozen by admin: incident 42 (Stage `dev`, until ")
                && trailer.ends_with("); overridden by admin: hotfix"),
            "{head:?}"
        );

        let lifted = p.cli(&["unfreeze", "--stage", "dev"])?;
        assert!(lifted.status.success(), "{}", text(&lifted));
        assert!(text(&lifted).contains("freeze lifted"), "{}", text(&lifted));
        let again = p.cli(&["unfreeze", "--stage", "dev"])?;
        assert!(text(&again).contains("was not frozen"), "{}", text(&again));

        // The whole project: every Stage refuses, until unfrozen.
        let frozen = p.cli(&["freeze", "--reason", "release week"])?;
        assert!(frozen.status.success(), "{}", text(&frozen));
        let refused = p.promote("dev", &alias)?;
        assert!(
            text(&refused).contains("frozen by admin: release week (project `demo`)"),
            "{}",
            text(&refused)
        );
        assert!(p.cli(&["unfreeze"])?.status.success());
        p.promote_ok("dev", &alias)?;
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_promotion_that_has_not_written_waits_at_a_freeze_until_lifted() -> Result<()> {
    let barriers = tempfile::Builder::new()
        .prefix("dray-barriers-")
        .tempdir()?;
    let options = DrayOptions {
        env: vec![(
            STEP_BARRIER_ENV.to_owned(),
            barriers.path().display().to_string(),
        )],
        ..Default::default()
    };
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start_with(options)?;
        p.apply_quickstart(str::to_owned)?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.refresh()?;
        let alias = p.newest_alias()?;
        // Held after its first step (a clone: nothing written yet) is recorded.
        std::fs::write(barriers.path().join("arm-recorded-0"), b"")?;
        let requested = p.cli(&["promote", "--stage", "dev", "--alias", &alias])?;
        ensure!(requested.status.success(), "{}", text(&requested));
        let name = promotion_name(&requested);
        let reached = barriers.path().join(format!("reached-{name}-recorded-0"));
        p.wait_until("the promotion to finish its first step", || {
            Ok(reached.exists().then_some(()))
        })?;
        let frozen = p.cli(&["freeze", "--stage", "dev", "--reason", "incident 42"])?;
        ensure!(frozen.status.success(), "{}", text(&frozen));
        std::fs::write(
            barriers.path().join(format!("release-{name}-recorded-0")),
            b"",
        )?;
        let held = p.wait_until("the promotion to be held by the freeze", || {
            let promotion = p.promotion(&name)?;
            let message = promotion["status"]["message"].as_str().unwrap_or_default();
            Ok(message
                .starts_with("held: frozen by admin: incident 42")
                .then_some(promotion))
        })?;
        assert_eq!(held["status"]["phase"], "Running", "{held:#}");
        assert!(
            p.config
                .branches()?
                .iter()
                .all(|b| !b.ends_with("stage/dev")),
            "a held promotion writes nothing"
        );

        let lifted = p.cli(&["unfreeze", "--stage", "dev"])?;
        ensure!(lifted.status.success(), "{}", text(&lifted));
        let ended = p.wait_until("the promotion to end once unfrozen", || {
            let promotion = p.promotion(&name)?;
            let phase = promotion["status"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            Ok(matches!(
                phase.as_str(),
                "Succeeded" | "Failed" | "Errored" | "Aborted"
            )
            .then_some(promotion))
        })?;
        assert_eq!(ended["status"]["phase"], "Succeeded", "{ended:#}");
        assert!(
            p.config
                .branches()?
                .iter()
                .any(|b| b.ends_with("stage/dev"))
        );
        Ok(())
    })
}
