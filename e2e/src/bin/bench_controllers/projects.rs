//! The two projects of the controller benchmark, as the YAML a user applies with
//! `dray apply`: what they hold, and nothing about running them.
//!
//! Both are the quickstart shrunk to what a user writes first: one Warehouse (an image
//! repository and the config repository, polling only hourly so that only `dray refresh`
//! starts a discovery), the quickstart's `render-to-stage-branch` task as shipped
//! (`examples/quickstart/project/task.yaml`), a Stage `dev` fed by the Warehouse with that
//! task, and `dev`'s auto-promotion. The big project adds `fed_by_dev` Stages
//! (`s0001`, `s0002`, …) that request Freight from `dev` (`sources.stages: [dev]`) with
//! the same task; no policy promotes them: they are there to load the controllers.

use std::path::Path;

use anyhow::{Context, Result, bail};
use dray_e2e::workspace_root;

/// One project of the benchmark.
pub(crate) struct ProjectSpec<'a> {
    /// The project (namespace) name.
    pub(crate) name: &'a str,
    /// `host:port/<project>/app`: the image repository its Warehouse follows.
    pub(crate) image: &'a str,
    /// Its config repository on the git server.
    pub(crate) config_url: &'a str,
    /// How many Stages besides `dev` (all fed by `dev`).
    pub(crate) fed_by_dev: usize,
}

/// The Warehouse every project has.
pub(crate) const WAREHOUSE: &str = "app";

/// The name of the `n`th (from 1) Stage fed by `dev`.
pub(crate) fn fed_stage_name(n: usize) -> String {
    format!("s{n:04}")
}

/// Writes the project's YAML to `path`.
pub(crate) fn write(spec: &ProjectSpec<'_>, path: &Path) -> Result<()> {
    std::fs::write(path, yaml(spec)?)
        .with_context(|| format!("Failed to write `{}`", path.display()))
}

/// The project's YAML: Project, ProjectConfig, Warehouse, PromotionTask, `dev`, and the
/// Stages fed by `dev`.
fn yaml(spec: &ProjectSpec<'_>) -> Result<String> {
    let ProjectSpec {
        name,
        image,
        config_url,
        ..
    } = spec;
    let mut text = format!(
        "apiVersion: dray.dev/v1alpha1
kind: Project
metadata:
  name: {name}
spec:
  description: Controller benchmark project
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata:
  name: {name}
  namespace: {name}
spec:
  promotionPolicies:
    - stageSelector:
        name: dev
      autoPromotionEnabled: true
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata:
  name: {WAREHOUSE}
  namespace: {name}
spec:
  interval: 1h
  subscriptions:
    - image:
        repoURL: {image}
        imageSelectionStrategy: SemVer
        constraint: ^1.0.0
        insecure: true
    - git:
        repoURL: {config_url}
        branch: main
        includePaths:
          - base/
          - overlays/
          - charts/
---
{task}---
{dev}",
        task = quickstart_task(name)?,
        dev = stage(spec, "dev", "direct: true"),
    );
    for n in 1..=spec.fed_by_dev {
        text.push_str("---\n");
        text.push_str(&stage(spec, &fed_stage_name(n), "stages: [dev]"));
    }
    Ok(text)
}

/// One Stage taking Freight from the Warehouse through `sources` (`direct: true` or
/// `stages: [dev]`) and promoting with the quickstart task.
fn stage(spec: &ProjectSpec<'_>, stage: &str, sources: &str) -> String {
    format!(
        "apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: {stage}
  namespace: {project}
spec:
  requestedFreight:
    - origin:
        kind: Warehouse
        name: {WAREHOUSE}
      sources:
        {sources}
  promotionTemplate:
    spec:
      steps:
        - task:
            name: render-to-stage-branch
          vars:
            - name: repoURL
              value: {config_url}
            - name: imageRepo
              value: {image}
",
        project = spec.name,
        config_url = spec.config_url,
        image = spec.image,
    )
}

/// The quickstart's `render-to-stage-branch` task as shipped, in `project`.
fn quickstart_task(project: &str) -> Result<String> {
    let path = workspace_root().join("examples/quickstart/project/task.yaml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("Failed to read `{}`", path.display()))?;
    if !text.contains("name: render-to-stage-branch") || !text.contains("  namespace: demo\n") {
        bail!(
            "`{}` no longer holds the PromotionTask `render-to-stage-branch` in namespace \
             `demo`; update the benchmark",
            path.display()
        );
    }
    let text = text.replace("  namespace: demo\n", &format!("  namespace: {project}\n"));
    Ok(format!("{}\n", text.trim_end()))
}
