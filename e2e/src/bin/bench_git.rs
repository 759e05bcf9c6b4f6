//! Dray's git discovery at monorepo scale (issue 15), side by side with plain git.
//!
//! Not a test and not run by CI: `e2e/bench/run.sh --only git` runs it and copies its
//! Markdown into `docs/benchmarks.md`. A repository of `--commits` commits over `--files`
//! files is generated with `git fast-import`; `app/config.yaml` is touched only by the
//! first commit, so its newest commit is `--commits` commits deep. The repository is
//! reached through `file://` (git's `upload-pack`, with `uploadpack.allowFilter`).
//!
//! - Dray: a fresh `GitDiscoverer` (what `dray serve`'s Warehouse controller runs) on a
//!   subscription with `includePaths: [app/]`: ls-remote, the first (partial) fetch and
//!   the branch search (a `git log -- app/` walk: the first commit-graph with Bloom
//!   filters is written in the background after it, and timed apart). Then a no-change refresh, and a
//!   refresh after one more commit (incremental). The same first discovery with
//!   `regex:^app/` (the search that reads every commit).
//! - Baselines: `git clone --bare` + `git log -1 -- app/`, and the same with
//!   `--filter=blob:none`.
//!
//! Peak memory: `VmHWM` of this process after Dray's discoveries (the Rust side of
//! discovery; git's own processes are separate and not counted there).
//!
//! ```text
//! bench_git [--commits N] [--files N] [--out-dir DIR]
//! ```
//!
//! Writes `DIR/git.md`. Exits 1 when it failed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray::api::GitSubscription;
use dray::discovery::git::{GitDiscoverer, MirrorCache};
use dray_e2e::bench_numbers::{
    fmt_duration, fmt_ratio, peak_rss, positive, runtime, write_section,
};

/// Dray's git discovery against plain git on a deep repository.
#[derive(Debug, clap::Parser)]
#[command(name = "bench_git")]
struct Args {
    /// Commits in the generated repository.
    #[arg(long, default_value = "100000", value_parser = positive)]
    commits: usize,
    /// Files in it.
    #[arg(long, default_value = "2000", value_parser = positive)]
    files: usize,
    /// Where to write the Markdown.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    std::fs::create_dir_all(&args.out_dir)?;
    let runtime = runtime()?;
    let failed = write_section(
        &args.out_dir.join("git.md"),
        "bench: git",
        "Git at monorepo scale (issue 15)",
        runtime.block_on(bench(&args)),
    )?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| format!("running git {args:?}"))?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Generate the repository: the first commit writes every file (with `app/config.yaml`),
/// each later one edits one file under `d*/`.
fn generate(dir: &Path, commits: usize, files: usize) -> Result<()> {
    git(dir, &["init", "--quiet", "--bare", "-b", "main", "."])?;
    git(dir, &["config", "uploadpack.allowFilter", "true"])?;
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()?;
    let mut stdin = std::io::BufWriter::new(child.stdin.take().context("fast-import stdin")?);
    use std::io::Write as _;
    let file = |k: usize| format!("d{:03}/f{k:05}.yaml", k / 50);
    for n in 0..commits {
        let message = format!("commit {n}");
        writeln!(
            stdin,
            "commit refs/heads/main\ncommitter Bench <bench@example.com> {} +0000\ndata {}\n{message}",
            1_600_000_000 + n,
            message.len()
        )?;
        let mut edit = |path: &str, body: &str| -> std::io::Result<()> {
            writeln!(stdin, "M 100644 inline {path}\ndata {}\n{body}", body.len())
        };
        if n == 0 {
            edit("app/config.yaml", "replicas: 1\n")?;
            for k in 0..files {
                edit(&file(k), &format!("kind: ConfigMap\nname: f{k}\n"))?;
            }
        } else {
            edit(
                &file(n % files),
                &format!("kind: ConfigMap\nrevision: {n}\n"),
            )?;
        }
    }
    drop(stdin);
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    Ok(())
}

fn timed<T>(what: &str, run: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
    let start = Instant::now();
    let value = run().with_context(|| what.to_owned())?;
    Ok((value, start.elapsed()))
}

async fn bench(args: &Args) -> Result<String> {
    let tmp = tempfile::tempdir()?;
    let source = tmp.path().join("source.git");
    std::fs::create_dir_all(&source)?;
    let ((), generated) = timed("generating", || generate(&source, args.commits, args.files))?;
    let url = format!("file://{}", source.display());
    let expected = git(&source, &["log", "-1", "--format=%H", "main", "--", "app/"])?;
    let sub = |include: &str| GitSubscription {
        repo_url: url.clone(),
        include_paths: vec![include.to_owned()],
        discovery_limit: 1,
        strict_semvers: true,
        ..GitSubscription::default()
    };

    // Dray, narrowed (Bloom filters).
    let data = tmp.path().join("dray");
    let discoverer = GitDiscoverer::new(Arc::new(MirrorCache::new(&data)));
    let start = Instant::now();
    let first = discoverer.discover(&sub("app/"), None, None).await?;
    let dray_first = start.elapsed();
    if first.commits.first().map(|c| c.id.as_str()) != Some(expected.as_str()) {
        bail!("Dray found {:?}, git log {expected}", first.commits.first());
    }
    // The first commit-graph (Bloom filters) is written in the background; the refreshes
    // below are measured once it is there, and its time is reported on its own.
    let start = Instant::now();
    if !discoverer
        .mirrors()
        .graph_settled(&url, Duration::from_secs(600))
        .await
    {
        bail!("the mirror's first commit-graph was not written within 10 minutes");
    }
    let graph_after = start.elapsed();
    let start = Instant::now();
    let again = discoverer
        .discover(&sub("app/"), None, Some(&first.state))
        .await?;
    let dray_same = start.elapsed();
    if !again.unchanged || again.stats.fetched {
        bail!("the no-change refresh fetched: {:?}", again.stats);
    }
    let fetches_before = discoverer.mirrors().fetch_count();
    // One more commit on top, with the same tree (touching nothing): an incremental refresh.
    let tip = git(
        &source,
        &[
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.com",
            "commit-tree",
            "main^{tree}",
            "-p",
            "main",
            "-m",
            "one more",
        ],
    )?;
    git(&source, &["update-ref", "refs/heads/main", &tip])?;
    let start = Instant::now();
    let moved = discoverer
        .discover(&sub("app/"), None, Some(&again.state))
        .await?;
    let dray_moved = start.elapsed();
    if !moved.stats.incremental
        || moved.commits.first().map(|c| c.id.as_str()) != Some(expected.as_str())
    {
        bail!(
            "the moved refresh was not incremental or wrong: {:?}",
            moved.stats
        );
    }
    let fetches = discoverer.mirrors().fetch_count() - fetches_before;
    let mirror = discoverer.mirrors().mirror_path(&url);
    let partial = git(&mirror, &["config", "--get", "extensions.partialclone"]).is_ok();

    // Dray, a regex (every commit read).
    let data_regex = tmp.path().join("dray-regex");
    let regex = GitDiscoverer::new(Arc::new(MirrorCache::new(&data_regex)));
    let start = Instant::now();
    let full = regex.discover(&sub("regex:^app/"), None, None).await?;
    let dray_regex = start.elapsed();
    if full.commits.first().map(|c| c.id.as_str()) != Some(expected.as_str()) {
        bail!("Dray (regex) found {:?}", full.commits.first());
    }
    // Its mirror's graph is written in the background: let it finish before the baselines.
    if !regex
        .mirrors()
        .graph_settled(&url, Duration::from_secs(600))
        .await
    {
        bail!("the regex mirror's first commit-graph was not written within 10 minutes");
    }
    let hwm = peak_rss("self");

    // Baselines.
    let baseline = |name: &str, filter: bool| -> Result<Duration> {
        let dest = tmp.path().join(name);
        let start = Instant::now();
        let mut clone = vec!["clone", "--quiet", "--bare"];
        if filter {
            clone.push("--filter=blob:none");
        }
        clone.extend([url.as_str(), name]);
        git(tmp.path(), &clone)?;
        let found = git(&dest, &["log", "-1", "--format=%H", "main", "--", "app/"])?;
        let took = start.elapsed();
        if found != expected {
            bail!("baseline found {found}");
        }
        Ok(took)
    };
    let full_clone = baseline("baseline-full.git", false)?;
    let partial_clone = baseline("baseline-partial.git", true)?;

    let mut md = String::from("### Git at monorepo scale (issue 15)\n\n");
    md.push_str(&format!(
        "A repository of {} commits over {} files (`git fast-import`, {}), reached through \
         `file://` with `uploadpack.allowFilter`; `app/config.yaml` was last touched {} \
         commits before the head. Dray: a fresh `GitDiscoverer` (what the Warehouse \
         controller runs) with `includePaths: [app/]`, `discoveryLimit: 1`. One run each.\n\n",
        args.commits,
        args.files + 1,
        fmt_duration(generated),
        args.commits - 1
    ));
    md.push_str("| Measurement | Time | Ratio to `git clone --bare` + `git log -1 -- app/` |\n|---|---:|---:|\n");
    let ratio = |d: Duration| fmt_ratio(d.as_secs_f64() / full_clone.as_secs_f64());
    for (name, d) in [
        (
            format!(
                "Dray first discovery (ls-remote, {} fetch, `git log -- app/` search: {} commits read)",
                if partial { "partial" } else { "full" },
                first.stats.commits_scanned
            ),
            dray_first,
        ),
        (
            "Dray's first commit-graph with Bloom filters, written in the background after it (not part of the discovery)".to_owned(),
            graph_after,
        ),
        (
            "Dray no-change refresh (one ls-remote, no fetch, no search)".to_owned(),
            dray_same,
        ),
        (
            format!(
                "Dray refresh after one new commit ({fetches} fetch, incremental search: {} commits read)",
                moved.stats.commits_scanned
            ),
            dray_moved,
        ),
        (
            format!(
                "Dray first discovery with `regex:^app/` (every commit read: {})",
                full.stats.commits_scanned
            ),
            dray_regex,
        ),
        (
            "`git clone --bare` + `git log -1 -- app/`".to_owned(),
            full_clone,
        ),
        (
            "`git clone --bare --filter=blob:none` + `git log -1 -- app/`".to_owned(),
            partial_clone,
        ),
    ] {
        md.push_str(&format!(
            "| {name} | {} | {} |\n",
            fmt_duration(d),
            ratio(d)
        ));
    }
    md.push_str(&format!(
        "\nPeak resident memory of the benchmark process after Dray's discoveries (`VmHWM`; \
         the Rust side of discovery, git's processes not included): {hwm}.\n"
    ));
    Ok(md)
}
