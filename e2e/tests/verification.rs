//! Deploy and verify end to end (issue #6): a promotion writes to the real config repo,
//! `argocd-update` asks the Argo CD double to sync that commit, the Stage's health comes from
//! the Application and must hold for the stabilisation window, then an AnalysisTemplate
//! queries the Prometheus double — and only a Successful run makes the Freight verified in
//! the Stage and available downstream. Also: Degraded after sync, Inconclusive on an empty
//! result, `failed (2) > failureLimit (1)`, a failed re-verification revoking `verifiedIn`,
//! and a queued promotion that waits for the verification of the Freight before it.

use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use dray_e2e::argocd::{AppSpec, ArgoCd};
use dray_e2e::prometheus::{Answer, Prometheus};
use dray_e2e::{Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, oci, workspace_root};
use serde_json::Value;

const ARGOCD_TOKEN: &str = "argocd-e2e-token";
const QUERY: &str = r#"sum(rate(http_requests_total{service="shop-dev",code!~"5.."}[1m])) / sum(rate(http_requests_total{service="shop-dev"}[1m]))"#;

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

struct Pipeline {
    world: TestWorld,
    registry: Registry,
    _git: GitServer,
    argocd: ArgoCd,
    prometheus: Prometheus,
    dray: Dray,
}

/// The project: the quickstart's Warehouse and render task; `dev` renders, pushes, syncs
/// `shop-dev` through Argo CD and is verified by a success-rate analysis; `staging` takes
/// Freight verified in `dev`.
fn project(p: &Pipeline, config_url: &str, queue_policy: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: argocd, namespace: demo}}
spec: {{type: argocd, repoURL: "{api}", token: {ARGOCD_TOKEN}}}
---
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: success-rate, namespace: demo}}
spec:
  args:
    - name: service
  metrics:
    - name: success-rate
      interval: 300ms
      count: 2
      successCondition: result[0] >= 0.95
      failureLimit: 1
      provider:
        prometheus:
          address: "{prom}"
          query: 'sum(rate(http_requests_total{{service="{{{{args.service}}}}",code!~"5.."}}[1m])) / sum(rate(http_requests_total{{service="{{{{args.service}}}}"}}[1m]))'
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  queuePolicy: {queue_policy}
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  health:
    stabilizationWindow: 1s
    timeout: 4s
  verification:
    analysisTemplates: [{{name: success-rate}}]
    args:
      - name: service
        value: shop-${{{{ ctx.stage }}}}
  promotionTemplate:
    spec:
      steps:
        - task: {{name: render-to-stage-branch}}
          as: render
          vars:
            - {{name: repoURL, value: "{config_url}"}}
            - {{name: imageRepo, value: "{registry}/demo/app"}}
        - uses: argocd-update
          as: deploy
          retry: {{timeout: 1m}}
          config:
            apiServer: "{api}"
            pollInterval: 200ms
            apps:
              - name: shop-dev
                sources:
                  - repoURL: "{config_url}"
                    desiredRevision: ${{{{ outputs["render::push"].commit }}}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: staging, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{stages: [dev]}}
  promotionTemplate:
    spec:
      steps:
        - task: {{name: render-to-stage-branch}}
          vars:
            - {{name: repoURL, value: "{config_url}"}}
            - {{name: imageRepo, value: "{registry}/demo/app"}}
"#,
        api = p.argocd.base_url(),
        prom = p.prometheus.url(),
        registry = p.registry.host(),
    )
}

impl Pipeline {
    fn start(queue_policy: &str) -> Result<Self> {
        let world = TestWorld::new()?;
        let registry = Registry::start(&world, Default::default())?;
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        GitRepo::seed(
            &world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )?;
        let argocd = ArgoCd::start(&world, ARGOCD_TOKEN, "ops")?;
        argocd.add_app(&AppSpec::new(
            "shop-dev",
            &config_url,
            "stage/dev",
            Some("demo:dev"),
        ));
        let prometheus = Prometheus::start(&world)?;
        prometheus.set(QUERY, Answer::Value(0.99));
        let dray = Dray::start(&world, DrayOptions::default())?;
        let p = Pipeline {
            world,
            registry,
            _git: git,
            argocd,
            prometheus,
            dray,
        };
        let dir = p.world.unique_dir("project")?;
        std::fs::create_dir_all(&dir)?;
        let quickstart = workspace_root().join("examples/quickstart/project");
        for file in ["project.yaml", "warehouse.yaml", "task.yaml"] {
            let yaml = std::fs::read_to_string(quickstart.join(file))?
                .replace("127.0.0.1:5000", &p.registry.host())
                .replace("http://127.0.0.1:8080/config.git", &config_url)
                .replace("interval: 5m", "interval: 1h");
            std::fs::write(dir.join(file), yaml)?;
        }
        std::fs::write(
            dir.join("zz-verify.yaml"),
            project(&p, &config_url, queue_policy),
        )?;
        let applied = p
            .dray
            .cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
        if !applied.status.success() {
            bail!("apply failed: {}", text(&applied));
        }
        Ok(p)
    }

    fn cli(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["-p", "demo"];
        all.extend_from_slice(args);
        self.dray.cli(all)
    }

    fn json(&self, args: &[&str]) -> Result<Value> {
        let output = self.cli(args)?;
        if !output.status.success() {
            bail!("dray {args:?} failed: {}", text(&output));
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn refresh(&self) -> Result<()> {
        let output = self.cli(&["refresh", "warehouse", "app", "--wait"])?;
        if !output.status.success() {
            bail!("refresh failed: {}", text(&output));
        }
        Ok(())
    }

    fn newest_freight(&self) -> Result<(String, String)> {
        let freight = self.json(&["get", "freight", "-o", "json"])?;
        let newest = freight.get(0).context("no freight")?;
        Ok((
            newest["metadata"]["name"]
                .as_str()
                .or(newest["name"].as_str())
                .context("name")?
                .to_owned(),
            newest["alias"].as_str().context("alias")?.to_owned(),
        ))
    }

    fn freight(&self, name: &str) -> Result<Value> {
        self.json(&["get", "freight", name, "-o", "json"])
    }

    fn promote(&self, stage: &str, alias: &str) -> Result<Output> {
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

    fn stage(&self, name: &str) -> Result<Value> {
        self.json(&["get", "stage", name, "-o", "json"])
    }

    /// Waits (bounded) until the verification of `freight` in `dev` has ended; returns it.
    fn verification_of(&self, freight: &str) -> Result<Value> {
        for _ in 0..600 {
            let stage = self.stage("dev")?;
            let run = &stage["status"]["verification"];
            if run["freight"] == freight
                && !matches!(run["phase"].as_str(), Some("Pending" | "Running") | None)
            {
                return Ok(run.clone());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "the verification of `{freight}` in dev did not end within 60s: {:#}",
            self.stage("dev")?["status"]
        )
    }
}

async fn pipeline(queue_policy: &str, tags: &[&str]) -> Result<Pipeline> {
    let p = tokio::task::block_in_place(|| Pipeline::start(queue_policy))?;
    for tag in tags {
        oci::push_image(&p.registry, "demo/app", tag).await?;
        tokio::task::block_in_place(|| p.refresh())?;
    }
    Ok(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_and_successful_analysis_verifies_freight_and_makes_it_available_downstream()
-> Result<()> {
    let p = pipeline("Supersede", &["1.0.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        let promoted = p.promote("dev", &alias)?;
        assert!(promoted.status.success(), "{}", text(&promoted));
        let run = p.verification_of(&freight)?;
        assert_eq!(run["phase"], "Successful", "{run:#}");
        assert_eq!(run["metrics"][0]["successful"], 2, "{run:#}");
        assert!(run["analysisStartTime"].is_string(), "{run:#}");
        let status = p.stage("dev")?["status"].clone();
        assert_eq!(status["health"]["status"], "Healthy", "{status:#}");
        assert_eq!(status["verificationHistory"][0]["id"], run["id"]);
        // Health counted only at the commit the promotion pushed.
        let pushed = status["branch"]["commit"].as_str().context("branch")?;
        assert_eq!(
            status["health"]["applications"][0]["syncedRevision"], pushed,
            "{status:#}"
        );
        assert!(
            p.freight(&freight)?["status"]["verifiedIn"]["dev"]["verifiedAt"].is_string(),
            "not verified in dev"
        );
        let downstream = p.promote("staging", &alias)?;
        assert!(downstream.status.success(), "{}", text(&downstream));
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_beyond_the_limit_fail_and_a_failed_reverification_revokes_verified_in()
-> Result<()> {
    let p = pipeline("Supersede", &["1.0.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        assert!(p.promote("dev", &alias)?.status.success());
        assert_eq!(p.verification_of(&freight)?["phase"], "Successful");
        assert!(p.freight(&freight)?["status"]["verifiedIn"]["dev"].is_object());

        p.prometheus.set(QUERY, Answer::Value(0.42));
        let reverified = p.cli(&["verify", "stage", "dev", "--wait", "--timeout", "1m"])?;
        let said = text(&reverified);
        assert!(!reverified.status.success(), "{said}");
        assert!(said.contains("Failed"), "{said}");
        let run = p.verification_of(&freight)?;
        assert_eq!(run["phase"], "Failed", "{run:#}");
        let message = run["metrics"][0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("failed (2) > failureLimit (1)"), "{run:#}");
        assert_eq!(run["actor"], "admin", "{run:#}");
        let verified_in = &p.freight(&freight)?["status"]["verifiedIn"];
        assert!(
            verified_in.get("dev").is_none(),
            "still verified: {verified_in:#}"
        );
        let refused = p.promote("staging", &alias)?;
        assert!(!refused.status.success());
        assert!(
            text(&refused).contains("not verified in `dev`"),
            "{}",
            text(&refused)
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_result_is_inconclusive_never_successful() -> Result<()> {
    let p = pipeline("Supersede", &["1.0.0"]).await?;
    p.prometheus.set(QUERY, Answer::Empty);
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        assert!(p.promote("dev", &alias)?.status.success());
        let run = p.verification_of(&freight)?;
        assert_eq!(run["phase"], "Inconclusive", "{run:#}");
        let metric = &run["metrics"][0];
        assert!(
            metric["message"]
                .as_str()
                .unwrap_or_default()
                .contains("inconclusive (1) > inconclusiveLimit (0)"),
            "{run:#}"
        );
        assert!(
            metric["measurements"][0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no data"),
            "{run:#}"
        );
        assert!(
            p.freight(&freight)?["status"]["verifiedIn"]
                .get("dev")
                .is_none()
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degraded_after_sync_makes_the_stage_unhealthy_and_leaves_freight_unverified() -> Result<()>
{
    let p = pipeline("Supersede", &["1.0.0"]).await?;
    let why = "Deployment shop has 0 of 2 replicas available: CrashLoopBackOff";
    p.argocd.degrade_after_sync("shop-dev", why);
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        // Written to git and synced: the promotion succeeded; the health is the Stage's.
        let promoted = p.promote("dev", &alias)?;
        assert!(promoted.status.success(), "{}", text(&promoted));
        let run = p.verification_of(&freight)?;
        assert_eq!(run["phase"], "Error", "{run:#}");
        let message = run["message"].as_str().unwrap_or_default();
        assert!(message.contains("did not become healthy"), "{message}");
        assert!(message.contains(why), "{message}");
        let health = &p.stage("dev")?["status"]["health"];
        assert_eq!(health["status"], "Unhealthy", "{health:#}");
        assert!(
            health["message"].as_str().unwrap_or_default().contains(why),
            "{health:#}"
        );
        assert!(
            p.freight(&freight)?["status"]["verifiedIn"]
                .get("dev")
                .is_none()
        );
        assert_eq!(
            p.prometheus.queries(QUERY),
            0,
            "analysis ran on an unhealthy Stage"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_promotion_waits_for_the_verification_of_the_freight_before_it() -> Result<()> {
    let p = pipeline("Queue", &["1.0.0", "1.1.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let freight = p.json(&["get", "freight", "-o", "json"])?;
        let name = |f: &Value| -> Result<(String, String)> {
            Ok((
                f["metadata"]["name"]
                    .as_str()
                    .or(f["name"].as_str())
                    .context("name")?
                    .to_owned(),
                f["alias"].as_str().context("alias")?.to_owned(),
            ))
        };
        let (newer, newer_alias) = name(&freight[0])?;
        let (older, older_alias) = name(&freight[1])?;
        let first = p.cli(&["promote", "--stage", "dev", "--alias", &older_alias])?;
        assert!(first.status.success(), "{}", text(&first));
        let second = p.cli(&["promote", "--stage", "dev", "--alias", &newer_alias])?;
        assert!(second.status.success(), "{}", text(&second));
        let last = p.verification_of(&newer)?;
        assert_eq!(last["phase"], "Successful", "{last:#}");
        let history = p.stage("dev")?["status"]["verificationHistory"].clone();
        let earlier = history
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["freight"] == older.as_str())
            .with_context(|| format!("no verification of the older Freight: {history:#}"))?;
        assert_eq!(earlier["phase"], "Successful", "{history:#}");
        // The newer promotion started only after the older Freight's verification ended.
        let promotions = p.json(&["get", "promotions", "-o", "json"])?;
        let newer_promotion = promotions
            .as_array()
            .into_iter()
            .flatten()
            .find(|pr| pr["spec"]["freight"] == newer.as_str())
            .context("no promotion of the newer Freight")?;
        let started = newer_promotion["status"]["startedAt"]
            .as_str()
            .context("startedAt")?;
        let ended = earlier["finishTime"].as_str().context("finishTime")?;
        let at = |t: &str| t.parse::<jiff::Timestamp>();
        assert!(
            at(started)? >= at(ended)?,
            "the newer promotion started at {started}, before the older Freight's verification ended at {ended}"
        );
        Ok(())
    })
}

/// KARGO-LESSONS 7–8: a closed sync window holds the promotion in "written to git, waiting
/// for sync", naming the window — never a failure — and it completes once the window opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sync_window_is_written_to_git_waiting_for_sync_until_it_opens() -> Result<()> {
    use dray_e2e::argocd::SyncWindow;

    let p = pipeline("Supersede", &["1.0.0"]).await?;
    p.argocd.deny_sync_window(
        "shop-dev",
        Some(SyncWindow {
            kind: "deny".into(),
            schedule: "0 22 * * *".into(),
            duration: "8h".into(),
            manual_sync: false,
        }),
    );
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        let requested = p.cli(&["promote", "--stage", "dev", "--alias", &alias])?;
        assert!(requested.status.success(), "{}", text(&requested));
        let promotion_of = || -> Result<Value> {
            let promotions = p.json(&["get", "promotions", "-o", "json"])?;
            promotions
                .as_array()
                .into_iter()
                .flatten()
                .find(|pr| pr["spec"]["freight"] == freight.as_str())
                .cloned()
                .context("no promotion")
        };
        let mut waiting = Value::Null;
        for _ in 0..600 {
            waiting = promotion_of()?;
            if waiting["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("sync window")
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let message = waiting["status"]["message"].as_str().unwrap_or_default();
        assert_eq!(waiting["status"]["phase"], "Running", "{waiting:#}");
        assert!(
            message.starts_with("written to git (`stage/dev` at "),
            "{message}"
        );
        assert!(message.contains("waiting for sync"), "{message}");
        assert!(
            message.contains("`deny` window `0 22 * * *` for 8h"),
            "{message}"
        );
        let written = &waiting["status"]["writtenToGit"];
        assert_eq!(written["name"], "stage/dev", "{waiting:#}");
        assert_eq!(p.argocd.syncs_started("shop-dev"), 0);

        p.argocd.deny_sync_window("shop-dev", None);
        let mut done = Value::Null;
        for _ in 0..600 {
            done = promotion_of()?;
            if done["status"]["phase"] != "Running" && done["status"]["phase"] != "Pending" {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(done["status"]["phase"], "Succeeded", "{done:#}");
        assert_eq!(p.argocd.syncs_started("shop-dev"), 1);
        assert_eq!(
            p.stage("dev")?["status"]["branch"]["commit"],
            written["commit"],
            "the commit that waited is the one deployed"
        );
        Ok(())
    })
}
