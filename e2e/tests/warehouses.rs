//! Warehouses end to end: a real registry and a real git server, `dray serve` discovering
//! them, minting Freight and saying what went wrong when something does.

use std::process::Output;

use anyhow::{Context, Result, bail};
use dray_e2e::{
    Credentials, Dray, DrayOptions, GitRepo, GitServer, Registry, RegistryOptions, TestWorld, oci,
};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

struct Pipeline {
    world: TestWorld,
    registry: Registry,
    git: GitServer,
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

fn warehouse_yaml(registry: &str, config_url: &str, image_extra: &str) -> String {
    format!(
        "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {{name: demo}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: app, namespace: demo}}
spec:
  interval: 1s
  subscriptions:
    - image:
        repoURL: {registry}/demo/app
        constraint: ^1.0.0
        insecure: true{image_extra}
    - git:
        repoURL: {config_url}
        branch: main
        includePaths: [apps/]
"
    )
}

impl Pipeline {
    fn start(registry_options: RegistryOptions) -> Result<Self> {
        let world = TestWorld::new()?;
        let registry = Registry::start(&world, registry_options)?;
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        let config = GitRepo::clone_from_url(&world, &config_url)?;
        config.write("apps/app.yaml", "replicas: 1\n")?;
        config.write("README.md", "# config\n")?;
        config.commit("Initial config")?;
        config.push("main")?;
        let dray = Dray::start(&world, DrayOptions::default())?;
        Ok(Pipeline {
            world,
            registry,
            git,
            config,
            config_url,
            dray,
        })
    }

    fn apply(&self, yaml: &str) -> Result<()> {
        let file = self.world.unique_dir("manifests")?.with_extension("yaml");
        std::fs::write(&file, yaml)?;
        let output = self
            .dray
            .cli(["apply", "-f", file.to_str().context("utf-8")?])?;
        if !output.status.success() {
            bail!("apply failed: {}", text(&output));
        }
        Ok(())
    }

    fn refresh(&self) -> Result<Output> {
        self.dray
            .cli(["refresh", "warehouse", "app", "-p", "demo", "--wait"])
    }

    fn freight(&self) -> Result<Vec<Value>> {
        let output = self
            .dray
            .cli(["get", "freight", "-p", "demo", "-o", "json"])?;
        if !output.status.success() {
            bail!("get freight failed: {}", text(&output));
        }
        Ok(serde_json::from_slice::<Vec<Value>>(&output.stdout)?)
    }

    fn warehouse(&self) -> Result<Value> {
        let output = self
            .dray
            .cli(["get", "warehouse", "app", "-p", "demo", "-o", "json"])?;
        Ok(serde_json::from_slice(&output.stdout)?)
    }
}

fn images_of(freight: &Value) -> Vec<(String, String)> {
    freight["images"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                i["tag"].as_str().unwrap_or("").to_owned(),
                i["digest"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semver_selection_pins_the_registry_digest_and_the_branch_head() -> Result<()> {
    let p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    let mut digests = std::collections::BTreeMap::new();
    for tag in ["1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"] {
        digests.insert(tag, oci::push_image(&p.registry, "demo/app", tag).await?);
    }
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&warehouse_yaml(&p.registry.host(), &p.config_url, ""))?;
        let refreshed = p.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        let freight = p.freight()?;
        assert_eq!(freight.len(), 1, "{freight:#?}");
        assert_eq!(
            images_of(&freight[0]),
            vec![("1.1.0".to_owned(), digests["1.1.0"].clone())]
        );
        assert_eq!(
            freight[0]["commits"][0]["id"],
            json!(p.config.head("main")?)
        );
        assert_eq!(
            freight[0]["origin"],
            json!({"kind": "Warehouse", "name": "app"})
        );
        assert!(
            freight[0]["alias"]
                .as_str()
                .is_some_and(|a| a.contains('-'))
        );

        // A README-only commit mints nothing.
        p.config.write("README.md", "# config, explained\n")?;
        p.config.commit("Explain the config")?;
        p.config.push("main")?;
        assert!(p.refresh()?.status.success());
        assert_eq!(
            p.freight()?.len(),
            1,
            "a commit outside includePaths must mint nothing"
        );

        // A commit under includePaths mints Freight paired with the current image.
        p.config.write("apps/app.yaml", "replicas: 2\n")?;
        let head = p.config.commit("Scale to two")?;
        p.config.push("main")?;
        assert!(p.refresh()?.status.success());
        let freight = p.freight()?;
        assert_eq!(freight.len(), 2, "{freight:#?}");
        assert_eq!(freight[0]["commits"][0]["id"], json!(head), "newest first");
        assert_eq!(
            images_of(&freight[0]),
            vec![("1.1.0".to_owned(), digests["1.1.0"].clone())]
        );

        let table = text(
            &p.dray
                .cli(["get", "freight", "-p", "demo", "--warehouse", "app"])?,
        );
        assert!(table.contains("demo/app:1.1.0@sha256:"), "{table}");
        assert!(table.contains("Scale to two"), "{table}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_tag_mints_freight_flagged_tag_moved() -> Result<()> {
    let p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    let first = oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&warehouse_yaml(&p.registry.host(), &p.config_url, ""))?;
        assert!(p.refresh()?.status.success());
        Ok(())
    })?;
    let second = oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    assert_ne!(first, second);
    tokio::task::block_in_place(|| -> Result<()> {
        let refreshed = p.refresh()?;
        assert!(
            text(&refreshed).contains("tagMoved"),
            "{}",
            text(&refreshed)
        );
        let freight = p.freight()?;
        assert_eq!(freight.len(), 2);
        assert_eq!(
            images_of(&freight[0]),
            vec![("1.0.0".to_owned(), second.clone())]
        );
        let warning = freight[0]["warnings"][0].as_str().unwrap_or_default();
        assert!(warning.starts_with("tagMoved"), "{warning}");
        assert!(
            warning.contains(&first),
            "the warning names the previous digest: {warning}"
        );
        let status = p.warehouse()?;
        assert!(
            status["status"]["warnings"][0]
                .as_str()
                .unwrap_or_default()
                .contains(&first)
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_registry_is_reported_and_discovery_recovers_by_itself() -> Result<()> {
    let mut p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.registry.stop()?;
        p.apply(&warehouse_yaml(&p.registry.host(), &p.config_url, ""))?;
        let refreshed = p.refresh()?;
        assert!(!refreshed.status.success());
        let said = text(&refreshed);
        assert!(said.contains("unreachable"), "{said}");
        assert!(said.contains(&p.registry.host()), "{said}");
        assert!(
            p.freight()?.is_empty(),
            "nothing may be minted while a subscription fails"
        );
        let ready = &p.warehouse()?["status"]["conditions"][0];
        assert_eq!(ready["status"], "False");

        p.registry.restart()?;
        // No refresh request: the 1s interval must bring discovery back by itself.
        let mut freight = Vec::new();
        for _ in 0..300 {
            freight = p.freight()?;
            if !freight.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(freight.len(), 1, "discovery did not recover within 30s");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_credentials_work_and_never_leak() -> Result<()> {
    let secret = "s3cr3t-registry-pass";
    let auth = Credentials::new("ci", secret);
    let p = tokio::task::block_in_place(|| {
        Pipeline::start(RegistryOptions {
            auth: Some(auth.clone()),
            ..Default::default()
        })
    })?;
    let digest = oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&warehouse_yaml(&p.registry.host(), &p.config_url, ""))?;
        let refreshed = p.refresh()?;
        let said = text(&refreshed);
        assert!(!refreshed.status.success(), "{said}");
        assert!(said.contains("authentication failed"), "{said}");
        assert!(
            said.contains("Credential"),
            "the error says what to do: {said}"
        );

        let credential = format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: registry, namespace: demo}}\nspec:\n  type: image\n  repoURL: {}/demo/app\n  username: ci\n  password: {secret}\n",
            p.registry.host()
        );
        p.apply(&credential)?;
        let refreshed = p.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        assert_eq!(
            images_of(&p.freight()?[0]),
            vec![("1.0.0".to_owned(), digest.clone())]
        );

        let shown = text(
            &p.dray
                .cli(["get", "credentials", "-p", "demo", "-o", "json"])?,
        );
        assert!(
            shown.contains("\"password\""),
            "secretFields names the field: {shown}"
        );
        assert!(
            !shown.contains(secret),
            "the API must not return the secret: {shown}"
        );
        let table = text(&p.dray.cli(["get", "credentials", "-p", "demo"])?);
        assert!(
            table.contains("password") && !table.contains(secret),
            "{table}"
        );
        assert!(
            !p.dray.log().contains(secret),
            "the secret must not be logged"
        );
        let database = std::fs::read(p.dray.data_dir().join("dray.db"))?;
        let wal = std::fs::read(p.dray.data_dir().join("dray.db-wal")).unwrap_or_default();
        let needle = secret.as_bytes();
        let stored_plain = [database, wal]
            .iter()
            .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle));
        assert!(!stored_plain, "the secret must be encrypted at rest");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_selection_picks_the_arm64_manifest() -> Result<()> {
    let p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    let (_, manifests) = oci::push_index(
        &p.registry,
        "demo/app",
        "1.0.0",
        &[("linux", "amd64"), ("linux", "arm64")],
    )
    .await?;
    let arm64 = manifests
        .iter()
        .find(|(platform, _)| format!("{platform:?}").contains("arm64"))
        .map(|(_, digest)| digest.clone())
        .context("pushed an arm64 manifest")?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&warehouse_yaml(
            &p.registry.host(),
            &p.config_url,
            "\n        platform: linux/arm64",
        ))?;
        let refreshed = p.refresh()?;
        assert!(refreshed.status.success(), "{}", text(&refreshed));
        assert_eq!(
            images_of(&p.freight()?[0]),
            vec![("1.0.0".to_owned(), arm64.clone())]
        );
        Ok(())
    })
}

fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_github_push_refreshes_and_a_forged_one_is_refused() -> Result<()> {
    let p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    let secret = "gh-webhook-secret";
    tokio::task::block_in_place(|| -> Result<()> {
        let mut yaml = warehouse_yaml(&p.registry.host(), &p.config_url, "")
            .replace("interval: 1s", "interval: 1h");
        yaml.push_str(&format!(
            "---\napiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: github-webhook, namespace: demo}}\nspec: {{type: webhook, token: {secret}}}\n---\napiVersion: dray.dev/v1alpha1\nkind: ProjectConfig\nmetadata: {{name: demo, namespace: demo}}\nspec:\n  webhookReceivers:\n    - name: github\n      github: {{secretRef: github-webhook}}\n"
        ));
        p.apply(&yaml)?;
        assert!(p.refresh()?.status.success());
        Ok(())
    })?;
    let config_paths = tokio::task::block_in_place(|| {
        p.dray
            .cli(["get", "projectconfig", "demo", "-p", "demo", "-o", "json"])
    })?;
    let config: Value = serde_json::from_slice(&config_paths.stdout)?;
    assert_eq!(
        config["status"]["webhookReceivers"][0]["path"],
        "/webhooks/demo/github"
    );

    tokio::task::block_in_place(|| -> Result<()> {
        p.config.write("apps/app.yaml", "replicas: 3\n")?;
        p.config.commit("Scale to three")?;
        p.config.push("main")?;
        Ok(())
    })?;
    let body = serde_json::to_vec(&json!({
        "ref": "refs/heads/main",
        "repository": {"clone_url": p.config_url, "html_url": p.config_url.trim_end_matches(".git")}
    }))?;
    let url = format!("{}/webhooks/demo/github", p.dray.url());
    let client = dray_e2e::http_client()?;
    let send = |signature: Option<String>| {
        let mut request = client
            .post(&url)
            .header("X-GitHub-Event", "push")
            .body(body.clone());
        if let Some(signature) = signature {
            request = request.header("X-Hub-Signature-256", signature);
        }
        request.send()
    };
    let unsigned = send(None).await?;
    assert_eq!(unsigned.status(), 401);
    let forged = send(Some(github_signature("not-the-secret", &body))).await?;
    assert_eq!(forged.status(), 401);
    assert_eq!(
        p.freight_count_async().await?,
        1,
        "a refused webhook changes nothing"
    );

    let signed = send(Some(github_signature(secret, &body))).await?;
    assert_eq!(signed.status(), 200);
    let answer: Value = signed.json().await?;
    assert_eq!(answer["refreshed"], 1, "{answer}");
    let mut count = 0;
    for _ in 0..300 {
        count = p.freight_count_async().await?;
        if count == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        count, 2,
        "the webhook's refresh minted the new commit's Freight within 30s"
    );
    assert!(!p.dray.log().contains(secret));
    Ok(())
}

impl Pipeline {
    async fn freight_count_async(&self) -> Result<usize> {
        let url = format!("{}/api/v1/projects/demo/freight", self.dray.url());
        let items: Vec<Value> = dray_e2e::http_client()?
            .get(url)
            .bearer_auth(self.dray.token())
            .send()
            .await?
            .json()
            .await?;
        Ok(items.len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotfix_freight_is_checked_against_the_registry_and_the_repository() -> Result<()> {
    let p = tokio::task::block_in_place(|| Pipeline::start(Default::default()))?;
    let digest = oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    // Discovery takes the newest build (1.0.1); the hotfix pins the older 1.0.0 by hand,
    // so the two never describe the same artifacts.
    oci::push_image(&p.registry, "demo/app", "1.0.1").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(
            &warehouse_yaml(&p.registry.host(), &p.config_url, "")
                .replace("interval: 1s", "interval: 1h"),
        )?;
        let head = p.config.head("main")?;
        let image = format!("{}/demo/app:1.0.0@{digest}", p.registry.host());
        let commit = format!("{}@{head}", p.config_url);
        let created = p.dray.cli([
            "freight",
            "create",
            "-p",
            "demo",
            "--warehouse",
            "app",
            "--image",
            &image,
            "--commit",
            &commit,
            "--alias",
            "hotfix-one",
        ])?;
        assert!(created.status.success(), "{}", text(&created));
        assert!(text(&created).contains("hotfix-one"));
        let freight = p.freight()?;
        let hotfix = freight
            .iter()
            .find(|f| f["alias"] == "hotfix-one")
            .context("hotfix listed")?;
        assert_eq!(
            images_of(hotfix),
            vec![("1.0.0".to_owned(), digest.clone())]
        );

        let bogus_digest = format!(
            "{}/demo/app:1.0.0@sha256:{}",
            p.registry.host(),
            "0".repeat(64)
        );
        let refused = p.dray.cli([
            "freight",
            "create",
            "-p",
            "demo",
            "--warehouse",
            "app",
            "--image",
            &bogus_digest,
        ])?;
        assert!(!refused.status.success());
        assert!(
            text(&refused).contains("does not exist in the registry"),
            "{}",
            text(&refused)
        );
        let bogus_commit = format!("{}@{}", p.config_url, "1".repeat(40));
        let refused = p.dray.cli([
            "freight",
            "create",
            "-p",
            "demo",
            "--warehouse",
            "app",
            "--commit",
            &bogus_commit,
        ])?;
        assert!(!refused.status.success());
        assert!(
            text(&refused).contains("does not exist in"),
            "{}",
            text(&refused)
        );
        let _ = &p.git;
        Ok(())
    })
}
