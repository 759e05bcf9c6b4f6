//! What the controller benchmark reads off the running `dray serve` besides git: its store
//! counters (`GET /metrics`), its CPU time (`/proc/<pid>/stat`), and whether it has gone
//! quiet (no store write for a while). Reads only; it changes nothing on the server.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The store counters `GET /metrics` exports, at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// `dray_store_reads_total`: read calls.
    pub(crate) reads: u64,
    /// `dray_store_objects_read_total`: objects those calls returned.
    pub(crate) objects_read: u64,
    /// `dray_store_writes_total`: objects written.
    pub(crate) writes: u64,
}

impl Counts {
    /// What happened between `earlier` and `self`.
    pub(crate) fn since(self, earlier: Counts) -> Counts {
        Counts {
            reads: self.reads.saturating_sub(earlier.reads),
            objects_read: self.objects_read.saturating_sub(earlier.objects_read),
            writes: self.writes.saturating_sub(earlier.writes),
        }
    }
}

/// `GET /metrics` of the server at `url`, parsed.
pub(crate) async fn counts(http: &reqwest::Client, url: &str) -> Result<Counts> {
    let address = format!("{url}/metrics");
    let response = http
        .get(&address)
        .send()
        .await
        .with_context(|| format!("GET {address}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("GET {address} answered {status}: {text}");
    }
    let value = |name: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .with_context(|| format!("GET {address} has no `{name}`:\n{text}"))?
            .trim()
            .parse()
            .with_context(|| format!("GET {address}: `{name}` is not a whole number"))
    };
    Ok(Counts {
        reads: value("dray_store_reads_total")?,
        objects_read: value("dray_store_objects_read_total")?,
        writes: value("dray_store_writes_total")?,
    })
}

/// How often the counters are read while waiting for quiet.
const QUIET_POLL: Duration = Duration::from_millis(100);

/// Waits until the store has taken no write for `quiet` (at most `timeout`, then fails
/// naming what it waited for). Returns when the last write was seen (0 when there was none
/// after the call), to within the 100 ms between reads of the counters.
pub(crate) async fn wait_quiet(
    http: &reqwest::Client,
    url: &str,
    quiet: Duration,
    timeout: Duration,
    after: &str,
) -> Result<Duration> {
    let started = Instant::now();
    let mut last = counts(http, url).await?.writes;
    let mut unchanged_since = Instant::now();
    loop {
        tokio::time::sleep(QUIET_POLL).await;
        let writes = counts(http, url).await?.writes;
        if writes != last {
            last = writes;
            unchanged_since = Instant::now();
        } else if unchanged_since.elapsed() >= quiet {
            return Ok(unchanged_since.duration_since(started));
        }
        if started.elapsed() > timeout {
            bail!(
                "the store of `dray serve` did not go {quiet:?} without a write within \
                 {timeout:?} {after} (it has written {last} objects so far)"
            );
        }
    }
}

/// CPU time a process used, from `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuTime {
    /// `utime + stime`: the process's own threads.
    pub(crate) own: Duration,
    /// `cutime + cstime`: children it waited for (`git`, `kubectl`).
    pub(crate) children: Duration,
}

/// The CPU time of `pid` now.
pub(crate) fn cpu_time(pid: u32) -> Result<CpuTime> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("Failed to read `{}`", path.display()))?;
    // Fields after the command name (which is in parentheses and may hold spaces): the
    // state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    let rest = text
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("`{}` is not a stat line: {text}", path.display()))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("`{}` has no field {n}: {text}", path.display()))
    };
    let tick = clock_tick()?;
    let ticks = |a: u64, b: u64| Duration::from_secs_f64((a + b) as f64 / tick);
    Ok(CpuTime {
        own: ticks(field(14)?, field(15)?),
        children: ticks(field(16)?, field(17)?),
    })
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux).
fn clock_tick() -> Result<f64> {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("Failed to run `getconf CLK_TCK`")?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|t| *t > 0.0)
        .context("`getconf CLK_TCK` did not print a positive number")
}

/// What an idle window measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Idle {
    /// Wall time of the window.
    pub(crate) wall: Duration,
    /// CPU time of the server's own threads in it.
    pub(crate) own: Duration,
    /// CPU time of its children in it.
    pub(crate) children: Duration,
    /// The store's counters in it.
    pub(crate) store: Counts,
}

impl Idle {
    /// The server's own CPU as a percentage of one core.
    pub(crate) fn percent(&self) -> f64 {
        100.0 * self.own.as_secs_f64() / self.wall.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// Measures `pid` over `window` while nothing is asked of it: CPU time and store counters
/// at both ends (the two scrapes of `/metrics` are the only requests).
pub(crate) async fn idle(
    http: &reqwest::Client,
    url: &str,
    pid: u32,
    window: Duration,
) -> Result<Idle> {
    let counts_before = counts(http, url).await?;
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    // The measured window itself, not a wait for something to happen.
    tokio::time::sleep(window).await;
    let cpu_after = cpu_time(pid)?;
    let wall = started.elapsed();
    let counts_after = counts(http, url).await?;
    Ok(Idle {
        wall,
        own: cpu_after.own.saturating_sub(cpu_before.own),
        children: cpu_after.children.saturating_sub(cpu_before.children),
        store: counts_after.since(counts_before),
    })
}
