//! Promotions end to end: real registry, real git over HTTP, real `kubectl kustomize`,
//! `dray serve` running the quickstart's PromotionTask into `stage/<stage>` branches.

use anyhow::{Context, Result, bail};
use dray_e2e::pipeline::{Pipeline, alias, promotion_name, text};
use dray_e2e::{GitRepo, oci};
use serde_json::Value;

/// The quickstart project against this world's registry and config repo, with the
/// Warehouse refreshed by hand only.
fn start() -> Result<Pipeline> {
    let q = Pipeline::start()?;
    q.apply_quickstart(str::to_owned)?;
    Ok(q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_writes_pinned_manifests_with_trailers_then_is_idempotent_and_rolls_back()
-> Result<()> {
    let q = tokio::task::block_in_place(start)?;
    let old_digest = oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    let new_digest = oci::push_image(&q.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        q.refresh()?;
        let freight = q.freight()?;
        assert_eq!(freight.len(), 2, "{freight:#?}");
        let (newest, older) = (alias(&freight[0]), alias(&freight[1]));

        let promoted = q.promote("dev", &newest)?;
        let said = text(&promoted);
        assert!(promoted.status.success(), "{said}");
        assert!(
            said.contains("Succeeded render-to-stage-branch::git-clone"),
            "live step progress: {said}"
        );
        // With the steps' own log lines under them.
        assert!(
            said.lines()
                .any(|l| l.starts_with("    | ") && l.contains("committed ")),
            "step logs: {said}"
        );
        let name = promotion_name(&promoted);

        let manifests = q.config.show("stage/dev", "manifests.yaml")?;
        let pinned = format!("{}/demo/app:1.1.0@{new_digest}", q.registry.host());
        assert!(
            manifests.contains(&pinned),
            "stage/dev must pin the digest:\n{manifests}"
        );
        assert!(manifests.contains("namespace: demo-dev"), "{manifests}");
        let log = q.config.log("stage/dev")?;
        assert_eq!(log.len(), 1, "{log:#?}");
        let head = &log[0];
        let freight_id = freight[0]["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            head.trailer("Dray-Freight"),
            Some(format!("{freight_id} ({newest})").as_str())
        );
        assert_eq!(head.trailer("Dray-Promotion"), Some(name.as_str()));
        assert_eq!(head.trailer("Dray-Stage"), Some("demo/dev"));
        assert_eq!(head.trailer("Dray-Actor"), Some("admin"));
        assert_eq!(head.trailer("Dray-Image"), Some(pinned.as_str()));
        let config_head = q.config.head("main")?;
        assert_eq!(
            head.trailer("Dray-Config-Commit"),
            Some(format!("{}@{config_head}", q.config_url).as_str())
        );

        // The same Freight again: Succeeded, the commit step Skipped, no new commit.
        let again = q.promote("dev", &newest)?;
        assert!(again.status.success(), "{}", text(&again));
        let promotion = q.promotion(&promotion_name(&again))?;
        let steps = promotion["status"]["stepExecutionMetadata"]
            .as_array()
            .context("steps")?;
        let commit = steps
            .iter()
            .find(|s| s["alias"].as_str().is_some_and(|a| a.ends_with("::commit")))
            .context("commit step")?;
        assert_eq!(commit["status"], "Skipped", "{promotion:#}");
        assert_eq!(
            q.config.log("stage/dev")?.len(),
            1,
            "no new commit for the same Freight"
        );

        // Rollback: older Freight lands as a new commit on top.
        let rollback = q.promote("dev", &older)?;
        assert!(rollback.status.success(), "{}", text(&rollback));
        let log = q.config.log("stage/dev")?;
        assert_eq!(log.len(), 2);
        assert_eq!(
            log[0].parents,
            vec![log[1].sha.clone()],
            "a rollback is a new commit on top"
        );
        let manifests = q.config.show("stage/dev", "manifests.yaml")?;
        assert!(
            manifests.contains(&format!("1.0.0@{old_digest}")),
            "{manifests}"
        );

        // The Stage reports what its branch holds.
        let stage: Value = serde_json::from_slice(
            &q.dray
                .cli(["get", "stage", "dev", "-p", "demo", "-o", "json"])?
                .stdout,
        )?;
        assert_eq!(stage["status"]["currentFreight"]["alias"], older.as_str());
        assert_eq!(stage["status"]["branch"]["name"], "stage/dev");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_reads_the_branch_and_flags_hand_made_commits() -> Result<()> {
    let q = tokio::task::block_in_place(start)?;
    oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        q.refresh()?;
        let freight = alias(&q.freight()?[0]);
        assert!(q.promote("dev", &freight)?.status.success());

        let hand = GitRepo::clone_from_url(&q.world, &q.config_url)?;
        hand.switch("stage/dev")?;
        hand.write("manifests.yaml", "# edited by hand\n")?;
        hand.commit_as("Hotfix by hand", "Eve", "eve@example.com")?;
        hand.push("stage/dev")?;

        let audit = q.dray.cli(["audit", "dev", "-p", "demo", "-o", "json"])?;
        assert!(audit.status.success(), "{}", text(&audit));
        let entries: Vec<Value> = serde_json::from_slice(&audit.stdout)?;
        assert_eq!(entries.len(), 2, "{entries:#?}");
        assert_eq!(entries[0]["byDray"], false);
        assert_eq!(entries[0]["subject"], "Hotfix by hand");
        assert_eq!(entries[1]["byDray"], true);
        assert!(
            entries[1]["freight"]
                .as_str()
                .unwrap_or_default()
                .contains(&freight)
        );
        assert_eq!(entries[1]["actor"], "admin");
        assert!(
            entries[1]["images"][0]
                .as_str()
                .unwrap_or_default()
                .contains("@sha256:")
        );
        let table = text(&q.dray.cli(["audit", "dev", "-p", "demo"])?);
        assert!(table.contains("NOT MADE BY DRAY"), "{table}");

        // Git is the truth: the Stage says its branch moved outside Dray, and to what.
        let stage: Value = serde_json::from_slice(
            &q.dray
                .cli(["get", "stage", "dev", "-p", "demo", "-o", "json"])?
                .stdout,
        )?;
        assert_eq!(
            stage["status"]["drift"]["commit"], entries[0]["commit"],
            "{stage:#}"
        );
        assert_eq!(stage["status"]["drift"]["message"], "Hotfix by hand");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_expressions_are_refused_at_apply_and_rendered_secrets_fail_the_commit() -> Result<()> {
    let q = tokio::task::block_in_place(start)?;
    oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let broken = "apiVersion: dray.dev/v1alpha1\nkind: PromotionTask\nmetadata: {name: broken, namespace: demo}\nspec:\n  steps:\n    - uses: git-clone\n      config:\n        repoURL: ${{ vars.repoURL \n";
        let refused = q.try_apply(broken)?;
        assert!(!refused.status.success());
        let said = text(&refused);
        assert!(said.contains("spec.steps[0].config.repoURL"), "{said}");
        assert!(said.contains(":8:"), "the error names the line: {said}");
        let unknown = "apiVersion: dray.dev/v1alpha1\nkind: PromotionTask\nmetadata: {name: typo, namespace: demo}\nspec:\n  steps:\n    - uses: git-clon\n";
        let said = text(&q.try_apply(unknown)?);
        assert!(said.contains("did you mean `git-clone`"), "{said}");

        // A config commit that renders a Secret with data.
        q.config.write(
            "base/secret.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\n",
        )?;
        q.config.write(
            "base/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deployment.yaml\n  - service.yaml\n  - secret.yaml\n",
        )?;
        q.config.commit("Add a secret")?;
        q.config.push("main")?;
        q.refresh()?;
        let freight = alias(&q.freight()?[0]);
        let promoted = q.promote("dev", &freight)?;
        assert!(!promoted.status.success());
        let said = text(&promoted);
        assert!(said.contains("Failed"), "{said}");
        assert!(
            said.contains("Secret") && said.contains("db"),
            "the reason names the Secret: {said}"
        );
        assert!(
            q.config
                .branches()?
                .iter()
                .all(|b| !b.contains("stage/dev"))
                || q.config
                    .log("stage/dev")
                    .map(|l| l.is_empty())
                    .unwrap_or(true),
            "nothing may be pushed"
        );
        Ok(())
    })
}

const LOAD_STAGES: usize = 25;

fn many_stages() -> String {
    let mut yaml = String::new();
    for i in 0..LOAD_STAGES {
        yaml.push_str(&format!(
            "---\napiVersion: dray.dev/v1alpha1\nkind: Stage\nmetadata: {{name: load-{i}, namespace: demo}}\nspec:\n  queuePolicy: Queue\n  requestedFreight:\n    - origin: {{kind: Warehouse, name: app}}\n      sources: {{direct: true}}\n  promotionTemplate:\n    spec:\n      steps:\n        - uses: git-clone\n          config:\n            repoURL: http://127.0.0.1:8080/config.git\n            checkout:\n              - commit: ${{{{ commitFrom(\"http://127.0.0.1:8080/config.git\").id }}}}\n                path: ./src\n              - branch: stage/shared\n                create: true\n                path: ./out\n        - uses: kustomize-set-image\n          config:\n            path: ./src/overlays/dev\n            images:\n              - image: app\n                newName: 127.0.0.1:5000/demo/app\n        - uses: kustomize-build\n          config:\n            path: ./src/overlays/dev\n            outPath: ./out/{i}/manifests.yaml\n        - uses: git-commit\n          config:\n            path: ./out\n            message: load-{i} gets ${{{{ ctx.targetFreight.alias }}}}\n        - uses: git-push\n          config:\n            path: ./out\n            targetBranch: stage/shared\n"
        ));
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_promotions_into_one_branch_all_land() -> Result<()> {
    let q = tokio::task::block_in_place(start)?;
    oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    oci::push_image(&q.registry, "demo/app", "1.1.0").await?;
    let names = tokio::task::block_in_place(|| -> Result<Vec<String>> {
        q.refresh()?;
        let applied = q.try_apply(&many_stages())?;
        assert!(applied.status.success(), "{}", text(&applied));
        let freight = q.freight()?;
        let (first, second) = (alias(&freight[1]), alias(&freight[0]));
        let mut children = Vec::new();
        for i in 0..LOAD_STAGES {
            for alias in [&first, &second] {
                let mut cmd = q.dray.cli_command();
                cmd.args([
                    "promote",
                    "-p",
                    "demo",
                    "--stage",
                    &format!("load-{i}"),
                    "--alias",
                    alias,
                ]);
                children.push(cmd.stdout(std::process::Stdio::piped()).spawn()?);
            }
        }
        let mut names = Vec::new();
        for child in children {
            let output = child.wait_with_output()?;
            assert!(output.status.success(), "{}", text(&output));
            names.push(promotion_name(&output));
        }
        Ok(names)
    })?;
    assert_eq!(names.len(), 2 * LOAD_STAGES);
    tokio::task::block_in_place(|| -> Result<()> {
        for name in &names {
            let mut phase = String::new();
            for _ in 0..1200 {
                phase = q.promotion(name)?["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if matches!(
                    phase.as_str(),
                    "Succeeded" | "Failed" | "Errored" | "Aborted"
                ) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            assert_eq!(
                phase,
                "Succeeded",
                "promotion {name}: {:#}",
                q.promotion(name)?
            );
        }
        let log = q.config.log("stage/shared")?;
        let promoted: std::collections::BTreeSet<String> = log
            .iter()
            .filter_map(|c| c.trailer("Dray-Promotion").map(str::to_owned))
            .collect();
        for name in &names {
            assert!(
                promoted.contains(name),
                "the commit of {name} was lost; branch has {promoted:?}"
            );
        }
        assert_eq!(
            log.len(),
            2 * LOAD_STAGES,
            "exactly one commit per promotion"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_promotion_then_restart_finishes_with_one_commit() -> Result<()> {
    let mut q = tokio::task::block_in_place(start)?;
    oci::push_image(&q.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    oci::push_image(&q.registry, "demo/app", "1.1.0").await?;
    tokio::task::block_in_place(|| q.refresh())?;
    let freight = tokio::task::block_in_place(|| q.freight())?;
    let aliases = [alias(&freight[1]), alias(&freight[0])];
    let steps = 6;
    for crash_at in 0..steps {
        let target = &aliases[crash_at % 2];
        let name = tokio::task::block_in_place(|| -> Result<String> {
            let requested = q
                .dray
                .cli(["promote", "-p", "demo", "--stage", "dev", "--alias", target])?;
            assert!(requested.status.success(), "{}", text(&requested));
            Ok(promotion_name(&requested))
        })?;
        // Kill as soon as the promotion reached step `crash_at` (or ended).
        tokio::task::block_in_place(|| -> Result<()> {
            for _ in 0..2000 {
                let promotion = q.promotion(&name)?;
                let step = promotion["status"]["currentStep"].as_u64().unwrap_or(0) as usize;
                let phase = promotion["status"]["phase"].as_str().unwrap_or("Pending");
                if step >= crash_at || phase == "Succeeded" {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            q.dray.kill9()?;
            q.dray.restart()?;
            Ok(())
        })?;
        let final_phase = tokio::task::block_in_place(|| -> Result<String> {
            for _ in 0..1200 {
                let promotion = q.promotion(&name)?;
                let phase = promotion["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if matches!(
                    phase.as_str(),
                    "Succeeded" | "Failed" | "Errored" | "Aborted"
                ) {
                    return Ok(phase);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            bail!(
                "promotion {name} did not finish after the restart: {:#}",
                q.promotion(&name)?
            )
        })?;
        assert_eq!(
            final_phase,
            "Succeeded",
            "crash at step {crash_at}: {:#}",
            q.promotion(&name)?
        );
        let log = tokio::task::block_in_place(|| q.config.log("stage/dev"))?;
        let commits = log
            .iter()
            .filter(|c| c.trailer("Dray-Promotion") == Some(name.as_str()))
            .count();
        assert_eq!(
            commits, 1,
            "crash at step {crash_at}: exactly one commit for {name}"
        );
    }
    Ok(())
}

/// A new ed25519 key pair made by `ssh-keygen` in `dir`: the private key, and an
/// allowed-signers file trusting its public key for Dray's committer address.
fn key_pair(dir: &std::path::Path, name: &str) -> Result<(String, std::path::PathBuf)> {
    let key = dir.join(name);
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "dray", "-f"])
        .arg(&key)
        .status()
        .context("ssh-keygen (openssh-client) must be installed")?;
    if !made.success() {
        bail!("ssh-keygen failed for {}", key.display());
    }
    let allowed = dir.join(format!("{name}.allowed_signers"));
    let public = std::fs::read_to_string(key.with_extension("pub"))?;
    std::fs::write(&allowed, format!("dray@localhost {public}"))?;
    Ok((std::fs::read_to_string(&key)?, allowed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_branch_commits_are_signed_with_the_projects_signing_key() -> Result<()> {
    let q = tokio::task::block_in_place(start)?;
    let (_, newest) = q.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        // An auditor's key pair: Dray gets the private key, the auditor keeps the public one.
        let dir = q.world.unique_dir("signing")?;
        std::fs::create_dir_all(&dir)?;
        let (private, allowed) = key_pair(&dir, "dray-signing")?;
        let indented: String = private.lines().map(|l| format!("    {l}\n")).collect();
        q.apply(&format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: signing, namespace: demo}}\nspec:\n  type: signing\n  repoURL: {}\n  sshPrivateKey: |\n{indented}",
            q.config_url
        ))?;
        // The key never comes back through the API.
        let shown = text(&q.cli(&["get", "credential", "signing", "-o", "json"])?);
        assert!(!shown.contains("OPENSSH PRIVATE KEY"), "{shown}");
        assert!(
            shown.contains("sshPrivateKey"),
            "names the field it holds: {shown}"
        );

        let promoted = q.promote("dev", &newest)?;
        let said = text(&promoted);
        assert!(promoted.status.success(), "{said}");
        assert!(
            said.contains("signed with the project's signing key"),
            "{said}"
        );
        let head = q.config.head("stage/dev")?;
        let verify = |allowed: &std::path::Path| -> Result<std::process::Output> {
            q.config.try_git([
                "-c",
                &format!("gpg.ssh.allowedSignersFile={}", allowed.display()),
                "verify-commit",
                &head,
            ])
        };
        let checked = verify(&allowed)?;
        assert!(checked.status.success(), "{}", text(&checked));
        assert!(
            text(&checked).contains("Good \"git\" signature for dray@localhost"),
            "{}",
            text(&checked)
        );
        // Someone else's key does not verify it.
        let (_, elsewhere) = key_pair(&dir, "other")?;
        assert!(!verify(&elsewhere)?.status.success());
        Ok(())
    })
}

/// The quickstart's task without `sparse:` (the whole config tree), and steps that show what
/// the render saw in `./src` and in a scratch directory, then leave a file in each.
fn plain_task_that_leaves_files(task: &str) -> String {
    let leaves = r#"    - uses: file-write
      config: {path: ./scratch/mine.txt, contents: mine}
    - uses: copy
      config: {inPath: ./src/overlays, outPath: ./out/seen/overlays}
    - uses: copy
      config: {inPath: ./scratch, outPath: ./out/seen/scratch}
    - uses: file-write
      config: {path: ./src/overlays/leftover.yaml, contents: "left: 1"}
    - uses: file-write
      config: {path: ./scratch/leftover.txt, contents: left}
    - uses: git-commit
"#;
    task.lines()
        .filter(|l| !l.contains("sparse:") && !l.contains("# Only what the render reads"))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("    - uses: git-commit\n", leaves)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_promotion_reuses_warm_worktrees_and_sees_nothing_the_last_one_left() -> Result<()>
{
    let q = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let q = Pipeline::start()?;
        q.apply_quickstart(|file| match file.contains("kind: PromotionTask") {
            true => plain_task_that_leaves_files(file),
            false => file.to_owned(),
        })?;
        Ok(q)
    })?;
    let (_, first) = q.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let promoted = q.promote("dev", &first)?;
        let said = text(&promoted);
        assert!(promoted.status.success(), "{said}");
        assert!(!said.contains("reused warm worktree"), "{said}");
        Ok(())
    })?;
    let (_, second) = q.release("1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let promoted = q.promote("dev", &second)?;
        let said = text(&promoted);
        assert!(promoted.status.success(), "{said}");
        for path in ["./src", "./out"] {
            assert!(
                said.lines().any(|l| l.starts_with("    | ")
                    && l.contains("reused warm worktree")
                    && l.ends_with(&format!("in `{path}`"))),
                "{path} was not reused warm: {said}"
            );
        }
        let manifests = q.config.show("stage/dev", "manifests.yaml")?;
        assert!(manifests.contains("demo/app:1.1.0@"), "{manifests}");
        // The render saw its own scratch file, and nothing the first promotion left.
        assert_eq!(q.config.show("stage/dev", "seen/scratch/mine.txt")?, "mine");
        for left in ["seen/scratch/leftover.txt", "seen/overlays/leftover.yaml"] {
            assert!(
                q.config.show("stage/dev", left).is_err(),
                "the second promotion saw `{left}` that the first one left"
            );
        }
        // Only the config commit's files, as committed (the first render's edit is undone).
        let seen = q.config.git([
            "ls-tree",
            "-r",
            "--name-only",
            "refs/remotes/origin/stage/dev",
            "seen/overlays",
        ])?;
        let config_head = q.config.head("main")?;
        let committed = q
            .config
            .git(["ls-tree", "-r", "--name-only", &config_head, "overlays"])?;
        let strip = |s: &str| -> Vec<String> {
            s.lines()
                .map(|l| l.trim_start_matches("seen/").to_owned())
                .collect()
        };
        assert_eq!(strip(&seen), strip(&committed));
        // The Stage goes, and its warm worktrees with it.
        let warm = q.dray.data_dir().join("work/demo/.warm/dev");
        assert!(
            warm.is_dir(),
            "{} holds dev's warm worktrees",
            warm.display()
        );
        for stage in ["prod", "staging", "dev"] {
            let deleted = q.cli(&["delete", "stage", stage])?;
            assert!(deleted.status.success(), "{}", text(&deleted));
        }
        q.wait_until("dev's warm directory to be removed", || {
            Ok((!warm.exists()).then_some(()))
        })?;
        Ok(())
    })
}
