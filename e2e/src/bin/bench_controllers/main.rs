//! The controller benchmark (issue 13, item 7): how the controllers of one `dray serve`
//! scale with what else the server holds.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh --only controllers` builds Dray in
//! release mode, runs this binary and copies its Markdown into `docs/benchmarks.md`
//! (section "Controllers"). Everything runs on loopback against real services: the e2e
//! harness's `docker-registry`, `git http-backend` serving one config repository per
//! project (the quickstart's), and the release `dray serve` (`$DRAY_BIN`) with API tokens.
//!
//! 1. `dray apply` a small project (one Warehouse, `dev` with the quickstart task and its
//!    auto-promotion; [`projects`]). One sample ([`sample`]): push a new tag, `POST` the
//!    Warehouse's refresh (what `dray refresh warehouse app` sends), and time until the
//!    project's `stage/dev` on the git server holds that tag's commit; then wait until the
//!    store takes no write for 2 s and check the Promotion succeeded. Two warm-up samples
//!    (the first clones Dray's mirror), then `--runs` samples: the small project alone.
//! 2. Idle: 20 s with nothing asked of the server ([`probe::idle`]): its CPU time from
//!    `/proc/<pid>/stat` and its store counters from `GET /metrics`.
//! 3. `dray apply` a big project beside it: the same plus `--stages` Stages fed by `dev`
//!    (none of them promotes). After the store goes quiet and two warm-up samples of the
//!    big project, `--runs` rounds of one big sample and one small sample.
//! 4. Idle again, with both loaded.
//!
//! The store counters of each sample (refresh to quiet) give the reads per write of one
//! promotion and everything it set off; the idle windows give them per second.
//!
//! ```text
//! bench_controllers [--runs N] [--stages N] [--idle-seconds N] [--out-dir DIR]
//! ```
//!
//! `--runs`, `--stages` and `--idle-seconds` also come from `DRAY_BENCH_RUNS`,
//! `DRAY_BENCH_STAGES` and `DRAY_BENCH_IDLE_SECONDS`. Writes `DIR/controllers.md`; exits 1
//! when the measurement failed (the Markdown then says why).

mod probe;
mod projects;
mod report;
mod sample;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::bench_numbers::{fmt_duration, positive, runtime, write_section};
use dray_e2e::{
    Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, http_client, workspace_root,
};

use crate::projects::ProjectSpec;
use crate::report::Results;
use crate::sample::{Env, Sample, Target};

/// The two projects.
const SMALL: &str = "small";
const BIG: &str = "big";

/// How long one sample may take before the benchmark gives up.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the first sample of a project may take (it clones Dray's mirror).
const WARMUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the store may keep writing after an apply.
const APPLY_QUIET_TIMEOUT: Duration = Duration::from_secs(600);

/// A small project alone, then beside a big one; the Markdown goes to
/// `<out-dir>/controllers.md`.
#[derive(Debug, clap::Parser)]
#[command(name = "bench_controllers")]
pub struct Args {
    /// Timed samples per project and phase.
    #[arg(long, env = "DRAY_BENCH_RUNS", default_value = "10", value_parser = positive)]
    runs: usize,
    /// Stages fed by `dev` in the big project.
    #[arg(long, env = "DRAY_BENCH_STAGES", default_value = "1000", value_parser = positive)]
    stages: usize,
    /// Length of each idle window, in seconds.
    #[arg(long, env = "DRAY_BENCH_IDLE_SECONDS", default_value = "20", value_parser = positive)]
    idle_seconds: usize,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let measured = runtime.block_on(controllers(&args));
    let failed = write_section(
        &args.out_dir.join("controllers.md"),
        "bench_controllers",
        report::TITLE,
        measured.and_then(|results| report::markdown(&args, &results)),
    )?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// Starts the services, runs the phases and returns what they measured.
async fn controllers(args: &Args) -> Result<Results> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git_server = GitServer::start(&world, Default::default())?;
    let seed = workspace_root().join("examples/quickstart/config-repo");
    let dray = Dray::start(&world, DrayOptions::default())?;
    let pid = dray
        .pid()
        .context("`dray serve` has no process id right after it started")?;
    let http = http_client()?;
    let url = dray.url();
    let files = world.unique_dir("projects")?;
    std::fs::create_dir_all(&files)?;

    let mut targets = Vec::new();
    for (project, fed_by_dev) in [(SMALL, 0), (BIG, args.stages)] {
        let repo = format!("config-{project}");
        let config_url = git_server.create_repo(&repo)?;
        GitRepo::seed(&world, &config_url, &seed)?;
        let image_repo = format!("{project}/app");
        let spec = ProjectSpec {
            name: project,
            image: &format!("{}/{image_repo}", registry.host()),
            config_url: &config_url,
            fed_by_dev,
        };
        projects::write(&spec, &files.join(format!("{project}.yaml")))?;
        targets.push(Target {
            project: project.to_owned(),
            image_repo,
            bare: git_server.repo_path(&repo),
        });
    }
    let [small, big] = <[Target; 2]>::try_from(targets)
        .map_err(|_| anyhow::anyhow!("two projects were set up"))?;
    let env = Env {
        world: &world,
        registry: &registry,
        dray: &dray,
        http: &http,
    };
    let window = Duration::from_secs(args.idle_seconds as u64);

    // --- 1. the small project alone --------------------------------------------------
    apply(&dray, &files.join(format!("{SMALL}.yaml")))?;
    probe::wait_quiet(
        &http,
        &url,
        sample::QUIET,
        APPLY_QUIET_TIMEOUT,
        "after applying `small`",
    )
    .await?;
    let cold_small = warm_up(&env, &small).await?;
    let alone = samples(&env, &[&small], args.runs, "1.1")
        .await?
        .pop()
        .unwrap_or_default();
    // --- 2. idle, small alone ----------------------------------------------------------
    let idle_alone = probe::idle(&http, &url, pid, window).await?;
    eprintln!(
        "bench_controllers: idle (small alone): {:.2}% of a core",
        idle_alone.percent()
    );

    // --- 3. the big project beside it --------------------------------------------------
    let before_apply = probe::counts(&http, &url).await?;
    let started = Instant::now();
    apply(&dray, &files.join(format!("{BIG}.yaml")))?;
    let applied = started.elapsed();
    let settled = probe::wait_quiet(
        &http,
        &url,
        sample::QUIET,
        APPLY_QUIET_TIMEOUT,
        &format!("after applying `big` ({} Stages)", args.stages + 1),
    )
    .await?;
    let apply_store = probe::counts(&http, &url).await?.since(before_apply);
    eprintln!(
        "bench_controllers: applied `big` in {}, quiet {} later",
        fmt_duration(applied),
        fmt_duration(settled)
    );
    let cold_big = warm_up(&env, &big).await?;
    let mut beside = samples(&env, &[&big, &small], args.runs, "1.2").await?;
    let small_beside = beside.pop().unwrap_or_default();
    let big_samples = beside.pop().unwrap_or_default();
    // --- 4. idle, both loaded ------------------------------------------------------------
    let idle_both = probe::idle(&http, &url, pid, window).await?;
    eprintln!(
        "bench_controllers: idle (both): {:.2}% of a core",
        idle_both.percent()
    );

    Ok(Results {
        alone,
        big: big_samples,
        beside: small_beside,
        idle_alone,
        idle_both,
        cold_small,
        cold_big,
        applied,
        settled,
        apply_store,
    })
}

/// `dray apply -f FILE`, which must succeed.
fn apply(dray: &Dray, file: &Path) -> Result<()> {
    let path = file
        .to_str()
        .with_context(|| format!("`{}` is not UTF-8", file.display()))?;
    let output = dray.cli(["apply", "-f", path])?;
    if !output.status.success() {
        bail!(
            "`dray apply -f {}` failed: {}{}",
            file.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Two untimed samples (tags `1.0.0`, `1.0.1`); returns the first one's time (a cold
/// mirror, and the first push creates `stage/dev`).
async fn warm_up(env: &Env<'_>, target: &Target) -> Result<Duration> {
    let cold = sample::run(env, target, "1.0.0", WARMUP_TIMEOUT)
        .await
        .with_context(|| format!("the first warm-up sample of `{}` failed", target.project))?;
    sample::run(env, target, "1.0.1", SAMPLE_TIMEOUT)
        .await
        .with_context(|| format!("the second warm-up sample of `{}` failed", target.project))?;
    eprintln!(
        "bench_controllers: `{}` warmed up (first refresh → stage/dev {})",
        target.project,
        fmt_duration(cold.elapsed)
    );
    Ok(cold.elapsed)
}

/// `runs` rounds of one sample of each target in turn, tags `<minor>.<round>`; the
/// samples per target, in the order of `targets`.
async fn samples(
    env: &Env<'_>,
    targets: &[&Target],
    runs: usize,
    minor: &str,
) -> Result<Vec<Vec<Sample>>> {
    let mut all = vec![Vec::new(); targets.len()];
    for run in 0..runs {
        for (target, samples) in targets.iter().zip(all.iter_mut()) {
            let tag = format!("{minor}.{run}");
            let sample = sample::run(env, target, &tag, SAMPLE_TIMEOUT)
                .await
                .with_context(|| {
                    format!(
                        "sample {} of {runs} of `{}` (tag `{tag}`) failed",
                        run + 1,
                        target.project
                    )
                })?;
            eprintln!(
                "bench_controllers: run {}/{runs}: `{}` refresh → stage/dev {} ({} reads, \
                 {} objects read, {} writes)",
                run + 1,
                target.project,
                fmt_duration(sample.elapsed),
                sample.store.reads,
                sample.store.objects_read,
                sample.store.writes
            );
            samples.push(sample);
        }
    }
    Ok(all)
}
