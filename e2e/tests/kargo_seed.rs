//! The seed article's Kargo project (`e2e/src/fixtures/kargo-seed`, verbatim but for its
//! last `argocd-update` step) applied unchanged to `dray serve`, with only its hosts
//! changed: `kargo.akuity.io/v1alpha1` documents and Kargo's Secrets are read as Dray's,
//! the Warehouse mints Freight of the image and the config commit, dev is auto-promoted, and
//! the chart is rendered with the real Helm SDK, pinned by tag@digest, onto `stage/dev` with
//! the commit message the task's expr-lang template says. The generic receiver's Kargo
//! `actions` refresh the Warehouse they name.

use anyhow::{Context, Result, bail};
use dray_e2e::pipeline::{Pipeline, Services, alias, id, text};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use serde_json::Value;

/// The seed's hosts.
const SEED_GIT_URL: &str = "https://git.example.com/platform/myapp-cd.git";
const SEED_REGISTRY: &str = "registry.example.com";

/// The config repository the seed renders: its chart and one values file per Stage.
fn seed_config_repo(repo: &GitRepo) -> Result<String> {
    repo.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: myapp\nversion: 0.1.0\n",
    )?;
    repo.write(
        "chart/templates/deployment.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        - name: app
          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"
",
    )?;
    repo.write(
        "chart/values.yaml",
        "replicas: 1\nimage: {repository: unset, tag: unset}\n",
    )?;
    for (stage, replicas) in [("dev", 1), ("staging", 2), ("prod", 3)] {
        repo.write(
            &format!("values-{stage}.yaml"),
            &format!("replicas: {replicas}\n"),
        )?;
    }
    repo.write("README.md", "# myapp CD\n")?;
    repo.commit("myapp chart and values")?;
    repo.push("main")?;
    repo.head("main")
}

/// The seed's files with this world's hosts, in a directory for `dray apply -f DIR`.
fn localised_seed(world: &TestWorld, git_url: &str, registry: &str) -> Result<String> {
    let dir = world.unique_dir("kargo-seed")?;
    std::fs::create_dir_all(&dir)?;
    let source = workspace_root().join("e2e/src/fixtures/kargo-seed");
    for entry in std::fs::read_dir(&source)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?
            .replace(SEED_GIT_URL, git_url)
            .replace(SEED_REGISTRY, registry);
        std::fs::write(dir.join(path.file_name().context("file name")?), text)?;
    }
    Ok(dir.to_str().context("utf-8")?.to_owned())
}

/// The real `helm` the tests pin (e2e/tools/versions.env), built from its Go module.
fn real_helm() -> Result<String> {
    let helm = dray_e2e::tools::helm()?;
    Ok(helm.to_str().context("utf-8")?.to_owned())
}

fn json(p: &Pipeline, args: &[&str]) -> Result<Value> {
    json_in(p, "myapp", args)
}

fn json_in(p: &Pipeline, project: &str, args: &[&str]) -> Result<Value> {
    let mut all = vec!["-p", project];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let output = p.dray.cli(all)?;
    if !output.status.success() {
        bail!("dray {args:?} failed: {}", text(&output));
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn freight(p: &Pipeline) -> Result<Vec<Value>> {
    Ok(serde_json::from_value(json(p, &["get", "freight"])?)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_kargo_project_applies_unchanged_and_auto_promotes_dev_pinned_by_digest()
-> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let old = oci::push_image(&registry, "myapp", "1.2.0").await?;
    let digest = oci::push_image(&registry, "myapp", "1.4.0").await?;
    assert_ne!(old, digest);
    let git = GitServer::start(&world, Default::default())?;
    let git_url = git.create_repo("platform/myapp-cd")?;
    let config = GitRepo::clone_from_url(&world, &git_url)?;
    let config_commit = seed_config_repo(&config)?;
    let options = DrayOptions {
        args: vec!["--helm".into(), real_helm()?],
        ..DrayOptions::default()
    };
    let dray = Dray::start(&world, options)?;
    let host = registry.host();
    let dir = localised_seed(&world, &git_url, &host)?;
    let services = Services {
        registry,
        git,
        config,
        config_url: git_url.clone(),
    };
    let p = Pipeline::from_parts(world, services, dray);

    tokio::task::block_in_place(|| -> Result<()> {
        // `dray convert kargo` prints the same documents in Dray's own form, secrets hidden.
        let converted = p.dray.cli(["convert", "kargo", "-f", &dir])?;
        assert!(converted.status.success(), "{}", text(&converted));
        let yaml = String::from_utf8_lossy(&converted.stdout).into_owned();
        assert!(!yaml.contains("kargo.akuity.io/v1alpha1"), "{yaml}");
        assert_eq!(
            yaml.matches("apiVersion: dray.dev/v1alpha1").count(),
            9,
            "{yaml}"
        );
        assert!(
            yaml.contains("dray.dev/expression-language: expr-lang"),
            "{yaml}"
        );
        assert!(yaml.contains("kind: Credential"), "{yaml}");
        assert!(
            yaml.contains("token: REDACTED") && !yaml.contains("ci-webhook-secret"),
            "{yaml}"
        );
        assert!(
            String::from_utf8_lossy(&converted.stderr).contains("--show-secrets"),
            "{}",
            text(&converted)
        );
        let shown = p
            .dray
            .cli(["convert", "kargo", "--show-secrets", "-f", &dir])?;
        assert!(text(&shown).contains("token: ci-webhook-secret-0123456789abcdef"));

        let applied = p.dray.cli(["apply", "-f", &dir])?;
        let said = text(&applied);
        assert!(applied.status.success(), "{said}");
        // Stored as Dray's kinds: the Secrets are Credentials, the task keeps its language.
        assert!(
            said.contains("credential myapp/gitlab-webhook created"),
            "{said}"
        );
        let task = json(&p, &["get", "promotiontask", "render-to-stage-branch"])?;
        assert_eq!(task["apiVersion"], "dray.dev/v1alpha1");
        assert_eq!(
            task["metadata"]["annotations"]["dray.dev/expression-language"],
            "expr-lang"
        );
        let hook = json(&p, &["get", "credential", "ci-webhook"])?;
        assert!(
            !hook.to_string().contains("ci-webhook-secret"),
            "a secret is never shown: {hook}"
        );

        // The Warehouse mints Freight of the newest ^1.3.0 image and the config commit.
        let refreshed = p
            .dray
            .cli(["-p", "myapp", "refresh", "warehouse", "myapp", "--wait"])?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let minted = freight(&p)?;
        assert_eq!(minted.len(), 1, "{minted:#?}");
        let target = &minted[0];
        assert_eq!(target["images"][0]["tag"], "1.4.0", "{target:#?}");
        assert_eq!(target["images"][0]["digest"], digest.as_str());
        assert_eq!(target["commits"][0]["id"], config_commit.as_str());
        let freight_name = id(target);

        // dev is auto-promoted (promotionPolicies[].stage), and the render lands on
        // stage/dev with the template's message and the image pinned by tag@digest.
        let subject = p.wait_until("the auto-promotion of dev to push stage/dev", || {
            let branches = p.config.branches()?;
            if !branches.iter().any(|b| b == "stage/dev") {
                return Ok(None);
            }
            Ok(p.config
                .log("stage/dev")?
                .first()
                .map(|c| c.subject.clone()))
        })?;
        let short = &config_commit[..7];
        assert_eq!(
            subject,
            format!("myapp 1.4.0 + config {short} → dev (Freight {freight_name})")
        );
        let manifests = p.config.show("stage/dev", "manifests.yaml")?;
        assert!(
            manifests.contains(&format!("image: \"{host}/myapp:1.4.0@{digest}\"")),
            "{manifests}"
        );
        assert!(manifests.contains("replicas: 1"), "{manifests}");
        let alias = alias(target);
        p.wait_until(&format!("`dev` to hold `{alias}`"), || {
            let dev = json(&p, &["get", "stage", "dev"])?;
            Ok((dev["status"]["currentFreight"]["alias"] == alias.as_str()).then_some(()))
        })?;
        // staging has no auto-promotion policy: it waits for a person.
        let staging = json(&p, &["get", "stage", "staging"])?;
        assert!(
            staging["status"]["currentFreight"].is_null(),
            "{staging:#?}"
        );
        Ok(())
    })?;

    // The CI webhook: the generic receiver's Kargo actions refresh Warehouse `myapp`.
    let newer = oci::push_image(&p.registry, "myapp", "1.4.1").await?;
    let url = format!(
        "{}/webhooks/myapp/ci-image-pushed/ci-webhook-secret-0123456789abcdef",
        p.dray.url()
    );
    let client = dray_e2e::http_client()?;
    let answer = client
        .post(&url)
        .json(&serde_json::json!({"image": "myapp:1.4.1"}))
        .send()
        .await?;
    let status = answer.status();
    let body: Value = answer.json().await?;
    assert!(status.is_success(), "{status}: {body}");
    assert_eq!(body["warehouses"], serde_json::json!(["myapp"]), "{body}");
    let forged = client
        .post(url.replace("0123456789abcdef", "0123456789abcdeX"))
        .json(&serde_json::json!({}))
        .send()
        .await?;
    assert_eq!(forged.status(), reqwest::StatusCode::UNAUTHORIZED);
    tokio::task::block_in_place(|| {
        p.wait_until("the webhook's refresh to mint Freight of 1.4.1", || {
            Ok(freight(&p)?
                .iter()
                .any(|f| f["images"][0]["digest"] == newer.as_str())
                .then_some(()))
        })
    })
}

/// A Kargo Warehouse's `expressionFilter` and `freightCreationCriteria` are expr-lang, as in
/// Kargo: `dray apply` checks them in that language (a CEL spelling is refused with the way
/// to write it), and discovery skips the commit the filter refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kargo_warehouse_filters_commits_in_expr_lang_end_to_end() -> Result<()> {
    let world = TestWorld::new()?;
    let registry = Registry::start(&world, Default::default())?;
    let git = GitServer::start(&world, Default::default())?;
    let git_url = git.create_repo("platform/filtered")?;
    let config = GitRepo::clone_from_url(&world, &git_url)?;
    config.write("app/config.yaml", "replicas: 1\n")?;
    config.commit("feat: first config")?;
    config.push("main")?;
    let wanted = config.head("main")?;
    config.write("app/config.yaml", "replicas: 2\n")?;
    config.commit("chore: bump [skip-ci]")?;
    config.push("main")?;
    let skipped = config.head("main")?;
    let documents = |filter: &str| {
        format!(
            "apiVersion: kargo.akuity.io/v1alpha1
kind: Project
metadata:
  name: filtered
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Warehouse
metadata:
  name: config
  namespace: filtered
spec:
  freightCreationCriteria:
    expression: commitFrom('{git_url}').ID != ''
  subscriptions:
    - git:
        repoURL: {git_url}
        branch: main
        expressionFilter: \"{filter}\"
"
        )
    };
    let dir = world.unique_dir("kargo-filter")?;
    std::fs::create_dir_all(&dir)?;
    let cel = dir.join("cel.yaml").display().to_string();
    std::fs::write(&cel, documents("!subject.contains('[skip-ci]')"))?;
    let kargo = dir.join("kargo.yaml").display().to_string();
    std::fs::write(&kargo, documents("!(subject contains '[skip-ci]')"))?;
    let dray = Dray::start(&world, DrayOptions::default())?;
    let services = Services {
        registry,
        git,
        config,
        config_url: git_url.clone(),
    };
    let p = Pipeline::from_parts(world, services, dray);
    tokio::task::block_in_place(|| -> Result<()> {
        let refused = p.dray.cli(["apply", "-f", &cel])?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("spec.subscriptions[0].git.expressionFilter")
                && said.contains("has no method contains")
                && said.contains("`subject contains 'x'`"),
            "{said}"
        );
        let applied = p.dray.cli(["apply", "-f", &kargo])?;
        assert!(applied.status.success(), "{}", text(&applied));
        let refreshed =
            p.dray
                .cli(["-p", "filtered", "refresh", "warehouse", "config", "--wait"])?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let minted: Vec<Value> =
            serde_json::from_value(json_in(&p, "filtered", &["get", "freight"])?)?;
        assert_eq!(minted.len(), 1, "{minted:#?}");
        assert_eq!(
            minted[0]["commits"][0]["id"],
            wanted.as_str(),
            "the [skip-ci] commit {skipped} is filtered out: {minted:#?}"
        );
        Ok(())
    })
}
