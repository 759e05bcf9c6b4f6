//! `dray version`: the CLI's version, and the server's when it answers.

use serde_json::Value;

use crate::cli::{CliError, Context};

/// Runs `dray version`.
pub async fn run(ctx: &Context) -> Result<(), CliError> {
    println!("client: dray {}", crate::VERSION);
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
                "server: at {} ({}; pass --token or set DRAY_TOKEN to see its version)",
                ctx.client.server(),
                body.error.message
            );
            Ok(())
        }
        Err(other) => Err(other),
    }
}
