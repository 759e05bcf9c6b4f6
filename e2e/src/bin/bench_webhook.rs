//! The webhook benchmark (KARGO-LESSONS 25): from a CI webhook to a `dev` promotion pushed.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh` builds Dray in release mode, runs this
//! binary and copies its Markdown into `docs/benchmarks.md` (section "Webhook to a dev
//! promotion"). Everything runs on loopback against real services: the e2e harness's
//! `docker-registry`, `git http-backend` serving the quickstart config repository, and
//! `dray serve` (`$DRAY_BIN`) with the quickstart project as shipped (its generic webhook
//! receiver `ci`, `dev`'s auto-promotion), except that the Warehouse polls only every hour,
//! so only the webhook starts a discovery.
//!
//! One sample: push a new image tag (untimed), start the clock, `POST` the generic webhook,
//! and stop the clock when `stage/dev` in the bare repository on the git server points at a
//! commit whose `Dray-Image` trailer names that tag and digest (the ref is read from disk
//! every 10 ms, at most 60 s). Afterwards (untimed) the commit's `Dray-Freight` and
//! `Dray-Promotion` trailers are checked against the API (the Freight holds that tag and
//! digest; the Promotion is `dev`'s, of that Freight, and succeeded), and their
//! `metadata.creationTimestamp`s (microseconds, the server's clock, which is this machine's)
//! split the time into webhook → Freight minted → Promotion created → pushed.
//!
//! The baseline, in the same run on the same config repository: `e2e/bench/baseline-promote.sh`
//! (clone, `sed`, `kubectl kustomize`, commit, push) with the pushed tag's digest, what a CI
//! job scripts after its image push. It gets the digest handed to it: no discovery.
//!
//! ```text
//! bench_webhook [--runs N] [--out-dir DIR]
//! ```
//!
//! Writes `DIR/webhook.md`; exits 1 when the measurement failed (the Markdown then says why).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::bench_baseline::script_promote;
use dray_e2e::bench_numbers::{
    Durations, fmt_duration, fmt_ratio, median_table, met, positive, ratio_of, runtime,
    write_section,
};
use dray_e2e::stage_branch::{branch_head, names_image, trailers};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use jiff::Timestamp;
use serde_json::Value;

/// The section title in `docs/benchmarks.md`.
const TITLE: &str = "Webhook to a dev promotion pushed (KARGO-LESSONS 25)";

/// The quickstart's project, its generic receiver and that receiver's Credential token
/// (`examples/quickstart/project/config.yaml`).
const PROJECT: &str = "demo";
const RECEIVER: &str = "ci";
const WEBHOOK_TOKEN: &str = "quickstart-ci-token";

/// The image repository the quickstart's Warehouse subscribes to.
const IMAGE_REPO: &str = "demo/app";

/// The stage branch the quickstart task pushes `dev`'s render to.
const STAGE_BRANCH: &str = "stage/dev";

/// How often the stage branch is read while a sample runs.
const POLL: Duration = Duration::from_millis(10);

/// How long one sample may take before the benchmark gives up.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the warm-up may take (it clones Dray's mirror of the config repository).
const WARMUP_TIMEOUT: Duration = Duration::from_secs(120);

/// The aim of KARGO-LESSONS 25.
const AIM: Duration = Duration::from_secs(2);

/// From the CI webhook to `stage/dev` pushed, beside the scripted promotion; the Markdown
/// goes to `<out-dir>/webhook.md`.
#[derive(Debug, clap::Parser)]
#[command(name = "bench_webhook")]
struct Args {
    /// Timed samples.
    #[arg(long, default_value = "10", value_parser = positive)]
    runs: usize,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn parse_args() -> Result<Args> {
    Ok(<Args as clap::Parser>::parse())
}

fn main() -> Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let failed = write_section(
        &args.out_dir.join("webhook.md"),
        "bench_webhook",
        TITLE,
        webhook(&runtime, &args),
    )?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// The services of one run.
struct Setup {
    world: TestWorld,
    registry: Registry,
    dray: Dray,
    /// The config repository's URL on the git server.
    config_url: String,
    /// Its bare repository on disk (where `stage/dev` is read).
    bare: PathBuf,
    http: reqwest::Client,
    /// Keeps the git server running.
    _git: GitServer,
}

/// What one Dray sample measured.
struct Sample {
    total: Duration,
    answered: Duration,
    to_freight: Duration,
    to_promotion: Duration,
    to_push: Duration,
}

fn webhook(runtime: &tokio::runtime::Runtime, args: &Args) -> Result<String> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git_server = GitServer::start(&world, Default::default())?;
    let config_url = git_server.create_repo("config")?;
    GitRepo::seed(
        &world,
        &config_url,
        &workspace_root().join("examples/quickstart/config-repo"),
    )?;
    let bare = git_server.repo_path("config");
    let project = quickstart_project(&world, &registry, &config_url)?;
    let dray = Dray::start(
        &world,
        DrayOptions {
            config: vec![project],
            ..Default::default()
        },
    )?;
    let setup = Setup {
        world,
        registry,
        dray,
        config_url,
        bare,
        http: dray_e2e::http_client()?,
        _git: git_server,
    };
    let image = format!("{}/{IMAGE_REPO}", setup.registry.host());

    // Warm-up (untimed): the first discovery clones Dray's mirror of the config repository
    // and the first promotion creates `stage/dev`; then one more round on a warm mirror.
    let (cold, _) = run_sample(runtime, &setup, "1.0.0", WARMUP_TIMEOUT)
        .context("the warm-up (first discovery and first promotion) failed")?;
    eprintln!(
        "bench_webhook: first webhook → stage/dev {} (cold mirror)",
        fmt_duration(cold.total)
    );
    let warm_tag = "1.0.1";
    let (again, digest) = run_sample(runtime, &setup, warm_tag, SAMPLE_TIMEOUT)
        .context("the second warm-up sample failed")?;
    script_promote(&setup.world, &setup.config_url, &image, &digest)
        .context("the baseline script's warm-up run failed")?;
    eprintln!(
        "bench_webhook: warm-up: webhook → stage/dev {}",
        fmt_duration(again.total)
    );

    let mut dray = Vec::new();
    let mut script = Durations::default();
    for run in 0..args.runs {
        let tag = format!("1.0.{}", run + 2);
        let (sample, digest) = run_sample(runtime, &setup, &tag, SAMPLE_TIMEOUT)
            .with_context(|| format!("sample {} of {} (tag `{tag}`) failed", run + 1, args.runs))?;

        let started = Instant::now();
        script_promote(&setup.world, &setup.config_url, &image, &digest)
            .with_context(|| format!("the baseline script failed in run {}", run + 1))?;
        script.push(started.elapsed());
        eprintln!(
            "bench_webhook: run {}/{}: dray webhook → pushed {} (freight {}, promotion {}, \
             push {}), script {}",
            run + 1,
            args.runs,
            fmt_duration(sample.total),
            fmt_duration(sample.to_freight),
            fmt_duration(sample.to_promotion),
            fmt_duration(sample.to_push),
            fmt_duration(script.last()),
        );
        dray.push(sample);
    }
    report(args, cold.total, &dray, &script)
}

/// Push `tag`, fire the webhook and wait until `stage/dev` holds its render; then check the
/// commit against the API and wait for its Promotion to succeed. Returns the sample and the
/// tag's digest.
fn run_sample(
    runtime: &tokio::runtime::Runtime,
    setup: &Setup,
    tag: &str,
    timeout: Duration,
) -> Result<(Sample, String)> {
    let digest = runtime
        .block_on(oci::push_image(&setup.registry, IMAGE_REPO, tag))
        .with_context(|| format!("Failed to push `{IMAGE_REPO}:{tag}`"))?;
    let before = branch_head(&setup.world, &setup.bare, STAGE_BRANCH)?;
    let hook = format!(
        "{}/webhooks/{PROJECT}/{RECEIVER}/{WEBHOOK_TOKEN}",
        setup.dray.url()
    );
    let body = serde_json::json!({
        "repoURL": format!("{}/{IMAGE_REPO}", setup.registry.host()),
    });

    // --- timed: webhook → stage/dev holds the commit for `tag` ---------------------------
    let sent_at = Timestamp::now();
    let started = Instant::now();
    let (status, text) = runtime.block_on(async {
        let response = setup.http.post(&hook).json(&body).send().await?;
        let status = response.status();
        anyhow::Ok((status, response.text().await.unwrap_or_default()))
    })?;
    let answered = started.elapsed();
    if !status.is_success() {
        bail!(
            "the webhook `POST /webhooks/{PROJECT}/{RECEIVER}/<token>` answered {status}: {text}"
        );
    }
    let refreshed = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|answer| answer["refreshed"].as_u64())
        .unwrap_or(0);
    if refreshed == 0 {
        bail!(
            "the webhook refreshed no Warehouse (answer: {text}); the Warehouse `app` should \
             subscribe to `{}`",
            body["repoURL"]
        );
    }
    let deadline = started + timeout;
    let mut seen = before.clone();
    let (head, pushed_at, total) = loop {
        let head = branch_head(&setup.world, &setup.bare, STAGE_BRANCH)?;
        if !head.is_empty() && head != seen {
            let observed_at = Timestamp::now();
            let total = started.elapsed();
            if names_image(&setup.world, &setup.bare, &head, IMAGE_REPO, tag, &digest)? {
                break (head, observed_at, total);
            }
            // Another render (not this tag's) moved the branch: keep waiting for ours.
            seen = head;
        }
        if Instant::now() > deadline {
            bail!(
                "`{STAGE_BRANCH}` of {} did not get a commit with the trailer `Dray-Image: \
                 …/{IMAGE_REPO}:{tag}@{digest}` within {timeout:?} of the webhook (it points at \
                 `{}`); Dray's log ends with:\n{}",
                setup.config_url,
                if seen.is_empty() { "nothing" } else { &seen },
                setup.dray.log_tail(30)
            );
        }
        std::thread::sleep(POLL);
    };
    // --- untimed: check the commit against the API ---------------------------------------
    let trailers = trailers(&setup.world, &setup.bare, &head)?;
    let trailer = |key: &str| {
        trailers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
            .with_context(|| format!("commit {head} on `{STAGE_BRANCH}` has no `{key}` trailer"))
    };
    let freight_id = trailer("Dray-Freight")?
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let promotion_name = trailer("Dray-Promotion")?;
    let freight = runtime.block_on(get(setup, &format!("freight/{freight_id}")))?;
    let holds_tag =
        freight["images"].as_array().into_iter().flatten().any(|i| {
            i["tag"].as_str() == Some(tag) && i["digest"].as_str() == Some(digest.as_str())
        });
    if !holds_tag {
        bail!(
            "the Freight `{freight_id}` named by commit {head} does not hold \
             `{IMAGE_REPO}:{tag}@{digest}`: {freight}"
        );
    }
    let promotion = runtime.block_on(wait_promotion(setup, &promotion_name))?;
    if promotion.pointer("/spec/stage").and_then(Value::as_str) != Some("dev")
        || promotion.pointer("/spec/freight").and_then(Value::as_str) != Some(&freight_id)
    {
        bail!(
            "the Promotion `{promotion_name}` named by commit {head} is not dev's promotion \
             of Freight `{freight_id}`: {}",
            promotion["spec"]
        );
    }
    let minted_at = created(&freight, "Freight")?;
    let requested_at = created(&promotion, "Promotion")?;
    let sample = Sample {
        total,
        answered,
        to_freight: between(sent_at, minted_at, "webhook sent", "Freight created")?,
        to_promotion: between(
            minted_at,
            requested_at,
            "Freight created",
            "Promotion created",
        )?,
        to_push: between(
            requested_at,
            pushed_at,
            "Promotion created",
            "push observed",
        )?,
    };
    Ok((sample, digest))
}

/// `GET /api/v1/projects/demo/{path}` as JSON.
async fn get(setup: &Setup, path: &str) -> Result<Value> {
    let url = format!("{}/api/v1/projects/{PROJECT}/{path}", setup.dray.url());
    let response = setup
        .http
        .get(&url)
        .bearer_auth(setup.dray.token())
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .with_context(|| format!("GET {url}: the answer is not JSON"))?;
    if !status.is_success() {
        bail!("GET {url} answered {status}: {body}");
    }
    Ok(body)
}

/// Wait (at most 60 s) until the Promotion has ended; it must have succeeded.
async fn wait_promotion(setup: &Setup, name: &str) -> Result<Value> {
    let deadline = Instant::now() + SAMPLE_TIMEOUT;
    loop {
        let promotion = get(setup, &format!("promotions/{name}")).await?;
        match promotion.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => return Ok(promotion),
            Some(phase @ ("Failed" | "Errored" | "Aborted")) => {
                bail!(
                    "the Promotion `{name}` pushed to `{STAGE_BRANCH}` but ended {phase}: {}",
                    promotion["status"]["message"]
                )
            }
            phase if Instant::now() > deadline => bail!(
                "the Promotion `{name}` pushed to `{STAGE_BRANCH}` but was not recorded as \
                 Succeeded within {SAMPLE_TIMEOUT:?} (phase {phase:?})"
            ),
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

/// `metadata.creationTimestamp` of an object; only sub-second timestamps are accepted (a
/// whole-second one could not split a two-second budget honestly).
fn created(object: &Value, kind: &str) -> Result<Timestamp> {
    let text = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .with_context(|| format!("the {kind} has no metadata.creationTimestamp: {object}"))?;
    if !text.contains('.') {
        bail!(
            "the {kind}'s metadata.creationTimestamp `{text}` has whole seconds only; the parts \
             of a sample cannot be measured from it"
        );
    }
    text.parse()
        .with_context(|| format!("the {kind}'s metadata.creationTimestamp `{text}`"))
}

/// `to - from`, which must not be negative.
fn between(from: Timestamp, to: Timestamp, what_from: &str, what_to: &str) -> Result<Duration> {
    Duration::try_from(to.duration_since(from)).map_err(|_| {
        anyhow::anyhow!(
            "{what_to} ({to}) is before {what_from} ({from}): the clock moved during the sample"
        )
    })
}

/// The quickstart project, pointed at this run's registry and git server (as
/// `quickstart.rs` does), with the Warehouse polling every hour: only the webhook starts a
/// discovery. `dev`'s auto-promotion and the `ci` receiver stay as shipped.
fn quickstart_project(world: &TestWorld, registry: &Registry, config_url: &str) -> Result<PathBuf> {
    let source = workspace_root().join("examples/quickstart/project");
    let target = world.unique_dir("project")?;
    std::fs::create_dir_all(&target)?;
    let mut polling = false;
    let mut receiver = false;
    for entry in std::fs::read_dir(&source)
        .with_context(|| format!("Failed to read `{}`", source.display()))?
    {
        let path = entry?.path();
        let mut text = std::fs::read_to_string(&path)?
            .replace("127.0.0.1:5000", &registry.host())
            .replace("http://127.0.0.1:8080/config.git", config_url);
        let kinds: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .map(str::to_owned)
            .collect();
        let is_kind = |kind: &str| kinds.iter().any(|k| k == kind);
        if is_kind("Warehouse") {
            if !text.contains("interval: 5m") {
                bail!(
                    "`{}` no longer says `interval: 5m`; update the benchmark so the Warehouse \
                     still polls only hourly",
                    path.display()
                );
            }
            text = text.replace("interval: 5m", "interval: 1h");
            polling = true;
        }
        if is_kind("ProjectConfig") {
            receiver = text.contains("autoPromotionEnabled: true")
                && text.contains(&format!("name: {RECEIVER}"))
                && text.contains(&format!("token: {WEBHOOK_TOKEN}"));
        }
        std::fs::write(target.join(path.file_name().context("file name")?), text)?;
    }
    if !polling || !receiver {
        bail!(
            "`{}` no longer has a Warehouse with `interval: 5m` and a ProjectConfig with dev's \
             auto-promotion and the generic receiver `{RECEIVER}` (token `{WEBHOOK_TOKEN}`); \
             update the benchmark",
            source.display()
        );
    }
    Ok(target)
}

// --- report -------------------------------------------------------------------------------

fn report(args: &Args, cold: Duration, dray: &[Sample], script: &Durations) -> Result<String> {
    let column = |f: fn(&Sample) -> Duration| Durations(dray.iter().map(f).collect());
    let total = column(|s| s.total);
    let answered = column(|s| s.answered);
    let to_freight = column(|s| s.to_freight);
    let to_promotion = column(|s| s.to_promotion);
    let to_push = column(|s| s.to_push);
    let freight_to_push = column(|s| s.to_promotion + s.to_push);

    let mut md = String::new();
    writeln!(md, "### {TITLE}\n")?;
    writeln!(
        md,
        "The quickstart (`examples/quickstart`): its config repository served by \
         `git http-backend`, a local `docker-registry`, `dray serve` with the quickstart project \
         as shipped (the generic webhook receiver `{RECEIVER}`, `dev`'s auto-promotion, the \
         `render-to-stage-branch` task), except the Warehouse's `interval`, raised from 5m to 1h \
         so only the webhook starts a discovery. One sample: push a new tag of `{IMAGE_REPO}` \
         (untimed), start the clock, `POST /webhooks/{PROJECT}/{RECEIVER}/<token>` with the \
         image's `repoURL`, stop it when `stage/dev` in the bare repository on the git server \
         (its ref, read from disk every 10 ms) points at a commit whose `Dray-Image` trailer \
         names that tag and digest. Every sample is checked afterwards: the commit's \
         `Dray-Freight` is the Freight holding that tag and digest, its `Dray-Promotion` is \
         `dev`'s promotion of it and succeeded. After two warm-up samples (the first clones \
         Dray's mirror); median of {} runs (min–max). Script: `e2e/bench/baseline-promote.sh` \
         against the same config repository (full `git clone`, `sed`, `kubectl kustomize`, \
         commit, `git push`) with the new tag's digest, one run after each Dray sample.\n",
        args.runs
    )?;
    md.push_str(&median_table(&[
        (
            "Dray: webhook `POST` → `stage/dev` holds the new tag's commit (end to end)",
            &total,
        ),
        (
            "… the webhook's `POST` answered (200, one Warehouse refreshed)",
            &answered,
        ),
        (
            "… webhook sent → Freight minted (the Freight's `creationTimestamp`)",
            &to_freight,
        ),
        (
            "… Freight minted → `stage/dev` pushed (observed on the git server)",
            &freight_to_push,
        ),
        (
            "… … Freight minted → auto-promotion's Promotion created",
            &to_promotion,
        ),
        ("… … Promotion created → `stage/dev` pushed", &to_push),
        (
            "Script: `git clone` + `sed` + `kubectl kustomize` + `git commit` + `git push` \
             (given the digest; no discovery)",
            script,
        ),
    ]));
    writeln!(
        md,
        "\nThe parts (rows starting with …) come from the server's `metadata.creationTimestamp` \
         of the Freight and of the Promotion (microseconds, this machine's clock) against the \
         clock read when the webhook was sent and when the new ref was seen; the push is \
         observed up to 10 ms late (the polling). The end-to-end row is a monotonic clock; the \
         parts add up to it within that. For context (one run, not compared): the first \
         webhook, whose discovery clones Dray's mirror of the config repository and whose \
         promotion creates `stage/dev`, took {}.\n",
        fmt_duration(cold)
    )?;
    let ratio = ratio_of(script.median(), total.median());
    let slowest = total.max();
    writeln!(md, "| Ratio or aim | Value | Aim | Met |")?;
    writeln!(md, "|---|---:|---|---|")?;
    writeln!(
        md,
        "| script ÷ Dray (webhook → pushed) | {} | – | – |",
        fmt_ratio(ratio)
    )?;
    writeln!(
        md,
        "| script ÷ Dray's promotion alone (Promotion created → pushed: the same git work) \
         | {} | – | – |",
        fmt_ratio(ratio_of(script.median(), to_push.median()))
    )?;
    writeln!(
        md,
        "| Dray webhook → pushed, median | {} | < 2 s | {} |",
        fmt_duration(total.median()),
        met(total.median() < AIM)
    )?;
    writeln!(
        md,
        "| Dray webhook → pushed, slowest of {} | {} | < 2 s | {} |",
        args.runs,
        fmt_duration(slowest),
        met(slowest < AIM)
    )?;
    Ok(md)
}
