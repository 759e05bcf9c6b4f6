//! `dray version [--client]`: the CLI's version, and the server's when it answers.

use serde_json::Value;

use crate::cli::{CliError, ConnectArgs, Context};

/// Arguments of `dray version`.
#[derive(clap::Args, Debug)]
pub struct VersionArgs {
    /// Print only the CLI's version; do not ask the server.
    #[arg(long)]
    pub client: bool,
    /// How to reach the server (without `--client`).
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// Runs `dray version`.
pub async fn run(args: VersionArgs) -> Result<(), CliError> {
    println!("client: dray {}", crate::VERSION);
    if args.client {
        return Ok(());
    }
    let ctx = Context::connect(&args.connect)?;
    match ctx.client.get::<Value>("/api/v1/version").await {
        Ok(server) => {
            let version = server
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            println!("server: dray {version} at {}", ctx.client.server());
            Ok(())
        }
        Err(CliError::Unreachable { server, cause }) => {
            println!("server: not reachable at {server} ({cause})");
            Ok(())
        }
        Err(CliError::Api { status: 401, body }) => {
            println!(
                "server: at {} ({}; pass --token, set DRAY_TOKEN or run `dray login` to see its version)",
                ctx.client.server(),
                body.error.message
            );
            Ok(())
        }
        Err(other) => Err(other),
    }
}
