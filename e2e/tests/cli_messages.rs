//! What the CLI says, end to end against the real `dray serve` (issue #19): `dray apply`
//! reports every mistake of a file in one pass; `dray promote --wait` waits for the
//! Stage's verification before it says anything succeeded; refusals say each reason once
//! with what lifts it; names that match nothing get "did you mean"; a failed step is named
//! once.

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

/// One file with a mistake of each kind in several documents: one `dray apply` reports
/// them all, each at its line, with "did you mean" where a near name exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reports_every_mistake_of_every_document_at_once() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply_base()?;
        let bad = "\
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: web, namespace: demo}
spec:
  interval: 5 m
  subscriptons:
    - image: {repoURL: registry.example.com/demo/web}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: demo}
spec:
  queuePolicy: 5
  requestedFreight:
    - origin: {kind: Warehouse, name: ap}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources:
        stages: [qaa]
        requiredSoakTim: 1h
  promotionTemplate:
    spec:
      steps:
        - task: {name: render-to-stage-branc}
        - uses: git-push
          if: ${{ outputs.clone. }}
";
        let refused = p.try_apply(bad)?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        for (line, what) in [
            (":5: ", "`5 m` is not a duration"),
            (":6: ", "unknown field `subscriptons`"),
            (":13: ", "spec.queuePolicy: invalid type"),
            (":15: ", "Warehouse `ap` does not exist in project `demo`"),
            (
                ":25: ",
                "upstream stage `qaa` does not exist in project `demo`",
            ),
            (":26: ", "unknown field `requiredSoakTim`"),
            (
                ":30: ",
                "PromotionTask `render-to-stage-branc` does not exist",
            ),
            (
                ":32: ",
                "spec.promotionTemplate.spec.steps[1].if: syntax error",
            ),
        ] {
            assert!(
                said.lines().any(|l| l.contains(line) && l.contains(what)),
                "`{what}` at line {line} not reported:\n{said}"
            );
        }
        for meant in [
            "did you mean `subscriptions`?",
            "did you mean `app`?",
            "did you mean `qa`?",
            "did you mean `requiredSoakTime`?",
            "did you mean `render-to-stage-branch`?",
        ] {
            assert!(said.contains(meant), "no `{meant}`:\n{said}");
        }
        assert!(
            said.contains("error: 8 errors in the configuration"),
            "{said}"
        );
        Ok(())
    })
}

/// A refusal says each reason once, with what would lift it; a misspelt alias or Stage
/// gets "did you mean"; a failed step is named once in the promotion's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_say_each_reason_once_with_the_way_out_and_names_get_did_you_mean() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    tokio::task::block_in_place(|| p.apply_quickstart(|yaml| yaml.to_owned()))?;
    p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let alias = p.newest_alias()?;
        let refused = p.promote("staging", &alias)?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert_eq!(said.matches("not verified in `dev`").count(), 1, "{said}");
        assert!(
            said.contains(&format!(
                "promote it there first: `dray promote -p demo --stage dev --alias {alias}`; \
                 or `dray approve -p demo --stage staging --alias {alias} --reason …`"
            )),
            "{said}"
        );

        let typo = format!("{alias}x");
        let missing = p.promote("dev", &typo)?;
        let said = text(&missing);
        assert!(
            said.contains(&format!(
                "Freight `{typo}` does not exist in project `demo` (by id, id prefix or alias); \
                 did you mean `{alias}`?"
            )),
            "{said}"
        );
        let missing = p.promote("dve", &alias)?;
        let said = text(&missing);
        assert!(
            said.contains("Stage `dve` does not exist in project `demo`; did you mean `dev`?")
                && said.contains("hint: run `dray get stages -p demo` to list them"),
            "{said}"
        );

        // A failing step is named once.
        p.apply(
            "apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: broken, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
  promotionTemplate:
    spec:
      steps:
        - uses: fail
          as: stop
",
        )?;
        let failed = p.promote("broken", &alias)?;
        let said = text(&failed);
        assert!(!failed.status.success(), "{said}");
        assert!(
            said.contains("step `stop` failed: `fail` ended the promotion"),
            "{said}"
        );
        assert_eq!(said.matches("step `stop`").count(), 1, "{said}");
        Ok(())
    })
}
