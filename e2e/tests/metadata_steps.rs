//! `set-metadata` and `set-freight-alias` end to end, against the real `dray serve` with the
//! quickstart project: a Stage's steps record metadata on their Stage and Freight and rename
//! the Freight; a later step and a downstream Stage read it back with `freightMetadata()` /
//! `stageMetadata()`; `dray get freight -o yaml` shows it. A Freight that does not exist and
//! an alias another Freight has fail the step, naming them. The same steps in Kubernetes
//! mode write the Freight's and the Stage's `status.metadata` through the cluster.

use anyhow::{Result, ensure};
use dray_e2e::kube_pipeline::{KubeOptions, KubePipeline};
use dray_e2e::pipeline::{Pipeline, promotion_name, text};
use serde_json::{Value, json};

/// Stage `name` fed by `source` (`direct: true` or `stages: [dev]`) whose promotion runs
/// `steps` (YAML list items, indented for `steps:`).
fn stage(name: &str, source: &str, steps: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: {name}
  namespace: demo
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{{source}}}
  promotionTemplate:
    spec:
      steps:
{steps}"#
    )
}

const DEV_STEPS: &str = r#"        - uses: set-metadata
          as: record
          config:
            updates:
              - kind: Stage
                name: ${{ ctx.stage }}
                values:
                  deployedBy: ${{ ctx.actor }}
                  build: {number: 7, components: [web, api]}
              - kind: Freight
                name: ${{ ctx.targetFreight.name }}
                values: {qa: passed}
        - uses: set-freight-alias
          as: rename
          config:
            freightName: ${{ ctx.targetFreight.name }}
            newAlias: release-1
        - uses: compose-output
          as: readback
          config:
            qa: ${{ freightMetadata(ctx.targetFreight.name, 'qa') }}
            build: ${{ stageMetadata(ctx.stage).build.number }}
"#;

const STAGING_STEPS: &str = r#"        - uses: compose-output
          as: upstream
          config:
            qa: ${{ freightMetadata(ctx.targetFreight.name).qa }}
            deployedBy: ${{ stageMetadata('dev').deployedBy }}
            alias: ${{ ctx.targetFreight.alias }}
"#;

/// The outputs of the Promotion `dray promote` just requested, by step alias.
fn outputs(p: &Pipeline, promoted: &std::process::Output) -> Result<Value> {
    let name = promotion_name(promoted);
    Ok(p.promotion(&name)?["status"]["state"]["outputs"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_and_alias_set_by_steps_are_read_back_downstream() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    tokio::task::block_in_place(|| p.apply_quickstart(|yaml| yaml.to_owned()))?;
    let (id, alias) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(&format!(
            "{}---\n{}",
            stage("dev", "direct: true", DEV_STEPS),
            stage("staging", "stages: [dev]", STAGING_STEPS)
        ))?;
        let promoted = p.promote("dev", &alias)?;
        ensure!(promoted.status.success(), "{}", text(&promoted));
        let read = outputs(&p, &promoted)?;
        assert_eq!(
            read["readback"],
            json!({"qa": "passed", "build": 7}),
            "{read:#}"
        );

        let freight = p.freight_named(&id)?;
        assert_eq!(freight["alias"], "release-1", "{freight:#}");
        assert_eq!(
            freight["status"]["metadata"],
            json!({"qa": "passed"}),
            "{freight:#}"
        );
        let dev = p.stage("dev")?;
        assert_eq!(
            dev["status"]["metadata"]["build"],
            json!({"number": 7, "components": ["web", "api"]}),
            "{dev:#}"
        );
        assert_eq!(
            dev["status"]["currentFreight"]["alias"], "release-1",
            "{dev:#}"
        );
        let yaml = text(&p.cli(&["get", "freight", &id, "-o", "yaml"])?);
        assert!(
            yaml.contains("alias: release-1") && yaml.contains("qa: passed"),
            "{yaml}"
        );

        // The old alias is gone; the new one promotes it downstream, where it is read back.
        let gone = p.promote("staging", &alias)?;
        assert!(!gone.status.success(), "{}", text(&gone));
        let promoted = p.promote("staging", "release-1")?;
        ensure!(promoted.status.success(), "{}", text(&promoted));
        let read = outputs(&p, &promoted)?;
        let actor = dev["status"]["metadata"]["deployedBy"].clone();
        assert!(actor.as_str().is_some_and(|a| !a.is_empty()), "{dev:#}");
        assert_eq!(
            read["upstream"],
            json!({"qa": "passed", "deployedBy": actor, "alias": "release-1"}),
            "{read:#}"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_freight_and_taken_aliases_fail_the_step_naming_them() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    tokio::task::block_in_place(|| p.apply_quickstart(|yaml| yaml.to_owned()))?;
    let (old_id, old_alias) = p.release("1.0.0").await?;
    let (_, new_alias) = p.release("1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        // A Freight name that is not in the project, one edit away from a real one.
        let last = if old_id.ends_with('a') { 'b' } else { 'a' };
        let typo = format!("{}{last}", &old_id[..old_id.len() - 1]);
        let steps = format!(
            r#"        - uses: set-metadata
          as: record
          config:
            updates:
              - {{kind: Freight, name: "{typo}", values: {{qa: passed}}}}
"#
        );
        p.apply(&stage("dev", "direct: true", &steps))?;
        let refused = p.promote("dev", &new_alias)?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        let promotion = p.promotion(&promotion_name(&refused))?;
        let message = promotion["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!(
                "step `record` failed: Freight `{typo}` does not exist in project `demo`; did you mean `{old_id}`?"
            )),
            "{message}"
        );

        // An alias another Freight of the project has.
        let steps = format!(
            r#"        - uses: set-freight-alias
          as: rename
          config:
            freightName: ${{{{ ctx.targetFreight.name }}}}
            newAlias: {old_alias}
"#
        );
        p.apply(&stage("dev", "direct: true", &steps))?;
        let refused = p.promote("dev", &new_alias)?;
        assert!(!refused.status.success(), "{}", text(&refused));
        let promotion = p.promotion(&promotion_name(&refused))?;
        let message = promotion["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!(
                "step `rename` failed: alias `{old_alias}` is already used by Freight `{old_id}` in project `demo`"
            )),
            "{message}"
        );
        // Nothing was renamed.
        let freight = p.freight()?;
        let aliases: Vec<&str> = freight.iter().filter_map(|f| f["alias"].as_str()).collect();
        assert!(aliases.contains(&new_alias.as_str()), "{aliases:?}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_kubernetes_mode_metadata_and_aliases_reach_the_cluster() -> Result<()> {
    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| -> Result<()> {
        k.apply_quickstart(str::to_owned)?;
        // dev follows new Freight by itself (the quickstart's policy), with these steps.
        k.kubectl_apply(&format!(
            "{}---\n{}",
            stage("dev", "direct: true", DEV_STEPS),
            stage("staging", "stages: [dev]", STAGING_STEPS)
        ))?;
        Ok(())
    })?;
    let (id, _) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        k.q.wait_for_stage("dev", "release-1")?;
        let freight = k.kubectl_ok(&["get", "freight", &id, "-n", "demo", "-o", "json"])?;
        let freight: Value = serde_json::from_str(&freight)?;
        assert_eq!(freight["alias"], "release-1", "{freight:#}");
        assert_eq!(
            freight["status"]["metadata"],
            json!({"qa": "passed"}),
            "{freight:#}"
        );
        let dev = k.kubectl_ok(&["get", "stage", "dev", "-n", "demo", "-o", "json"])?;
        let dev: Value = serde_json::from_str(&dev)?;
        assert_eq!(dev["status"]["metadata"]["build"]["number"], 7, "{dev:#}");

        let promoted = k.q.promote("staging", "release-1")?;
        ensure!(promoted.status.success(), "{}", text(&promoted));
        let read = outputs(&k.q, &promoted)?;
        assert_eq!(read["upstream"]["qa"], "passed", "{read:#}");
        assert_eq!(read["upstream"]["alias"], "release-1", "{read:#}");
        Ok(())
    })
}
