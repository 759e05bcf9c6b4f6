//! Safe by construction, end to end against the real `dray serve` with a real registry and
//! git server: Freight a Stage holds is not deleted; a project goes only with `--cascade`
//! (and `--yes` without a terminal); `delete -f` deletes what files name; hand-made Freight
//! must cover every subscription with a tag that points at its digest and an RFC 1123
//! alias; `token create` binds where every command works unless `--all-projects`; `token
//! list` shows ROLE and SCOPE; the last admin token is not revoked, the bootstrap file goes
//! with its revoked token, and `dray serve --reset-admin` is the way back.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use anyhow::{Context, Result};
use dray_e2e::Dray;
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, text};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freight_a_stage_holds_is_not_deleted() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    let (first, first_alias) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.promote_ok("dev", &first_alias)?;
        p.wait_for_stage("dev", &first_alias)?;
        let refused = p.cli(&["delete", "freight", &first])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&format!(
                "Freight `{first_alias}` is current in Stage `dev`"
            )) && said.contains("hint: promote other Freight to Stage `dev` first"),
            "{said}"
        );
        let stage = p.stage("dev")?;
        assert_eq!(stage["status"]["currentFreight"]["name"], first.as_str());
        assert!(p.freight_named(&first).is_ok(), "still there");
        Ok(())
    })?;
    let (_, second_alias) = p.release("1.0.1").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.promote_ok("dev", &second_alias)?;
        p.wait_for_stage("dev", &second_alias)?;
        let deleted = p.cli(&["delete", "freight", &first])?;
        assert!(deleted.status.success(), "{}", text(&deleted));
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_goes_only_with_cascade_and_yes_without_a_terminal() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    let (freight, _) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let refused = p.dray.cli(["delete", "project", "demo"])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("project `demo` still holds")
                && said.contains("dray delete project demo --cascade"),
            "{said}"
        );
        // No terminal (the test's stdin is not one) and no --yes: refused, nothing removed.
        let unconfirmed = p.dray.cli(["delete", "project", "demo", "--cascade"])?;
        let said = text(&unconfirmed);
        assert_eq!(unconfirmed.status.code(), Some(2), "{said}");
        assert!(said.contains("pass --yes"), "{said}");
        assert!(p.stage("dev")?.is_object(), "nothing removed");

        let deleted = p
            .dray
            .cli(["delete", "project", "demo", "--cascade", "--yes"])?;
        let said = text(&deleted);
        assert!(deleted.status.success(), "{said}");
        for line in [
            "stage demo/dev deleted".to_owned(),
            "warehouse demo/app deleted".to_owned(),
            format!("freight demo/{freight} deleted"),
            "project demo deleted".to_owned(),
        ] {
            assert!(said.contains(&line), "`{line}` in {said}");
        }
        let projects = p.dray.cli(["get", "projects", "-o", "json"])?;
        let listed: Vec<Value> = serde_json::from_slice(&projects.stdout)?;
        assert!(listed.is_empty(), "{listed:?}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_f_deletes_what_the_files_name() -> Result<()> {
    tokio::task::block_in_place(|| -> Result<()> {
        let p = Pipeline::start()?;
        p.apply_base()?;
        let yaml = "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: scratch}
---
apiVersion: dray.dev/v1alpha1
kind: PromotionTask
metadata: {name: noop, namespace: scratch}
spec:
  steps:
    - uses: http
      config: {url: 'http://127.0.0.1:9/health'}
";
        p.apply(yaml)?;
        let file = p.world.unique_dir("delete")?.with_extension("yaml");
        std::fs::write(&file, yaml)?;
        let file = file.to_str().context("a UTF-8 path")?;
        let deleted = p.dray.cli(["delete", "-f", file])?;
        let said = text(&deleted);
        assert!(deleted.status.success(), "{said}");
        let task = said
            .find("promotiontask noop deleted")
            .context(said.clone())?;
        let project = said.find("project scratch deleted").context(said.clone())?;
        assert!(task < project, "the task before its project: {said}");
        let again = p.dray.cli(["delete", "-f", file])?;
        assert_eq!(again.status.code(), Some(1), "{}", text(&again));
        assert!(
            text(&again).contains("2 of 2 resources not deleted"),
            "{}",
            text(&again)
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_made_freight_needs_agreeing_tags_every_subscription_and_a_label_alias() -> Result<()>
{
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_base()?;
        Ok(p)
    })?;
    let old = oci::push_image(&p.registry, "demo/app", "1.2.0").await?;
    let other = oci::push_image(&p.registry, "demo/app", "9.9.9").await?;
    assert_ne!(old, other, "two images");
    tokio::task::block_in_place(|| -> Result<()> {
        let repo = format!("{}/demo/app", p.registry.host());
        let commit = format!("{}@{}", p.config_url, p.config.head("main")?);
        let create = |image: &str, extra: &[&str]| -> Result<std::process::Output> {
            let mut args = vec!["freight", "create", "--warehouse", "app", "--image", image];
            args.extend_from_slice(extra);
            p.cli(&args)
        };
        let lying = format!("{repo}:9.9.9@{old}");
        let refused = create(&lying, &["--commit", &commit])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&format!(
                "tag `9.9.9` points at `{other}` in the registry, not at the given digest"
            )),
            "{said}"
        );

        let honest = format!("{repo}:1.2.0@{old}");
        let refused = create(&honest, &[])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("subscribes to git repository") && said.contains("--commit"),
            "{said}"
        );

        let refused = create(&honest, &["--commit", &commit, "--alias", "Hot_Fix"])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("alias `Hot_Fix` is not an RFC 1123 label")
                && said.contains("use --alias hot-fix"),
            "{said}"
        );

        let created = create(&honest, &["--commit", &commit, "--alias", "hot-fix"])?;
        assert!(created.status.success(), "{}", text(&created));
        let freight = p.freight()?;
        assert!(
            freight.iter().any(|f| f["alias"] == "hot-fix"),
            "{freight:?}"
        );
        assert!(freight.iter().all(|f| f["alias"] != "Hot_Fix"));
        Ok(())
    })
}

/// The id of the listed token of `user`.
fn token_id(listed: &[Value], user: &str) -> Result<String> {
    let token = listed
        .iter()
        .find(|t| t["user"] == user)
        .with_context(|| format!("no token of `{user}` in {listed:?}"))?;
    Ok(token["id"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_bind_where_commands_work_and_admin_is_never_lost() -> Result<()> {
    tokio::task::block_in_place(|| -> Result<()> {
        let mut p = Pipeline::start()?;
        p.apply_base()?;
        let list = |p: &Pipeline| -> Result<Vec<Value>> {
            let listed = p.dray.cli(["token", "list", "-o", "json"])?;
            anyhow::ensure!(listed.status.success(), "{}", text(&listed));
            Ok(serde_json::from_slice(&listed.stdout)?)
        };
        let bootstrap = token_id(&list(&p)?, "admin")?;
        let refused = p.dray.cli(["token", "revoke", &bootstrap])?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("is the last one with role `dray-admin` in every project")
                && said.contains("--reset-admin"),
            "{said}"
        );

        // One project, no -p: the binding is in that project, as every command resolves it.
        let ann = p
            .dray
            .cli(["token", "create", "--user", "ann", "--role", "dray-viewer"])?;
        assert!(ann.status.success(), "{}", text(&ann));
        assert!(text(&ann).contains("in project `demo`"), "{}", text(&ann));
        let root = p.dray.cli([
            "token",
            "create",
            "--user",
            "root",
            "--role",
            "dray-admin",
            "--all-projects",
        ])?;
        assert!(root.status.success(), "{}", text(&root));
        assert!(text(&root).contains("in every project"), "{}", text(&root));
        let root_token = String::from_utf8(root.stdout.clone())?.trim().to_owned();

        let table = text(&p.dray.cli(["token", "list"])?);
        let header = table.lines().next().unwrap_or_default();
        assert!(
            header.contains("ROLE") && header.contains("SCOPE"),
            "{table}"
        );
        let row = |user: &str| {
            table
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(user))
                .unwrap_or_default()
                .split_whitespace()
                .skip(2)
                .take(2)
                .collect::<Vec<_>>()
        };
        assert_eq!(row("ann"), ["dray-viewer", "demo"], "{table}");
        assert_eq!(row("root"), ["dray-admin", "*"], "{table}");
        let bindings = text(&p.dray.cli(["token", "bindings"])?);
        assert!(
            bindings
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["User", "root", "dray-admin", "*"]),
            "{bindings}"
        );

        // With another admin, the bootstrap token goes, and its file with it.
        let file = p.dray.data_dir().join("bootstrap-token");
        let revoked = p.dray.cli(["token", "revoke", &bootstrap])?;
        assert!(revoked.status.success(), "{}", text(&revoked));
        assert!(!file.exists(), "the file never holds a revoked token");

        // Every admin token lost (root's forgotten): --reset-admin is the way back.
        p.dray.stop(std::time::Duration::from_secs(10))?;
        let reset = Command::new(Dray::binary())
            .args(["serve", "--reset-admin", "--data-dir"])
            .arg(p.dray.data_dir())
            .env("HOME", p.world.home())
            .output()?;
        let said = text(&reset);
        assert!(reset.status.success(), "{said}");
        let token = std::fs::read_to_string(&file)?.trim().to_owned();
        assert!(token.starts_with("dray_"), "a token in the file");
        assert!(!said.contains(&token), "the token is never printed: {said}");
        assert!(said.contains("no other token was revoked"), "{said}");
        let mode = std::fs::metadata(&file)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A server of its own on the data dir (the fixture's checks take the first
        // banner's token as the only one allowed in its log): the new token administers.
        let server = Served::start(&p)?;
        let cli = |token: &str, args: &[&str]| -> Result<std::process::Output> {
            Ok(Command::new(Dray::binary())
                .arg("--server")
                .arg(&server.url)
                .args(args)
                .env("DRAY_TOKEN", token)
                .env("HOME", p.world.home())
                .env("NO_COLOR", "1")
                .output()?)
        };
        let listed = cli(&token, &["token", "list", "-o", "json"])?;
        assert!(listed.status.success(), "{}", text(&listed));
        let listed: Vec<Value> = serde_json::from_slice(&listed.stdout)?;
        assert!(
            listed.iter().any(|t| t["user"] == "root"),
            "nothing revoked: {listed:?}"
        );
        let as_root = cli(&root_token, &["token", "list"])?;
        assert!(as_root.status.success(), "root's token still works");
        Ok(())
    })
}

/// `dray serve` on the pipeline's data dir and a free port, killed when dropped.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Served {
    fn start(p: &Pipeline) -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(Dray::binary())
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(p.dray.data_dir())
            .env("HOME", p.world.home())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let served = Served {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        p.wait_until("the second `dray serve` to answer", || {
            Ok(std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ()))
        })?;
        Ok(served)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
