//! A stage branch as the benchmarks read it, straight from the git server's bare repository:
//! where it points (the loose ref first, what `git receive-pack` renames into place when a
//! push lands) and the trailers of a commit, to tell which render landed.

use std::path::Path;

use anyhow::{Context, Result};

use crate::bench_baseline::checked;
use crate::{TestWorld, git};

/// The commit `branch` points at in the bare repository, or "" when it does not exist. Reads
/// the loose ref (what `git receive-pack` renames into place when a push lands), falling back
/// to `git rev-parse` for a packed ref.
pub fn branch_head(world: &TestWorld, bare: &Path, branch: &str) -> Result<String> {
    let loose = bare.join("refs/heads").join(branch);
    match std::fs::read_to_string(&loose) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_owned()),
        _ => {}
    }
    let output = git(world)
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}^{{commit}}"))
        .output()
        .context("Failed to run `git rev-parse` in the config repository")?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The `Key: value` trailers of `commit` in the bare repository.
pub fn trailers(world: &TestWorld, bare: &Path, commit: &str) -> Result<Vec<(String, String)>> {
    let output = checked(git(world).arg("--git-dir").arg(bare).args([
        "log",
        "-1",
        "--format=%(trailers:only,unfold)",
        commit,
    ]))?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

/// Whether `commit` carries `Dray-Image: …/{repo}:{tag}@{digest}`.
pub fn names_image(
    world: &TestWorld,
    bare: &Path,
    commit: &str,
    repo: &str,
    tag: &str,
    digest: &str,
) -> Result<bool> {
    let wanted = format!("/{repo}:{tag}@{digest}");
    Ok(trailers(world, bare, commit)?
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("Dray-Image") && v.ends_with(&wanted)))
}
