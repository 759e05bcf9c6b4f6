//! `dray crds [--out DIR]`: the CustomResourceDefinitions, generated from the Rust types.

use std::path::PathBuf;

use crate::api::{Kind, crd};
use crate::cli::CliError;

/// Arguments of `dray crds`.
#[derive(clap::Args, Debug)]
pub struct CrdsArgs {
    /// Write one file per kind into this directory instead of printing them.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn crd_yaml(kind: Kind) -> Result<String, CliError> {
    crd::yaml(kind).map_err(|e| CliError::Local(format!("cannot render the {kind} CRD: {e}")))
}

/// Runs `dray crds`.
pub fn run(args: CrdsArgs) -> Result<(), CliError> {
    match args.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| CliError::Local(format!("cannot create `{}`: {e}", dir.display())))?;
            for kind in Kind::ALL {
                let path = dir.join(crd::file_name(kind));
                std::fs::write(&path, crd_yaml(kind)?).map_err(|e| {
                    CliError::Local(format!("cannot write `{}`: {e}", path.display()))
                })?;
                println!("wrote {}", path.display());
            }
        }
        None => {
            for (i, kind) in Kind::ALL.into_iter().enumerate() {
                if i > 0 {
                    println!("---");
                }
                print!("{}", crd_yaml(kind)?);
            }
        }
    }
    Ok(())
}
