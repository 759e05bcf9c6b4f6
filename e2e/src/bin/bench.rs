//! Dray's benchmarks (issues 3 and 4), side by side with what teams script today.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh` builds Dray in release mode, runs this
//! binary and copies its Markdown into `docs/benchmarks.md`. Every measurement runs against
//! real services on loopback (the e2e harness's registry, git server and `dray serve`).
//!
//! - `discovery`: a registry repository with 300 tags. Dray's first discovery (a fresh
//!   `ImageDiscoverer`) and a no-change refresh (the same discoverer again), against
//!   `e2e/bench/baseline-discovery.sh` (`skopeo list-tags`, then `skopeo inspect` of the
//!   same candidates, one after the other). HTTP requests are counted in the registry log.
//! - `promotion`: one promotion of the quickstart task into `dev` against a config
//!   repository with 20,000 commits and 2,000 files, after a warm-up promotion (a warm
//!   mirror), against `e2e/bench/baseline-promote.sh` (clone, sed, kustomize, commit, push).
//!
//! Each measurement is the median of `--runs` runs, after one untimed warm-up run.
//!
//! ```text
//! bench [--runs N] [--only discovery|promotion] [--out-dir DIR]
//!       [--tags N] [--commits N] [--files N]
//! ```
//!
//! Writes `DIR/discovery.md` and `DIR/promotion.md` (the parts that ran; a part that
//! could not be measured says why). Exits 1 when a part failed.

use std::fmt::Write as _;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray::api::{ImageSelectionStrategy, ImageSubscription};
use dray::discovery::image::{ImageDiscoverer, ImageDiscovererOptions};
use dray_e2e::bench_baseline::{checked, script_promote};
use dray_e2e::bench_numbers::{
    Durations, counts, fmt_duration, fmt_ratio, median_table, met, peak_rss, positive, ratio_of,
    runtime, write_section,
};
use dray_e2e::{
    Dray, DrayOptions, GitServer, Registry, TEST_AUTHOR, TestWorld, git, ls_remote, oci,
    workspace_root,
};
use futures_util::StreamExt as _;
use serde_json::Value;

/// Dray's discovery against skopeo and its promotion against a scripted one (issues 3
/// and 4); each part's Markdown goes to `<out-dir>/<part>.md`.
#[derive(Debug, clap::Parser)]
#[command(name = "bench")]
struct Args {
    /// Timed runs per measurement.
    #[arg(long, default_value = "5", value_parser = positive)]
    runs: usize,
    /// Run one part only.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// Tags in the registry repository (discovery).
    #[arg(long, default_value = "300", value_parser = positive)]
    tags: usize,
    /// Commits in the generated config repository (promotion).
    #[arg(long, default_value = "20000", value_parser = positive)]
    commits: usize,
    /// Files in it (promotion).
    #[arg(long, default_value = "2000", value_parser = positive)]
    files: usize,
}

/// The parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Discovery,
    Promotion,
}

impl Args {
    fn runs(&self, part: Part) -> bool {
        self.only.is_none_or(|only| only == part)
    }
}

/// Candidates each discovery keeps (`discoveryLimit`).
const DISCOVERY_LIMIT: usize = 20;

/// Files per directory under `filler/` in the generated config repository.
const FILES_PER_DIR: usize = 50;

/// Every this many commits (and the last one) edit `overlays/prod` instead of a filler.
const TUNE_EVERY: usize = 50;

fn parse_args() -> Result<Args> {
    let args = <Args as clap::Parser>::parse();
    if args.tags < DISCOVERY_LIMIT {
        bail!("`--tags` must be at least {DISCOVERY_LIMIT} (the discovery limit)");
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let mut failed = false;
    if args.runs(Part::Discovery) {
        failed |= write_section(
            &args.out_dir.join("discovery.md"),
            "bench: discovery",
            "Discovery (issue 3)",
            runtime.block_on(discovery(&args)),
        )?;
    }
    if args.runs(Part::Promotion) {
        failed |= write_section(
            &args.out_dir.join("promotion.md"),
            "bench: promotion",
            "Promotion (issue 4)",
            promotion(&runtime, &args),
        )?;
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

// --- discovery ----------------------------------------------------------------------------

/// Issue 3: Dray's discovery against `skopeo` on one repository with `args.tags` tags.
async fn discovery(args: &Args) -> Result<String> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let repo = "bench/app";
    // Spread over minors: 1.0.0 … 1.0.19, 1.1.0 …, like a real release history.
    let tags: Vec<String> = (0..args.tags)
        .map(|i| format!("1.{}.{}", i / 20, i % 20))
        .collect();
    let started = Instant::now();
    let pushes: Vec<Result<String>> =
        futures_util::stream::iter(tags.iter().map(|tag| oci::push_image(&registry, repo, tag)))
            .buffer_unordered(8)
            .collect()
            .await;
    for pushed in pushes {
        pushed.context("Failed to push the benchmark's images")?;
    }
    eprintln!(
        "bench: pushed {} tags in {:.1?}",
        tags.len(),
        started.elapsed()
    );

    let sub = ImageSubscription {
        repo_url: format!("{}/{repo}", registry.host()),
        image_selection_strategy: ImageSelectionStrategy::SemVer,
        constraint: Some(">=0.0.0".into()),
        strict_semvers: true,
        discovery_limit: DISCOVERY_LIMIT as u32,
        insecure: true,
        ..ImageSubscription::default()
    };
    let requests = RequestLog::new(&registry);

    // Warm-up (untimed): the registry's storage, the OS caches, skopeo's binary.
    let warmup = ImageDiscoverer::new(ImageDiscovererOptions::default())?;
    let expected = warmup.discover(&sub, None).await?;
    let expected: Vec<(String, String)> = expected
        .images
        .iter()
        .map(|i| (i.tag.clone(), i.digest.clone()))
        .collect();
    let skopeo_repo = format!("{}/{repo}", registry.host());
    for no_tags in [true, false] {
        let found = skopeo_loop(&world, &skopeo_repo, no_tags)?;
        if found != expected {
            bail!(
                "skopeo and Dray disagree on the candidates (the comparison would be void)\n\
                 Dray: {expected:?}\nskopeo: {found:?}"
            );
        }
    }

    let mut cold = Samples::default();
    let mut refresh = Samples::default();
    let mut skopeo = Samples::default();
    let mut skopeo_tags = Samples::default();
    let mut cold_unlimited = Samples::default();
    for run in 0..args.runs {
        let discoverer = ImageDiscoverer::new(ImageDiscovererOptions::default())?;
        let mark = requests.mark();
        let started = Instant::now();
        let first = discoverer.discover(&sub, None).await?;
        let elapsed = started.elapsed();
        cold.push(
            elapsed,
            first.stats.http_requests,
            requests.since(mark).await,
        );
        check_same(&first.images, &expected, "first discovery")?;

        // A refresh comes minutes later in practice: let the per-registry token bucket
        // (20 requests per second) refill so the refresh is not slowed by the first one.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let mark = requests.mark();
        let started = Instant::now();
        let again = discoverer.discover(&sub, None).await?;
        let elapsed = started.elapsed();
        refresh.push(
            elapsed,
            again.stats.http_requests,
            requests.since(mark).await,
        );
        check_same(&again.images, &expected, "refresh")?;

        // Not the default: how much of the first discovery is the politeness limit (a
        // burst of 20 requests, then 20 per second; a first discovery sends 21).
        let unlimited = ImageDiscoverer::new(ImageDiscovererOptions {
            requests_per_second: 100_000,
            ..ImageDiscovererOptions::default()
        })?;
        let mark = requests.mark();
        let started = Instant::now();
        let fast = unlimited.discover(&sub, None).await?;
        let elapsed = started.elapsed();
        cold_unlimited.push(
            elapsed,
            fast.stats.http_requests,
            requests.since(mark).await,
        );
        check_same(
            &fast.images,
            &expected,
            "first discovery without a rate limit",
        )?;

        for (no_tags, samples) in [(true, &mut skopeo), (false, &mut skopeo_tags)] {
            let mark = requests.mark();
            let started = Instant::now();
            let found = skopeo_loop(&world, &skopeo_repo, no_tags)?;
            let elapsed = started.elapsed();
            samples.push(elapsed, 0, requests.since(mark).await);
            if found != expected {
                bail!("skopeo found other candidates in run {run}: {found:?}");
            }
        }
        eprintln!(
            "bench: discovery run {}/{}: dray first {:.1?}, refresh {:.1?}, skopeo {:.1?} / {:.1?}",
            run + 1,
            args.runs,
            cold.durations.last(),
            refresh.durations.last(),
            skopeo.durations.last(),
            skopeo_tags.durations.last(),
        );
    }

    let mut md = String::new();
    writeln!(md, "### Discovery (issue 3)\n")?;
    writeln!(
        md,
        "One repository with {} tags (`1.0.0` … `1.{}.{}`) in a local `docker-registry` \
         (distribution 2.8, plain HTTP). Dray: `SemVer`, constraint `>=0.0.0`, \
         `discoveryLimit: {DISCOVERY_LIMIT}`, default discoverer options (20 requests/s, 8 in \
         flight), run in-process. skopeo: `e2e/bench/baseline-discovery.sh`, `list-tags` then \
         `inspect` of the same {DISCOVERY_LIMIT} candidates one by one (checked: same tags, same \
         digests). Median of {} runs (min–max); HTTP requests counted in the registry's log.\n",
        tags.len(),
        (tags.len() - 1) / 20,
        (tags.len() - 1) % 20,
        args.runs,
    )?;
    writeln!(
        md,
        "| Measurement | Median | Min–max | HTTP requests (registry log) | Dray's own count |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|")?;
    for (name, samples, own) in [
        (
            "Dray: first discovery (fresh discoverer, cold caches)",
            &cold,
            true,
        ),
        ("Dray: no-change refresh (same discoverer)", &refresh, true),
        (
            "Dray: first discovery, rate limit raised to 100,000/s (not the default)",
            &cold_unlimited,
            true,
        ),
        (
            "skopeo: `list-tags` + 20 × `inspect --no-tags`",
            &skopeo,
            false,
        ),
        (
            "skopeo: `list-tags` + 20 × `inspect` (default: lists the tags again)",
            &skopeo_tags,
            false,
        ),
    ] {
        writeln!(
            md,
            "| {name} | {} | {} | {} | {} |",
            fmt_duration(samples.median()),
            samples.range(),
            samples.logged_requests(),
            if own {
                samples.own_requests()
            } else {
                "–".to_owned()
            },
        )?;
    }
    let ratio = ratio_of(skopeo.median(), cold.median());
    let ratio_tags = ratio_of(skopeo_tags.median(), cold.median());
    let refresh_requests = refresh.own.iter().copied().max().unwrap_or_default();
    writeln!(md)?;
    writeln!(md, "| Ratio | Value | Aim | Met |")?;
    writeln!(md, "|---|---:|---|---|")?;
    writeln!(
        md,
        "| skopeo loop (`--no-tags`) ÷ Dray first discovery | {} | ≥ 3× | {} |",
        fmt_ratio(ratio),
        met(ratio >= 3.0)
    )?;
    writeln!(
        md,
        "| skopeo loop (default `inspect`) ÷ Dray first discovery | {} | ≥ 3× | {} |",
        fmt_ratio(ratio_tags),
        met(ratio_tags >= 3.0)
    )?;
    writeln!(
        md,
        "| skopeo loop (`--no-tags`) ÷ Dray no-change refresh | {} | – | – |",
        fmt_ratio(ratio_of(skopeo.median(), refresh.median()))
    )?;
    writeln!(
        md,
        "| HTTP requests of a no-change refresh | {refresh_requests} | 1 | {} |",
        if refresh_requests <= 1 {
            "yes".to_owned()
        } else {
            format!(
                "**no**: {refresh_requests} (a tag list and a `HEAD` of the newest candidate, \
                 by design, to notice a moved tag)"
            )
        }
    )?;
    Ok(md)
}

/// Run the skopeo baseline once; its `(tag, digest)` lines.
fn skopeo_loop(world: &TestWorld, repo: &str, no_tags: bool) -> Result<Vec<(String, String)>> {
    let script = workspace_root().join("e2e/bench/baseline-discovery.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script);
    if no_tags {
        cmd.arg("--no-tags");
    }
    cmd.arg(repo)
        .arg(DISCOVERY_LIMIT.to_string())
        .env("HOME", world.home())
        .current_dir(world.path());
    let output = checked(&mut cmd)?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(t, d)| (t.to_owned(), d.to_owned()))
        .collect())
}

fn check_same(
    images: &[dray::discovery::image::DiscoveredImage],
    expected: &[(String, String)],
    what: &str,
) -> Result<()> {
    let got: Vec<(String, String)> = images
        .iter()
        .map(|i| (i.tag.clone(), i.digest.clone()))
        .collect();
    if got != expected {
        bail!("Dray's {what} found other candidates: {got:?}, expected {expected:?}");
    }
    Ok(())
}

/// Counts the requests the registry logged (`response completed` lines, one per request).
struct RequestLog<'a> {
    registry: &'a Registry,
}

impl<'a> RequestLog<'a> {
    fn new(registry: &'a Registry) -> Self {
        Self { registry }
    }

    fn count(&self) -> u32 {
        let n = self
            .registry
            .log()
            .matches("msg=\"response completed")
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn mark(&self) -> u32 {
        self.count()
    }

    /// Requests logged since `mark`, after a moment for the last log line to be written.
    async fn since(&self, mark: u32) -> u32 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.count().saturating_sub(mark)
    }
}

// --- promotion ----------------------------------------------------------------------------

/// Issue 4: one promotion of the quickstart task against a large config repository.
fn promotion(runtime: &tokio::runtime::Runtime, args: &Args) -> Result<String> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let server = GitServer::start(&world, Default::default())?;
    let config_url = server.create_repo("config")?;
    let bare = server.repo_path("config");

    let started = Instant::now();
    build_config_repo(&world, &bare, args.commits, args.files)?;
    let generated = started.elapsed();
    let size = pack_size(&world, &bare)?;
    eprintln!(
        "bench: generated {} commits, {} filler files ({size}) in {generated:.1?}",
        args.commits, args.files
    );

    let project = quickstart_project(&world, &registry, &config_url)?;
    let dray = Dray::start(&world, DrayOptions::default())?;
    cli(&dray, &["apply", "-f", path_str(&project)?])?;

    let image_repo = "demo/app";
    let image = format!("{}/{image_repo}", registry.host());
    let first = runtime.block_on(oci::push_image(&registry, image_repo, "1.0.0"))?;
    let started = Instant::now();
    refresh(&dray)?;
    let first_refresh = started.elapsed();
    let serve_pid = dray
        .pid()
        .map(|p| p.to_string())
        .context("`dray serve`'s pid")?;
    let rss_after_discovery = peak_rss(&serve_pid);
    let second = runtime.block_on(oci::push_image(&registry, image_repo, "1.0.1"))?;
    refresh(&dray)?;
    let aliases = [
        freight_alias(&dray, "1.0.0")?,
        freight_alias(&dray, "1.0.1")?,
    ];
    let digests = [first, second];
    eprintln!(
        "bench: Freight {} (1.0.0) and {} (1.0.1); first refresh (mirror clone) {first_refresh:.1?}",
        aliases[0], aliases[1]
    );

    // Warm-up (untimed as a sample): the mirror is warm after it, Dray's design point.
    let started = Instant::now();
    promote_cli(&dray, &aliases[0])?;
    let warmup = started.elapsed();
    let stage_branch = "refs/heads/stage/dev";
    let mut stage_head = remote_head(&world, &config_url, stage_branch)?;
    script_promote(&world, &config_url, &image, &digests[0])?;
    eprintln!("bench: warm-up promotion {warmup:.1?}");

    let http = dray_e2e::http_client()?;
    let mut dray_cli = Samples::default();
    let mut dray_api = Samples::default();
    let mut script = Samples::default();
    let mut next = 1;
    for run in 0..args.runs {
        let started = Instant::now();
        promote_cli(&dray, &aliases[next])?;
        dray_cli.push(started.elapsed(), 0, 0);
        stage_head = moved(&world, &config_url, stage_branch, &stage_head)?;
        next = 1 - next;

        let started = Instant::now();
        runtime.block_on(promote_api(&http, &dray, &aliases[next]))?;
        dray_api.push(started.elapsed(), 0, 0);
        stage_head = moved(&world, &config_url, stage_branch, &stage_head)?;
        next = 1 - next;

        let started = Instant::now();
        script_promote(&world, &config_url, &image, &digests[run % 2])?;
        script.push(started.elapsed(), 0, 0);
        eprintln!(
            "bench: promotion run {}/{}: dray cli {:.1?}, dray api {:.1?}, script {:.1?}",
            run + 1,
            args.runs,
            dray_cli.durations.last(),
            dray_api.durations.last(),
            script.durations.last(),
        );
    }

    // The plain task: the same task without `sparse:`, so each checkout holds the whole
    // tree; warm per-Stage worktrees make it write only what changed (issue 15).
    let plain = plain_task(&project)?;
    cli(&dray, &["apply", "-f", path_str(&plain)?])?;
    promote_cli(&dray, &aliases[next])?;
    stage_head = moved(&world, &config_url, stage_branch, &stage_head)?;
    next = 1 - next;
    let mut dray_plain = Samples::default();
    for run in 0..args.runs {
        let started = Instant::now();
        promote_cli(&dray, &aliases[next])?;
        dray_plain.push(started.elapsed(), 0, 0);
        stage_head = moved(&world, &config_url, stage_branch, &stage_head)?;
        next = 1 - next;
        eprintln!(
            "bench: plain-task promotion run {}/{}: dray cli {:.1?}",
            run + 1,
            args.runs,
            dray_plain.durations.last(),
        );
    }

    let rss_after_promotions = peak_rss(&serve_pid);

    // The file system's share: write as many small files as a checkout does.
    let total_files = args.files + quickstart_files()?.len();
    let mut write_files = Samples::default();
    for _ in 0..args.runs {
        let dir = world.unique_dir("files")?;
        let started = Instant::now();
        for f in 0..total_files {
            let path = dir.join(filler_path(f));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, filler(f, 0))?;
        }
        write_files.push(started.elapsed(), 0, 0);
        std::fs::remove_dir_all(&dir)?;
    }

    let mut md = String::new();
    writeln!(md, "### Promotion (issue 4)\n")?;
    writeln!(
        md,
        "A config repository with {} commits and {} files (the quickstart's `base/`, \
         `overlays/`, `charts/` plus filler ConfigMaps; {size} packed), served by \
         `git http-backend` over HTTP. Dray: `dray serve` with the quickstart \
         project (dev's auto-promotion turned off, so nothing queues beside a measured \
         promotion); each run promotes the other of two Freight (`1.0.0`, `1.0.1`) into `dev` \
         with the `render-to-stage-branch` task (clone from the mirror, set the image, \
         `kubectl kustomize`, commit, push to `stage/dev`), after one warm-up promotion. \
         The plain task is the same task without `sparse:` (both checkouts hold the whole \
         tree; the Stage's warm worktrees are updated in place), applied after those runs \
         and measured after one warm-up promotion of its own. \
         Script: `e2e/bench/baseline-promote.sh` (full `git clone`, `sed`, `kubectl kustomize`, \
         commit, `git push`), after one warm-up run. Median of {} runs (min–max).\n",
        args.commits, total_files, args.runs,
    )?;
    md.push_str(&median_table(&[
        (
            "Dray: `dray promote --stage dev --alias … --wait` (CLI, end to end)",
            &dray_cli.durations,
        ),
        (
            "Dray: the same through the API, polled every 10 ms",
            &dray_api.durations,
        ),
        (
            "Dray, plain task (no `sparse:`, the whole tree checked out): CLI, end to end",
            &dray_plain.durations,
        ),
        (
            "Script: `git clone` + `sed` + `kubectl kustomize` + `git commit` + `git push`",
            &script.durations,
        ),
    ]));
    writeln!(
        md,
        "\nFor context (single runs, not compared): generating the repository with \
         `git fast-import` took {}, Dray's first refresh (which clones its mirror) {}, the \
         warm-up promotion {}. Writing the checkout's {} files (about 500 bytes each) into \
         a fresh directory takes {} on this machine's file system (median of {} runs): \
         both sides pay it, Dray in its worktree checkout, the script in its clone.\n",
        fmt_duration(generated),
        fmt_duration(first_refresh),
        fmt_duration(warmup),
        total_files,
        fmt_duration(write_files.median()),
        args.runs,
    )?;
    writeln!(
        md,
        "Peak resident memory of `dray serve` (`VmHWM`; git's own processes not included): \
         {rss_after_discovery} after the first refresh (the mirror's first clone and the \
         first discovery), {rss_after_promotions} after every promotion above.\n"
    )?;
    let ratio_cli = ratio_of(script.median(), dray_cli.median());
    let ratio_api = ratio_of(script.median(), dray_api.median());
    writeln!(md, "| Ratio | Value | Aim | Met |")?;
    writeln!(md, "|---|---:|---|---|")?;
    writeln!(
        md,
        "| script ÷ Dray (CLI `--wait`) | {} | ≥ 4× | {} |",
        fmt_ratio(ratio_cli),
        met(ratio_cli >= 4.0)
    )?;
    writeln!(
        md,
        "| script ÷ Dray (API) | {} | ≥ 4× | {} |",
        fmt_ratio(ratio_api),
        met(ratio_api >= 4.0)
    )?;
    let plain_ratio = ratio_of(dray_plain.median(), script.median());
    writeln!(
        md,
        "| Dray plain task (CLI `--wait`) ÷ script | {plain_ratio:.2}× | ≤ 0.25× | {} |",
        met(plain_ratio <= 0.25)
    )?;
    Ok(md)
}

/// The quickstart's task in `project` without `sparse:` (every checkout the whole tree),
/// as a file of its own to apply over it.
fn plain_task(project: &Path) -> Result<PathBuf> {
    let task = std::fs::read_to_string(project.join("task.yaml"))?;
    let plain: String = task
        .lines()
        .filter(|l| !l.contains("sparse:") && !l.contains("# Only what the render reads"))
        .map(|l| format!("{l}\n"))
        .collect();
    if plain == task || !plain.contains("kind: PromotionTask") {
        bail!("the quickstart's task.yaml no longer has a `sparse:` line to drop");
    }
    let path = project.with_extension("plain-task.yaml");
    std::fs::write(&path, plain)?;
    Ok(path)
}

/// Write `commits` commits into the bare repository with `git fast-import`: the first adds
/// the quickstart config and `files` filler ConfigMaps, each later one edits one filler
/// (or, every `TUNE_EVERY` commits and last, appends a comment to the prod overlay).
fn build_config_repo(world: &TestWorld, bare: &Path, commits: usize, files: usize) -> Result<()> {
    let mut child = git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("Failed to start `git fast-import`")?;
    let stdin = child.stdin.take().context("fast-import's stdin")?;
    let written = (|| -> Result<()> {
        let mut out = BufWriter::with_capacity(1 << 20, stdin);
        let epoch: u64 = 1_700_000_000;
        let quickstart = quickstart_files()?;
        let prod = "overlays/prod/kustomization.yaml";
        let prod_text = quickstart
            .iter()
            .find(|(path, _)| path == prod)
            .map(|(_, text)| text.clone())
            .with_context(|| format!("the quickstart has no `{prod}`"))?;
        let mut first = quickstart;
        first.extend((0..files).map(|f| (filler_path(f), filler(f, 0).into_bytes())));
        commit(
            &mut out,
            epoch,
            "Initial config: quickstart and filler",
            &first,
        )?;
        for i in 1..commits {
            let time = epoch + 60 * i as u64;
            if i % TUNE_EVERY == 0 || i == commits - 1 {
                // Overlays change too (so the Warehouse's `includePaths` find a recent
                // commit); a comment keeps the rendered output as in the quickstart.
                let mut text = prod_text.clone();
                text.extend_from_slice(format!("# tuned in revision {i}\n").as_bytes());
                let message = format!("Tune prod (revision {i})");
                commit(&mut out, time, &message, &[(prod.to_owned(), text)])?;
                continue;
            }
            let f = (i * 7_919) % files;
            let file = vec![(filler_path(f), filler(f, i).into_bytes())];
            let message = format!("Update filler-{f:04} to revision {i}");
            commit(&mut out, time, &message, &file)?;
        }
        out.write_all(b"done\n")?;
        out.flush()?;
        Ok(())
    })();
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "`git fast-import` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    written.context("Failed to write the fast-import stream")?;
    Ok(())
}

/// One fast-import commit on `main` (the parent is the branch's current tip).
fn commit(
    out: &mut impl std::io::Write,
    time: u64,
    message: &str,
    files: &[(String, Vec<u8>)],
) -> Result<()> {
    let (name, email) = TEST_AUTHOR;
    writeln!(out, "commit refs/heads/main")?;
    writeln!(out, "author {name} <{email}> {time} +0000")?;
    writeln!(out, "committer {name} <{email}> {time} +0000")?;
    writeln!(out, "data {}\n{message}", message.len())?;
    for (path, content) in files {
        writeln!(out, "M 100644 inline {path}")?;
        writeln!(out, "data {}", content.len())?;
        out.write_all(content)?;
        writeln!(out)?;
    }
    writeln!(out)?;
    Ok(())
}

fn filler_path(f: usize) -> String {
    format!("filler/d{:02}/cm-{f:04}.yaml", f / FILES_PER_DIR)
}

/// A ConfigMap of about 500 bytes; `revision` makes each version distinct.
fn filler(f: usize, revision: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: filler-{f:04}\n  namespace: demo\n  \
         labels:\n    app.kubernetes.io/part-of: dray-bench\n    team: team-{team}\ndata:\n  \
         revision: \"{revision}\"\n  description: Generated by Dray's benchmark to give the config \
         repository a realistic size.\n  settings.yaml: |\n    replicas: {replicas}\n    \
         logLevel: info\n    featureFlags: [alpha, beta, gamma]\n    timeoutSeconds: {timeout}\n",
        team = f % 7,
        replicas = 1 + revision % 5,
        timeout = 10 + revision % 50,
    )
}

/// The quickstart config repository's files, relative paths and contents.
fn quickstart_files() -> Result<Vec<(String, Vec<u8>)>> {
    let root = workspace_root().join("examples/quickstart/config-repo");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(&root)?.to_string_lossy().into_owned();
                files.push((relative, std::fs::read(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// `size-pack` of the bare repository, human-readable.
fn pack_size(world: &TestWorld, bare: &Path) -> Result<String> {
    let output =
        checked(
            git(world)
                .arg("--git-dir")
                .arg(bare)
                .args(["count-objects", "-v", "-H"]),
        )?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("size-pack: "))
        .unwrap_or("?")
        .to_owned())
}

/// The quickstart project, pointed at this world's registry and git server (as the
/// foundation e2e test does), with dev's auto-promotion turned off: an automatic
/// promotion queued beside a measured one would be measured with it.
fn quickstart_project(world: &TestWorld, registry: &Registry, config_url: &str) -> Result<PathBuf> {
    let source = workspace_root().join("examples/quickstart/project");
    let target = world.unique_dir("project")?;
    for entry in std::fs::read_dir(&source)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?
            .replace("127.0.0.1:5000", &registry.host())
            .replace("http://127.0.0.1:8080/config.git", config_url)
            .replace("autoPromotionEnabled: true", "autoPromotionEnabled: false");
        std::fs::write(target.join(path.file_name().context("file name")?), text)?;
    }
    Ok(target)
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().context("the path is not UTF-8")
}

/// `dray ARGS` against the server; its output if it succeeded.
fn cli(dray: &Dray, args: &[&str]) -> Result<Output> {
    let mut cmd = dray.cli_command();
    cmd.args(args);
    checked(&mut cmd).with_context(|| format!("`dray {}` failed", args.join(" ")))
}

/// Refreshes the Warehouse `app` and waits (at most 2 minutes) for discovery.
fn refresh(dray: &Dray) -> Result<()> {
    cli(
        dray,
        &[
            "refresh",
            "warehouse",
            "app",
            "-p",
            "demo",
            "--wait",
            "--timeout",
            "120",
        ],
    )
    .map(drop)
}

fn promote_cli(dray: &Dray, alias: &str) -> Result<()> {
    cli(
        dray,
        &[
            "promote", "--stage", "dev", "--alias", alias, "--wait", "-p", "demo",
        ],
    )
    .map(drop)
    .with_context(|| format!("server log tail:\n{}", dray.log_tail(30)))
}

/// Request a promotion through the API and poll it every 10 ms until it ends.
async fn promote_api(http: &reqwest::Client, dray: &Dray, alias: &str) -> Result<()> {
    let base = format!("{}/api/v1/projects/demo", dray.url());
    let response = http
        .post(format!("{base}/stages/dev/promote"))
        .bearer_auth(dray.token())
        .json(&serde_json::json!({ "alias": alias }))
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    if !status.is_success() {
        bail!("promote answered {status}: {body}");
    }
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("the promotion has no name")?
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let promotion: Value = http
            .get(format!("{base}/promotions/{name}"))
            .bearer_auth(dray.token())
            .send()
            .await?
            .json()
            .await?;
        match promotion.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => return Ok(()),
            Some(phase @ ("Failed" | "Errored" | "Aborted")) => {
                bail!(
                    "promotion {name} {phase}: {}",
                    promotion["status"]["message"]
                )
            }
            _ if Instant::now() > deadline => bail!("promotion {name} did not end in 5 minutes"),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The alias of the Freight holding image tag `tag`.
fn freight_alias(dray: &Dray, tag: &str) -> Result<String> {
    let output = cli(dray, &["get", "freight", "-p", "demo", "-o", "json"])?;
    let freight: Value = serde_json::from_slice(&output.stdout)?;
    freight
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| {
            f["images"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|i| i["tag"] == tag)
        })
        .and_then(|f| f["alias"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("no Freight holds image tag `{tag}`: {freight}"))
}

fn remote_head(world: &TestWorld, url: &str, branch: &str) -> Result<String> {
    Ok(ls_remote(world, url)?
        .into_iter()
        .find(|(_, name)| name == branch)
        .map(|(sha, _)| sha)
        .unwrap_or_default())
}

/// Check that `branch` moved away from `before` (the promotion made a commit).
fn moved(world: &TestWorld, url: &str, branch: &str, before: &str) -> Result<String> {
    let now = remote_head(world, url, branch)?;
    if now.is_empty() || now == before {
        bail!("the promotion succeeded but `{branch}` did not move (still `{before}`)");
    }
    Ok(now)
}

// --- numbers ------------------------------------------------------------------------------

/// Durations of one measurement, with the request counts of each run.
#[derive(Debug, Default)]
struct Samples {
    durations: Durations,
    /// Dray's own count (`DiscoveryStats::http_requests`).
    own: Vec<u32>,
    /// Requests the registry logged.
    logged: Vec<u32>,
}

impl Samples {
    fn push(&mut self, duration: Duration, own: u32, logged: u32) {
        self.durations.push(duration);
        self.own.push(own);
        self.logged.push(logged);
    }

    fn median(&self) -> Duration {
        self.durations.median()
    }

    fn range(&self) -> String {
        self.durations.range()
    }

    fn own_requests(&self) -> String {
        counts(&self.own)
    }

    fn logged_requests(&self) -> String {
        counts(&self.logged)
    }
}
