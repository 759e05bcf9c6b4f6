//! What the CLI says, end to end against the real `dray serve` (issue #19): `dray apply`
//! reports every mistake of a file in one pass, and `dray promote --wait` waits for the
//! Stage's verification before it says anything succeeded.

use anyhow::Result;
use dray_e2e::pipeline::{Pipeline, text};
use dray_e2e::prometheus::{Answer, Prometheus};

/// The query the Stage `dev` of [`verified_dev`] is verified by.
const READY: &str = r#"ready{stage="dev"}"#;

/// An AnalysisTemplate `ready` over `prometheus`, and Stage `dev` (direct from the
/// Warehouse) verified by it; no Argo CD Applications, so analysis starts at once.
fn verified_dev(p: &Pipeline, prometheus: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: ready, namespace: demo}}
spec:
  metrics:
    - name: ready
      count: 1
      successCondition: result[0] == 1.0
      provider:
        prometheus:
          address: "{prometheus}"
          query: '{READY}'
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  verification:
    analysisTemplates: [{{name: ready}}]
{template}"#,
        template = p.render_template(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_wait_waits_for_the_verification_and_fails_when_it_fails() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    let prometheus = Prometheus::start(&p.world)?;
    prometheus.set(READY, Answer::Value(0.0));
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply_base()?;
        p.apply(&verified_dev(&p, &prometheus.url()))
    })?;
    p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let (freight, alias) = p.newest_freight()?;
        let failed = p.promote("dev", &alias)?;
        let said = text(&failed);
        assert_eq!(failed.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&format!(
                "waiting for the verification of {freight} in stage dev"
            )),
            "{said}"
        );
        assert!(
            said.contains("the promotion Succeeded, but verification")
                && said.contains("ended Failed"),
            "{said}"
        );
        let run = p.stage("dev")?["status"]["verification"].clone();
        assert_eq!(
            run["phase"], "Failed",
            "the CLI waited for the end: {run:#}"
        );

        // Verified: the same command ends 0 and says so.
        prometheus.set(READY, Answer::Value(1.0));
        let verified = p.promote("dev", &alias)?;
        let said = text(&verified);
        assert!(verified.status.success(), "{said}");
        assert!(
            said.contains(&format!(" of {freight} in stage dev Successful")),
            "{said}"
        );

        // --no-verify-wait stops at the promotion.
        prometheus.set(READY, Answer::Value(0.0));
        let skipped = p.cli(&[
            "promote",
            "--stage",
            "dev",
            "--alias",
            &alias,
            "--wait",
            "--no-verify-wait",
            "--timeout",
            "2m",
        ])?;
        let said = text(&skipped);
        assert!(skipped.status.success(), "{said}");
        assert!(!said.contains("waiting for the verification"), "{said}");
        Ok(())
    })
}
