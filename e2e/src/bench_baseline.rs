//! The baselines the benchmarks run beside Dray: the scripted promotion
//! (`e2e/bench/baseline-promote.sh`: clone, `sed`, `kubectl kustomize`, commit, push) and a
//! checked way to run such commands. Benchmark tooling only, never shipped.

use std::process::{Command, Output};

use anyhow::{Context, Result, bail};

use crate::{TEST_AUTHOR, TestWorld, workspace_root};

/// Runs the scripted promotion once: `image@digest` into `script/dev` of `url`.
pub fn script_promote(world: &TestWorld, url: &str, image: &str, digest: &str) -> Result<()> {
    let script = workspace_root().join("e2e/bench/baseline-promote.sh");
    let (name, email) = TEST_AUTHOR;
    checked(
        Command::new("bash")
            .arg(&script)
            .args([url, image, digest, "script/dev"])
            .env("HOME", world.home())
            .env("TMPDIR", world.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", name)
            .env("GIT_AUTHOR_EMAIL", email)
            .env("GIT_COMMITTER_NAME", name)
            .env("GIT_COMMITTER_EMAIL", email)
            .current_dir(world.path()),
    )?;
    Ok(())
}

/// Runs a command; its output if it succeeded, else an error with its stderr and stdout.
pub fn checked(cmd: &mut Command) -> Result<Output> {
    let output = cmd
        .output()
        .with_context(|| format!("Failed to run {cmd:?}"))?;
    if !output.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
            String::from_utf8_lossy(&output.stdout).trim()
        );
    }
    Ok(output)
}
