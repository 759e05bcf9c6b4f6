//! Dray's CEL functions: `imageFrom(repoURL)`, `commitFrom(repoURL)` and
//! `chartFrom(repoURL[, name])` (the Freight's artifacts), `quote(x)` (a value as a quoted string, so `1.0` stays a string in YAML),
//! `freightMetadata(name[, key])` and `stageMetadata(name[, key])` (what `set-metadata`
//! recorded: the whole map, `{}` when there is none, or one key's value, `null` when unset),
//! and, for step `if` conditions, `success()`, `failure()`, `always()` and `status(alias)`.
//!
//! CEL's standard library and its strings extension (`'a'.upperAscii()`, `.split()`, …)
//! come from the `Env` built in `compile.rs`; this module only adds Dray's functions to
//! the context of one evaluation.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::{ExecutionError, Value};
use serde_json::json;

use super::context::{ExprContext, FreightView, cel_to_json, json_to_cel};
use super::template::to_text;
use crate::api::{FreightChart, FreightCommit, FreightImage};

/// The names of Dray's functions, for error messages.
pub(crate) const FUNCTIONS: &[&str] = &[
    "imageFrom",
    "commitFrom",
    "chartFrom",
    "quote",
    "success",
    "failure",
    "always",
    "status",
    "freightMetadata",
    "stageMetadata",
];

/// Adds Dray's functions, bound to `ctx`, to a CEL context.
pub(crate) fn register(cel_ctx: &mut cel::Context<'static, 'static>, ctx: &ExprContext) {
    let freight = Arc::new(ctx.freight.clone());
    let statuses = Arc::new(ctx.step_statuses.clone());
    let any_failed = ctx.any_failed;

    let images = Arc::clone(&freight);
    add(cel_ctx, "imageFrom", move |repo: Value| {
        call("imageFrom", || image_from(&images, &string_arg(&repo)?))
    });
    let charts = Arc::clone(&freight);
    add(cel_ctx, "commitFrom", move |repo: Value| {
        call("commitFrom", || commit_from(&freight, &string_arg(&repo)?))
    });
    add(
        cel_ctx,
        "chartFrom",
        move |cel::extractors::Arguments(args): cel::extractors::Arguments| {
            call("chartFrom", || {
                let (repo, name) = match args.as_slice() {
                    [repo] => (string_arg(repo)?, None),
                    [repo, name] => (string_arg(repo)?, Some(string_arg(name)?)),
                    _ => return Err("takes `repoURL` and, optionally, the chart's `name`".into()),
                };
                chart_from(&charts, &repo, name.as_deref())
            })
        },
    );
    add(cel_ctx, "quote", |value: Value| {
        call("quote", || quote(&value).map(serde_json::Value::String))
    });
    add(cel_ctx, "success", move || !any_failed);
    add(cel_ctx, "failure", move || any_failed);
    add(cel_ctx, "always", || true);
    let metadata = Arc::new(ctx.metadata.clone());
    let stages = Arc::clone(&metadata);
    add(
        cel_ctx,
        "freightMetadata",
        move |cel::extractors::Arguments(args): cel::extractors::Arguments| {
            call("freightMetadata", || {
                metadata_of(&args, |name| metadata.freight_map(name))
            })
        },
    );
    add(
        cel_ctx,
        "stageMetadata",
        move |cel::extractors::Arguments(args): cel::extractors::Arguments| {
            call("stageMetadata", || {
                metadata_of(&args, |name| stages.stage_map(name))
            })
        },
    );
    add(cel_ctx, "status", move |alias: Value| {
        call("status", || {
            Ok(json!(status(&statuses, &string_arg(&alias)?)))
        })
    });
}

fn add<T: 'static, F>(cel_ctx: &mut cel::Context<'static, 'static>, name: &str, function: F)
where
    F: cel::extractors::IntoFunction<T> + 'static + Send + Sync,
{
    // Only a name the CEL environment already declares is refused: none of ours is (tested).
    cel_ctx
        .add_function(name, function)
        .unwrap_or_else(|err| panic!("CEL function `{name}`: {err}"));
}

/// Runs a function body, turning its message into CEL's function error.
fn call(
    name: &str,
    body: impl FnOnce() -> Result<serde_json::Value, String>,
) -> Result<Value, ExecutionError> {
    body()
        .map(|value| json_to_cel(&value))
        .map_err(|message| ExecutionError::function_error(name, message))
}

fn string_arg(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.to_string()),
        other => Err(format!("expects a string, not a {}", other.type_of())),
    }
}

/// The Freight's image from `repo`, or why there is none (naming the images it has). Both
/// expression languages look images, commits and charts up here.
pub(crate) fn find_image<'f>(
    freight: &'f FreightView,
    repo: &str,
) -> Result<&'f FreightImage, String> {
    freight
        .images
        .iter()
        .find(|image| image.repo_url == repo)
        .ok_or_else(|| {
            missing(
                "image",
                repo,
                freight,
                freight.images.iter().map(|i| i.repo_url.clone()),
            )
        })
}

/// The Freight's commit from `repo`, or why there is none.
pub(crate) fn find_commit<'f>(
    freight: &'f FreightView,
    repo: &str,
) -> Result<&'f FreightCommit, String> {
    freight
        .commits
        .iter()
        .find(|commit| commit.repo_url == repo)
        .ok_or_else(|| {
            missing(
                "commit",
                repo,
                freight,
                freight.commits.iter().map(|c| c.repo_url.clone()),
            )
        })
}

/// The Freight's chart from `repo` (named `name`, for a classic repository holding
/// several), or why there is none.
pub(crate) fn find_chart<'f>(
    freight: &'f FreightView,
    repo: &str,
    name: Option<&str>,
) -> Result<&'f FreightChart, String> {
    freight
        .charts
        .iter()
        .find(|chart| chart.repo_url == repo && name.is_none_or(|name| chart.name == name))
        .ok_or_else(|| {
            let shown = match name {
                Some(name) => format!("{repo}` named `{name}"),
                None => repo.to_owned(),
            };
            let known = freight
                .charts
                .iter()
                .map(|c| format!("{} {}", c.repo_url, c.name));
            missing("chart", &shown, freight, known)
        })
}

/// `imageFrom(repoURL)`: `{repoURL, tag, digest}` of the Freight's image from `repo`.
pub(crate) fn image_from(freight: &FreightView, repo: &str) -> Result<serde_json::Value, String> {
    let image = find_image(freight, repo)?;
    Ok(json!({
        "repoURL": image.repo_url,
        "tag": image.tag,
        "digest": image.digest,
    }))
}

/// `commitFrom(repoURL)`: `{repoURL, id, branch, tag, message, author}` of the Freight's
/// commit from `repo` (`branch` and `tag` are `""` when unknown).
pub(crate) fn commit_from(freight: &FreightView, repo: &str) -> Result<serde_json::Value, String> {
    let commit = find_commit(freight, repo)?;
    Ok(json!({
        "repoURL": commit.repo_url,
        "id": commit.id,
        "branch": commit.branch.clone().unwrap_or_default(),
        "tag": commit.tag.clone().unwrap_or_default(),
        "message": commit.message,
        "author": commit.author,
    }))
}

/// `chartFrom(repoURL[, name])`: `{repoURL, name, version, digest}` of the Freight's chart
/// from `repo` (and named `name`, for a classic repository holding several; `digest` is
/// `""` for classic repositories).
pub(crate) fn chart_from(
    freight: &FreightView,
    repo: &str,
    name: Option<&str>,
) -> Result<serde_json::Value, String> {
    let chart = find_chart(freight, repo, name)?;
    Ok(json!({
        "repoURL": chart.repo_url,
        "name": chart.name,
        "version": chart.version,
        "digest": chart.digest.clone().unwrap_or_default(),
    }))
}

fn missing(
    what: &str,
    repo: &str,
    freight: &FreightView,
    repos: impl Iterator<Item = String>,
) -> String {
    let known: Vec<String> = repos.map(|repo| format!("`{repo}`")).collect();
    let id = &freight.id;
    if known.is_empty() {
        format!("no {what} from `{repo}`: Freight `{id}` has no {what}s")
    } else {
        let known = known.join(", ");
        format!("no {what} from `{repo}` in Freight `{id}` (its {what}s: {known})")
    }
}

/// `quote(x)`: `x` as text (as in a template), then as a JSON string literal, which YAML
/// reads as the same string: `quote("1.0")` is `"1.0"`, quotes included.
pub(crate) fn quote(value: &Value) -> Result<String, String> {
    let text = to_text(&cel_to_json(value).map_err(|what| format!("cannot quote {what}"))?);
    Ok(serde_json::Value::String(text).to_string())
}

/// `freightMetadata(name[, key])` / `stageMetadata(name[, key])`: the resource's metadata
/// (`{}` when it has none), or the value of `key` (`null` when unset).
fn metadata_of(
    args: &[Value],
    lookup: impl Fn(&str) -> Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<serde_json::Value, String> {
    let (name, key) = match args {
        [name] => (string_arg(name)?, None),
        [name, key] => (string_arg(name)?, Some(string_arg(key)?)),
        _ => return Err("takes the resource's `name` and, optionally, a `key`".into()),
    };
    if name.is_empty() {
        return Err("the name must not be empty".into());
    }
    let map = lookup(&name).unwrap_or_default();
    Ok(match key {
        Some(key) => map.get(&key).cloned().unwrap_or(serde_json::Value::Null),
        None => serde_json::Value::Object(map),
    })
}

/// `status(alias)`: the status of an earlier step, `""` if it has not run.
pub(crate) fn status(statuses: &BTreeMap<String, String>, alias: &str) -> String {
    statuses.get(alias).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FreightCommit, FreightImage};

    fn freight() -> FreightView {
        FreightView {
            id: "f1".into(),
            images: vec![FreightImage {
                repo_url: "reg/app".into(),
                tag: "1.2.0".into(),
                digest: "sha256:abc".into(),
                ..Default::default()
            }],
            commits: vec![FreightCommit {
                repo_url: "https://git/cfg.git".into(),
                id: "deadbeef".into(),
                branch: Some("main".into()),
                ..FreightCommit::default()
            }],
            ..FreightView::default()
        }
    }

    #[test]
    fn image_from_finds_the_image_or_lists_the_repos() {
        let image = image_from(&freight(), "reg/app").unwrap();
        assert_eq!(image["digest"], "sha256:abc");
        assert_eq!(image["tag"], "1.2.0");
        let err = image_from(&freight(), "reg/other").unwrap_err();
        assert_eq!(
            err,
            "no image from `reg/other` in Freight `f1` (its images: `reg/app`)"
        );
        let empty = FreightView::default();
        assert!(
            image_from(&empty, "reg/app")
                .unwrap_err()
                .contains("has no images")
        );
    }

    #[test]
    fn commit_from_finds_the_commit_or_lists_the_repos() {
        let commit = commit_from(&freight(), "https://git/cfg.git").unwrap();
        assert_eq!(commit["id"], "deadbeef");
        assert_eq!(commit["branch"], "main");
        assert_eq!(commit["tag"], "");
        let err = commit_from(&freight(), "https://git/other.git").unwrap_err();
        assert!(
            err.contains("(its commits: `https://git/cfg.git`)"),
            "{err}"
        );
    }

    #[test]
    fn chart_from_finds_the_chart_by_repository_and_name() {
        use crate::api::FreightChart;
        let chart = |repo: &str, name: &str, version: &str| FreightChart {
            repo_url: repo.into(),
            name: name.into(),
            version: version.into(),
            digest: None,
        };
        let view = FreightView {
            id: "f1".into(),
            charts: vec![
                chart("https://charts", "app", "1.2.0"),
                chart("https://charts", "db", "3.0.0"),
                FreightChart {
                    digest: Some("sha256:cc".into()),
                    ..chart("oci://reg/charts/web", "web", "0.4.0")
                },
            ],
            ..FreightView::default()
        };
        let found = chart_from(&view, "https://charts", Some("db")).unwrap();
        assert_eq!(
            (found["name"].as_str(), found["version"].as_str()),
            (Some("db"), Some("3.0.0"))
        );
        let found = chart_from(&view, "oci://reg/charts/web", None).unwrap();
        assert_eq!(found["digest"], "sha256:cc");
        assert_eq!(
            chart_from(&view, "https://charts", None).unwrap()["name"],
            "app"
        );
        let err = chart_from(&view, "https://charts", Some("nope")).unwrap_err();
        assert!(
            err.starts_with("no chart from `https://charts` named `nope` in Freight `f1`"),
            "{err}"
        );
        assert!(err.contains("`https://charts db`"), "{err}");
        assert!(
            chart_from(&freight(), "x", None)
                .unwrap_err()
                .contains("has no charts")
        );
    }

    #[test]
    fn quote_makes_a_json_string() {
        assert_eq!(quote(&Value::from("1.0")).unwrap(), r#""1.0""#);
        assert_eq!(
            quote(&Value::from("say \"hi\"")).unwrap(),
            r#""say \"hi\"""#
        );
        assert_eq!(quote(&Value::Int(3)).unwrap(), r#""3""#);
        assert!(quote(&Value::Float(f64::INFINITY)).is_err());
    }

    #[test]
    fn status_is_empty_for_unknown_steps() {
        let statuses = BTreeMap::from([("clone".to_owned(), "Succeeded".to_owned())]);
        assert_eq!(status(&statuses, "clone"), "Succeeded");
        assert_eq!(status(&statuses, "push"), "");
    }

    #[test]
    fn metadata_functions_read_the_map_or_one_key() {
        use crate::api::Metadata;
        use crate::expr::{ExprCache, MetadataView};
        let ctx = ExprContext {
            metadata: MetadataView {
                freight: [(
                    "f1".to_owned(),
                    Metadata::from([("build".to_owned(), json!({"n": 7}))]),
                )]
                .into(),
                stages: [(
                    "dev".to_owned(),
                    Metadata::from([("owner".to_owned(), json!("ana"))]),
                )]
                .into(),
            },
            ..ExprContext::default()
        };
        let cache = ExprCache::new();
        let eval = |e: &str| cache.evaluate_expression(e, &ctx);
        assert_eq!(eval("freightMetadata('f1').build.n").unwrap(), json!(7));
        assert_eq!(
            eval("freightMetadata('f1', 'build')").unwrap(),
            json!({"n": 7})
        );
        assert_eq!(eval("freightMetadata('f1', 'nope')").unwrap(), json!(null));
        assert_eq!(eval("freightMetadata('f2')").unwrap(), json!({}));
        assert_eq!(eval("stageMetadata('dev').owner").unwrap(), json!("ana"));
        assert_eq!(eval("stageMetadata('dev', 'owner')").unwrap(), json!("ana"));
        assert_eq!(
            eval("'owner' in stageMetadata('prod')").unwrap(),
            json!(false)
        );
        let err = eval("stageMetadata('')").unwrap_err().to_string();
        assert!(err.contains("must not be empty"), "{err}");
        let err = eval("stageMetadata(1)").unwrap_err().to_string();
        assert!(err.contains("expects a string"), "{err}");
    }

    #[test]
    fn every_function_registers() {
        let env = Arc::new(super::super::compile::new_env());
        let mut cel_ctx = cel::Context::with_env(env);
        register(&mut cel_ctx, &ExprContext::default());
    }
}
