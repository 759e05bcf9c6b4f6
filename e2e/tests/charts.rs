//! Helm chart subscriptions end to end: a real classic chart repository (real chart
//! archives and an `index.yaml` served over HTTP, behind basic auth) and real charts pushed
//! into the real `docker-registry` as OCI artifacts with Helm's media types; `dray serve`
//! discovering them, minting Freight with the chart versions (and OCI digests), `dray get
//! freight` showing them, and a Stage's promotion rendering the chart at the Freight's
//! version with the `helm` shim over Helm's SDK.

use std::process::Output;

use anyhow::{Context, Result, bail};
use dray::api::ChartSubscription;
use dray::discovery::chart::{ChartDiscoverer, ChartDiscoveryError};
use dray::discovery::image::{ImageDiscoverer, ImageDiscovererOptions, RegistryCredentials};
use dray_e2e::chart_repo::{ChartRepo, build_chart};
use dray_e2e::pipeline::text;
use dray_e2e::{
    Credentials, Dray, DrayOptions, GitRepo, GitServer, Registry, RegistryOptions, TestWorld, oci,
};
use dray_steps::GitCredentials;
use dray_steps::helm::{ChartRef, ChartRepoError, fetch_chart};
use serde_json::Value;

/// The real `helm` the tests pin (e2e/tools/versions.env), built from its Go module.
fn real_helm() -> Result<String> {
    let helm = dray_e2e::tools::helm()?;
    Ok(helm.to_str().context("utf-8")?.to_owned())
}

/// A world with a git server holding the config repository (where stage branches go) and
/// `dray serve` using the real helm.
struct Fixture {
    world: TestWorld,
    _git: GitServer,
    config: GitRepo,
    config_url: String,
    dray: Dray,
}

impl Fixture {
    fn start(world: TestWorld) -> Result<Self> {
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        let config = GitRepo::clone_from_url(&world, &config_url)?;
        config.write("README.md", "# config\n")?;
        config.commit("Initial config")?;
        config.push("main")?;
        let options = DrayOptions {
            args: vec!["--helm".into(), real_helm()?],
            ..DrayOptions::default()
        };
        let dray = Dray::start(&world, options)?;
        Ok(Self {
            world,
            _git: git,
            config,
            config_url,
            dray,
        })
    }

    fn try_apply(&self, yaml: &str) -> Result<Output> {
        let file = self.world.unique_dir("manifests")?.with_extension("yaml");
        std::fs::write(&file, yaml)?;
        self.dray
            .cli(["apply", "-f", file.to_str().context("utf-8")?])
    }

    fn apply(&self, yaml: &str) -> Result<()> {
        let output = self.try_apply(yaml)?;
        if !output.status.success() {
            bail!("apply failed: {}", text(&output));
        }
        Ok(())
    }

    fn refresh(&self) -> Result<Output> {
        self.dray
            .cli(["refresh", "warehouse", "charts", "-p", "demo", "--wait"])
    }

    fn json(&self, args: &[&str]) -> Result<Value> {
        let mut all = vec!["-p", "demo"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let output = self.dray.cli(all)?;
        if !output.status.success() {
            bail!("dray {args:?} failed: {}", text(&output));
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn freight(&self) -> Result<Vec<Value>> {
        Ok(serde_json::from_value(self.json(&["get", "freight"])?)?)
    }

    fn subscription_message(&self) -> Result<String> {
        let warehouse = self.json(&["get", "warehouse", "charts"])?;
        Ok(warehouse["status"]["subscriptions"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// The project, a Warehouse `charts` with `chart` (YAML of the subscription's fields,
    /// indented for it) and a Stage `dev` that renders `template_chart` (the step's
    /// `chart:` fields) onto `stage/dev`.
    fn pipeline_yaml(&self, chart: &str, template_chart: &str) -> String {
        format!(
            "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: charts, namespace: demo}}
spec:
  interval: 1h
  subscriptions:
    - chart:
{chart}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: charts}}
      sources: {{direct: true}}
  promotionTemplate:
    spec:
      steps:
        - uses: git-clone
          config:
            repoURL: {config}
            checkout:
              - branch: stage/${{{{ ctx.stage }}}}
                create: true
                path: ./out
        - uses: git-clear
          config: {{path: ./out}}
        - uses: helm-template
          config:
            chart:
{template_chart}
            releaseName: web
            outPath: ./out/manifests.yaml
        - uses: git-commit
          config:
            path: ./out
            message: Render ${{{{ ctx.targetFreight.alias }}}}
        - uses: git-push
          config:
            path: ./out
            targetBranch: stage/${{{{ ctx.stage }}}}
",
            config = self.config_url,
        )
    }

    /// Promotes `alias` into `dev` and returns the rendered manifests on `stage/dev`.
    fn promote_and_read(&self, alias: &str) -> Result<String> {
        let promoted = self.dray.cli([
            "-p",
            "demo",
            "promote",
            "--stage",
            "dev",
            "--alias",
            alias,
            "--wait",
            "--timeout",
            "2m",
        ])?;
        if !promoted.status.success() {
            bail!("promoting `{alias}` failed: {}", text(&promoted));
        }
        self.config.show("stage/dev", "manifests.yaml")
    }
}

fn charts_of(freight: &Value) -> Vec<(String, String, Option<String>)> {
    freight["charts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["version"].as_str().unwrap_or_default().to_owned(),
                c["digest"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_repository_behind_basic_auth_mints_the_constrained_version_and_renders_it()
-> Result<()> {
    tokio::task::block_in_place(|| -> Result<()> {
        let world = TestWorld::new()?;
        let secret = "chart-repo-s3cret";
        let repo = ChartRepo::start(&world, Some(Credentials::new("bot", secret)))?;
        for version in ["1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"] {
            repo.publish_built(&world, "app", version, &format!("built-{version}"))?;
        }
        repo.publish_built(&world, "other", "9.0.0", "other")?;
        let f = Fixture::start(world)?;
        let url = repo.url();

        // Apply refuses what discovery could not use, naming the field.
        let refused = f.try_apply(&f.pipeline_yaml(
            &format!("        repoURL: {url}\n        semverConstraint: \"^1.0.0 ^2.0.0\""),
            "              {repoURL: x, version: y}",
        ))?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(said.contains("spec.subscriptions[0].chart.name"), "{said}");
        assert!(said.contains("needs the chart's `name`"), "{said}");
        assert!(
            said.contains("spec.subscriptions[0].chart.semverConstraint"),
            "{said}"
        );

        f.apply(&f.pipeline_yaml(
            &format!("        repoURL: {url}\n        name: app\n        semverConstraint: ^1.0.0"),
            &format!(
                "              repoURL: {url}\n              name: app\n              version: ${{{{ chartFrom('{url}', 'app').version }}}}"
            ),
        ))?;
        f.refresh()?;
        let message = f.subscription_message()?;
        assert!(
            message.contains("wants credentials and none were given")
                && message.contains("Credential of type `helm`"),
            "{message}"
        );
        assert!(f.freight()?.is_empty());
        let refused_before = repo.refused();
        assert!(refused_before >= 1);

        let credential = |password: &str| {
            format!(
                "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: charts, namespace: demo}}\nspec:\n  type: helm\n  repoURL: {url}\n  username: bot\n  password: {password}\n"
            )
        };
        f.apply(&credential("wrong-password"))?;
        f.refresh()?;
        let message = f.subscription_message()?;
        assert!(
            message.contains("refused the credentials of `bot`"),
            "{message}"
        );
        assert!(repo.refused() > refused_before);

        f.apply(&credential(secret))?;
        let refreshed = f.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let freight = f.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        // ^1.0.0: 2.0.0 is out of range, 1.2.0-rc.1 a pre-release the range does not name.
        assert_eq!(
            charts_of(&freight[0]),
            [("app".to_owned(), "1.1.0".to_owned(), None)]
        );
        assert_eq!(freight[0]["charts"][0]["repoURL"], url.as_str());
        let warehouse = f.json(&["get", "warehouse", "charts"])?;
        let versions: Vec<&str> = warehouse["status"]["subscriptions"][0]["charts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["version"].as_str())
            .collect();
        assert_eq!(versions, ["1.1.0", "1.0.0"]);

        let table = text(&f.dray.cli(["get", "freight", "-p", "demo"])?);
        assert!(
            table.contains("CHARTS") && table.contains("app:1.1.0"),
            "{table}"
        );

        let alias = freight[0]["alias"].as_str().context("alias")?;
        let rendered = f.promote_and_read(alias)?;
        assert!(rendered.contains("marker: \"built-1.1.0\""), "{rendered}");
        assert!(rendered.contains("chartVersion: \"1.1.0\""), "{rendered}");
        assert!(rendered.contains("name: web-app"), "{rendered}");
        assert!(
            !f.dray.log().contains(secret),
            "the password must not be logged"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oci_charts_pin_their_digest_map_tags_back_to_versions_and_render_at_the_freight_s_version()
-> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, RegistryOptions::default())?;
    let mut digests = std::collections::BTreeMap::new();
    for version in ["0.1.0", "0.2.0", "0.2.1+build.7", "0.3.0-rc.1"] {
        let archive = build_chart(&world, "app", version, &format!("oci-{version}"))?;
        let digest = oci::push_chart(&registry, "charts/app", "app", version, &archive).await?;
        digests.insert(version, digest);
    }
    tokio::task::block_in_place(|| -> Result<()> {
        let f = Fixture::start(world)?;
        let url = format!("oci://{}/charts/app", registry.host());
        let yaml = |constraint: &str| {
            f.pipeline_yaml(
                &format!("        repoURL: {url}\n        insecure: true{constraint}"),
                &format!(
                    "              repoURL: {url}\n              version: ${{{{ chartFrom('{url}').version }}}}\n              insecure: true"
                ),
            )
        };
        let refused = f.try_apply(&f.pipeline_yaml(
            &format!("        repoURL: {url}\n        name: app"),
            "              {repoURL: x, version: y}",
        ))?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("spec.subscriptions[0].chart.name") && said.contains("oci://"),
            "{said}"
        );

        f.apply(&yaml(""))?;
        let refreshed = f.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let freight = f.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        // Tag `0.2.1_build.7` is version `0.2.1+build.7`, the highest release.
        let expected = (
            "app".to_owned(),
            "0.2.1+build.7".to_owned(),
            Some(digests["0.2.1+build.7"].clone()),
        );
        assert_eq!(charts_of(&freight[0]), [expected]);
        let table = text(&f.dray.cli(["get", "freight", "-p", "demo"])?);
        assert!(table.contains("app:0.2.1+build.7@sha256:"), "{table}");

        let alias = freight[0]["alias"].as_str().context("alias")?.to_owned();
        let rendered = f.promote_and_read(&alias)?;
        assert!(
            rendered.contains("marker: \"oci-0.2.1+build.7\""),
            "{rendered}"
        );

        // A constraint naming a pre-release admits it.
        f.apply(&yaml("\n        semverConstraint: \">=0.3.0-rc.0\""))?;
        let refreshed = f.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let newest = f
            .freight()?
            .into_iter()
            .find(|fr| fr["alias"] != alias.as_str())
            .context("Freight for the pre-release")?;
        assert_eq!(
            charts_of(&newest),
            [(
                "app".to_owned(),
                "0.3.0-rc.1".to_owned(),
                Some(digests["0.3.0-rc.1"].clone())
            )]
        );
        let alias = newest["alias"].as_str().context("alias")?;
        let rendered = f.promote_and_read(alias)?;
        assert!(
            rendered.contains("marker: \"oci-0.3.0-rc.1\""),
            "{rendered}"
        );

        // The version is pushed again with other content: new Freight, flagged, pinned by
        // the new digest, and the promotion renders what that digest holds.
        let archive = build_chart(&f.world, "app", "0.3.0-rc.1", "oci-rebuilt")?;
        let push = oci::push_chart(&registry, "charts/app", "app", "0.3.0-rc.1", &archive);
        let rebuilt = tokio::runtime::Handle::current().block_on(push)?;
        let refreshed = f.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let freight = f.freight()?;
        let moved = freight
            .iter()
            .find(|fr| charts_of(fr).first().and_then(|c| c.2.as_deref()) == Some(rebuilt.as_str()))
            .context("Freight for the re-pushed chart")?;
        let warnings = moved["warnings"].to_string();
        assert!(
            warnings.contains(&format!(
                "tagMoved: `{url}:0.3.0-rc.1` now points at `{rebuilt}`"
            )),
            "{warnings}"
        );
        let rendered = f.promote_and_read(moved["alias"].as_str().context("alias")?)?;
        assert!(rendered.contains("marker: \"oci-rebuilt\""), "{rendered}");
        Ok(())
    })
}

fn oci_subscription(registry: &Registry, repo: &str) -> ChartSubscription {
    ChartSubscription {
        repo_url: format!("oci://{}/{repo}", registry.host()),
        discovery_limit: 20,
        insecure: true,
        ..ChartSubscription::default()
    }
}

#[tokio::test]
async fn registry_auth_works_for_discovery_and_download_and_an_image_is_not_a_chart() -> Result<()>
{
    let world = TestWorld::new()?;
    let auth = Credentials::new("alice", "oci-chart-pass");
    let registry = Registry::start(
        &world,
        RegistryOptions {
            auth: Some(auth.clone()),
            ..RegistryOptions::default()
        },
    )?;
    let archive = build_chart(&world, "web", "1.4.0", "web-1.4.0")?;
    let digest = oci::push_chart(&registry, "charts/web", "web", "1.4.0", &archive).await?;
    oci::push_image(&registry, "charts/notachart", "1.0.0").await?;
    let discoverer = ChartDiscoverer::new(ImageDiscoverer::new(ImageDiscovererOptions::default())?);
    let creds = RegistryCredentials {
        username: auth.username.clone(),
        password: auth.password.clone(),
    };
    let sub = oci_subscription(&registry, "charts/web");

    let err = discoverer.discover(&sub, None).await.unwrap_err();
    assert!(err.to_string().contains("authentication failed"), "{err}");
    let found = discoverer.discover(&sub, Some(&creds)).await?;
    assert_eq!(found.charts.len(), 1);
    assert_eq!(
        (
            found.charts[0].version.as_str(),
            found.charts[0].digest.as_deref()
        ),
        ("1.4.0", Some(digest.as_str()))
    );
    assert_eq!(found.charts[0].to_freight_chart().name, "web");

    let err = discoverer
        .discover(
            &oci_subscription(&registry, "charts/notachart"),
            Some(&creds),
        )
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        matches!(
            err,
            ChartDiscoveryError::Repository(ChartRepoError::NotAChart { .. })
        ),
        "{said}"
    );
    assert!(
        said.contains("is not a Helm chart")
            && said.contains("application/vnd.oci.image.config.v1+json"),
        "{said}"
    );

    // The steps' download: the chart layer, by digest, with the registry's Basic challenge.
    let http = dray_e2e::http_client()?;
    let chart = ChartRef {
        repo_url: &sub.repo_url,
        name: "web",
        version: "1.4.0",
        digest: Some(&digest),
        insecure: true,
    };
    let steps_creds = GitCredentials {
        username: auth.username.clone(),
        password: auth.password.clone(),
    };
    assert_eq!(
        fetch_chart(&http, &chart, Some(&steps_creds)).await?,
        archive
    );
    let err = fetch_chart(&http, &chart, None).await.unwrap_err();
    assert!(matches!(err, ChartRepoError::AuthFailed { .. }), "{err}");
    let wrong = format!("sha256:{}", "0".repeat(64));
    let err = fetch_chart(
        &http,
        &ChartRef {
            digest: Some(&wrong),
            ..chart
        },
        Some(&steps_creds),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("HTTP 404"), "{err}");
    Ok(())
}
