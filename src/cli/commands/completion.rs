//! `dray completion SHELL` (a completion script for bash, zsh, fish, elvish or PowerShell)
//! and `dray man --out DIR` (one man page per command), both generated from the CLI's own
//! clap definition, so they always match the binary.

use std::path::PathBuf;

use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::cli::{Cli, CliError};

/// Arguments of `dray completion`.
#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell, e.g. `bash` (`source <(dray completion bash)`), `zsh` or `fish`.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `dray man`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The directory to write the pages into (made if missing): `dray.1`, `dray-apply.1`, ...
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs `dray completion`.
pub fn completion(args: CompletionArgs) -> Result<(), CliError> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "dray", &mut std::io::stdout());
    Ok(())
}

/// Runs `dray man`.
pub fn man(args: ManArgs) -> Result<(), CliError> {
    let cannot = |e: std::io::Error| {
        CliError::Local(format!(
            "cannot write man pages into `{}`: {e}; give a writable directory with --out",
            args.out.display()
        ))
    };
    std::fs::create_dir_all(&args.out).map_err(cannot)?;
    clap_mangen::generate_to(Cli::command(), &args.out).map_err(cannot)?;
    println!("wrote man pages into {}", args.out.display());
    Ok(())
}
