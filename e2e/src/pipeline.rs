//! The quickstart pipeline as a test fixture: a fresh world with a real registry, the config
//! repository (seeded from `examples/quickstart/config-repo`) behind `git http-backend`,
//! and `dray serve`; the quickstart's YAML localised to them, and the CLI calls the tests
//! make against project `demo` (apply, refresh, freight, promote, read a Stage).
//!
//! Tests that need more (an Argo CD double, a Prometheus double, their own Stages) apply
//! their YAML with [`Pipeline::apply`]; `127.0.0.1:5000` and the quickstart's config URL in
//! it are replaced with this world's.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};

/// The quickstart's project.
pub const PROJECT: &str = "demo";

/// The quickstart's files that every pipeline test uses: the project, its Warehouse and
/// the render task (no Stages, no auto-promotion).
pub const BASE_FILES: [&str; 3] = ["project.yaml", "warehouse.yaml", "task.yaml"];

/// A command's stdout and stderr, for messages and assertions.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The quickstart's services: a registry and the config repository (seeded from
/// `examples/quickstart/config-repo`) behind `git http-backend`.
pub struct Services {
    /// The OCI registry.
    pub registry: Registry,
    /// The git server.
    pub git: GitServer,
    /// A working copy of the config repository.
    pub config: GitRepo,
    /// The config repository's URL.
    pub config_url: String,
}

impl Services {
    /// Starts them in `world`.
    pub fn start(world: &TestWorld) -> Result<Self> {
        let registry = Registry::start(world, Default::default())?;
        let git = GitServer::start(world, Default::default())?;
        let config_url = git.create_repo("config")?;
        let (config, _) = GitRepo::seed(
            world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )?;
        Ok(Services {
            registry,
            git,
            config,
            config_url,
        })
    }
}

/// A world running the quickstart's services.
pub struct Pipeline {
    /// The world everything runs in.
    pub world: TestWorld,
    /// The OCI registry.
    pub registry: Registry,
    /// The git server.
    pub git: GitServer,
    /// A working copy of the config repository.
    pub config: GitRepo,
    /// The config repository's URL.
    pub config_url: String,
    /// `dray serve`.
    pub dray: Dray,
}

impl Pipeline {
    /// Starts the services; applies nothing.
    pub fn start() -> Result<Self> {
        Self::start_with(DrayOptions::default())
    }

    /// Starts the services with `dray serve` started as `options` say.
    pub fn start_with(options: DrayOptions) -> Result<Self> {
        let world = TestWorld::new()?;
        let services = Services::start(&world)?;
        let dray = Dray::start(&world, options)?;
        Ok(Self::from_parts(world, services, dray))
    }

    /// A pipeline of `services` and a `dray serve` started elsewhere (the Kubernetes
    /// mode's fixture).
    pub fn from_parts(world: TestWorld, services: Services, dray: Dray) -> Self {
        let Services {
            registry,
            git,
            config,
            config_url,
        } = services;
        Pipeline {
            world,
            registry,
            git,
            config,
            config_url,
            dray,
        }
    }

    /// The quickstart's YAML pointed at this world: its registry, its config repository,
    /// and Warehouses that look only when asked (`interval: 1h`).
    pub fn localise(&self, yaml: &str) -> String {
        yaml.replace("127.0.0.1:5000", &self.registry.host())
            .replace("http://127.0.0.1:8080/config.git", &self.config_url)
            .replace("interval: 5m", "interval: 1h")
    }

    /// The text of a file of the quickstart project.
    pub fn quickstart_file(name: &str) -> Result<String> {
        let path = workspace_root()
            .join("examples/quickstart/project")
            .join(name);
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// A Stage's `promotionTemplate` (as it sits under `spec:`) running the quickstart's
    /// `render-to-stage-branch` task against this world's config repository and registry.
    pub fn render_template(&self) -> String {
        format!(
            r#"  promotionTemplate:
    spec:
      steps:
        - task: {{name: render-to-stage-branch}}
          vars:
            - {{name: repoURL, value: "{config_url}"}}
            - {{name: imageRepo, value: "{registry}/demo/app"}}
"#,
            config_url = self.config_url,
            registry = self.registry.host(),
        )
    }

    /// Applies [`BASE_FILES`].
    pub fn apply_base(&self) -> Result<()> {
        let yaml = BASE_FILES
            .iter()
            .map(|f| Self::quickstart_file(f))
            .collect::<Result<Vec<_>>>()?;
        self.apply(&yaml.join("\n---\n"))
    }

    /// Applies the whole quickstart project but its `config.yaml` (auto-promotion and the CI
    /// webhook: tests bring their own), each file passed through `edit` first.
    pub fn apply_quickstart(&self, edit: impl Fn(&str) -> String) -> Result<()> {
        let dir = workspace_root().join("examples/quickstart/project");
        let mut yaml = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(&dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        names.sort();
        for path in names {
            if path.file_name().is_some_and(|n| n == "config.yaml") {
                continue;
            }
            yaml.push(edit(&std::fs::read_to_string(&path)?));
        }
        self.apply(&yaml.join("\n---\n"))
    }

    /// Applies `yaml` (localised) with `dray apply`; fails with its output when refused.
    pub fn apply(&self, yaml: &str) -> Result<()> {
        let output = self.try_apply(yaml)?;
        if !output.status.success() {
            bail!("apply failed: {}", text(&output));
        }
        Ok(())
    }

    /// Applies `yaml` (localised) and returns what `dray apply` did, refused or not.
    pub fn try_apply(&self, yaml: &str) -> Result<Output> {
        let file = self.world.unique_dir("apply")?.with_extension("yaml");
        std::fs::write(&file, self.localise(yaml))?;
        self.dray.cli(["apply", "-f", path_str(&file)?])
    }

    /// Runs the CLI in project `demo`.
    pub fn cli(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["-p", PROJECT];
        all.extend_from_slice(args);
        self.dray.cli(all)
    }

    /// Runs the CLI in project `demo` and parses its JSON output; fails when it fails.
    pub fn json(&self, args: &[&str]) -> Result<Value> {
        let output = self.cli(args)?;
        if !output.status.success() {
            bail!("dray {args:?} failed: {}", text(&output));
        }
        serde_json::from_slice(&output.stdout)
            .with_context(|| format!("dray {args:?} printed no JSON: {}", text(&output)))
    }

    /// Refreshes the Warehouse `app` and waits for discovery.
    pub fn refresh(&self) -> Result<()> {
        let output = self.cli(&["refresh", "warehouse", "app", "--wait"])?;
        if !output.status.success() {
            bail!("refresh failed: {}", text(&output));
        }
        Ok(())
    }

    /// Every Freight, newest first.
    pub fn freight(&self) -> Result<Vec<Value>> {
        Ok(serde_json::from_value(
            self.json(&["get", "freight", "-o", "json"])?,
        )?)
    }

    /// One Freight by id.
    pub fn freight_named(&self, id: &str) -> Result<Value> {
        self.json(&["get", "freight", id, "-o", "json"])
    }

    /// The newest Freight's id and alias.
    pub fn newest_freight(&self) -> Result<(String, String)> {
        let freight = self.freight()?;
        let newest = freight.first().context("no freight")?;
        Ok((id(newest), alias(newest)))
    }

    /// The alias of the newest Freight.
    pub fn newest_alias(&self) -> Result<String> {
        Ok(alias(self.freight()?.first().context("no freight")?))
    }

    /// Pushes `demo/app:<tag>` and mints its Freight; returns the Freight's id and alias.
    pub async fn release(&self, tag: &str) -> Result<(String, String)> {
        oci::push_image(&self.registry, "demo/app", tag).await?;
        tokio::task::block_in_place(|| {
            self.refresh()?;
            let freight = self.freight()?;
            let minted = freight
                .iter()
                .find(|f| f["images"][0]["tag"] == tag)
                .with_context(|| format!("no Freight for {tag}: {freight:#?}"))?;
            Ok((id(minted), alias(minted)))
        })
    }

    /// `dray promote --stage S --alias A --wait` (at most 2 minutes).
    pub fn promote(&self, stage: &str, alias: &str) -> Result<Output> {
        self.cli(&[
            "promote",
            "--stage",
            stage,
            "--alias",
            alias,
            "--wait",
            "--timeout",
            "2m",
        ])
    }

    /// [`Pipeline::promote`] that must succeed: an error with what the CLI said otherwise.
    pub fn promote_ok(&self, stage: &str, alias: &str) -> Result<()> {
        let promoted = self.promote(stage, alias)?;
        if !promoted.status.success() {
            bail!(
                "promoting `{alias}` into `{stage}` failed: {}",
                text(&promoted)
            );
        }
        Ok(())
    }

    /// One Stage as JSON.
    pub fn stage(&self, name: &str) -> Result<Value> {
        self.json(&["get", "stage", name, "-o", "json"])
    }

    /// One Promotion as JSON.
    pub fn promotion(&self, name: &str) -> Result<Value> {
        self.json(&["get", "promotion", name, "-o", "json"])
    }

    /// Waits (at most 60s) until `stage` holds the Freight `alias`.
    pub fn wait_for_stage(&self, stage: &str, alias: &str) -> Result<()> {
        self.wait_until(&format!("`{stage}` to hold `{alias}`"), || {
            Ok((self.stage(stage)?["status"]["currentFreight"]["alias"] == alias).then_some(()))
        })
    }

    /// Polls `check` every 100ms until it answers `Some`, at most 60s; the error names
    /// `what` it waited for.
    pub fn wait_until<T>(&self, what: &str, check: impl FnMut() -> Result<Option<T>>) -> Result<T> {
        crate::wait_until(what, Duration::from_secs(60), check)
    }
}

/// Project `demo`'s ProjectConfig with one Deny window `name` over Stage `stage` that
/// started an hour ago and lasts two hours: closed now, whenever the test runs.
pub fn deny_window_now(name: &str, stage: &str) -> String {
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let dtstart = start.strftime("%Y%m%dT%H%M%SZ");
    format!(
        "apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: demo, namespace: demo}}
spec:
  promotionWindows:
    - name: {name}
      kind: Deny
      rrule: \"DTSTART:{dtstart}\\nRRULE:FREQ=DAILY;COUNT=1\"
      duration: 2h
      stageSelector: {{name: {stage}}}
"
    )
}

/// A Freight's id.
pub fn id(freight: &Value) -> String {
    freight["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A Freight's alias.
pub fn alias(freight: &Value) -> String {
    freight["alias"].as_str().unwrap_or_default().to_owned()
}

/// The name of the promotion `dray promote` requested, from its output.
pub fn promotion_name(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix("promotion ")
                .and_then(|r| r.strip_suffix(" requested"))
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}
