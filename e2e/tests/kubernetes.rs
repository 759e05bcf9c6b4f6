//! Kubernetes mode end to end, on a real control plane (`dray_e2e::control_plane`: etcd,
//! kube-apiserver and kube-controller-manager of the pinned release): Dray installed from
//! the rendered chart, the quickstart project applied with the pinned `kubectl`,
//! `dray controller` replicas on a Lease, and `dray serve --kubernetes` for the CLI and the
//! admission webhook the API server calls.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dray_e2e::kube_pipeline::{DEVELOPER, DRAY_USER, KubeOptions, KubePipeline};
use dray_e2e::pipeline::text;

/// The quickstart as in embedded mode: a pushed image reaches dev by auto-promotion,
/// then staging and (approved) prod by `dray promote`, from the same YAML applied with
/// `kubectl apply`; status reaches the cluster through the `status` subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_runs_through_dray_controller_from_the_same_yaml() -> Result<()> {
    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let stages = tokio::task::block_in_place(|| k.kubectl_ok(&["get", "stages", "-n", "demo"]))?;
    for stage in ["dev", "staging", "prod"] {
        ensure!(stages.contains(stage), "kubectl get stages: {stages}");
    }
    let (_, alias) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        k.q.wait_for_stage("dev", &alias)?;
        k.q.promote_ok("staging", &alias)?;
        let approved =
            k.q.cli(&["approve", "--stage", "prod", "--alias", &alias])?;
        ensure!(approved.status.success(), "{}", text(&approved));
        k.q.promote_ok("prod", &alias)?;
        k.q.wait_for_stage("prod", &alias)?;
        Ok(())
    })?;
    // What kubectl shows is what Dray wrote.
    let prod = tokio::task::block_in_place(|| {
        k.kubectl_ok(&["get", "stage", "prod", "-n", "demo", "-o", "json"])
    })?;
    let prod: serde_json::Value = serde_json::from_str(&prod)?;
    assert_eq!(
        prod["status"]["currentFreight"]["alias"],
        alias.as_str(),
        "{prod:#}"
    );
    let status_writes = k
        .dray_requests()?
        .iter()
        .filter(|r| {
            r.resource == "stages"
                && r.subresource == "status"
                && matches!(r.verb.as_str(), "update" | "patch")
                && r.code == 200
        })
        .count();
    ensure!(status_writes > 0, "no Stage status went through /status");
    let head = k.q.config.log("stage/prod")?;
    let commit = head.first().context("stage/prod has a commit")?;
    ensure!(
        commit.trailer("Dray-Freight").is_some(),
        "stage/prod's commit carries the trailers: {commit:?}"
    );
    Ok(())
}

/// One active controller: two replicas share a Lease; the leader is SIGKILLed in the
/// middle of a promotion (its push landed, its outcome not recorded: the engine's step
/// barrier holds it there), the standby takes the Lease once it expires, resumes the
/// promotion from its status, and `stage/dev` gets exactly one commit for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_in_the_middle_of_a_promotion_neither_repeats_nor_loses_it() -> Result<()> {
    use dray::promotion::engine::STEP_BARRIER_ENV;
    const PUSH: usize = 5;
    let barriers = tempfile::tempdir()?;
    let mut k = KubePipeline::start(KubeOptions {
        controllers: 2,
        lease_duration: Some(4),
        controller_env: vec![(
            STEP_BARRIER_ENV.into(),
            barriers.path().display().to_string(),
        )],
        ..Default::default()
    })
    .await?;
    let first = tokio::task::block_in_place(|| k.wait_for_leader(Duration::from_secs(60)))?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let arm = barriers.path().join(format!("arm-ran-{PUSH}"));
    std::fs::write(&arm, b"")?;
    let (_, alias) = k.q.release("1.0.0").await?;
    let promotion = tokio::task::block_in_place(|| {
        k.q.wait_until("dev's auto-promotion to hold after its push", || {
            held_promotion(barriers.path(), "ran", PUSH)
        })
    })?;
    let pushed = k.q.config.log("stage/dev")?;
    let ours = |log: &[dray_e2e::Commit]| commits_of(log, &promotion);
    assert_eq!(
        ours(&pushed),
        1,
        "the held promotion's push landed: {pushed:#?}"
    );

    k.controllers[first].kill9()?;
    std::fs::remove_file(&arm)?;
    let second = tokio::task::block_in_place(|| k.wait_for_leader(Duration::from_secs(60)))?;
    assert_ne!(first, second, "the standby took over");
    let holder = tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "get",
            "lease",
            "dray-controller",
            "-n",
            "dray",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
    })?;
    assert_eq!(holder, format!("replica-{second}"));
    tokio::task::block_in_place(|| -> Result<()> {
        let phase =
            k.q.wait_until(&format!("{promotion} to end on the new leader"), || {
                let p = k.q.promotion(&promotion)?;
                let phase = p["status"]["phase"].as_str().unwrap_or_default().to_owned();
                Ok((!matches!(phase.as_str(), "" | "Pending" | "Running")).then_some(phase))
            })?;
        assert_eq!(phase, "Succeeded", "{:#}", k.q.promotion(&promotion)?);
        k.q.wait_for_stage("dev", &alias)
    })?;
    let log = k.q.config.log("stage/dev")?;
    assert_eq!(
        ours(&log),
        1,
        "exactly one commit for {promotion}: {log:#?}"
    );
    Ok(())
}

/// The Kubernetes store behind `dray controller`, on the real API server: a write naming a
/// stale `resourceVersion` is a conflict and leaves the newer object alone (never a blind
/// overwrite), a status write without one retries on the newest, and labelled Secrets are
/// read as sealed Credentials with nothing in plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_store_refuses_stale_writes_and_reads_secrets_as_sealed_credentials()
-> Result<()> {
    use dray::api::{Kind, ObjectKey};
    use dray::store::kubernetes::{KubeStore, KubeStoreOptions, NamespaceSelection, Reads};
    use dray::store::{SqliteStore, Store, StoreError};

    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let dir = tempfile::tempdir()?;
    let secret_key = std::sync::Arc::new(dray::secrets::SecretKey::load(dir.path())?);
    // As Dray's ServiceAccount, through its kubeconfig: anyone else's status writes are
    // refused by the admission webhook.
    let store = KubeStore::connect(
        dray::app::kubernetes::kube_client(Some(&k.dray_kubeconfig)).await?,
        KubeStoreOptions {
            namespaces: NamespaceSelection::default(),
            secret_key: secret_key.clone(),
            local: std::sync::Arc::new(SqliteStore::open(dir.path())?),
            sync_timeout: Duration::from_secs(30),
            reads: Reads::Watched,
        },
    )
    .await?;
    let key = ObjectKey::namespaced(Kind::Stage, "demo", "staging");
    let stale = store.get(&key).await?.context("staging is listed")?;
    tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "annotate",
            "stage",
            "staging",
            "-n",
            "demo",
            "owner=platform-team",
        ])
    })?;
    let mut edited = stale.object.clone();
    edited["metadata"]["annotations"]["owner"] = "someone-else".into();
    match store.update(edited).await {
        Err(StoreError::Conflict {
            expected, actual, ..
        }) => {
            assert_eq!(expected, stale.resource_version);
            assert!(actual > expected, "{actual} > {expected}");
        }
        other => anyhow::bail!("a stale update must conflict, got {other:?}"),
    }
    let now = tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "get",
            "stage",
            "staging",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.annotations.owner}",
        ])
    })?;
    assert_eq!(now, "platform-team", "kubectl's edit was not overwritten");
    let stale_status = store
        .update_status(
            &key,
            serde_json::json!({"lastPromotion": "stale"}),
            Some(stale.resource_version),
        )
        .await;
    assert!(
        matches!(stale_status, Err(StoreError::Conflict { .. })),
        "{stale_status:?}"
    );
    let written = store
        .update_status(&key, serde_json::json!({"lastPromotion": "fresh"}), None)
        .await?;
    assert_eq!(written.object["status"]["lastPromotion"], "fresh");
    assert_eq!(
        written.object["metadata"]["annotations"]["owner"],
        "platform-team"
    );

    // A create that carries a resourceVersion (read from elsewhere, as `POST` through
    // Dray's API may) is a create: the API server would refuse it as sent.
    let mut copy = stale.object.clone();
    copy["metadata"] = serde_json::json!({
        "name": "staging-copy", "namespace": "demo", "resourceVersion": "12345"
    });
    copy.as_object_mut().map(|m| m.remove("status"));
    let created = store.create(copy).await?;
    assert_eq!(created.key.name, "staging-copy");

    // A Kargo-style credential Secret, applied with kubectl, is a sealed Credential.
    let password = "kube-secret-password-8c1f";
    dray_e2e::secrets::remember("the test's git password", password);
    tokio::task::block_in_place(|| {
        k.kubectl_apply(&format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: config-repo
  namespace: demo
  labels: {{kargo.akuity.io/cred-type: git}}
stringData:
  repoURL: http://127.0.0.1:8080/config.git
  username: ci
  password: {password}
"
        ))
    })?;
    let credential = ObjectKey::namespaced(Kind::Credential, "demo", "config-repo");
    let found = wait_for(&store, &credential).await?;
    assert_eq!(found.object["spec"]["type"], "git");
    assert!(
        !found.object.to_string().contains(password),
        "{:#}",
        found.object
    );
    let opened = dray::secrets::open_credential(&secret_key, &found.object)?;
    assert_eq!(opened.password.as_deref(), Some(password));
    Ok(())
}

async fn wait_for(
    store: &dray::store::kubernetes::KubeStore,
    key: &dray::api::ObjectKey,
) -> Result<dray::store::StoredObject> {
    use dray::store::Store;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut feed = store.changes();
    loop {
        if let Some(found) = store.get(key).await? {
            return Ok(found);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{key} did not appear within 30s"
        );
        let latest = feed.latest();
        feed.wait_past(latest, Duration::from_secs(1)).await;
    }
}

/// Watches that break and whose resourceVersion was compacted away (410 Gone) are
/// resumed by listing again: etcd's history is compacted and the API server restarted (every
/// watch breaks, and resuming from an old resourceVersion is a 410), and a release made
/// afterwards still reaches dev by auto-promotion; the controller listed Warehouses again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_broken_after_compaction_relist_and_nothing_is_missed() -> Result<()> {
    // A lease long enough that the leader keeps it through the API server's restart (with
    // the default 15 s, a restart longer than its 10 s renew deadline ends the process, as
    // it should, and a fresh process lists anyway).
    let mut k = KubePipeline::start(KubeOptions {
        lease_duration: Some(90),
        ..Default::default()
    })
    .await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let (_, first) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &first))?;
    let lists_before = relists(&k)?;
    tokio::task::block_in_place(|| -> Result<()> {
        // A write after Dray's last event, so that what it watched from is older than the
        // newest revision, then compaction up to it: resuming is a 410, not a no-op.
        k.kubectl_ok(&["create", "configmap", "bump", "-n", "default"])?;
        k.cluster.compact_etcd()?;
        k.cluster.restart_apiserver()
    })?;
    let (_, second) = k.q.release("1.1.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &second))?;
    let lists_after = relists(&k)?;
    ensure!(
        k.controllers[0].is_running(),
        "the leader kept the lease through the restart:\n{}",
        k.controllers[0].log()
    );
    ensure!(
        lists_after > lists_before,
        "the controller listed Warehouses again after the 410 ({lists_before} → {lists_after})"
    );
    Ok(())
}

/// The promotion the engine holds at step barrier `point` of step `step`, once one does.
fn held_promotion(barriers: &std::path::Path, point: &str, step: usize) -> Result<Option<String>> {
    let suffix = format!("-{point}-{step}");
    Ok(std::fs::read_dir(barriers)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find_map(|n| {
            n.strip_prefix("reached-")?
                .strip_suffix(&suffix)
                .map(str::to_owned)
        }))
}

/// How many commits of `log` carry `promotion`'s trailer.
fn commits_of(log: &[dray_e2e::Commit], promotion: &str) -> usize {
    log.iter()
        .filter(|c| c.trailer("Dray-Promotion") == Some(promotion))
        .count()
}

/// How many times Dray's ServiceAccount listed Warehouses.
fn relists(k: &KubePipeline) -> Result<usize> {
    Ok(k.dray_requests()?
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "warehouses")
        .count())
}

/// Kubernetes RBAC decides who may promote: `dray promote` as a user the API server knows
/// but who has no RoleBinding is a 403 naming user, verb and Stage, asked of the API
/// server with a SubjectAccessReview; bound to the chart's `dray-promoter` in the
/// project's namespace, the same user promotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_is_authorised_by_subject_access_review_on_the_stage() -> Result<()> {
    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let (_, alias) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &alias))?;
    let ann = k.cluster.token(DEVELOPER)?.to_owned();
    let as_ann = |args: &[&str]| -> Result<std::process::Output> {
        let mut command = k.q.dray.cli_command();
        command
            .env("DRAY_TOKEN", &ann)
            .args(["-p", "demo"])
            .args(args);
        Ok(command.output()?)
    };
    let refused = tokio::task::block_in_place(|| {
        as_ann(&["promote", "--stage", "staging", "--alias", &alias])
    })?;
    let said = text(&refused);
    ensure!(!refused.status.success(), "ann has no RoleBinding: {said}");
    for part in [
        "ann",
        "promote",
        "stages/staging",
        "demo",
        "kubectl create rolebinding",
    ] {
        ensure!(said.contains(part), "the refusal names `{part}`: {said}");
    }
    let asked = k
        .dray_requests()?
        .iter()
        .any(|r| r.verb == "create" && r.resource == "subjectaccessreviews");
    ensure!(
        asked,
        "Dray asked the API server with a SubjectAccessReview"
    );
    tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "create",
            "rolebinding",
            "ann-promoter",
            "-n",
            "demo",
            "--clusterrole=dray-promoter",
            "--user=ann",
        ])
    })?;
    // Answers are believed for a few seconds (the cache); the binding counts once it ends.
    let promoted = tokio::task::block_in_place(|| {
        k.q.wait_until("ann's promotion to be allowed", || {
            let output = as_ann(&[
                "promote",
                "--stage",
                "staging",
                "--alias",
                &alias,
                "--wait",
                "--timeout",
                "2m",
            ])?;
            Ok(output.status.success().then_some(output))
        })
    })?;
    let name = dray_e2e::pipeline::promotion_name(&promoted);
    let promotion = tokio::task::block_in_place(|| k.q.promotion(&name))?;
    assert_eq!(promotion["status"]["phase"], "Succeeded", "{promotion:#}");
    assert_eq!(
        promotion["metadata"]["annotations"]["dray.dev/actor"], "ann",
        "the reviewed user is the actor: {promotion:#}"
    );
    // The Stage's status is written after the promotion ends: wait for it.
    tokio::task::block_in_place(|| k.q.wait_for_stage("staging", &alias))?;
    Ok(())
}

/// The one door holds in the cluster: `kubectl create` of a Promotion, by a user allowed
/// to create Promotions by RBAC, is refused by Dray's validating admission webhook with
/// the promote path's reason; so is a status write by anyone but Dray; Dray's own
/// Promotions pass the same webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_of_a_promotion_is_refused_by_the_admission_webhook() -> Result<()> {
    let k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let (freight, alias) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &alias))?;
    let forged = format!(
        "apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata: {{name: forged-to-prod, namespace: demo}}
spec:
  stage: prod
  freight: {freight}
  steps:
    - uses: git-push
      config: {{path: ./out}}
"
    );
    let file = k.q.world.unique_dir("forged")?.with_extension("yaml");
    std::fs::write(&file, &forged)?;
    let created =
        tokio::task::block_in_place(|| k.kubectl(&["create", "-f", &file.display().to_string()]))?;
    let said = text(&created);
    ensure!(
        !created.status.success(),
        "a forged Promotion must be refused: {said}"
    );
    ensure!(
        said.contains("admission webhook \"validate.dray.dev\" denied the request"),
        "kubectl prints the webhook's denial: {said}"
    );
    ensure!(
        said.contains("steps"),
        "the reason names what is wrong: {said}"
    );
    let forged_exists =
        tokio::task::block_in_place(|| k.object("promotions.dray.dev", "demo", "forged-to-prod"))?;
    ensure!(forged_exists.is_none(), "nothing was stored");
    // Freight is minted, never written: a copy under a new name is refused.
    let minted = tokio::task::block_in_place(|| k.object("freight.dray.dev", "demo", &freight))?
        .context("the minted Freight is in the cluster")?;
    let mut copy = minted.clone();
    copy["metadata"] = serde_json::json!({"name": "forged-freight", "namespace": "demo"});
    copy.as_object_mut().map(|m| m.remove("status"));
    let copy_file =
        k.q.world
            .unique_dir("forged-freight")?
            .with_extension("json");
    std::fs::write(&copy_file, serde_json::to_vec(&copy)?)?;
    let created = tokio::task::block_in_place(|| {
        k.kubectl(&["create", "-f", &copy_file.display().to_string()])
    })?;
    let said = text(&created);
    ensure!(
        !created.status.success(),
        "forged Freight must be refused: {said}"
    );
    ensure!(said.contains("Freight is minted by Dray"), "{said}");
    // A status write by a cluster admin is refused the same way.
    let patched = tokio::task::block_in_place(|| {
        k.kubectl(&[
            "patch",
            "freight",
            &freight,
            "-n",
            "demo",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"verifiedIn":{"prod":{}}}}"#,
        ])
    })?;
    let said = text(&patched);
    ensure!(
        !patched.status.success(),
        "a forged status must be refused: {said}"
    );
    ensure!(
        said.contains("written by Dray's controllers only"),
        "{said}"
    );
    // `kubectl delete` of what others use meets the API's own delete rule, in its words.
    let deleted = tokio::task::block_in_place(|| {
        k.kubectl(&["delete", "warehouse", "app", "-n", "demo", "--wait=false"])
    })?;
    let said = text(&deleted);
    ensure!(!deleted.status.success(), "the Warehouse is in use: {said}");
    ensure!(
        said.contains("is still used by stage `dev`")
            && said.contains("delete or change those first"),
        "{said}"
    );
    let through_api = k.q.cli(&["delete", "warehouse", "app"])?;
    let api_said = text(&through_api);
    ensure!(
        !through_api.status.success() && api_said.contains("is still used by stage `dev`"),
        "the API refuses with the same words: {api_said}"
    );
    let deleted = tokio::task::block_in_place(|| {
        k.kubectl(&["delete", "stage", "staging", "-n", "demo", "--wait=false"])
    })?;
    let said = text(&deleted);
    ensure!(
        !deleted.status.success() && said.contains("is still used by stage `prod`"),
        "{said}"
    );

    // A Project whose name cannot name a namespace is refused by the CRD's own rule.
    let applied = tokio::task::block_in_place(|| {
        let file = k.q.world.unique_dir("project")?.join("project.yaml");
        std::fs::write(
            &file,
            "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {name: kube-team}\nspec: {}\n",
        )?;
        k.kubectl(&["apply", "-f", &file.display().to_string()])
    })?;
    let said = text(&applied);
    ensure!(
        !applied.status.success() && said.contains("a Project's name is the name of its namespace"),
        "{said}"
    );

    // Dray's own writes never reach its webhook: the configuration leaves its
    // ServiceAccount out (matchConditions), so its auto-promotion above did not depend on it.
    let config = tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "get",
            "validatingwebhookconfiguration",
            "dray",
            "-o",
            "json",
        ])
    })?;
    let config: serde_json::Value = serde_json::from_str(&config)?;
    let conditions = config["webhooks"][0]["matchConditions"].to_string();
    ensure!(conditions.contains(DRAY_USER), "{conditions}");
    Ok(())
}

/// Leader election is safe against a partition: the leader, holding a promotion between its
/// commit and its push, is cut off from the API server (a TCP proxy in front of it stops
/// passing anything). It stops — the process exits, pushing nothing — before the standby,
/// judging the Lease by its own clock, takes over; the standby resumes the promotion and
/// `stage/dev` gets exactly one commit for it; reconnected, the old leader does not come
/// back as a leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_stops_before_the_standby_takes_over() -> Result<()> {
    use dray::promotion::engine::STEP_BARRIER_ENV;
    const COMMIT: usize = 4;
    let barriers = tempfile::tempdir()?;
    let mut k = KubePipeline::start(KubeOptions {
        controllers: 2,
        lease_duration: Some(6),
        proxied_controllers: true,
        controller_env: vec![(
            STEP_BARRIER_ENV.into(),
            barriers.path().display().to_string(),
        )],
        ..Default::default()
    })
    .await?;
    let first = tokio::task::block_in_place(|| k.wait_for_leader(Duration::from_secs(60)))?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let arm = barriers.path().join(format!("arm-recorded-{COMMIT}"));
    std::fs::write(&arm, b"")?;
    let (_, alias) = k.q.release("1.0.0").await?;
    let promotion = tokio::task::block_in_place(|| {
        k.q.wait_until(
            "dev's auto-promotion to hold between commit and push",
            || held_promotion(barriers.path(), "recorded", COMMIT),
        )
    })?;
    let ours = |log: &[dray_e2e::Commit]| commits_of(log, &promotion);
    ensure!(
        ours(&k.q.config.log("stage/dev").unwrap_or_default()) == 0,
        "nothing pushed yet"
    );

    // The partition: the leader reaches nothing; the standby still reaches the API server.
    k.proxies[first].cut();
    std::fs::remove_file(&arm)?;
    let second = tokio::task::block_in_place(|| {
        dray_e2e::wait_until("the standby to lead", Duration::from_secs(60), || {
            Ok(k.leader().filter(|&i| i != first))
        })
    })?;
    // By the time the standby leads, the old leader has stopped: it gave up at its renew
    // deadline, before the lease could expire on the standby's clock.
    ensure!(
        !k.controllers[first].is_running(),
        "the old leader still ran when the standby took over:\n{}",
        k.controllers[first].log()
    );
    let said = k.controllers[first].log();
    ensure!(said.contains("could not renew the lease"), "{said}");

    tokio::task::block_in_place(|| -> Result<()> {
        let phase =
            k.q.wait_until(&format!("{promotion} to end on the new leader"), || {
                let p = k.q.promotion(&promotion)?;
                let phase = p["status"]["phase"].as_str().unwrap_or_default().to_owned();
                Ok((!matches!(phase.as_str(), "" | "Pending" | "Running")).then_some(phase))
            })?;
        assert_eq!(phase, "Succeeded", "{:#}", k.q.promotion(&promotion)?);
        k.q.wait_for_stage("dev", &alias)
    })?;
    // Reconnected, the old replica stays down; the new leader keeps the lease.
    k.proxies[first].heal();
    let holder = tokio::task::block_in_place(|| {
        k.kubectl_ok(&[
            "get",
            "lease",
            "dray-controller",
            "-n",
            "dray",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
    })?;
    assert_eq!(holder, format!("replica-{second}"));
    ensure!(
        !k.controllers[first].is_running(),
        "the old leader did not resume"
    );
    let log = k.q.config.log("stage/dev")?;
    assert_eq!(
        ours(&log),
        1,
        "exactly one commit for {promotion}: {log:#?}"
    );
    Ok(())
}

/// Dray's own writes do not depend on its webhook: with `dray serve` (which serves the
/// webhook) down, a refresh asked with `kubectl annotate` is discovered, minted and
/// auto-promoted to dev by `dray controller`, whose Freight, Promotion and status writes the
/// API server no longer sends to the webhook; a user's `kubectl create` of a Promotion fails
/// closed, with the API server's words that the webhook cannot be reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_webhook_down_dray_keeps_writing_and_users_writes_fail_closed() -> Result<()> {
    let mut k = KubePipeline::start(KubeOptions::default()).await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let (freight, first) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &first))?;
    k.q.dray.kill9()?;

    dray_e2e::oci::push_image(&k.q.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        k.kubectl_ok(&[
            "annotate",
            "warehouse",
            "app",
            "-n",
            "demo",
            "--overwrite",
            "dray.dev/refresh=after-the-webhook-went-down",
        ])?;
        k.q.wait_until("dev to hold the Freight of 1.1.0", || {
            let Some(dev) = k.object("stages.dray.dev", "demo", "dev")? else {
                return Ok(None);
            };
            let Some(current) = dev["status"]["currentFreight"]["name"].as_str() else {
                return Ok(None);
            };
            let Some(now) = k.object("freight.dray.dev", "demo", current)? else {
                return Ok(None);
            };
            Ok((now["images"][0]["tag"] == "1.1.0").then_some(()))
        })
    })?;

    let forged = format!(
        "apiVersion: dray.dev/v1alpha1
kind: Promotion
metadata: {{name: forged-while-down, namespace: demo}}
spec: {{stage: prod, freight: {freight}}}
"
    );
    let file = k.q.world.unique_dir("forged")?.join("promotion.yaml");
    std::fs::write(&file, forged)?;
    let created =
        tokio::task::block_in_place(|| k.kubectl(&["create", "-f", &file.display().to_string()]))?;
    let said = text(&created);
    ensure!(
        !created.status.success(),
        "the webhook fails closed: {said}"
    );
    ensure!(
        said.contains("failed calling webhook \"validate.dray.dev\""),
        "the API server says the webhook could not be called: {said}"
    );
    Ok(())
}

/// Deleting a project's namespace completes while a promotion runs in it and a Stage holds
/// Freight: the namespace controller's deletes of Promotions and Freight are not refused
/// by the webhook (it leaves the cluster's cleanup out), and `dray controller` goes on
/// leading when the promotion it held is gone under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "flaky under CI load: the 1.1.0 promotion sometimes does not reach its step barrier within 60 s; passes alone (`--ignored`); being investigated"]
async fn deleting_a_projects_namespace_completes_with_a_promotion_running() -> Result<()> {
    use dray::promotion::engine::STEP_BARRIER_ENV;
    const COMMIT: usize = 4;
    let barriers = tempfile::tempdir()?;
    let mut k = KubePipeline::start(KubeOptions {
        controller_env: vec![(
            STEP_BARRIER_ENV.into(),
            barriers.path().display().to_string(),
        )],
        ..Default::default()
    })
    .await?;
    tokio::task::block_in_place(|| k.apply_quickstart(str::to_owned))?;
    let (_, first) = k.q.release("1.0.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &first))?;
    std::fs::write(barriers.path().join(format!("arm-recorded-{COMMIT}")), b"")?;
    let (_, second) = k.q.release("1.1.0").await?;
    let promotion = tokio::task::block_in_place(|| {
        k.q.wait_until("dev's promotion of 1.1.0 to hold mid-way", || {
            held_promotion(barriers.path(), "recorded", COMMIT)
        })
    })?;
    ensure!(promotion.contains(&second), "{promotion} promotes {second}");

    let deleted = tokio::task::block_in_place(|| {
        k.kubectl(&[
            "delete",
            "namespace",
            "demo",
            "--wait=true",
            "--timeout=120s",
        ])
    })?;
    ensure!(
        deleted.status.success(),
        "the namespace is deleted: {}\n{}",
        text(&deleted),
        k.cluster.controller_manager_log()
    );
    std::fs::remove_file(barriers.path().join(format!("arm-recorded-{COMMIT}")))?;
    std::fs::write(
        barriers
            .path()
            .join(format!("release-{promotion}-recorded-{COMMIT}")),
        b"",
    )?;
    // The held promotion ends against objects that are gone; the replica goes on: the
    // project, removed and applied again, promotes a new release to dev.
    tokio::task::block_in_place(|| -> Result<()> {
        // The webhook's view of the project empties as its watches follow the deletion.
        k.q.wait_until("project demo to be deletable", || {
            let deleted =
                k.kubectl(&["delete", "project", "demo", "--wait=true", "--timeout=60s"])?;
            Ok(deleted.status.success().then_some(()))
        })?;
        k.apply_quickstart(str::to_owned)
    })?;
    let (_, third) = k.q.release("1.2.0").await?;
    tokio::task::block_in_place(|| k.q.wait_for_stage("dev", &third))?;
    ensure!(
        k.controllers[0].is_running(),
        "the controller goes on:\n{}",
        k.controllers[0].log()
    );
    Ok(())
}
