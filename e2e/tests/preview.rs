//! Previews end to end (issue #17, item 1): `dray promote --dry-run` against `dray serve`
//! running the quickstart's PromotionTask over a real registry, real git over HTTP and real
//! `kubectl kustomize`. The preview prints the diff of what would be committed, and writes
//! nothing: the stage branch does not move, no Promotion is made, and no worktree of the
//! preview stays registered in the shared mirror.

use std::path::Path;

use anyhow::{Context, Result};
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, alias, text};
use serde_json::Value;

/// How many Promotions project `demo` has.
fn promotions(q: &Pipeline) -> Result<usize> {
    let listed = q.json(&["get", "promotions", "-o", "json"])?;
    Ok(match &listed {
        Value::Array(items) => items.len(),
        other => other["items"].as_array().map_or(0, Vec::len),
    })
}

/// The worktree registrations in Dray's git mirrors whose directory is a preview's.
fn preview_registrations(data_dir: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let Ok(mirrors) = std::fs::read_dir(data_dir.join("git-mirrors")) else {
        return Ok(found);
    };
    for mirror in mirrors.flatten() {
        let Ok(registrations) = std::fs::read_dir(mirror.path().join("worktrees")) else {
            continue;
        };
        for registration in registrations.flatten() {
            let gitdir =
                std::fs::read_to_string(registration.path().join("gitdir")).unwrap_or_default();
            if gitdir.contains(".previews") {
                found.push(gitdir);
            }
        }
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_prints_the_diff_of_the_new_tag_and_writes_nothing() -> Result<()> {
    let q = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let q = Pipeline::start()?;
        q.apply_quickstart(str::to_owned)?;
        Ok(q)
    })?;
    let old_digest = oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    let new_digest = oci::push_image(&q.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        q.refresh()?;
        let freight = q.freight()?;
        let (newest, older) = (alias(&freight[0]), alias(&freight[1]));
        q.promote_ok("dev", &older)?;
        let head = q.config.head("stage/dev")?;
        let before = promotions(&q)?;

        let previewed = q.cli(&["promote", "--stage", "dev", "--alias", &newest, "--dry-run"])?;
        let said = text(&previewed);
        assert!(previewed.status.success(), "{said}");
        let host = q.registry.host();
        let stdout = String::from_utf8_lossy(&previewed.stdout);
        assert!(
            stdout.lines().any(|l| l.starts_with('+')
                && l.contains(&format!("{host}/demo/app:1.1.0@{new_digest}"))),
            "the new tag, pinned, on an added line: {said}"
        );
        assert!(
            stdout.lines().any(|l| l.starts_with('-')
                && l.contains(&format!("{host}/demo/app:1.0.0@{old_digest}"))),
            "the old tag on a removed line: {said}"
        );
        assert!(stdout.contains("modified out/manifests.yaml"), "{said}");
        assert!(stdout.contains("gates: open"), "{said}");
        assert!(stdout.contains("stopped before `"), "{said}");
        assert!(!stdout.contains('\x1b'), "no colour off a terminal: {said}");

        // Nothing written: the branch, the Promotions, the mirror's worktrees.
        assert_eq!(q.config.head("stage/dev")?, head, "stage/dev moved");
        assert_eq!(promotions(&q)?, before, "a preview made a Promotion");
        let left = preview_registrations(&q.dray.data_dir())?;
        assert!(
            left.is_empty(),
            "preview worktrees still registered: {left:?}"
        );
        let stage = q.stage("dev")?;
        assert_eq!(stage["status"]["currentFreight"]["alias"], older.as_str());

        // Into prod, where the gates refuse: the refusal and the diff, both; exit 0.
        let refused = q.cli(&[
            "promote",
            "--stage",
            "prod",
            "--alias",
            &newest,
            "--dry-run",
        ])?;
        let said = text(&refused);
        assert!(refused.status.success(), "{said}");
        let stdout = String::from_utf8_lossy(&refused.stdout);
        assert!(stdout.contains("promoting now would be refused"), "{said}");
        assert!(stdout.contains("not verified in `staging`"), "{said}");
        assert!(
            stdout.contains("added out/manifests.yaml"),
            "a new stage branch: every file added: {said}"
        );
        assert!(
            q.config.head("stage/prod").is_err(),
            "a preview created stage/prod"
        );
        assert_eq!(promotions(&q)?, before);
        Ok(())
    })
    .context("preview")
}
