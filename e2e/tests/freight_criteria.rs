//! Freight creation criteria end to end (issue #16): a real registry and a real git
//! server, `dray serve` discovering them. `freightCreationCriteria` mints only matching
//! combinations and says on the Warehouse why it refused one; a git subscription's
//! `expressionFilter` and `since` choose commits; a `Manual` Warehouse records what it
//! found and mints nothing until a person runs `dray freight create --newest`.

use std::process::Output;

use anyhow::{Context, Result, bail};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, git, oci};
use serde_json::Value;

struct World {
    world: TestWorld,
    registry: Registry,
    _git: GitServer,
    config: GitRepo,
    config_url: String,
    dray: Dray,
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

impl World {
    fn start() -> Result<Self> {
        let world = TestWorld::new()?;
        let registry = Registry::start(&world, Default::default())?;
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        let config = GitRepo::clone_from_url(&world, &config_url)?;
        config.write("apps/app.yaml", "replicas: 1\n")?;
        config.commit("Initial config")?;
        config.push("main")?;
        let dray = Dray::start(&world, DrayOptions::default())?;
        Ok(World {
            world,
            registry,
            _git: git,
            config,
            config_url,
            dray,
        })
    }

    fn image_repo(&self) -> String {
        format!("{}/demo/app", self.registry.host())
    }

    /// The Project and a Warehouse `app` with `spec` (YAML indented under `spec:`).
    fn warehouse_yaml(&self, spec: &str) -> String {
        format!(
            "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: demo}}
spec:
  interval: 1h
{spec}"
        )
    }

    /// A spec whose criteria want the image's tag to equal the config's (SemVer) tag.
    fn same_tag_spec(&self, policy: &str) -> String {
        format!(
            "  freightCreationPolicy: {policy}
  freightCreationCriteria:
    expression: imageFrom('{image}').tag == commitFrom('{git}').tag
  subscriptions:
    - image: {{repoURL: {image}, insecure: true}}
    - git: {{repoURL: {git}, commitSelectionStrategy: SemVer}}
",
            image = self.image_repo(),
            git = self.config_url
        )
    }

    fn apply(&self, yaml: &str) -> Result<Output> {
        let file = self.world.unique_dir("manifests")?.with_extension("yaml");
        std::fs::write(&file, yaml)?;
        self.dray
            .cli(["apply", "-f", file.to_str().context("utf-8")?])
    }

    fn apply_ok(&self, yaml: &str) -> Result<()> {
        let output = self.apply(yaml)?;
        if !output.status.success() {
            bail!("apply failed: {}", text(&output));
        }
        Ok(())
    }

    fn refresh(&self) -> Result<()> {
        let output = self
            .dray
            .cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])?;
        if !output.status.success() {
            bail!("refresh failed: {}", text(&output));
        }
        Ok(())
    }

    fn freight(&self) -> Result<Vec<Value>> {
        let output = self
            .dray
            .cli(["get", "freight", "-p", "demo", "-o", "json"])?;
        if !output.status.success() {
            bail!("get freight failed: {}", text(&output));
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn warehouse(&self) -> Result<Value> {
        let output = self
            .dray
            .cli(["get", "warehouse", "app", "-p", "demo", "-o", "json"])?;
        if !output.status.success() {
            bail!("get warehouse failed: {}", text(&output));
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn tag_config(&self, tag: &str) -> Result<()> {
        self.config.git(["tag", tag])?;
        self.config.git(["push", "--quiet", "origin", tag])?;
        Ok(())
    }
}

/// The Warehouse's condition of `type_`, if any.
fn condition<'a>(warehouse: &'a Value, type_: &str) -> Option<&'a Value> {
    warehouse["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn tags_of(freight: &Value) -> (String, String) {
    (
        freight["images"][0]["tag"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        freight["commits"][0]["tag"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn criteria_mint_only_an_image_and_a_config_tag_that_match() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    oci::push_image(&w.registry, "demo/app", "1.0.0").await?;
    let spec = w.same_tag_spec("Automatic");
    tokio::task::block_in_place(|| -> Result<()> {
        w.tag_config("1.0.0")?;
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        w.refresh()?;
        let freight = w.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        assert_eq!(tags_of(&freight[0]), ("1.0.0".into(), "1.0.0".into()));
        let satisfied = condition(&w.warehouse()?, "FreightCreationCriteriaSatisfied")
            .cloned()
            .context("a criteria condition")?;
        assert_eq!(satisfied["status"], "True", "{satisfied:#}");
        Ok(())
    })?;

    // The image moves ahead of the config: the combination is refused, and the Warehouse
    // says which expression refused what, and why.
    oci::push_image(&w.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        w.refresh()?;
        assert_eq!(w.freight()?.len(), 1, "a refused combination mints nothing");
        let warehouse = w.warehouse()?;
        let refused = condition(&warehouse, "FreightCreationCriteriaSatisfied")
            .context("a criteria condition")?;
        assert_eq!(refused["status"], "False", "{refused:#}");
        assert_eq!(refused["reason"], "CriteriaNotSatisfied");
        let message = refused["message"].as_str().unwrap_or_default();
        let image = w.image_repo();
        assert!(
            message.contains(&format!("`imageFrom('{image}').tag` is \"1.1.0\"")),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "`commitFrom('{}').tag` is \"1.0.0\"",
                w.config_url
            )),
            "{message}"
        );
        let ready = condition(&warehouse, "Ready").context("Ready")?;
        assert_eq!(ready["status"], "True", "discovery itself worked");
        let table = text(&w.dray.cli(["get", "warehouses", "-p", "demo"])?);
        assert!(table.contains("CRITERIA"), "{table}");
        assert!(table.contains("freightCreationCriteria refused"), "{table}");

        // The config catches up: the matching combination is minted.
        w.config.write("apps/app.yaml", "replicas: 2\n")?;
        w.config.commit("Release 1.1.0")?;
        w.config.push("main")?;
        w.tag_config("1.1.0")?;
        w.refresh()?;
        let freight = w.freight()?;
        assert_eq!(freight.len(), 2, "{freight:#?}");
        assert_eq!(tags_of(&freight[0]), ("1.1.0".into(), "1.1.0".into()));
        let satisfied = condition(&w.warehouse()?, "FreightCreationCriteriaSatisfied")
            .cloned()
            .context("a criteria condition")?;
        assert_eq!(satisfied["status"], "True", "{satisfied:#}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_criteria_expression_that_errs_is_an_error_on_the_status() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    oci::push_image(&w.registry, "demo/app", "1.0.0").await?;
    // `int()` of a tag that is not a number: valid at apply time, fails when evaluated.
    let spec = format!(
        "  freightCreationCriteria:
    expression: int(imageFrom('{image}').tag) > 0
  subscriptions:
    - image: {{repoURL: {image}, insecure: true}}
",
        image = w.image_repo()
    );
    tokio::task::block_in_place(|| -> Result<()> {
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        w.refresh()?;
        assert!(w.freight()?.is_empty());
        let warehouse = w.warehouse()?;
        let failed = condition(&warehouse, "FreightCreationCriteriaSatisfied")
            .context("a criteria condition")?;
        assert_eq!(failed["reason"], "CriteriaEvaluationFailed", "{failed:#}");
        let ready = condition(&warehouse, "Ready").context("Ready")?;
        assert_eq!(ready["status"], "False", "{ready:#}");
        assert!(
            ready["message"]
                .as_str()
                .is_some_and(|m| m.contains("could not be evaluated") && m.contains("int")),
            "{ready:#}"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_criteria_and_filters_that_cannot_work() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    tokio::task::block_in_place(|| -> Result<()> {
        let spec = format!(
            "  freightCreationCriteria:
    expression: imageFrom('{image}-typo').tag == ''
  subscriptions:
    - image: {{repoURL: {image}, insecure: true}}
    - git: {{repoURL: {git}, expressionFilter: \"msg == ''\", since: yesterday}}
",
            image = w.image_repo(),
            git = w.config_url
        );
        let output = w.apply(&w.warehouse_yaml(&spec))?;
        let said = text(&output);
        assert!(!output.status.success(), "{said}");
        assert!(
            said.contains("spec.freightCreationCriteria.expression"),
            "{said}"
        );
        assert!(said.contains("names no image subscription"), "{said}");
        assert!(
            said.contains("spec.subscriptions[1].git.expressionFilter"),
            "{said}"
        );
        assert!(said.contains("no variable `msg`"), "{said}");
        assert!(said.contains("spec.subscriptions[1].git.since"), "{said}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expression_filter_and_since_choose_the_config_commit() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    tokio::task::block_in_place(|| -> Result<()> {
        // The initial commit is backdated (committer time 2020) so `since` excludes it.
        let path = w.config.path();
        let amended = git(&w.world)
            .arg("-C")
            .arg(path)
            .args(["commit", "--quiet", "--amend", "--no-edit"])
            .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
            .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
            .output()?;
        assert!(amended.status.success(), "{}", text(&amended));
        w.config.force_push("main")?;
        w.config.write("apps/app.yaml", "replicas: 2\n")?;
        let kept = w.config.commit("Scale to two")?;
        w.config.write("apps/app.yaml", "replicas: 3\n")?;
        w.config.commit("wip: try three")?;
        w.config.push("main")?;

        let spec = format!(
            "  subscriptions:
    - git:
        repoURL: {git}
        expressionFilter: \"!subject.startsWith('wip')\"
        since: 2024-01-01T00:00:00Z
",
            git = w.config_url
        );
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        w.refresh()?;
        let warehouse = w.warehouse()?;
        let commits: Vec<&str> = warehouse["status"]["subscriptions"][0]["commits"]
            .as_array()
            .context("discovered commits")?
            .iter()
            .filter_map(|c| c["id"].as_str())
            .collect();
        assert_eq!(
            commits,
            vec![kept.as_str()],
            "the wip commit fails the filter and the 2020 commit is before since"
        );
        let freight = w.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        assert_eq!(freight[0]["commits"][0]["id"], kept.as_str());

        // A filter no commit passes leaves a message that names the filters.
        let spec = spec.replace("!subject.startsWith('wip')", "subject == 'nothing'");
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        let refreshed = w
            .dray
            .cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])?;
        assert!(!refreshed.status.success(), "{}", text(&refreshed));
        let warehouse = w.warehouse()?;
        let message = warehouse["status"]["subscriptions"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("passes expressionFilter and since"),
            "{warehouse:#}"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_warehouse_records_discoveries_and_a_person_mints_the_newest() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    let digest = oci::push_image(&w.registry, "demo/app", "1.1.0").await?;
    let spec = w.same_tag_spec("Manual");
    tokio::task::block_in_place(|| -> Result<()> {
        w.tag_config("1.0.0")?;
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        w.refresh()?;
        assert!(w.freight()?.is_empty(), "Manual mints nothing by itself");
        let warehouse = w.warehouse()?;
        let subs = &warehouse["status"]["subscriptions"];
        assert_eq!(
            subs[0]["images"][0]["digest"],
            digest.as_str(),
            "{warehouse:#}"
        );
        assert_eq!(subs[1]["commits"][0]["tag"], "1.0.0", "{warehouse:#}");
        let refused = condition(&warehouse, "FreightCreationCriteriaSatisfied")
            .context("the criteria's verdict is shown under Manual too")?;
        assert_eq!(refused["status"], "False");

        // A person mints the newest combination; the criteria's objection is recorded.
        let output = w.dray.cli([
            "freight",
            "create",
            "-p",
            "demo",
            "--warehouse",
            "app",
            "--newest",
        ])?;
        let said = text(&output);
        assert!(output.status.success(), "{said}");
        assert!(said.contains("created"), "{said}");
        assert!(
            said.contains("warning: criteriaNotMet: freightCreationCriteria refused"),
            "{said}"
        );
        let freight = w.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        assert_eq!(tags_of(&freight[0]), ("1.1.0".into(), "1.0.0".into()));
        assert_eq!(freight[0]["images"][0]["digest"], digest.as_str());
        assert_eq!(
            freight[0]["commits"][0]["id"],
            w.config.head("main")?.as_str()
        );
        assert!(
            freight[0]["warnings"][0]
                .as_str()
                .is_some_and(|m| m.starts_with("criteriaNotMet: ")),
            "{:#}",
            freight[0]
        );

        // --newest with explicit artifacts is a usage error, before any request.
        let output = w.dray.cli([
            "freight",
            "create",
            "-p",
            "demo",
            "--warehouse",
            "app",
            "--newest",
            "--commit",
            "x@y",
        ])?;
        assert!(!output.status.success(), "{}", text(&output));
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_expression_filter_skips_tags_before_anything_is_pinned() -> Result<()> {
    let w = tokio::task::block_in_place(World::start)?;
    let kept = oci::push_image(&w.registry, "demo/app", "build-1").await?;
    oci::push_image(&w.registry, "demo/app", "build-2-debug").await?;
    let spec = format!(
        "  subscriptions:
    - image:
        repoURL: {image}
        insecure: true
        imageSelectionStrategy: Lexical
        expressionFilter: \"!tag.endsWith('-debug')\"
",
        image = w.image_repo()
    );
    tokio::task::block_in_place(|| -> Result<()> {
        w.apply_ok(&w.warehouse_yaml(&spec))?;
        w.refresh()?;
        let warehouse = w.warehouse()?;
        let images: Vec<&str> = warehouse["status"]["subscriptions"][0]["images"]
            .as_array()
            .context("discovered images")?
            .iter()
            .filter_map(|i| i["tag"].as_str())
            .collect();
        assert_eq!(images, vec!["build-1"], "{warehouse:#}");
        let freight = w.freight()?;
        assert_eq!(freight[0]["images"][0]["digest"], kept.as_str());
        Ok(())
    })
}
