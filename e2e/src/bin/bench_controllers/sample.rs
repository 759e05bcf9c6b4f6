//! One sample of the controller benchmark: push a new image tag (untimed), `POST` the
//! Warehouse's refresh (what `dray refresh warehouse app` sends), and time until the
//! project's `stage/dev` on the git server points at a commit whose `Dray-Image` trailer
//! names that tag and digest. Then (untimed) wait until the store is quiet, check that the
//! commit's Promotion succeeded, and return the time with the store counters of the whole
//! sample (refresh to quiet: the promotion and everything it set off).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::bench_baseline::checked;
use dray_e2e::{Dray, Registry, TestWorld, git, oci};
use serde_json::Value;

use crate::probe::{self, Counts};
use crate::projects::WAREHOUSE;

/// The stage branch the quickstart task pushes `dev`'s render to.
const STAGE_BRANCH: &str = "stage/dev";

/// How often the stage branch is read while a sample runs.
const POLL: Duration = Duration::from_millis(10);

/// How long the store must take no write before a sample counts as over.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// How long a sample's aftermath may take to go quiet.
const QUIET_TIMEOUT: Duration = Duration::from_secs(180);

/// One project as the samples see it.
pub(crate) struct Target {
    /// The project name.
    pub(crate) project: String,
    /// `<project>/app` in the registry.
    pub(crate) image_repo: String,
    /// Its config repository's bare directory on the git server (where `stage/dev` is read).
    pub(crate) bare: PathBuf,
}

/// What a sample shares with the others.
pub(crate) struct Env<'a> {
    /// The test world (for `git`).
    pub(crate) world: &'a TestWorld,
    /// The registry images are pushed to.
    pub(crate) registry: &'a Registry,
    /// The server under test.
    pub(crate) dray: &'a Dray,
    /// The benchmark's HTTP client.
    pub(crate) http: &'a reqwest::Client,
}

/// What one sample measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// Refresh sent → `stage/dev` holds the tag's commit.
    pub(crate) elapsed: Duration,
    /// Store counters from the refresh until the store went quiet again.
    pub(crate) store: Counts,
}

/// Runs one sample of `target` with a new `tag`; the branch must move within `timeout`.
pub(crate) async fn run(
    env: &Env<'_>,
    target: &Target,
    tag: &str,
    timeout: Duration,
) -> Result<Sample> {
    let digest = oci::push_image(env.registry, &target.image_repo, tag)
        .await
        .with_context(|| format!("Failed to push `{}:{tag}`", target.image_repo))?;
    let before = branch_head(env.world, &target.bare)?;
    let refresh = format!(
        "{}/api/v1/projects/{}/warehouses/{WAREHOUSE}/refresh",
        env.dray.url(),
        target.project
    );
    let counts_before = probe::counts(env.http, &env.dray.url()).await?;

    // --- timed: refresh → stage/dev holds the commit for `tag` ---------------------------
    let started = Instant::now();
    let response = env
        .http
        .post(&refresh)
        .bearer_auth(env.dray.token())
        .send()
        .await
        .with_context(|| format!("POST {refresh}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        bail!("POST {refresh} answered {status}: {text}");
    }
    let deadline = started + timeout;
    let mut seen = before;
    let (head, elapsed) = loop {
        let head = branch_head(env.world, &target.bare)?;
        if !head.is_empty() && head != seen {
            let elapsed = started.elapsed();
            if names_image(env.world, &target.bare, &head, tag, &digest)? {
                break (head, elapsed);
            }
            // Another render moved the branch: keep waiting for this tag's.
            seen = head;
        }
        if Instant::now() > deadline {
            bail!(
                "`{STAGE_BRANCH}` of project `{}` did not get a commit with the trailer \
                 `Dray-Image: …/{}:{tag}@{digest}` within {timeout:?} of the refresh (it \
                 points at `{}`); Dray's log ends with:\n{}",
                target.project,
                target.image_repo,
                if seen.is_empty() { "nothing" } else { &seen },
                env.dray.log_tail(30)
            );
        }
        tokio::time::sleep(POLL).await;
    };

    // --- untimed: the aftermath, then check the Promotion --------------------------------
    probe::wait_quiet(
        env.http,
        &env.dray.url(),
        QUIET,
        QUIET_TIMEOUT,
        &format!("after `{}`'s promotion of `{tag}`", target.project),
    )
    .await?;
    let store = probe::counts(env.http, &env.dray.url())
        .await?
        .since(counts_before);
    let promotion = trailer(env.world, &target.bare, &head, "Dray-Promotion")?
        .with_context(|| format!("commit {head} on `{STAGE_BRANCH}` has no `Dray-Promotion`"))?;
    let url = format!(
        "{}/api/v1/projects/{}/promotions/{promotion}",
        env.dray.url(),
        target.project
    );
    let promotion: Value = env
        .http
        .get(&url)
        .bearer_auth(env.dray.token())
        .send()
        .await
        .with_context(|| format!("GET {url}"))?
        .json()
        .await
        .with_context(|| format!("GET {url}: the answer is not JSON"))?;
    let phase = promotion.pointer("/status/phase").and_then(Value::as_str);
    if phase != Some("Succeeded") {
        bail!(
            "the Promotion that pushed `{tag}` to `{STAGE_BRANCH}` of `{}` is {phase:?}, not \
             Succeeded, {QUIET:?} after the store went quiet: {}",
            target.project,
            promotion["status"]
        );
    }
    Ok(Sample { elapsed, store })
}

/// The commit `stage/dev` points at in the bare repository, or "" when it does not exist.
/// Reads the loose ref (what `git receive-pack` renames into place when a push lands),
/// falling back to `git rev-parse` for a packed ref.
fn branch_head(world: &TestWorld, bare: &Path) -> Result<String> {
    let loose = bare.join("refs/heads").join(STAGE_BRANCH);
    if let Ok(text) = std::fs::read_to_string(&loose)
        && !text.trim().is_empty()
    {
        return Ok(text.trim().to_owned());
    }
    let output = git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{STAGE_BRANCH}^{{commit}}"))
        .output()
        .context("Failed to run `git rev-parse` in the config repository")?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The value of trailer `key` of `commit`, if it has one.
fn trailer(world: &TestWorld, bare: &Path, commit: &str, key: &str) -> Result<Option<String>> {
    let output = checked(git(world).arg("--git-dir").arg(bare).args([
        "log",
        "-1",
        "--format=%(trailers:only,unfold)",
        commit,
    ]))?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
        .map(|(_, v)| v.trim().to_owned()))
}

/// Whether `commit` carries `Dray-Image: …/<repo>:{tag}@{digest}`.
fn names_image(
    world: &TestWorld,
    bare: &Path,
    commit: &str,
    tag: &str,
    digest: &str,
) -> Result<bool> {
    let wanted = format!(":{tag}@{digest}");
    Ok(trailer(world, bare, commit, "Dray-Image")?.is_some_and(|v| v.ends_with(&wanted)))
}
