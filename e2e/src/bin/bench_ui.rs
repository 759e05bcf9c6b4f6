//! The UI-at-scale benchmark (issue 8): how fast `dray serve` answers the project page of a
//! project with 1,000 Stages and 10,000 Freight, beside the JSON list of the same Stages.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh` builds Dray in release mode, runs this
//! binary and copies its Markdown into `docs/benchmarks.md` (section "UI at scale").
//!
//! 1. Seeds a data directory directly through `dray`'s [`SqliteStore`] (batched writes,
//!    seconds instead of minutes through the API): one Project, a few Warehouses, a DAG
//!    of Stages per Warehouse (chains of five hanging off each other with a fan-out of
//!    three, and every seventh chain also fed by its neighbour, a fan-in), each Stage with
//!    `requestedFreight` and a four-step `promotionTemplate`, and Freight per Warehouse with
//!    `status.currentlyIn` / `verifiedIn` spread over the Stages (deeper Stages hold older
//!    Freight; each Stage verified the last 30 Freight it held). The resources pass
//!    `dray::config::load` (the API's validation, references and cycles included) and
//!    deserialise into `dray::api` types before they are written.
//! 2. Starts `dray serve` (`$DRAY_BIN`, the release build under `run.sh`) on that data
//!    directory through the e2e harness, twice: with API tokens (the page gets the session
//!    cookie of a `POST /login` with the bootstrap token, the JSON the bearer token) and
//!    with `--auth none`.
//! 3. Times `GET <page>` (default `/projects/{project}`, the UI page; a page that does not
//!    answer 200 is reported as not measured), the release board (issue 18; default
//!    `/?name={project}`) and `GET /api/v1/projects/{project}/stages` (the baseline),
//!    interleaved, on one keep-alive connection each, after a warm-up:
//!    median and p95 in milliseconds and the page/JSON ratio.
//!
//! ```text
//! bench_ui [--stages N] [--freight N] [--warehouses N] [--requests N] [--warmup N]
//!          [--page-path PATH] [--board-path PATH] [--out-dir DIR]
//! ```
//!
//! Writes `DIR/ui.md`; exits 1 when the measurement failed (the Markdown then says why).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray::api::{API_VERSION, Freight, FreightCommit, FreightImage, Kind, Stage};
use dray::config::{SourceFile, load};
use dray::discovery::mint::{alias_for, freight_id, freight_object};
use dray::store::{SqliteStore, Store, Write};
use dray_e2e::bench_numbers::{Durations, fmt_duration, positive, runtime, write_section};
use dray_e2e::{Dray, DrayOptions, TestWorld};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The seeded project.
const PROJECT: &str = "scale";

/// Warehouse names, in order; `--warehouses` takes the first N.
const WAREHOUSES: &[&str] = &[
    "api", "web", "worker", "billing", "search", "auth", "mobile", "reports",
];

/// Stages in one chain of the DAG.
const CHAIN: usize = 5;

/// How many chains hang off the end of each chain.
const FAN_OUT: usize = 3;

/// Every this many chains, the chain's first Stage also takes Freight from the previous
/// chain's last Stage (a fan-in; the graph is a DAG, not a tree).
const FAN_IN_EVERY: usize = 7;

/// How many of the Freight a Stage held before its current one it verified.
const HISTORY: usize = 30;

/// Rows per store transaction.
const BATCH: usize = 500;

/// How long the whole set of requests may take before the benchmark gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The UI's project page at scale against the JSON list of the same Stages; the Markdown
/// goes to `<out-dir>/ui.md`.
#[derive(Debug, clap::Parser)]
#[command(name = "bench_ui")]
struct Args {
    /// Stages in the seeded project.
    #[arg(long, default_value = "1000", value_parser = positive)]
    stages: usize,
    /// Freight in it.
    #[arg(long, default_value = "10000", value_parser = positive)]
    freight: usize,
    /// Warehouses in it.
    #[arg(long, default_value = "5", value_parser = positive)]
    warehouses: usize,
    /// Timed requests per measurement.
    #[arg(long, default_value = "30", value_parser = positive)]
    requests: usize,
    /// Untimed requests first.
    #[arg(long, default_value = "5", value_parser = positive)]
    warmup: usize,
    /// The page to time (`{project}` is replaced).
    #[arg(long, default_value = "/projects/{project}")]
    page_path: String,
    /// The release board to time beside it (`{project}` is replaced; a filter keeps `/`
    /// from going straight to the only project's page).
    #[arg(long, default_value = "/?name={project}")]
    board_path: String,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn parse_args() -> Result<Args> {
    let args = <Args as clap::Parser>::parse();
    if args.warehouses > WAREHOUSES.len() {
        bail!(
            "`--warehouses` is at most {} (the benchmark names them)",
            WAREHOUSES.len()
        );
    }
    if args.stages < args.warehouses || args.freight < args.warehouses {
        bail!("`--stages` and `--freight` must be at least `--warehouses` (one per Warehouse)");
    }
    if !args.page_path.starts_with('/') {
        bail!(
            "`--page-path` must start with `/`, not `{}`",
            args.page_path
        );
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let failed = write_section(
        &args.out_dir.join("ui.md"),
        "bench_ui",
        "UI at scale (issue 8)",
        runtime.block_on(run(&args)),
    )?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// How the measured server authenticates, and what the benchmark sends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Auth {
    /// Bearer API tokens; the page gets the session cookie of a `POST /login`.
    Token,
    /// `--auth none`: no credentials, no permission checks.
    None,
}

/// One server's numbers.
struct Measured {
    auth: Auth,
    /// The page's HTTP status on the first request; measured only when 200.
    page_status: u16,
    page: Durations,
    list: Durations,
    page_bytes: usize,
    json_bytes: usize,
    /// The board's HTTP status on the first request; measured only when 200.
    board_status: u16,
    board: Durations,
    board_bytes: usize,
    /// How many of the first three seeded Stages the page's HTML names.
    stages_named: usize,
    restart: Duration,
}

async fn run(args: &Args) -> Result<String> {
    let started = Instant::now();
    let seed = plan(args)?;
    let planned = started.elapsed();
    eprintln!("bench_ui: planned and validated the seed in {planned:.1?}");
    let mut written = Duration::ZERO;
    let mut db_bytes = 0;
    let mut results = Vec::new();
    for auth in [Auth::Token, Auth::None] {
        let world = TestWorld::new()?;
        let options = match auth {
            Auth::Token => DrayOptions::default(),
            Auth::None => DrayOptions {
                args: vec!["--auth".into(), "none".into()],
                ..DrayOptions::default()
            },
        };
        // Started once so that the data directory (and the bootstrap token) exist, then
        // stopped: the store has one writer.
        let mut dray = Dray::start(&world, options)?;
        dray.stop(Duration::from_secs(10))?;
        let started = Instant::now();
        write_seed(&dray.data_dir(), seed.clone()).await?;
        written = started.elapsed();
        eprintln!("bench_ui: wrote the seed in {written:.1?}");
        db_bytes = std::fs::metadata(dray.data_dir().join(dray::store::DATABASE_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        let started = Instant::now();
        dray.restart()?;
        let restart = started.elapsed();
        let measured = measure(args, &dray, auth, restart).await?;
        if !dray.is_running() {
            bail!(
                "`dray serve` stopped during the benchmark; log:\n{}",
                dray.log()
            );
        }
        results.push(measured);
    }
    report(args, &results, planned + written, db_bytes)
}

/// `POST /login` with the bootstrap token; the `name=value` of the session cookie.
async fn login(dray: &Dray) -> Result<String> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let response = http
        .post(format!("{}/login", dray.url()))
        .header("Origin", dray.url())
        .form(&[("token", dray.token())])
        .send()
        .await
        .context("`POST /login` failed")?;
    let status = response.status().as_u16();
    let cookie = response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|pair| pair.starts_with("dray_session=") && pair.len() > "dray_session=".len())
        .map(str::to_owned);
    cookie.with_context(|| {
        format!("`POST /login` with the bootstrap token answered {status} without a session cookie")
    })
}

async fn measure(args: &Args, dray: &Dray, auth: Auth, restart: Duration) -> Result<Measured> {
    let json_path = format!("/api/v1/projects/{PROJECT}/stages");
    let page_path = args.page_path.replace("{project}", PROJECT);
    let mut headers = reqwest::header::HeaderMap::new();
    let mut page_headers = reqwest::header::HeaderMap::new();
    if auth == Auth::Token {
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", dray.token()).parse()?,
        );
        page_headers.insert(reqwest::header::COOKIE, login(dray).await?.parse()?);
    }
    let client = |headers| {
        reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
    };
    let json_http = client(headers)?;
    let page_http = client(page_headers)?;

    // The baseline must answer with every seeded Stage, or the comparison is void.
    let (status, body) = get(&json_http, &dray.url(), &json_path).await?;
    if status != 200 {
        bail!(
            "`GET {json_path}` answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let listed: Vec<Value> = serde_json::from_slice(&body)
        .with_context(|| format!("`GET {json_path}` did not answer a JSON list"))?;
    if listed.len() != args.stages {
        bail!(
            "`GET {json_path}` listed {} Stages, not the {} seeded",
            listed.len(),
            args.stages
        );
    }
    let (page_status, page_body) = get(&page_http, &dray.url(), &page_path).await?;
    let page_ok = page_status == 200;
    if !page_ok {
        eprintln!(
            "bench_ui: `GET {page_path}` answered {page_status}; measuring the JSON route only"
        );
    }
    let text = String::from_utf8_lossy(&page_body);
    let stages_named = (0..args.stages.min(3))
        .map(|i| stage_name(args, i))
        .filter(|name| text.contains(name.as_str()))
        .count();
    if page_ok && stages_named == 0 {
        bail!(
            "`GET {page_path}` answered 200 but names none of the first seeded Stages \
             (a login form or an empty page?); its first 400 bytes: {}",
            text.chars().take(400).collect::<String>()
        );
    }

    let board_path = args.board_path.replace("{project}", PROJECT);
    let (board_status, board_body) = get(&page_http, &dray.url(), &board_path).await?;
    if board_status != 200 {
        eprintln!("bench_ui: `GET {board_path}` answered {board_status}; not measuring it");
    }
    let mut measured = Measured {
        auth,
        board_status,
        board: Durations::default(),
        board_bytes: board_body.len(),
        page_status,
        page: Durations::default(),
        list: Durations::default(),
        page_bytes: page_body.len(),
        json_bytes: body.len(),
        stages_named,
        restart,
    };
    for round in 0..args.warmup + args.requests {
        let counted = round >= args.warmup;
        if page_ok {
            let (took, status, bytes) = timed(&page_http, &dray.url(), &page_path).await?;
            if status != 200 {
                bail!("`GET {page_path}` answered {status} in round {round}");
            }
            measured.page_bytes = bytes;
            if counted {
                measured.page.push(took);
            }
        }
        if board_status == 200 {
            let (took, status, bytes) = timed(&page_http, &dray.url(), &board_path).await?;
            if status != 200 {
                bail!("`GET {board_path}` answered {status} in round {round}");
            }
            measured.board_bytes = bytes;
            if counted {
                measured.board.push(took);
            }
        }
        let (took, status, bytes) = timed(&json_http, &dray.url(), &json_path).await?;
        if status != 200 {
            bail!("`GET {json_path}` answered {status} in round {round}");
        }
        measured.json_bytes = bytes;
        if counted {
            measured.list.push(took);
        }
    }
    Ok(measured)
}

fn report(args: &Args, results: &[Measured], seeding: Duration, db_bytes: u64) -> Result<String> {
    let json_path = format!("/api/v1/projects/{PROJECT}/stages");
    let page_path = args.page_path.replace("{project}", PROJECT);
    let board_path = args.board_path.replace("{project}", PROJECT);
    let build = if Dray::binary()
        .components()
        .any(|c| c.as_os_str() == "release")
    {
        "the release"
    } else {
        "a **debug** (not comparable)"
    };
    let restarts: Vec<String> = results.iter().map(|r| fmt_duration(r.restart)).collect();
    let mut md = String::new();
    writeln!(md, "### UI at scale (issue 8)\n")?;
    writeln!(
        md,
        "One project with {} Stages over {} Warehouses (per Warehouse a DAG: chains of {CHAIN} \
         Stages, each chain feeding {FAN_OUT} more, every {FAN_IN_EVERY}th chain also fed by its \
         neighbour; each Stage with `requestedFreight` and a four-step `promotionTemplate`) \
         and {} Freight (`currentlyIn` for each Stage's current Freight, `verifiedIn` for the \
         last {HISTORY} Freight each Stage held), written straight into the SQLite store \
         ({:.1} MiB database; seeding took {}, `dray serve` restarted on it in {}). Served by \
         {build} `dray serve`, once with API tokens (the page with the session cookie of a \
         `POST /login`, the JSON with the bearer token) and once with `--auth none`. The \
         benchmark sends the two requests alternately, each on its own keep-alive connection \
         from the same machine, and times each from sending to the last byte of the body: \
         {} rounds after {} warm-up rounds.\n",
        args.stages,
        args.warehouses,
        args.freight,
        db_bytes as f64 / (1024.0 * 1024.0),
        fmt_duration(seeding),
        restarts.join(" / "),
        args.requests,
        args.warmup,
    )?;
    writeln!(md, "| Request | Auth | Median | p95 | Min–max | Body |")?;
    writeln!(md, "|---|---|---:|---:|---:|---:|")?;
    for r in results {
        let (page_auth, json_auth) = match r.auth {
            Auth::Token => ("session cookie", "bearer token"),
            Auth::None => ("`--auth none`", "`--auth none`"),
        };
        if r.page_status == 200 {
            writeln!(
                md,
                "| `GET {page_path}` (UI page) | {page_auth} | {} | {} | {} | {} |",
                fmt_duration(r.page.median()),
                fmt_duration(r.page.percentile(95)),
                r.page.range(),
                fmt_bytes(r.page_bytes)
            )?;
        } else {
            writeln!(
                md,
                "| `GET {page_path}` (UI page) | {page_auth} | not measured: HTTP {} | – | – | – |",
                r.page_status
            )?;
        }
        if r.board_status == 200 {
            writeln!(
                md,
                "| `GET {board_path}` (release board) | {page_auth} | {} | {} | {} | {} |",
                fmt_duration(r.board.median()),
                fmt_duration(r.board.percentile(95)),
                r.board.range(),
                fmt_bytes(r.board_bytes)
            )?;
        } else {
            writeln!(
                md,
                "| `GET {board_path}` (release board) | {page_auth} | not measured: HTTP {} | – | – | – |",
                r.board_status
            )?;
        }
        writeln!(
            md,
            "| `GET {json_path}` (JSON, baseline) | {json_auth} | {} | {} | {} | {} |",
            fmt_duration(r.list.median()),
            fmt_duration(r.list.percentile(95)),
            r.list.range(),
            fmt_bytes(r.json_bytes)
        )?;
    }
    writeln!(md)?;
    writeln!(md, "| Ratio or aim | Auth | Value | Aim | Met |")?;
    writeln!(md, "|---|---|---:|---|---|")?;
    let met = |d: Duration| {
        if d < Duration::from_millis(200) {
            "yes"
        } else {
            "**no**"
        }
    };
    for r in results {
        let auth = match r.auth {
            Auth::Token => "tokens",
            Auth::None => "`--auth none`",
        };
        if r.page_status != 200 {
            writeln!(
                md,
                "| page median | {auth} | not measured (HTTP {}) | < 200 ms | – |",
                r.page_status
            )?;
            continue;
        }
        let page = r.page.median();
        let ratio = page.as_secs_f64() / r.list.median().as_secs_f64().max(f64::MIN_POSITIVE);
        writeln!(
            md,
            "| page ÷ JSON (medians) | {auth} | {ratio:.1}× | – | – |"
        )?;
        writeln!(
            md,
            "| page median | {auth} | {} | < 200 ms | {} |",
            fmt_duration(page),
            met(page)
        )?;
        let p95 = r.page.percentile(95);
        writeln!(
            md,
            "| page p95 | {auth} | {} | < 200 ms | {} |",
            fmt_duration(p95),
            met(p95)
        )?;
        writeln!(
            md,
            "| page body | {auth} | {} | < 300 KB | {} |",
            fmt_bytes(r.page_bytes),
            if r.page_bytes < 300 * 1024 {
                "yes"
            } else {
                "**no**"
            }
        )?;
    }
    if let Some(r) = results.iter().find(|r| r.page_status == 200) {
        writeln!(
            md,
            "\nThe page's HTML named {} of the first 3 seeded Stages (a check that it rendered \
             the seeded project, not an empty shell or a login form).",
            r.stages_named
        )?;
    }
    Ok(md)
}

async fn get(http: &reqwest::Client, base: &str, path: &str) -> Result<(u16, Vec<u8>)> {
    let response = http
        .get(format!("{base}{path}"))
        .send()
        .await
        .with_context(|| format!("`GET {path}` failed"))?;
    let status = response.status().as_u16();
    let body = response
        .bytes()
        .await
        .with_context(|| format!("reading the body of `GET {path}` failed"))?;
    Ok((status, body.to_vec()))
}

/// One timed request: from sending to the last byte of the body.
async fn timed(http: &reqwest::Client, base: &str, path: &str) -> Result<(Duration, u16, usize)> {
    let started = Instant::now();
    let (status, body) = get(http, base, path).await?;
    Ok((started.elapsed(), status, body.len()))
}

// --- the seed ---------------------------------------------------------------------------

/// Everything to write: the Project, Warehouses and Stages (with status), then Freight.
#[derive(Clone)]
struct Seed {
    resources: Vec<Value>,
    freight: Vec<Value>,
}

/// The Stages of one Warehouse, as indices: `(upstreams, depth)` per Stage; Stage 0 takes
/// Freight directly from the Warehouse.
fn dag(count: usize) -> Vec<(Vec<usize>, usize)> {
    let mut stages: Vec<(Vec<usize>, usize)> = Vec::with_capacity(count);
    for i in 0..count {
        let upstreams = if i == 0 {
            Vec::new()
        } else {
            let chain = (i - 1) / CHAIN;
            let position = (i - 1) % CHAIN;
            if position > 0 {
                vec![i - 1]
            } else if chain == 0 {
                vec![0]
            } else {
                // The last Stage of the parent chain (chains 1..=3 hang off chain 0, …).
                let parent_chain = (chain - 1) / FAN_OUT;
                let mut ups = vec![(parent_chain * CHAIN + CHAIN).min(i - 1)];
                if chain % FAN_IN_EVERY == 0 {
                    let neighbour = (chain - 1) * CHAIN + CHAIN;
                    if neighbour < i && !ups.contains(&neighbour) {
                        ups.push(neighbour);
                    }
                }
                ups
            }
        };
        let depth = upstreams
            .iter()
            .map(|u| stages[*u].1 + 1)
            .max()
            .unwrap_or(0);
        stages.push((upstreams, depth));
    }
    stages
}

/// How many of `total` go to bucket `index` of `buckets` (the first ones get the rest).
fn share(total: usize, buckets: usize, index: usize) -> usize {
    total / buckets + usize::from(index < total % buckets)
}

fn stage_name(args: &Args, global: usize) -> String {
    // Stages are numbered per Warehouse; `global` counts across them in order.
    let mut left = global;
    for (w, warehouse) in WAREHOUSES.iter().enumerate().take(args.warehouses) {
        let n = share(args.stages, args.warehouses, w);
        if left < n {
            return format!("{warehouse}-{left:03}");
        }
        left -= n;
    }
    String::new()
}

fn hex(data: &str) -> String {
    Sha256::digest(data.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn plan(args: &Args) -> Result<Seed> {
    let base = jiff::Timestamp::now();
    let at = |minutes_ago: usize| -> Result<String> {
        Ok(base
            .checked_sub(jiff::SignedDuration::from_mins(minutes_ago as i64))?
            .round(jiff::Unit::Second)?
            .to_string())
    };

    let mut specs = vec![json!({
        "apiVersion": API_VERSION,
        "kind": "Project",
        "metadata": {"name": PROJECT},
        "spec": {"description": "UI-at-scale benchmark: many Stages, much Freight"},
    })];
    let mut statuses: BTreeMap<String, Value> = BTreeMap::new();
    let mut freight = Vec::new();
    let mut aliases = BTreeSet::new();

    for (w, warehouse) in WAREHOUSES.iter().enumerate().take(args.warehouses) {
        let repo = format!("http://127.0.0.1:9/{warehouse}.git");
        let image_repo = format!("127.0.0.1:9/{PROJECT}/{warehouse}");
        specs.push(json!({
            "apiVersion": API_VERSION,
            "kind": "Warehouse",
            "metadata": {"name": warehouse, "namespace": PROJECT},
            "spec": {
                "interval": "24h",
                "subscriptions": [
                    {"image": {"repoURL": image_repo, "imageSelectionStrategy": "SemVer",
                               "constraint": "^1.0.0", "insecure": true}},
                    {"git": {"repoURL": repo, "branch": "main",
                             "includePaths": ["base/", "overlays/"]}},
                ],
            },
        }));

        // Freight, index 0 the newest; written oldest first so creation order matches.
        let count = share(args.freight, args.warehouses, w);
        let mut ids = Vec::with_capacity(count);
        let mut objects = Vec::with_capacity(count);
        for k in 0..count {
            let n = count - 1 - k; // 0 for the oldest
            let images = vec![FreightImage {
                repo_url: image_repo.clone(),
                tag: format!("1.{}.{}", n / 100, n % 100),
                digest: format!("sha256:{}", hex(&format!("image {warehouse} {n}"))),
                ..Default::default()
            }];
            let commits = vec![FreightCommit {
                repo_url: repo.clone(),
                id: hex(&format!("commit {warehouse} {n}"))[..40].to_owned(),
                branch: Some("main".into()),
                tag: None,
                message: format!("Release {warehouse} 1.{}.{}", n / 100, n % 100),
                author: "Release Bot <release@example.com>".into(),
            }];
            let id = freight_id(&images, &commits);
            let alias = alias_for(&id, &aliases);
            aliases.insert(alias.clone());
            let mut object =
                freight_object(PROJECT, warehouse, &alias, &images, &commits, &[], &[]);
            object["status"] = json!({"currentlyIn": {}, "verifiedIn": {}});
            ids.push((id, alias));
            objects.push(object);
        }

        let stages = dag(share(args.stages, args.warehouses, w));
        for (i, (upstreams, depth)) in stages.iter().enumerate() {
            let name = format!("{warehouse}-{i:03}");
            let sources = if upstreams.is_empty() {
                json!({"direct": true})
            } else {
                let names: Vec<String> = upstreams
                    .iter()
                    .map(|u| format!("{warehouse}-{u:03}"))
                    .collect();
                if i % 10 == 3 {
                    json!({"stages": names, "requiredSoakTime": "30m"})
                } else {
                    json!({"stages": names})
                }
            };
            specs.push(json!({
                "apiVersion": API_VERSION,
                "kind": "Stage",
                "metadata": {"name": name, "namespace": PROJECT},
                "spec": {
                    "requestedFreight": [{
                        "origin": {"kind": "Warehouse", "name": warehouse},
                        "sources": sources,
                    }],
                    "vars": [
                        {"name": "repoURL", "value": repo},
                        {"name": "imageRepo", "value": image_repo},
                    ],
                    "promotionTemplate": {"spec": {"steps": [
                        {"uses": "git-clone", "config": {
                            "repoURL": "${{ vars.repoURL }}",
                            "checkout": [
                                {"commit": "${{ commitFrom(vars.repoURL).id }}", "path": "./src"},
                                {"branch": "stage/${{ ctx.stage }}", "create": true, "path": "./out"},
                            ],
                        }},
                        {"uses": "kustomize-set-image", "config": {
                            "path": "./src/overlays/dev",
                            "images": [{"image": "app", "newName": "${{ vars.imageRepo }}"}],
                        }},
                        {"uses": "git-commit", "as": "commit", "config": {
                            "path": "./out",
                            "message": "Promote ${{ ctx.targetFreight.alias }} to ${{ ctx.stage }}",
                        }},
                        {"uses": "git-push", "config": {
                            "path": "./out", "targetBranch": "stage/${{ ctx.stage }}",
                        }},
                    ]}},
                },
            }));

            // Deeper Stages hold older Freight; one Stage in 50 never got any.
            if i % 50 == 49 {
                continue;
            }
            let current = (depth * 3 + i % 3).min(count - 1);
            let object = &mut objects[count - 1 - current];
            let (id, alias) = &ids[count - 1 - current];
            let since = at(current * 10 + 5)?;
            object["status"]["currentlyIn"][&name] = json!({"since": since});
            statuses.insert(
                name.clone(),
                json!({"currentFreight": {"name": id, "alias": alias, "since": since}}),
            );
            for held in current..(current + HISTORY).min(count) {
                let verified = at(held * 10)?;
                objects[count - 1 - held]["status"]["verifiedIn"][&name] =
                    json!({"verifiedAt": verified, "longestSoakSeconds": 3_600});
            }
        }
        freight.extend(objects);
    }

    // Validate as the API would (schemas, references, cycles), then add the status.
    let content = specs
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n---\n");
    let file = SourceFile {
        path: "bench_ui seed".into(),
        content,
    };
    let manifests = load(&[file], None, &BTreeMap::new())
        .map_err(|errors| anyhow::anyhow!("the seeded resources do not validate:\n{errors}"))?;
    let mut resources = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        let mut object = manifest.object;
        if manifest.key.kind == Kind::Stage {
            if let Some(status) = statuses.get(&manifest.key.name) {
                object["status"] = status.clone();
            }
            serde_json::from_value::<Stage>(object.clone())
                .with_context(|| format!("seeded Stage `{}` is not a Stage", manifest.key.name))?;
        }
        resources.push(object);
    }
    for object in &freight {
        serde_json::from_value::<Freight>(object.clone()).with_context(|| {
            format!(
                "seeded Freight `{}` is not a Freight",
                object["metadata"]["name"]
            )
        })?;
    }
    Ok(Seed { resources, freight })
}

async fn write_seed(data_dir: &std::path::Path, seed: Seed) -> Result<()> {
    let store = SqliteStore::open(data_dir)
        .with_context(|| format!("Failed to open the store in `{}`", data_dir.display()))?;
    let mut writes: Vec<Write> = seed.resources.into_iter().map(Write::Create).collect();
    writes.extend(seed.freight.into_iter().map(Write::Create));
    let total = writes.len();
    let mut rest = writes.into_iter().peekable();
    while rest.peek().is_some() {
        let batch: Vec<Write> = rest.by_ref().take(BATCH).collect();
        store
            .commit(batch)
            .await
            .context("Failed to write the seed into the store")?;
    }
    eprintln!("bench_ui: wrote {total} resources");
    Ok(())
}

// --- numbers ----------------------------------------------------------------------------

fn fmt_bytes(n: usize) -> String {
    if n >= 1024 * 1024 {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", n as f64 / 1024.0)
    }
}
