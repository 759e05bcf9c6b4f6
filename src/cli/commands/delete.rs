//! `dray delete KIND NAME [--cascade [--yes]]` and `dray delete -f FILE…`.
//!
//! - `KIND NAME`: one resource. The server refuses what is still in use (a Warehouse
//!   Stages subscribe to, Freight a Stage holds, a project that holds anything) and says
//!   what holds it.
//! - `--cascade` (projects and warehouses): what belongs to it goes with it, in one store
//!   commit. The server is asked first what that is; it is listed, and on a terminal the
//!   command asks before removing it (`--yes` skips the question; without a terminal,
//!   `--yes` is required). Then it lists what was removed.
//! - `-f FILE…` (files or directories, read as `dray apply -f` reads them): deletes every
//!   resource the YAML documents name, in reverse order (Stages before the Warehouse and
//!   the Project they sit in), one by one, reporting each; resources named without a
//!   namespace are in the project `-p` names (or the only one).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;

use reqwest::Method;
use serde_json::Value;

use crate::api::{Kind, ObjectKey};
use crate::cli::{CliError, Context};
use crate::config;

use super::get::parse_kind;

/// Arguments of `dray delete`.
#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The kind, e.g. `stage` or `warehouses`.
    #[arg(required_unless_present = "files")]
    pub kind: Option<String>,
    /// The name.
    #[arg(required_unless_present = "files")]
    pub name: Option<String>,
    /// YAML files or directories naming the resources to delete; may be repeated.
    #[arg(short = 'f', long = "filename", num_args = 1.., conflicts_with_all = ["kind", "name", "cascade"])]
    pub files: Vec<PathBuf>,
    /// Delete a project or warehouse with everything that belongs to it (a project's
    /// resources; a warehouse's Freight), in one transaction.
    #[arg(long)]
    pub cascade: bool,
    /// With --cascade: do not ask for confirmation (required without a terminal).
    #[arg(long, short = 'y', requires = "cascade")]
    pub yes: bool,
}

/// Runs `dray delete`.
pub async fn run(ctx: &Context, args: DeleteArgs) -> Result<(), CliError> {
    if !args.files.is_empty() {
        return delete_files(ctx, &args.files).await;
    }
    let (Some(kind), Some(name)) = (&args.kind, &args.name) else {
        return Err(CliError::usage(
            "say what to delete",
            "run `dray delete KIND NAME` or `dray delete -f FILE`",
        ));
    };
    let kind = parse_kind(kind)?;
    let path = resource_path(ctx, kind, name, None).await?;
    if args.cascade {
        return delete_cascading(ctx, kind, name, &path, args.yes).await;
    }
    let _: Value = ctx.client.send(Method::DELETE, &path, None::<&()>).await?;
    println!("{} {name} deleted", kind.as_str().to_ascii_lowercase());
    Ok(())
}

/// The API path of a resource: in `namespace`, or the project as every command resolves it.
async fn resource_path(
    ctx: &Context,
    kind: Kind,
    name: &str,
    namespace: Option<&str>,
) -> Result<String, CliError> {
    if !kind.is_namespaced() {
        return Ok(format!("/api/v1/{}/{name}", kind.plural()));
    }
    let project = match namespace {
        Some(namespace) => namespace.to_owned(),
        None => ctx.project().await?,
    };
    Ok(format!(
        "/api/v1/projects/{project}/{}/{name}",
        kind.plural()
    ))
}

/// `--cascade`: ask what goes, confirm, remove in one commit, list what went.
async fn delete_cascading(
    ctx: &Context,
    kind: Kind,
    name: &str,
    path: &str,
    yes: bool,
) -> Result<(), CliError> {
    let what = format!("{} {name}", kind.as_str().to_ascii_lowercase());
    let plan: Value = ctx
        .client
        .send(
            Method::DELETE,
            &format!("{path}?cascade=true&dryRun=true"),
            None::<&()>,
        )
        .await?;
    let listed = removed(&plan);
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::usage(
                format!(
                    "deleting {what} with --cascade removes {} resources, and there is no terminal to confirm it on",
                    listed.len()
                ),
                "pass --yes to delete without asking",
            ));
        }
        eprintln!("deleting {what} with --cascade removes:");
        for line in &listed {
            eprintln!("  {line}");
        }
        eprint!("delete these {} resources? [y/N] ", listed.len());
        std::io::stderr().flush().ok();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| CliError::Local(format!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(CliError::usage(
                format!("{what} not deleted"),
                "answer `y` to delete, or pass --yes",
            ));
        }
    }
    let done: Value = ctx
        .client
        .send(Method::DELETE, &format!("{path}?cascade=true"), None::<&()>)
        .await?;
    for line in removed(&done) {
        println!("{line} deleted");
    }
    Ok(())
}

/// `kind name` (or `kind namespace/name`) of each entry of a cascade answer's `removed`.
fn removed(answer: &Value) -> Vec<String> {
    answer
        .get("removed")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|entry| {
            let text = |field: &str| entry.get(field).and_then(Value::as_str).unwrap_or("");
            let kind = text("kind").to_ascii_lowercase();
            match entry.get("namespace").and_then(Value::as_str) {
                Some(namespace) => format!("{kind} {namespace}/{}", text("name")),
                None => format!("{kind} {}", text("name")),
            }
        })
        .collect()
}

/// The resources YAML documents name, in the order written.
fn named_resources(files: &[config::SourceFile]) -> Result<Vec<ObjectKey>, CliError> {
    let mut keys = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        for (index, document) in serde_yaml_ng::Deserializer::from_str(&file.content).enumerate() {
            let at = format!("{} (document {})", file.path, index + 1);
            let value = match <serde_yaml_ng::Value as serde::Deserialize>::deserialize(document) {
                Ok(serde_yaml_ng::Value::Null) => continue,
                Ok(value) => value,
                Err(error) => {
                    problems.push(format!("{at}: not YAML: {error}"));
                    continue;
                }
            };
            let json: Value = match serde_json::to_value(&value) {
                Ok(json) => json,
                Err(error) => {
                    problems.push(format!("{at}: {error}"));
                    continue;
                }
            };
            let text = |pointer: &str| json.pointer(pointer).and_then(Value::as_str);
            let Some(kind) = text("/kind").and_then(Kind::from_manifest_kind) else {
                problems.push(format!(
                    "{at}: `kind` is missing or not one of Dray's kinds"
                ));
                continue;
            };
            let Some(name) = text("/metadata/name").filter(|n| !n.is_empty()) else {
                problems.push(format!("{at}: {} without `metadata.name`", kind.as_str()));
                continue;
            };
            keys.push(match (kind.is_namespaced(), text("/metadata/namespace")) {
                (true, Some(namespace)) => ObjectKey::namespaced(kind, namespace, name),
                // The project is resolved when it is deleted.
                (true, None) => ObjectKey::namespaced(kind, "", name),
                (false, _) => ObjectKey::cluster(kind, name),
            });
        }
    }
    if problems.is_empty() {
        Ok(keys)
    } else {
        Err(CliError::usage(
            format!("cannot tell what to delete: {}", problems.join("; ")),
            "give the YAML files `dray apply -f` took: each document with `kind` and `metadata.name`",
        ))
    }
}

/// `-f`: every resource the files name, last first; each reported; fails if any failed.
async fn delete_files(ctx: &Context, paths: &[PathBuf]) -> Result<(), CliError> {
    let files = config::read_paths(paths).map_err(|errors| CliError::Local(errors.to_string()))?;
    let keys = named_resources(&files)?;
    let mut failed = Vec::new();
    for key in keys.iter().rev() {
        let namespace = key.namespace.as_deref().filter(|n| !n.is_empty());
        let path = resource_path(ctx, key.kind, &key.name, namespace).await?;
        let what = format!("{} {}", key.kind.as_str().to_ascii_lowercase(), key.name);
        match ctx
            .client
            .send::<Value>(Method::DELETE, &path, None::<&()>)
            .await
        {
            Ok(_) => println!("{what} deleted"),
            Err(error) => {
                eprintln!("error: {what}: {error}");
                failed.push(what);
            }
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::Local(format!(
        "{} of {} resources not deleted: {}",
        failed.len(),
        keys.len(),
        failed.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_name_resources_in_order() {
        let file = config::SourceFile {
            path: "p.yaml".into(),
            content: "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {name: demo}\n---\n\
                      kind: Warehouse\nmetadata: {name: app, namespace: demo}\n---\n\
                      kind: Stage\nmetadata: {name: dev}\n"
                .into(),
        };
        let keys = named_resources(&[file]).unwrap();
        assert_eq!(
            keys,
            [
                ObjectKey::cluster(Kind::Project, "demo"),
                ObjectKey::namespaced(Kind::Warehouse, "demo", "app"),
                ObjectKey::namespaced(Kind::Stage, "", "dev"),
            ]
        );
        let wrong = config::SourceFile {
            path: "w.yaml".into(),
            content: "kind: Gizmo\nmetadata: {name: x}\n".into(),
        };
        let error = named_resources(&[wrong]).unwrap_err().to_string();
        assert!(error.contains("w.yaml (document 1)"), "{error}");
    }
}
