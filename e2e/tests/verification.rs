//! Deploy and verify end to end (issue #6): a promotion writes to the real config repo,
//! `argocd-update` asks the Argo CD double to sync that commit, the Stage's health comes from
//! the Application and must hold for the stabilisation window, then an AnalysisTemplate
//! queries the Prometheus double — and only a Successful run makes the Freight verified in
//! the Stage and available downstream. Also: Degraded after sync, Inconclusive on an empty
//! result, `failed (2) > failureLimit (1)`, a failed re-verification revoking `verifiedIn`,
//! and a queued promotion that waits for the verification of the Freight before it.

use std::time::Duration;

use anyhow::{Context, Result};
use dray_e2e::deploy::{Deploy, DeployOptions, QUERY};
use dray_e2e::pipeline::{self, text};
use dray_e2e::prometheus::Answer;
use serde_json::Value;

async fn pipeline(queue_policy: &'static str, tags: &[&str]) -> Result<Deploy> {
    let options = DeployOptions {
        queue_policy,
        ..Default::default()
    };
    let d = tokio::task::block_in_place(|| Deploy::start(options))?;
    for tag in tags {
        d.p.release(tag).await?;
    }
    Ok(d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_and_successful_analysis_verifies_freight_and_makes_it_available_downstream()
-> Result<()> {
    let d = pipeline("Supersede", &["1.0.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        d.p.promote_ok("dev", &alias)?;
        let run = d.verification_of(&freight)?;
        assert_eq!(run["phase"], "Successful", "{run:#}");
        assert_eq!(run["metrics"][0]["successful"], 2, "{run:#}");
        assert!(run["analysisStartTime"].is_string(), "{run:#}");
        let status = d.p.stage("dev")?["status"].clone();
        assert_eq!(status["health"]["status"], "Healthy", "{status:#}");
        assert_eq!(status["verificationHistory"][0]["id"], run["id"]);
        // Health counted only at the commit the promotion pushed.
        let pushed = status["branch"]["commit"].as_str().context("branch")?;
        assert_eq!(
            status["health"]["applications"][0]["syncedRevision"], pushed,
            "{status:#}"
        );
        assert!(
            d.p.freight_named(&freight)?["status"]["verifiedIn"]["dev"]["verifiedAt"].is_string(),
            "not verified in dev"
        );
        let downstream = d.p.promote("staging", &alias)?;
        assert!(downstream.status.success(), "{}", text(&downstream));
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_beyond_the_limit_fail_and_a_failed_reverification_revokes_verified_in()
-> Result<()> {
    let d = pipeline("Supersede", &["1.0.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        d.p.promote_ok("dev", &alias)?;
        assert_eq!(d.verification_of(&freight)?["phase"], "Successful");
        assert!(d.p.freight_named(&freight)?["status"]["verifiedIn"]["dev"].is_object());

        d.prometheus.set(QUERY, Answer::Value(0.42));
        let reverified =
            d.p.cli(&["verify", "stage", "dev", "--wait", "--timeout", "1m"])?;
        let said = text(&reverified);
        assert!(!reverified.status.success(), "{said}");
        assert!(said.contains("Failed"), "{said}");
        let run = d.verification_of(&freight)?;
        assert_eq!(run["phase"], "Failed", "{run:#}");
        let message = run["metrics"][0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("failed (2) > failureLimit (1)"), "{run:#}");
        assert_eq!(run["actor"], "admin", "{run:#}");
        let verified_in = &d.p.freight_named(&freight)?["status"]["verifiedIn"];
        assert!(
            verified_in.get("dev").is_none(),
            "still verified: {verified_in:#}"
        );
        let refused = d.p.promote("staging", &alias)?;
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
    let d = pipeline("Supersede", &["1.0.0"]).await?;
    d.prometheus.set(QUERY, Answer::Empty);
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        // The promotion succeeds; `--wait` waits for the verification and fails with it.
        let promoted = d.p.promote("dev", &alias)?;
        let said = text(&promoted);
        assert_eq!(promoted.status.code(), Some(1), "{said}");
        assert!(said.contains("ended Inconclusive"), "{said}");
        let run = d.verification_of(&freight)?;
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
            d.p.freight_named(&freight)?["status"]["verifiedIn"]
                .get("dev")
                .is_none()
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degraded_after_sync_makes_the_stage_unhealthy_and_leaves_freight_unverified() -> Result<()>
{
    let d = pipeline("Supersede", &["1.0.0"]).await?;
    let why = "Deployment shop has 0 of 2 replicas available: CrashLoopBackOff";
    d.argocd.degrade_after_sync("shop-dev", why);
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        // Written to git and synced: the promotion succeeded; the health is the Stage's, and
        // `--wait` fails with the verification it waited for.
        let promoted = d.p.promote("dev", &alias)?;
        let said = text(&promoted);
        assert!(
            said.contains("the promotion Succeeded, but verification")
                && said.contains("ended Error"),
            "{said}"
        );
        let run = d.verification_of(&freight)?;
        assert_eq!(run["phase"], "Error", "{run:#}");
        let message = run["message"].as_str().unwrap_or_default();
        assert!(message.contains("did not become healthy"), "{message}");
        assert!(message.contains(why), "{message}");
        let health = &d.p.stage("dev")?["status"]["health"];
        assert_eq!(health["status"], "Unhealthy", "{health:#}");
        assert!(
            health["message"].as_str().unwrap_or_default().contains(why),
            "{health:#}"
        );
        assert!(
            d.p.freight_named(&freight)?["status"]["verifiedIn"]
                .get("dev")
                .is_none()
        );
        assert_eq!(
            d.prometheus.queries(QUERY),
            0,
            "analysis ran on an unhealthy Stage"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_promotion_waits_for_the_verification_of_the_freight_before_it() -> Result<()> {
    let d = pipeline("Queue", &["1.0.0", "1.1.0"]).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let freight = d.p.freight()?;
        let (newer, newer_alias) = (pipeline::id(&freight[0]), pipeline::alias(&freight[0]));
        let (older, older_alias) = (pipeline::id(&freight[1]), pipeline::alias(&freight[1]));
        let first =
            d.p.cli(&["promote", "--stage", "dev", "--alias", &older_alias])?;
        assert!(first.status.success(), "{}", text(&first));
        let second =
            d.p.cli(&["promote", "--stage", "dev", "--alias", &newer_alias])?;
        assert!(second.status.success(), "{}", text(&second));
        let last = d.verification_of(&newer)?;
        assert_eq!(last["phase"], "Successful", "{last:#}");
        let history = d.p.stage("dev")?["status"]["verificationHistory"].clone();
        let earlier = history
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["freight"] == older.as_str())
            .with_context(|| format!("no verification of the older Freight: {history:#}"))?;
        assert_eq!(earlier["phase"], "Successful", "{history:#}");
        // The newer promotion started only after the older Freight's verification ended.
        let promotions = d.p.json(&["get", "promotions", "-o", "json"])?;
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

    let d = pipeline("Supersede", &["1.0.0"]).await?;
    d.argocd.deny_sync_window(
        "shop-dev",
        Some(SyncWindow {
            kind: "deny".into(),
            schedule: "0 22 * * *".into(),
            duration: "8h".into(),
            manual_sync: false,
        }),
    );
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        let requested = d.p.cli(&["promote", "--stage", "dev", "--alias", &alias])?;
        assert!(requested.status.success(), "{}", text(&requested));
        let promotion_of = || -> Result<Value> {
            let promotions = d.p.json(&["get", "promotions", "-o", "json"])?;
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
        assert_eq!(d.argocd.syncs_started("shop-dev"), 0);

        d.argocd.deny_sync_window("shop-dev", None);
        let mut done = Value::Null;
        for _ in 0..600 {
            done = promotion_of()?;
            if done["status"]["phase"] != "Running" && done["status"]["phase"] != "Pending" {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(done["status"]["phase"], "Succeeded", "{done:#}");
        assert_eq!(d.argocd.syncs_started("shop-dev"), 1);
        assert_eq!(
            d.p.stage("dev")?["status"]["branch"]["commit"],
            written["commit"],
            "the commit that waited is the one deployed"
        );
        Ok(())
    })
}

/// Two Stages, `dev` and `staging`, both taking Freight from the Warehouse, rendering to their own branches, each verified by a metric on
/// its own query; neither has Argo CD Applications, so analysis starts at once.
fn two_stages(p: &dray_e2e::pipeline::Pipeline, prometheus: &str) -> String {
    let stage = |name: &str| {
        format!(
            r#"---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: {name}, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  verification:
    analysisTemplates: [{{name: ready}}]
    args:
      - name: stage
        value: ${{{{ ctx.stage }}}}
{template}"#,
            template = p.render_template(),
        )
    };
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: ready, namespace: demo}}
spec:
  args:
    - name: stage
  metrics:
    - name: ready
      count: 1
      successCondition: result[0] == 1.0
      provider:
        prometheus:
          address: "{prometheus}"
          query: 'ready{{stage="{{{{args.stage}}}}"}}'
{a}{b}"#,
        a = stage("dev"),
        b = stage("staging"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stages_slow_measurement_does_not_hold_up_anothers() -> Result<()> {
    let p = tokio::task::block_in_place(dray_e2e::pipeline::Pipeline::start)?;
    let prometheus = dray_e2e::prometheus::Prometheus::start(&p.world)?;
    // Each Stage's query is answered only once the other's has been asked (held up to 20s,
    // then empty: Inconclusive): both pass only if Dray measures `staging` while `dev`'s
    // measurement is still waiting for its answer.
    let (qa, qb) = (r#"ready{stage="dev"}"#, r#"ready{stage="staging"}"#);
    let held = |other: &str| Answer::AfterQuery {
        other: other.to_owned(),
        value: 1.0,
        wait: Duration::from_secs(20),
    };
    prometheus.set(qa, held(qb));
    prometheus.set(qb, held(qa));
    p.apply_base()?;
    p.apply(&two_stages(&p, &prometheus.url()))?;
    p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        // Both verifications must run at once: neither promotion waits for its own.
        for stage in ["dev", "staging"] {
            let promoted = p.cli(&[
                "promote",
                "--stage",
                stage,
                "--alias",
                &alias,
                "--wait",
                "--no-verify-wait",
                "--timeout",
                "2m",
            ])?;
            assert!(promoted.status.success(), "{}", text(&promoted));
        }
        for stage in ["dev", "staging"] {
            let run = p.wait_until(&format!("the verification of `{stage}`"), || {
                let run = p.stage(stage)?["status"]["verification"].clone();
                let ended = run["freight"] == freight.as_str()
                    && !matches!(run["phase"].as_str(), Some("Pending" | "Running") | None);
                Ok(ended.then_some(run))
            })?;
            assert_eq!(run["phase"], "Successful", "`{stage}`: {run:#}");
        }
        assert_eq!(prometheus.queries(qa), 1, "{:?}", prometheus.all_queries());
        assert_eq!(prometheus.queries(qb), 1, "{:?}", prometheus.all_queries());
        Ok(())
    })
}

/// Issue #17, item 7: a pod of the new ReplicaSet in CrashLoopBackOff fails the Stage's
/// health at once, naming the pod and the reason, while Argo CD itself still says
/// `Progressing` (it would say `Degraded` only at the Deployment's progress deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_new_pod_fails_health_at_once_with_its_reason() -> Result<()> {
    let d = pipeline("Supersede", &["1.0.0"]).await?;
    let back_off = "back-off 5m0s restarting failed container=shop pod=shop-dev-00000001-x7k2p";
    d.argocd
        .fail_pods_after_sync("shop-dev", "CrashLoopBackOff", 5, back_off);
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = d.newest_freight()?;
        let promoted = d.p.promote("dev", &alias)?;
        let said = text(&promoted);
        assert!(!promoted.status.success(), "{said}");
        let health = &d.p.stage("dev")?["status"]["health"];
        assert_eq!(health["status"], "Unhealthy", "{health:#}");
        let message = health["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("will not become healthy: pod `shop-dev/shop-dev-00000001-x7k2p`")
                && message.contains("is in CrashLoopBackOff, restarted 5 times")
                && message.contains(back_off),
            "{health:#}"
        );
        assert_eq!(
            d.argocd.app("shop-dev").context("shop-dev")?["status"]["health"]["status"],
            "Progressing",
            "Argo CD itself has not given up yet"
        );
        assert!(
            d.argocd
                .requests()
                .iter()
                .any(|r| r == "GET /api/v1/applications/shop-dev/resource-tree 200"),
            "{:?}",
            d.argocd.requests()
        );
        assert!(
            d.p.freight_named(&freight)?["status"]["verifiedIn"]
                .get("dev")
                .is_none()
        );
        Ok(())
    })
}
