//! `helm-update-chart`: sets the versions of a chart's dependencies in its `Chart.yaml`
//! (keeping the rest of the file as it is, through `yaml-update`'s lossless edit) and
//! vendors each updated dependency's archive into the chart's `charts/` directory, so
//! `helm template` renders it offline. Like Kargo's step of that name.
//!
//! Owns matching updates to dependencies (by `name` and `repository`, a trailing `/`
//! ignored) and the `charts/` files (`<name>-<version>.tgz`; other versions of that
//! dependency are removed). Downloading is `crate::helm`, with the project's `helm`
//! Credential for each repository. `Chart.lock` is left alone. A dependency that is not
//! in `Chart.yaml` is refused rather than added.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use super::files::{read_text, resolve, write_if_changed};
use super::typed::TypedStep;
use super::yaml_doc::YamlEdit;
use super::yaml_update::apply;
use crate::helm::{ChartRef, fetch_chart, is_oci};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "helm-update-chart";

/// Configuration of `helm-update-chart`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The chart directory (holding `Chart.yaml`), relative to the work directory.
    path: String,
    /// The dependencies to update, each already listed in `Chart.yaml`.
    #[schemars(length(min = 1))]
    charts: Vec<Dependency>,
    /// Talk plain HTTP to `oci://` registries (loopback registries in tests).
    #[serde(default)]
    insecure: bool,
}

/// One dependency at its new version.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Dependency {
    /// The dependency's `repository` as `Chart.yaml` writes it (`https://…` or `oci://…`).
    repository: String,
    /// The dependency's `name`.
    name: String,
    /// The new version, e.g. `${{ chartFrom('https://charts.example.com', 'db').version }}`.
    version: String,
}

/// The `helm-update-chart` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HelmUpdateChart;

#[async_trait]
impl TypedStep for HelmUpdateChart {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, config).await {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn same_repository(a: &str, b: &str) -> bool {
    a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/')
}

async fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    if config.charts.is_empty() {
        return Err(StepOutcome::failed(format!(
            "invalid `{KIND}` config at `charts`: list at least one dependency to update"
        )));
    }
    let dir = resolve(ctx, &config.path, true)?;
    // The lossless YAML tree is not `Send`: the edit is done before any download.
    let changes = update_chart_yaml(ctx, &dir, &config)?;
    for update in &config.charts {
        vendor(ctx, &dir, &config, update).await?;
    }
    let mut outputs = Map::new();
    outputs.insert(
        "commitMessage".to_owned(),
        Json::from(format!(
            "Updated chart dependencies for {}:\n{}",
            config.path,
            changes.join("\n")
        )),
    );
    Ok(StepOutcome::succeeded(outputs))
}

/// Sets the dependencies' versions in `Chart.yaml`; the changes, one line each.
fn update_chart_yaml(
    ctx: &StepContext,
    dir: &std::path::Path,
    config: &Config,
) -> Result<Vec<String>, StepOutcome> {
    let shown = format!("{}/Chart.yaml", config.path.trim_end_matches('/'));
    let file = dir.join("Chart.yaml");
    if !file.is_file() {
        return Err(StepOutcome::failed(format!(
            "`{}` is not a Helm chart (no Chart.yaml); point `path` at the chart's directory",
            config.path
        )));
    }
    let text = read_text(&file, &shown)?;
    let edit = YamlEdit::parse(&text, &shown)?;
    let listed: Vec<(String, String, String)> = edit
        .before
        .get("dependencies")
        .and_then(|d| d.as_sequence())
        .into_iter()
        .flatten()
        .map(|d| {
            let field = |k: &str| {
                d.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            (field("name"), field("repository"), field("version"))
        })
        .collect();
    let mut expected = edit.before.clone();
    let mut changes = Vec::new();
    for (i, update) in config.charts.iter().enumerate() {
        let Some(index) = listed.iter().position(|(name, repo, _)| {
            *name == update.name && same_repository(repo, &update.repository)
        }) else {
            let known: Vec<String> = listed
                .iter()
                .map(|(name, repo, _)| format!("`{name}` from `{repo}`"))
                .collect();
            return Err(StepOutcome::failed(format!(
                "invalid `{KIND}` config at `charts[{i}]`: `{shown}` has no dependency `{}` from \
                 `{}` (its dependencies: {}); add it to `Chart.yaml` first",
                update.name,
                update.repository,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        let key = [
            "dependencies".to_owned(),
            index.to_string(),
            "version".to_owned(),
        ];
        let version = Json::String(update.version.clone());
        apply(&edit, &mut expected, &key, &version, false).map_err(|why| {
            StepOutcome::failed(format!(
                "cannot set the version of `{}` in `{shown}`: {why}",
                update.name
            ))
        })?;
        changes.push(format!(
            "- {}: {} -> {}",
            update.name, listed[index].2, update.version
        ));
    }
    let edited = edit.finish(&expected, &shown)?;
    if write_if_changed(&file, &edited)? {
        ctx.log(&format!("updated `{shown}`"));
    }
    Ok(changes)
}

/// Downloads `update` into `<chart>/charts/<name>-<version>.tgz`, replacing other
/// versions of that dependency.
async fn vendor(
    ctx: &StepContext,
    dir: &std::path::Path,
    config: &Config,
    update: &Dependency,
) -> Result<(), StepOutcome> {
    let repository = update.repository.trim().trim_end_matches('/');
    let repo_url = if is_oci(repository) {
        format!("{repository}/{}", update.name)
    } else {
        repository.to_owned()
    };
    let chart = ChartRef {
        repo_url: &repo_url,
        name: &update.name,
        version: &update.version,
        digest: None,
        insecure: config.insecure,
    };
    let credentials = ctx.credentials.helm(&repo_url);
    let archive = fetch_chart(&ctx.http, &chart, credentials.as_ref())
        .await
        .map_err(|err| {
            let message = format!(
                "cannot download dependency `{}` {} from `{repository}`: {err}",
                update.name, update.version
            );
            if err.is_retryable() {
                StepOutcome::errored(message)
            } else {
                StepOutcome::failed(message)
            }
        })?;
    let charts = dir.join("charts");
    let io = |err: std::io::Error| {
        StepOutcome::errored(format!("cannot write `{}/charts`: {err}", config.path))
    };
    tokio::fs::create_dir_all(&charts).await.map_err(io)?;
    let keep = format!("{}-{}.tgz", update.name, update.version);
    let mut entries = tokio::fs::read_dir(&charts).await.map_err(io)?;
    while let Some(entry) = entries.next_entry().await.map_err(io)? {
        let file = entry.file_name().to_string_lossy().into_owned();
        let other_version = file
            .strip_prefix(&format!("{}-", update.name))
            .and_then(|rest| rest.strip_suffix(".tgz"))
            .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit() || c == 'v'));
        if other_version && file != keep {
            tokio::fs::remove_file(entry.path()).await.map_err(io)?;
        }
    }
    tokio::fs::write(charts.join(&keep), &archive)
        .await
        .map_err(io)?;
    ctx.log(&format!("vendored `{keep}` into `{}/charts`", config.path));
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use axum::Router;
    use axum::routing::get;
    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};

    /// A chart archive as `helm package` makes it, whose ConfigMap carries `marker`.
    fn archive(dir: &Path, name: &str, version: &str, marker: &str) -> Vec<u8> {
        let src = dir.join(format!("src-{version}"));
        std::fs::create_dir_all(src.join(name).join("templates")).unwrap();
        std::fs::write(
            src.join(name).join("Chart.yaml"),
            format!("apiVersion: v2\nname: {name}\nversion: {version}\n"),
        )
        .unwrap();
        std::fs::write(
            src.join(name).join("templates/cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  marker: {marker}\n"),
        )
        .unwrap();
        let out = dir.join(format!("{name}-{version}.tgz"));
        let ok = std::process::Command::new("tar")
            .arg("-czf")
            .arg(&out)
            .arg("-C")
            .arg(&src)
            .arg(name)
            .status()
            .unwrap()
            .success();
        assert!(ok, "tar");
        std::fs::read(out).unwrap()
    }

    #[tokio::test]
    async fn sets_the_version_keeps_the_file_and_vendors_the_archive() {
        let work = tempfile::tempdir().unwrap();
        let built = archive(work.path(), "app", "1.1.0", "new-app");
        let index = "apiVersion: v1\nentries:\n  app:\n  - name: app\n    version: 1.1.0\n    urls: [app-1.1.0.tgz]\n";
        let app = Router::new()
            .route("/index.yaml", get(move || async move { index }))
            .route("/app-1.1.0.tgz", get(move || async move { built.clone() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let repo = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });

        let chart = work.path().join("umbrella");
        std::fs::create_dir_all(chart.join("charts")).unwrap();
        std::fs::write(
            chart.join("Chart.yaml"),
            format!(
                "# the umbrella\napiVersion: v2\nname: umbrella\nversion: 0.1.0\ndependencies:\n  - name: app # pinned by Dray\n    version: 1.0.0\n    repository: {repo}\n"
            ),
        )
        .unwrap();
        std::fs::write(chart.join("charts/app-1.0.0.tgz"), b"old").unwrap();
        std::fs::write(chart.join("charts/application-2.0.0.tgz"), b"other").unwrap();
        let ctx = context(work.path());
        let config = json!({"path": "umbrella", "charts": [
            {"repository": repo.trim_end_matches('/'), "name": "app", "version": "1.1.0"},
        ]});
        let out = outputs(HelmUpdateChart.run(&ctx, config).await);
        assert_eq!(
            out["commitMessage"],
            "Updated chart dependencies for umbrella:\n- app: 1.0.0 -> 1.1.0"
        );
        let text = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap();
        assert!(text.starts_with("# the umbrella\n"), "{text}");
        assert!(
            text.contains("- name: app # pinned by Dray\n    version: 1.1.0\n"),
            "{text}"
        );
        let mut files: Vec<String> = std::fs::read_dir(chart.join("charts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files, ["app-1.1.0.tgz", "application-2.0.0.tgz"]);

        let config = json!({"path": "umbrella", "charts": [
            {"repository": repo, "name": "db", "version": "3.0.0"},
        ]});
        let reason = failed(HelmUpdateChart.run(&ctx, config).await);
        assert!(
            reason.contains("has no dependency `db`")
                && reason.contains("add it to `Chart.yaml` first"),
            "{reason}"
        );
        let text_after = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap();
        assert_eq!(text_after, text, "a refused update changes nothing");
    }
}
