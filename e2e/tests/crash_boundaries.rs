//! Crash at every step boundary: `dray serve` is SIGKILLed at each boundary of the
//! quickstart's render task in turn, restarted, and every promotion must still end
//! Succeeded with exactly one commit on `stage/dev`, carrying the right trailers.
//!
//! The stopping points are deterministic: the engine's test hook
//! ([`dray::promotion::engine::STEP_BARRIER_ENV`]) holds a promotion after step `i` ran
//! (`ran`: a push has landed, Dray has not recorded it) or after its outcome is saved
//! (`recorded`), writes a `reached-…` file, and the test kills the server then.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use dray::promotion::engine::STEP_BARRIER_ENV;
use dray_e2e::DrayOptions;
use dray_e2e::pipeline::{Pipeline, alias, id, promotion_name, text};
use serde_json::Value;

/// The render task's steps, as the Promotion lists them (`render-to-stage-branch::…`).
const STEPS: [&str; 6] = [
    "git-clone",
    "git-clear",
    "set-image",
    "kustomize-build",
    "commit",
    "push",
];

/// Where the engine's step barrier holds a promotion.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Point {
    /// The step ran; its outcome is not recorded.
    Ran,
    /// The step's outcome is recorded.
    Recorded,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::Ran => "ran",
            Point::Recorded => "recorded",
        }
    }
}

/// A Freight the test promotes: id, alias, image tag and digest.
struct Release {
    id: String,
    alias: String,
    tag: String,
    digest: String,
}

/// The quickstart pipeline with the step barrier enabled, and two Freight to alternate
/// between (so every promotion changes `stage/dev`).
struct Crashes {
    q: Pipeline,
    barriers: tempfile::TempDir,
    releases: [Release; 2],
    /// Every promotion made, with the index of the Release it promoted.
    promoted: Vec<(String, usize)>,
}

impl Crashes {
    async fn start() -> Result<Self> {
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
        let q = tokio::task::block_in_place(|| -> Result<Pipeline> {
            let q = Pipeline::start_with(options)?;
            q.apply_quickstart(str::to_owned)?;
            Ok(q)
        })?;
        let mut releases = Vec::new();
        for tag in ["1.0.0", "1.1.0"] {
            let digest = dray_e2e::oci::push_image(&q.registry, "demo/app", tag).await?;
            let freight = tokio::task::block_in_place(|| {
                q.refresh()?;
                q.freight()
            })?;
            let minted = freight
                .iter()
                .find(|f| f["images"][0]["tag"] == tag)
                .with_context(|| format!("no Freight for {tag}: {freight:#?}"))?;
            releases.push(Release {
                id: id(minted),
                alias: alias(minted),
                tag: tag.to_owned(),
                digest,
            });
        }
        let releases: [Release; 2] = releases
            .try_into()
            .map_err(|_| anyhow::anyhow!("two releases"))?;
        Ok(Crashes {
            q,
            barriers,
            releases,
            promoted: Vec::new(),
        })
    }

    fn dir(&self) -> &Path {
        self.barriers.path()
    }

    fn arm(&self, point: Point, step: usize) -> PathBuf {
        self.dir().join(format!("arm-{}-{step}", point.name()))
    }

    /// Promotes the next Release into `dev`, SIGKILLs `dray serve` when the promotion
    /// reaches `point` of `step`, restarts it and waits for the promotion to end.
    /// `before_kill` sees the promotion (and the world) while it is held.
    fn crash_at(
        &mut self,
        point: Point,
        step: usize,
        before_kill: impl FnOnce(&Pipeline, &str, &Value) -> Result<()>,
    ) -> Result<String> {
        let at = format!("`{}` of step {step} ({})", point.name(), STEPS[step]);
        let release = self.promoted.len() % 2;
        let target = self.releases[release].alias.clone();
        let arm = self.arm(point, step);
        std::fs::write(&arm, b"")?;
        let requested = self
            .q
            .cli(&["promote", "--stage", "dev", "--alias", &target])?;
        ensure!(requested.status.success(), "{}", text(&requested));
        let name = promotion_name(&requested);
        ensure!(
            !name.is_empty(),
            "no promotion named in {}",
            text(&requested)
        );
        let reached = self
            .dir()
            .join(format!("reached-{name}-{}-{step}", point.name()));
        self.q.wait_until(&format!("{name} to reach {at}"), || {
            Ok(reached.exists().then_some(()))
        })?;
        let held = self.q.promotion(&name)?;
        let steps = held["status"]["stepExecutionMetadata"]
            .as_array()
            .context("stepExecutionMetadata")?;
        let aliases: Vec<&str> = steps.iter().filter_map(|s| s["alias"].as_str()).collect();
        let want: Vec<String> = STEPS
            .iter()
            .map(|s| format!("render-to-stage-branch::{s}"))
            .collect();
        assert_eq!(aliases, want, "the render task's steps");
        let recorded = steps[step]["status"].as_str().unwrap_or_default();
        match point {
            Point::Ran => assert_eq!(recorded, "Running", "{at}, held: {held:#}"),
            Point::Recorded => assert!(
                matches!(recorded, "Succeeded" | "Skipped"),
                "{at}, held: {held:#}"
            ),
        }
        assert_eq!(held["status"]["phase"], "Running", "{at}: {held:#}");
        before_kill(&self.q, &name, &held)?;

        self.q.dray.kill9()?;
        std::fs::remove_file(&arm)?;
        self.q.dray.restart()?;

        let phase = self
            .q
            .wait_until(&format!("{name} to end after {at}"), || {
                let promotion = self.q.promotion(&name)?;
                let phase = promotion["status"]["phase"].as_str().unwrap_or_default();
                Ok((!matches!(phase, "" | "Pending" | "Running")).then(|| phase.to_owned()))
            })?;
        assert_eq!(
            phase,
            "Succeeded",
            "killed at {at}: {:#}",
            self.q.promotion(&name)?
        );
        self.q.wait_for_stage("dev", &target)?;
        self.promoted.push((name.clone(), release));
        self.check_branch()?;
        Ok(name)
    }

    /// `stage/dev` holds exactly one commit per promotion made, newest first, each with
    /// the trailers of its promotion.
    fn check_branch(&self) -> Result<()> {
        let log = self.q.config.log("stage/dev")?;
        let config_head = self.q.config.head("main")?;
        let mut commits = log.iter();
        for (name, release) in self.promoted.iter().rev() {
            let ours: Vec<_> = log
                .iter()
                .filter(|c| c.trailer("Dray-Promotion") == Some(name.as_str()))
                .collect();
            assert_eq!(
                ours.len(),
                1,
                "exactly one commit of {name} on stage/dev: {log:#?}"
            );
            let commit = commits.next().context("a commit is missing")?;
            assert_eq!(
                commit.sha, ours[0].sha,
                "commits in promotion order: {log:#?}"
            );
            let r = &self.releases[*release];
            let trailers = [
                ("Dray-Freight", format!("{} ({})", r.id, r.alias)),
                ("Dray-Promotion", name.clone()),
                ("Dray-Stage", "demo/dev".to_owned()),
                ("Dray-Actor", "admin".to_owned()),
                (
                    "Dray-Image",
                    format!("{}/demo/app:{}@{}", self.q.registry.host(), r.tag, r.digest),
                ),
                (
                    "Dray-Config-Commit",
                    format!("{}@{config_head}", self.q.config_url),
                ),
            ];
            for (key, want) in trailers {
                assert_eq!(
                    commit.trailer(key),
                    Some(want.as_str()),
                    "{key} of {name}: {commit:#?}"
                );
            }
        }
        assert_eq!(
            log.len(),
            self.promoted.len(),
            "one commit per promotion, nothing else: {log:#?}"
        );
        Ok(())
    }
}

fn nothing(_: &Pipeline, _: &str, _: &Value) -> Result<()> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_each_step_is_recorded_then_restart_finishes_with_one_commit() -> Result<()> {
    let mut c = Crashes::start().await?;
    tokio::task::block_in_place(|| {
        for step in 0..STEPS.len() {
            c.crash_at(Point::Recorded, step, nothing)?;
        }
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_each_step_ran_but_before_it_is_recorded_then_restart_finishes_with_one_commit()
-> Result<()> {
    let mut c = Crashes::start().await?;
    tokio::task::block_in_place(|| {
        for step in 0..STEPS.len() {
            c.crash_at(Point::Ran, step, nothing)?;
        }
        Ok(())
    })
}

/// The most dangerous boundary: the push landed on `stage/dev`, Dray died before
/// recording it. The resumed `git-push` must recognise its own commit (by HEAD, or by
/// its `Dray-Promotion` trailer once rebased) and push nothing a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_a_landed_push_and_its_record_pushes_nothing_twice() -> Result<()> {
    let mut c = Crashes::start().await?;
    let push = STEPS.len() - 1;
    tokio::task::block_in_place(|| -> Result<()> {
        // Once onto a new branch, then onto an existing one.
        for _ in 0..2 {
            let mut landed = String::new();
            let name = c.crash_at(Point::Ran, push, |q, name, held| {
                let log = q.config.log("stage/dev")?;
                let tip = log.first().context("the push has not landed")?;
                if tip.trailer("Dray-Promotion") != Some(name) {
                    bail!("stage/dev's tip is not {name}'s commit: {tip:#?}");
                }
                assert!(
                    held["status"]["state"]["outputs"]["render-to-stage-branch::push"].is_null(),
                    "Dray has not recorded the push: {held:#}"
                );
                landed = tip.sha.clone();
                Ok(())
            })?;
            let promotion = c.q.promotion(&name)?;
            let steps = promotion["status"]["stepExecutionMetadata"]
                .as_array()
                .context("steps")?;
            assert_eq!(steps[push]["status"], "Succeeded", "{promotion:#}");
            assert_eq!(
                promotion["status"]["state"]["outputs"]["render-to-stage-branch::push"]["commit"],
                landed.as_str(),
                "the resumed push reports the commit that landed: {promotion:#}"
            );
            assert_eq!(c.q.config.head("stage/dev")?, landed);
            let said = steps[push].to_string();
            assert!(said.contains("already has our change"), "{promotion:#}");
        }
        Ok(())
    })
}
