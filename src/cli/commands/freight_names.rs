//! Showing Freight the one way the CLI shows it (`fresh-otter (3f2a9c1b7d0e)`, see
//! [`crate::cli::output::freight_label`]) when a command has only its id.

use serde_json::Value;

use crate::cli::Context;
use crate::cli::output::freight_label;

/// The Freight `id` of `project` as `alias (short id)`; the short id alone when it cannot
/// be read (a listing is never refused for want of an alias).
pub async fn label_of(ctx: &Context, project: &str, id: &str) -> String {
    let path = format!("/api/v1/projects/{project}/freight/{id}");
    let alias = match ctx.client.get::<Value>(&path).await {
        Ok(freight) => freight["alias"].as_str().map(str::to_owned),
        Err(_) => None,
    };
    freight_label(alias.as_deref(), Some(id))
}
