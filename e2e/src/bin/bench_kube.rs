//! The Kubernetes-mode benchmark (issue 33, item 5): the same quickstart, the same CI
//! webhook, in embedded mode (`dray serve`, SQLite) and in Kubernetes mode (`dray serve
//! --kubernetes` and `dray controller` on a real control plane, `e2e/src/control_plane`),
//! side by side in one run.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh --only kubernetes` builds Dray in release
//! mode, runs this binary and copies its Markdown into `docs/benchmarks.md` (section
//! "Kubernetes mode"). Everything runs on loopback against real services.
//!
//! One sample, in either mode: push a new image tag (untimed), start the clock, `POST` the
//! quickstart's generic webhook (`ci`), and stop it when `stage/dev` in the git server's bare
//! repository points at a commit whose `Dray-Image` trailer names that tag and digest (read
//! every 10 ms, at most 120 s). Measured:
//!
//! - webhook → `stage/dev` pushed, median of the samples in each mode, and the ratio
//!   Kubernetes ÷ embedded (aim ≤ 1.5×);
//! - the API requests Dray's ServiceAccount made per sample in Kubernetes mode, from the API
//!   server's audit log (every request from the webhook to the push: the refresh, discovery's
//!   writes, the Freight, the Promotion and its status writes, the Stage's);
//! - after the API server is restarted (SIGTERM, then started on the same etcd; measured from
//!   when it answers again): how long until the next webhook's promotion is pushed. A
//!   controller that lost its Lease while the API server was away has exited, as it should;
//!   the benchmark starts it again at once, as the kubelet would, and that counts in the time.
//!
//! ```text
//! bench_kube [--runs N] [--out-dir DIR]
//! ```
//!
//! Writes `DIR/kubernetes.md`; exits 1 when the measurement failed (the Markdown says why).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::bench_numbers::{
    Durations, fmt_duration, fmt_ratio, met, positive, ratio_of, runtime, write_section,
};
use dray_e2e::kube_pipeline::{DRAY_USER, KubeOptions, KubePipeline};
use dray_e2e::pipeline::Pipeline;
use dray_e2e::stage_branch::{branch_head, names_image};
use dray_e2e::{Registry, TestWorld, oci};

/// The section title in `docs/benchmarks.md`.
const TITLE: &str = "Kubernetes mode (issue 33)";

/// The quickstart's generic receiver and its token (`examples/quickstart/project/config.yaml`).
const WEBHOOK: &str = "webhooks/demo/ci/quickstart-ci-token";

/// The image repository the quickstart's Warehouse subscribes to.
const IMAGE_REPO: &str = "demo/app";

/// How often the stage branch is read while a sample runs.
const POLL: Duration = Duration::from_millis(10);

/// How long one sample may take.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The aim: Kubernetes mode at most this many times embedded mode's time.
const AIM: f64 = 1.5;

/// Embedded and Kubernetes mode, side by side; the Markdown goes to
/// `<out-dir>/kubernetes.md`.
#[derive(Debug, clap::Parser)]
#[command(name = "bench_kube")]
struct Args {
    /// Timed samples per mode.
    #[arg(long, default_value = "5", value_parser = positive)]
    runs: usize,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let failed = write_section(
        &args.out_dir.join("kubernetes.md"),
        "bench_kube",
        TITLE,
        measure(&runtime, &args),
    )?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// Where one mode's samples go: its services and the bare config repository.
struct Target<'a> {
    world: &'a TestWorld,
    registry: &'a Registry,
    webhook: String,
    bare: PathBuf,
    http: reqwest::Client,
}

impl<'a> Target<'a> {
    fn of(pipeline: &'a Pipeline) -> Result<Self> {
        Ok(Target {
            world: &pipeline.world,
            registry: &pipeline.registry,
            webhook: format!("{}/{WEBHOOK}", pipeline.dray.url()),
            bare: pipeline.git.repo_path("config"),
            http: dray_e2e::http_client()?,
        })
    }

    /// Push `tag`, fire the webhook and wait until `stage/dev` holds its render.
    fn sample(&self, runtime: &tokio::runtime::Runtime, tag: &str) -> Result<Duration> {
        let digest = runtime
            .block_on(oci::push_image(self.registry, IMAGE_REPO, tag))
            .with_context(|| format!("Failed to push `{IMAGE_REPO}:{tag}`"))?;
        let body = serde_json::json!({"repoURL": format!("{}/{IMAGE_REPO}", self.registry.host())});
        let started = Instant::now();
        let (status, text) = runtime.block_on(async {
            let response = self.http.post(&self.webhook).json(&body).send().await?;
            let status = response.status();
            anyhow::Ok((status, response.text().await.unwrap_or_default()))
        })?;
        if !status.is_success() {
            bail!("the webhook answered {status}: {text}");
        }
        let deadline = started + SAMPLE_TIMEOUT;
        loop {
            let head = branch_head(self.world, &self.bare, "stage/dev")?;
            if !head.is_empty()
                && names_image(self.world, &self.bare, &head, IMAGE_REPO, tag, &digest)?
            {
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                bail!(
                    "`stage/dev` got no commit for `{IMAGE_REPO}:{tag}` within {SAMPLE_TIMEOUT:?} of the webhook"
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Samples `runs` tags `1.0.<first>…` into `target`, after one untimed warm-up sample.
fn samples(
    runtime: &tokio::runtime::Runtime,
    target: &Target,
    mode: &str,
    runs: usize,
    mut each: impl FnMut(Duration),
) -> Result<Durations> {
    let warm = target
        .sample(runtime, "1.0.0")
        .with_context(|| format!("{mode}: the warm-up failed"))?;
    eprintln!("bench_kube: {mode}: warm-up {}", fmt_duration(warm));
    let mut times = Durations::default();
    for run in 0..runs {
        let tag = format!("1.0.{}", run + 1);
        let took = target
            .sample(runtime, &tag)
            .with_context(|| format!("{mode}: sample {} (tag `{tag}`) failed", run + 1))?;
        eprintln!(
            "bench_kube: {mode}: run {}/{runs}: {}",
            run + 1,
            fmt_duration(took)
        );
        times.push(took);
        each(took);
    }
    Ok(times)
}

fn measure(runtime: &tokio::runtime::Runtime, args: &Args) -> Result<String> {
    let embedded = {
        let pipeline = Pipeline::start()?;
        pipeline.apply_quickstart(str::to_owned)?;
        // The project as shipped: `dev`'s auto-promotion and the `ci` receiver.
        pipeline.apply(&Pipeline::quickstart_file("config.yaml")?)?;
        let target = Target::of(&pipeline)?;
        samples(runtime, &target, "embedded", args.runs, |_| {})?
    };

    let mut kube = runtime.block_on(KubePipeline::start(KubeOptions::default()))?;
    kube.apply_quickstart(str::to_owned)?;
    let requests = |kube: &KubePipeline| -> Result<usize> {
        Ok(kube
            .cluster
            .requests()?
            .iter()
            .filter(|r| r.user == DRAY_USER)
            .count())
    };
    let mut per_promotion = Vec::new();
    let kubernetes = {
        let target = Target::of(&kube.q)?;
        let mut before = requests(&kube)?;
        let mut counts = Vec::new();
        let times = samples(runtime, &target, "kubernetes", args.runs, |_| {
            let after = requests(&kube).unwrap_or(before);
            counts.push(after.saturating_sub(before));
            before = after;
        })?;
        per_promotion.extend(counts);
        times
    };

    // An API server restart: from when it answers again to the next promotion pushed.
    kube.cluster.restart_apiserver()?;
    let answered = Instant::now();
    for controller in &mut kube.controllers {
        if !controller.is_running() {
            controller.restart()?;
        }
    }
    Target::of(&kube.q)?
        .sample(runtime, &format!("1.0.{}", args.runs + 1))
        .context("the first promotion after the API server's restart failed")?;
    // Includes pushing the image (tens of milliseconds) before the webhook.
    let after_restart = answered.elapsed();
    report(args, &embedded, &kubernetes, &per_promotion, after_restart)
}

fn report(
    args: &Args,
    embedded: &Durations,
    kubernetes: &Durations,
    requests: &[usize],
    after_restart: Duration,
) -> Result<String> {
    let ratio = ratio_of(embedded.median(), kubernetes.median());
    let mut requests = requests.to_vec();
    requests.sort_unstable();
    let median_requests = requests
        .get(requests.len() / 2)
        .copied()
        .unwrap_or_default();
    let mut out = String::new();
    writeln!(
        out,
        "The quickstart in both modes, one after the other in one run, {} samples each after \
         one warm-up: push a tag, `POST` the `ci` webhook, stop when `stage/dev` holds its \
         render (`e2e/src/bin/bench_kube.rs`). Kubernetes mode runs on the real control plane \
         of the tests (kube-apiserver, etcd, kube-controller-manager, Kubernetes {}).\n",
        args.runs,
        kubernetes_version()
    )?;
    writeln!(
        out,
        "| | embedded | Kubernetes | Kubernetes ÷ embedded | aim |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    writeln!(
        out,
        "| webhook → `stage/dev` pushed, median | {} | {} | {} | ≤ {AIM}× {} |",
        fmt_duration(embedded.median()),
        fmt_duration(kubernetes.median()),
        fmt_ratio(ratio),
        met(ratio <= AIM)
    )?;
    writeln!(
        out,
        "| range | {} | {} | | |",
        embedded.range(),
        kubernetes.range()
    )?;
    writeln!(
        out,
        "\nAPI requests by Dray's ServiceAccount per sample (audit log; webhook to push): \
         median {median_requests}, all {requests:?}.\n"
    )?;
    writeln!(
        out,
        "After an API server restart (SIGTERM, started again on the same etcd), the next \
         webhook's promotion was pushed {} after the API server answered again.",
        fmt_duration(after_restart)
    )?;
    Ok(out)
}

/// The pinned Kubernetes release (`e2e/tools/versions.env`).
fn kubernetes_version() -> String {
    let versions = dray_e2e::workspace_root().join("e2e/tools/versions.env");
    read_pin(&versions, "KUBERNETES_VERSION").unwrap_or_else(|| "(unknown)".into())
}

fn read_pin(file: &Path, key: &str) -> Option<String> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
}
