//! Authentication and RBAC end to end (issue 6): the bootstrap token of a new data
//! directory, `dray token create` for another user, a viewer refused an approval with a
//! message naming user, verb and Stage, tokens kept out of the server's log, and
//! `--auth none` as an explicit, loud opt-out.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use anyhow::Result;
use dray_e2e::{BOOTSTRAP_TOKEN_FILE, DRAY_TOKEN_ENV, Dray, DrayOptions, TestWorld};

/// A project with three Stages; nothing here needs a registry or git server.
const PROJECT: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec:
  subscriptions:
    - image: {repoURL: 127.0.0.1:5000/demo/app}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {stages: [dev]}
";

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn start(world: &TestWorld, args: &[&str]) -> Result<Dray> {
    let options = DrayOptions {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        // Trace HTTP requests: even then no header (and so no token) may reach the log.
        env: vec![("DRAY_LOG".into(), "debug,tower_http=trace".into())],
        ..Default::default()
    };
    Dray::start(world, options)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_token_reads_but_may_not_approve_and_never_reaches_the_log() -> Result<()> {
    let world = TestWorld::new()?;
    let mut dray = tokio::task::block_in_place(|| start(&world, &[]))?;

    // The bootstrap token: in a private file, and accepted.
    let admin = dray.token().to_owned();
    assert!(admin.starts_with("dray_"), "{admin}");
    let file = dray.data_dir().join(BOOTSTRAP_TOKEN_FILE);
    assert_eq!(
        std::fs::metadata(&file)?.permissions().mode() & 0o777,
        0o600
    );
    let http = dray_e2e::http_client()?;
    let projects = format!("{}/api/v1/projects", dray.url());
    let refused = http.get(&projects).send().await?;
    assert_eq!(refused.status(), 401);
    let allowed = http.get(&projects).bearer_auth(&admin).send().await?;
    assert_eq!(allowed.status(), 200);

    let ann = tokio::task::block_in_place(|| -> Result<String> {
        let project = world.path().join("project.yaml");
        std::fs::write(&project, PROJECT)?;
        let applied = dray.cli(["apply", "-f", project.to_str().unwrap_or_default()])?;
        assert!(applied.status.success(), "{}", text(&applied));

        // Without a token the CLI says what to do.
        let mut anonymous = dray.cli_command();
        anonymous
            .env_remove(DRAY_TOKEN_ENV)
            .args(["get", "stages", "-p", "demo"]);
        let anonymous = anonymous.output()?;
        assert_eq!(anonymous.status.code(), Some(1), "{}", text(&anonymous));
        assert!(
            text(&anonymous).contains("hint: pass --token or set DRAY_TOKEN"),
            "{}",
            text(&anonymous)
        );

        let made = dray.cli([
            "token",
            "create",
            "--user",
            "ann",
            "--role",
            "dray-viewer",
            "-p",
            "demo",
        ])?;
        assert!(made.status.success(), "{}", text(&made));
        let ann = String::from_utf8(made.stdout)?.trim().to_owned();
        assert!(ann.starts_with("dray_") && ann != admin, "{ann}");

        let as_ann = |args: &[&str]| {
            let mut cmd = dray.cli_command();
            cmd.env(DRAY_TOKEN_ENV, &ann).args(args);
            cmd.output()
        };
        let listed = as_ann(&["get", "stages", "-p", "demo"])?;
        assert!(listed.status.success(), "{}", text(&listed));
        assert!(text(&listed).contains("prod"), "{}", text(&listed));

        let approved = as_ann(&[
            "approve", "-p", "demo", "--stage", "prod", "--alias", "any", "--reason", "hotfix",
        ])?;
        let said = text(&approved);
        assert_eq!(approved.status.code(), Some(1), "{said}");
        assert!(
            said.contains("error: user `ann` may not approve stages/prod in project `demo`"),
            "{said}"
        );
        let made = as_ann(&["token", "create", "--user", "ann", "--role", "dray-admin"])?;
        assert!(
            text(&made).contains("user `ann` may not create tokens"),
            "{}",
            text(&made)
        );

        let bindings = dray.cli(["get", "rolebindings", "-p", "demo"])?;
        assert!(
            text(&bindings).contains("dray-viewer-ann"),
            "{}",
            text(&bindings)
        );
        Ok(ann)
    })?;

    let log = dray.log();
    assert!(
        log.contains("user `ann`") || log.contains("user=ann"),
        "{log}"
    );
    assert!(!log.contains(&ann), "ann's token must never be logged");
    assert!(
        !log.to_ascii_lowercase().contains("authorization"),
        "no request header may be logged:\n{log}"
    );

    // A restart keeps the tokens and announces no new bootstrap token.
    tokio::task::block_in_place(|| dray.restart())?;
    assert_eq!(dray.token(), admin);
    assert_eq!(dray.log().matches("shown only this once").count(), 1);
    let again = http
        .get(format!("{}/api/v1/projects/demo/stages", dray.url()))
        .bearer_auth(&ann)
        .send()
        .await?;
    assert_eq!(again.status(), 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_none_is_explicit_loud_and_anonymous() -> Result<()> {
    let world = TestWorld::new()?;
    let dray = tokio::task::block_in_place(|| start(&world, &["--auth", "none"]))?;
    assert_eq!(
        dray.token(),
        "",
        "no bootstrap token without authentication"
    );
    assert!(!dray.data_dir().join(BOOTSTRAP_TOKEN_FILE).exists());
    assert!(
        dray.log().contains("WARNING: --auth none"),
        "{}",
        dray.log()
    );
    let answer = dray_e2e::http_client()?
        .get(format!("{}/api/v1/projects", dray.url()))
        .send()
        .await?;
    assert_eq!(answer.status(), 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_listed_without_its_secret_and_revoked_at_once() -> Result<()> {
    let world = TestWorld::new()?;
    let dray = tokio::task::block_in_place(|| start(&world, &[]))?;
    let carl = tokio::task::block_in_place(|| -> Result<String> {
        let made = dray.cli([
            "token",
            "create",
            "--user",
            "carl",
            "--role",
            "dray-viewer",
            "--all-projects",
            "--description",
            "CI deploys",
            "--expires-in",
            "30d",
        ])?;
        assert!(made.status.success(), "{}", text(&made));
        let carl = String::from_utf8(made.stdout.clone())?.trim().to_owned();
        assert!(carl.starts_with("dray_"), "{carl}");

        let listed = dray.cli(["token", "list", "-o", "json"])?;
        assert!(listed.status.success(), "{}", text(&listed));
        let said = text(&listed);
        assert!(
            !said.contains(&carl) && !said.contains(dray.token()),
            "{said}"
        );
        let items: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout)?;
        let entry = items
            .iter()
            .find(|t| t["user"] == "carl")
            .ok_or_else(|| anyhow::anyhow!("carl's token is not listed: {said}"))?;
        assert_eq!(entry["description"], "CI deploys");
        assert_eq!(entry["createdBy"], "admin");
        assert!(entry["expiresAt"].is_string(), "{entry}");
        let id = entry["id"].as_str().unwrap_or_default().to_owned();
        assert!(
            text(&made).contains(&format!("token `{id}`")),
            "{}",
            text(&made)
        );
        let table = dray.cli(["token", "list"])?;
        assert!(
            text(&table).contains(&id) && text(&table).contains("CI deploys"),
            "{}",
            text(&table)
        );

        let as_carl = |args: &[&str]| {
            let mut cmd = dray.cli_command();
            cmd.env(DRAY_TOKEN_ENV, &carl).args(args);
            cmd.output()
        };
        let before = as_carl(&["get", "projects"])?;
        assert!(before.status.success(), "{}", text(&before));

        let revoked = dray.cli(["token", "revoke", &id])?;
        assert!(revoked.status.success(), "{}", text(&revoked));
        assert!(
            text(&revoked).contains(&format!("token `{id}` of user `carl` revoked")),
            "{}",
            text(&revoked)
        );

        let after = as_carl(&["get", "projects"])?;
        let said = text(&after);
        assert_eq!(after.status.code(), Some(1), "{said}");
        assert!(said.contains("error: the API token is not valid"), "{said}");
        assert!(said.contains("revoked"), "{said}");
        assert!(
            said.contains("hint: pass --token or set DRAY_TOKEN"),
            "{said}"
        );
        let listed = dray.cli(["token", "list", "-o", "json"])?;
        assert!(!text(&listed).contains(&id), "{}", text(&listed));
        Ok(carl)
    })?;
    assert!(!dray.log().contains(&carl), "a token must never be logged");
    Ok(())
}
