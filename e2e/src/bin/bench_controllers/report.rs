//! The Markdown of the controller benchmark: what was measured, the tables, the ratios
//! against issue 13's aims. Formats only; it measures nothing.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;
use dray_e2e::bench_numbers::{Durations, fmt_duration, fmt_ratio, median_table, met, ratio_of};

use crate::Args;
use crate::probe::{Counts, Idle};
use crate::sample::Sample;

/// The section title in `docs/benchmarks.md`.
pub(crate) const TITLE: &str = "Controllers (issue 13)";

/// Issue 13's aims.
const AIM_BIG: f64 = 1.5;
const AIM_BESIDE: f64 = 1.2;
const AIM_IDLE_PERCENT: f64 = 1.0;

/// What the phases measured.
pub(crate) struct Results {
    /// The small project alone.
    pub(crate) alone: Vec<Sample>,
    /// The big project's `dev`.
    pub(crate) big: Vec<Sample>,
    /// The small project beside the big one.
    pub(crate) beside: Vec<Sample>,
    /// Idle with the small project only.
    pub(crate) idle_alone: Idle,
    /// Idle with both.
    pub(crate) idle_both: Idle,
    /// The small project's first (cold) sample.
    pub(crate) cold_small: Duration,
    /// The big project's first (cold) sample.
    pub(crate) cold_big: Duration,
    /// `dray apply` of the big project (the CLI, end to end).
    pub(crate) applied: Duration,
    /// From the end of that apply until the store went quiet.
    pub(crate) settled: Duration,
    /// The store counters from that apply until quiet.
    pub(crate) apply_store: Counts,
}

/// The section.
pub(crate) fn markdown(args: &Args, results: &Results) -> Result<String> {
    let times = |samples: &[Sample]| Durations(samples.iter().map(|s| s.elapsed).collect());
    let alone = times(&results.alone);
    let big = times(&results.big);
    let beside = times(&results.beside);
    let stages = args.stages;
    let runs = args.runs;
    let idle = args.idle_seconds;

    let mut md = String::new();
    writeln!(md, "### {TITLE}\n")?;
    writeln!(
        md,
        "One release `dray serve` (API tokens), a local `docker-registry`, `git http-backend` \
         with one copy of the quickstart's config repository per project. The small project: \
         one Warehouse (an image repository and the config repository, `interval: 1h` so only \
         the refresh starts a discovery), a Stage `dev` with the quickstart's \
         `render-to-stage-branch` task and `dev`'s auto-promotion, applied with `dray apply`. \
         The big project, applied beside it with `dray apply`: the same plus {stages} Stages \
         fed by `dev` (`sources.stages: [dev]`, the same task, never promoted). One sample: \
         push a new tag (untimed), `POST …/warehouses/app/refresh` (what `dray refresh \
         warehouse app` sends), stop the clock when the project's `stage/dev` on the git \
         server (read from disk every 10 ms) points at a commit whose `Dray-Image` trailer \
         names that tag and digest; then, untimed, wait until the store has taken no write \
         for 2 s and check the commit's Promotion succeeded. Two warm-up samples per project \
         (the first clones Dray's mirror); median of {runs} runs (min–max); beside the big \
         project, big and small samples alternate.\n"
    )?;
    let big_row = format!("Big project ({stages} Stages fed by `dev`): refresh → `stage/dev`");
    md.push_str(&median_table(&[
        ("Small project alone: refresh → `stage/dev`", &alone),
        (big_row.as_str(), &big),
        (
            "Small project beside the big one: refresh → `stage/dev`",
            &beside,
        ),
    ]));
    writeln!(
        md,
        "\nFor context (single runs, not compared): the first refresh → `stage/dev` took {} \
         (small) and {} (big), with a cold mirror; `dray apply` of the big project took {} \
         (CLI, one atomic commit of {} objects); the controllers' last write in reaction came \
         {} after it, and until the store had gone 2 s without a write it served {} reads \
         ({} objects) and wrote {} objects (the apply's included).\n",
        fmt_duration(results.cold_small),
        fmt_duration(results.cold_big),
        fmt_duration(results.applied),
        stages + 5,
        fmt_duration(results.settled),
        results.apply_store.reads,
        results.apply_store.objects_read,
        results.apply_store.writes,
    )?;

    let big_ratio = ratio_of(big.median(), alone.median());
    let beside_ratio = ratio_of(beside.median(), alone.median());
    let idle_both = results.idle_both.percent();
    writeln!(md, "| Ratio or aim | Value | Aim | Met |")?;
    writeln!(md, "|---|---:|---|---|")?;
    writeln!(
        md,
        "| big ÷ small alone (medians) | {} | ≤ {AIM_BIG}× | {} |",
        fmt_ratio(big_ratio),
        met(big_ratio <= AIM_BIG)
    )?;
    writeln!(
        md,
        "| small beside ÷ small alone (medians) | {} | ≤ {AIM_BESIDE}× | {} |",
        fmt_ratio(beside_ratio),
        met(beside_ratio <= AIM_BESIDE)
    )?;
    writeln!(
        md,
        "| idle CPU of `dray serve`, both projects loaded, over {idle} s | {} | < {AIM_IDLE_PERCENT} % of a core | {} |",
        percent(idle_both),
        met(idle_both < AIM_IDLE_PERCENT)
    )?;
    writeln!(
        md,
        "| idle CPU of `dray serve`, small project alone, over {idle} s | {} | – | – |\n",
        percent(results.idle_alone.percent())
    )?;

    writeln!(
        md,
        "Store reads per write (`GET /metrics`: `dray_store_reads_total`, \
         `dray_store_objects_read_total`, `dray_store_writes_total`). A sample counts from \
         just before its refresh until the store went quiet: the discovery, the Freight, the \
         Promotion, its steps' records, and whatever the controllers did in reaction. \
         Medians over the samples.\n"
    )?;
    writeln!(
        md,
        "| When | Reads | Objects read | Objects written | Reads per write | Objects read per write |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|")?;
    for (name, samples) in [
        ("one promotion, small project alone", &results.alone),
        (
            &*format!("one promotion, big project ({stages} Stages)"),
            &results.big,
        ),
        (
            "one promotion, small project beside the big one",
            &results.beside,
        ),
    ] {
        md.push_str(&counts_row(name, &median_counts(samples)));
    }
    for (name, window) in [
        (
            format!("idle {idle} s, small project alone"),
            &results.idle_alone,
        ),
        (format!("idle {idle} s, both projects"), &results.idle_both),
    ] {
        md.push_str(&counts_row(&name, &window.store));
    }
    writeln!(
        md,
        "\nIdle CPU is `utime + stime` of the `dray serve` process (all its threads) from \
         `/proc/<pid>/stat` at both ends of a window with no request but the two scrapes of \
         `/metrics`, after the store had gone 2 s without a write; children's CPU in the \
         windows (`cutime + cstime`: `git` and the like): {} (small alone), {} (both).",
        fmt_duration(results.idle_alone.children),
        fmt_duration(results.idle_both.children),
    )?;
    Ok(md)
}

/// `0.35 % of a core`.
fn percent(value: f64) -> String {
    format!("{value:.2} % of a core")
}

/// The per-field medians of the samples' store counters.
fn median_counts(samples: &[Sample]) -> Counts {
    let median = |field: fn(&Counts) -> u64| -> u64 {
        let mut values: Vec<u64> = samples.iter().map(|s| field(&s.store)).collect();
        values.sort_unstable();
        match values.len() {
            0 => 0,
            n if n % 2 == 1 => values[n / 2],
            n => (values[n / 2 - 1] + values[n / 2]) / 2,
        }
    };
    Counts {
        reads: median(|c| c.reads),
        objects_read: median(|c| c.objects_read),
        writes: median(|c| c.writes),
    }
}

/// One row of the store table.
fn counts_row(name: &str, counts: &Counts) -> String {
    let per_write = |n: u64| match counts.writes {
        0 => "– (no write)".to_owned(),
        w => format!("{:.1}", n as f64 / w as f64),
    };
    format!(
        "| {name} | {} | {} | {} | {} | {} |\n",
        counts.reads,
        counts.objects_read,
        counts.writes,
        per_write(counts.reads),
        per_write(counts.objects_read)
    )
}
