//! `dray convert kargo -f PATH...`: print Kargo's documents (and Argo Rollouts' analysis
//! templates, and Kargo's Secrets) in Dray's own form, for a team that moves over for
//! good. The documents are read exactly as `dray apply` reads them, one by one and on this
//! machine (no server): what `dray apply` would refuse is refused here with the same
//! messages. Expressions stay expr-lang, marked by the `dray.dev/expression-language`
//! annotation; secret fields are printed only with `--show-secrets`.

use std::io::Read as _;
use std::path::PathBuf;

use serde_json::Value;

use crate::api::Kind;
use crate::cli::{CliError, output};
use crate::config;
use crate::secrets::SECRET_FIELDS;

/// Arguments of `dray convert`.
#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// What to convert from.
    #[command(subcommand)]
    pub from: ConvertFrom,
}

/// The formats `dray convert` reads.
#[derive(clap::Subcommand, Debug)]
pub enum ConvertFrom {
    /// Kargo's `kargo.akuity.io/v1alpha1` documents and Secrets, and Argo Rollouts'
    /// analysis templates.
    Kargo(KargoArgs),
}

/// Arguments of `dray convert kargo`.
#[derive(clap::Args, Debug)]
pub struct KargoArgs {
    /// YAML files or directories (read recursively), or `-` for standard input; may be
    /// repeated.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,
    /// Print the Credentials' passwords and tokens instead of `REDACTED`.
    #[arg(long)]
    pub show_secrets: bool,
}

/// What stands in for a secret value not shown.
const REDACTED: &str = "REDACTED";

/// Runs `dray convert`.
pub fn run(args: ConvertArgs) -> Result<(), CliError> {
    let ConvertFrom::Kargo(args) = args.from;
    let files = super::apply::read_all(&args.paths, || {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map(|_| text)
            .map_err(|e| e.to_string())
    })?;
    let manifests = config::adopt(&files).map_err(|e| CliError::Local(e.to_string()))?;
    let mut redacted = 0;
    let objects: Vec<Value> = manifests
        .into_iter()
        .map(|m| {
            let mut object = m.object;
            if m.key.kind == Kind::Credential && !args.show_secrets {
                redacted += redact(&mut object);
            }
            object
        })
        .collect();
    print!("{}", output::yaml(&objects)?);
    if redacted > 0 {
        eprintln!(
            "note: {redacted} secret {} printed as `{REDACTED}`; add `--show-secrets` to print them, or keep your Secrets and apply them as they are",
            if redacted == 1 {
                "value is"
            } else {
                "values are"
            }
        );
    }
    Ok(())
}

/// Replaces a Credential's secret fields with [`REDACTED`]; returns how many.
fn redact(object: &mut Value) -> usize {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return 0;
    };
    let mut count = 0;
    for field in SECRET_FIELDS {
        if let Some(value) = spec.get_mut(field) {
            *value = Value::from(REDACTED);
            count += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secret_fields_are_redacted_and_counted() {
        let mut credential = json!({"kind": "Credential", "spec": {"type": "git",
            "username": "bot", "password": "s3cr3t", "token": "t"}});
        assert_eq!(redact(&mut credential), 2);
        assert_eq!(credential["spec"]["password"], REDACTED);
        assert_eq!(credential["spec"]["token"], REDACTED);
        assert_eq!(credential["spec"]["username"], "bot");
    }
}
