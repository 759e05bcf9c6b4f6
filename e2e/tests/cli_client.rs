//! The CLI as kubectl and Kargo users reach for it, against the real `dray serve`: server
//! URLs checked when the command line is read, empty environment values treated as unset,
//! client options only on client commands, saved contexts (`dray login`, `dray config`) and
//! their precedence, `dray apply -f -`, `dray hold set`, `dray promote --downstream-from`,
//! shell completions and man pages.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use anyhow::{Context as _, Result};
use dray_e2e::pipeline::{Pipeline, text};
use dray_e2e::{Dray, DrayOptions, TestWorld};
use serde_json::Value;

/// Runs `cmd` with `stdin` as its standard input.
fn with_stdin(mut cmd: Command, stdin: &str) -> Result<Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(stdin.as_bytes())?;
    Ok(child.wait_with_output()?)
}

/// The `dray` binary with nothing set: no server, token, project or saved context from the
/// environment, and `HOME` in `world`.
fn bare(world: &TestWorld) -> Command {
    let mut cmd = Command::new(Dray::binary());
    cmd.env("HOME", world.home())
        .env("NO_COLOR", "1")
        .env_remove("DRAY_SERVER")
        .env_remove("DRAY_TOKEN")
        .env_remove("DRAY_PROJECT")
        .env_remove("DRAY_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(world.path());
    cmd
}

fn run(mut cmd: Command, args: &[&str]) -> Result<Output> {
    cmd.args(args);
    cmd.output()
        .with_context(|| format!("cannot run dray {args:?}"))
}

const PROJECT: &str = "apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: demo}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: app, namespace: demo}
spec:
  interval: 1h
  subscriptions:
    - image: {repoURL: 127.0.0.1:9/demo/app}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: app}
      sources: {direct: true}
";

#[test]
fn a_server_url_without_a_scheme_is_refused_when_the_command_line_is_read() -> Result<()> {
    let world = TestWorld::new()?;
    let by_flag = run(
        bare(&world),
        &["get", "stages", "--server", "127.0.0.1:45413"],
    )?;
    assert_eq!(by_flag.status.code(), Some(2), "{}", text(&by_flag));
    let said = text(&by_flag);
    assert!(
        said.contains("did you mean `http://127.0.0.1:45413`"),
        "{said}"
    );
    assert!(!said.contains("start the server"), "{said}");

    let mut cmd = bare(&world);
    cmd.env("DRAY_SERVER", "127.0.0.1:45413");
    let by_env = run(cmd, &["get", "stages"])?;
    assert_eq!(by_env.status.code(), Some(2), "{}", text(&by_env));
    assert!(
        text(&by_env).contains("DRAY_SERVER: `127.0.0.1:45413` has no scheme"),
        "{}",
        text(&by_env)
    );
    Ok(())
}

#[test]
fn client_options_belong_to_client_commands_only() -> Result<()> {
    let world = TestWorld::new()?;
    for local in [
        &["serve", "--help"][..],
        &["crds", "--help"],
        &["controller", "--help"],
    ] {
        let help = text(&run(bare(&world), local)?);
        for flag in ["--server", "--token", "--project", "Client options"] {
            assert!(
                !help.contains(flag),
                "`dray {local:?}` lists {flag}:\n{help}"
            );
        }
    }
    let refused = run(bare(&world), &["serve", "--server", "http://127.0.0.1:1"])?;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let refused = run(bare(&world), &["-p", "demo", "crds"])?;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("`dray crds` takes no client options"),
        "{}",
        text(&refused)
    );

    let help = text(&run(bare(&world), &["get", "--help"])?);
    let usage = help
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .context("no usage line")?;
    assert!(!usage.contains("--server"), "{usage}");
    let (own, client) = help
        .split_once("Client options:")
        .with_context(|| format!("no Client options heading:\n{help}"))?;
    assert!(
        client.contains("--server <URL>") && client.contains("-p, --project"),
        "{help}"
    );
    assert!(!own.contains("--server"), "{help}");

    let version = run(bare(&world), &["version", "--client"])?;
    assert!(version.status.success(), "{}", text(&version));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).lines().count(),
        1,
        "{}",
        text(&version)
    );
    Ok(())
}

#[test]
fn login_checks_the_token_and_saved_contexts_come_below_flags_and_environment() -> Result<()> {
    let world = TestWorld::new()?;
    let dray = Dray::start(&world, DrayOptions::default())?;
    let token = dray.token().to_owned();
    let applied = with_stdin(
        {
            let mut cmd = dray.cli_command();
            cmd.args(["apply", "-f", "-"]);
            cmd
        },
        PROJECT,
    )?;
    assert!(applied.status.success(), "{}", text(&applied));

    let config = world.home().join(".config/dray/config.yaml");
    let mut login = bare(&world);
    login.args([
        "login",
        "--server",
        &dray.url(),
        "--token-stdin",
        "--name",
        "local",
    ]);
    let refused = with_stdin(login, "not-a-token\n")?;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("refused the token"),
        "{}",
        text(&refused)
    );
    assert!(
        !config.exists(),
        "a refused login saved {}",
        config.display()
    );

    let mut login = bare(&world);
    login.args([
        "login",
        "--server",
        &dray.url(),
        "--token-stdin",
        "--name",
        "local",
    ]);
    let logged = with_stdin(login, &format!("{token}\n"))?;
    assert!(logged.status.success(), "{}", text(&logged));
    assert!(!text(&logged).contains(&token), "login printed the token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&config)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", config.display());
    }
    let set = run(bare(&world), &["config", "set-project", "demo"])?;
    assert!(set.status.success(), "{}", text(&set));

    let view = run(bare(&world), &["config", "view"])?;
    assert!(view.status.success(), "{}", text(&view));
    assert!(!text(&view).contains(&token), "config view shows the token");
    assert!(text(&view).contains("token: <redacted>"), "{}", text(&view));
    let contexts = text(&run(bare(&world), &["config", "get-contexts"])?);
    assert!(
        contexts
            .lines()
            .any(|l| l.starts_with('*') && l.contains("local") && l.contains("demo")),
        "{contexts}"
    );

    let get_dev = ["get", "stage", "dev", "-o", "json"];
    // The context alone: its server, token and project.
    let by_context = run(bare(&world), &get_dev)?;
    assert!(by_context.status.success(), "{}", text(&by_context));
    // Empty environment values are unset: the context still answers.
    let mut cmd = bare(&world);
    cmd.env("DRAY_SERVER", "")
        .env("DRAY_TOKEN", "")
        .env("DRAY_PROJECT", "");
    let empty_env = run(cmd, &get_dev)?;
    assert!(empty_env.status.success(), "{}", text(&empty_env));
    // The environment beats the context ...
    let mut cmd = bare(&world);
    cmd.env("DRAY_TOKEN", "wrong-token");
    let env_token = run(cmd, &get_dev)?;
    assert_eq!(env_token.status.code(), Some(1), "{}", text(&env_token));
    let mut cmd = bare(&world);
    cmd.env("DRAY_PROJECT", "nope");
    let env_project = run(cmd, &get_dev)?;
    assert!(!env_project.status.success(), "{}", text(&env_project));
    let mut cmd = bare(&world);
    cmd.env("DRAY_SERVER", "http://127.0.0.1:9");
    let env_server = run(cmd, &get_dev)?;
    assert_eq!(env_server.status.code(), Some(3), "{}", text(&env_server));
    assert!(
        text(&env_server).contains("127.0.0.1:9"),
        "{}",
        text(&env_server)
    );
    // ... and flags beat the environment.
    let mut cmd = bare(&world);
    cmd.env("DRAY_TOKEN", "wrong-token")
        .env("DRAY_PROJECT", "nope")
        .env("DRAY_SERVER", "http://127.0.0.1:9");
    let flags = run(
        cmd,
        &[
            "get",
            "stage",
            "dev",
            "-o",
            "json",
            "--token",
            &token,
            "-p",
            "demo",
            "--server",
            &dray.url(),
        ],
    )?;
    assert!(flags.status.success(), "{}", text(&flags));
    Ok(())
}

#[test]
fn apply_reads_standard_input_and_names_it_in_errors() -> Result<()> {
    let world = TestWorld::new()?;
    let dray = Dray::start(&world, DrayOptions::default())?;
    let apply = || {
        let mut cmd = dray.cli_command();
        cmd.args(["apply", "-f", "-"]);
        cmd
    };
    let applied = with_stdin(apply(), PROJECT)?;
    assert!(applied.status.success(), "{}", text(&applied));
    assert!(
        String::from_utf8_lossy(&applied.stdout).contains("stage demo/dev created"),
        "{}",
        text(&applied)
    );
    let broken = PROJECT.replace("name: dev,", "name: Dev_1,");
    let refused = with_stdin(apply(), &broken)?;
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("<stdin>:"), "{}", text(&refused));
    Ok(())
}

#[test]
fn completion_and_man_pages_come_from_the_command_line_definition() -> Result<()> {
    let world = TestWorld::new()?;
    for shell in ["bash", "zsh", "fish"] {
        let script = run(bare(&world), &["completion", shell])?;
        assert!(script.status.success(), "{}", text(&script));
        let script = String::from_utf8_lossy(&script.stdout);
        assert!(script.contains("downstream-from"), "{shell}: {script}");
    }
    let refused = run(bare(&world), &["completion", "tcsh"])?;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let out = world.unique_dir("man")?;
    let made = run(bare(&world), &["man", "--out", &out.display().to_string()])?;
    assert!(made.status.success(), "{}", text(&made));
    let page = std::fs::read_to_string(out.join("dray-promote.1"))?;
    assert!(page.contains("downstream\\-from"), "{page}");
    assert!(out.join("dray-hold-set.1").exists());
    Ok(())
}

const AUTO_DEV: &str = "apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  promotionPolicies:
    - stageSelector: {name: dev}
      autoPromotionEnabled: true
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_set_keeps_auto_promotion_off_a_stage_until_lifted() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        p.apply(AUTO_DEV)?;
        Ok(p)
    })?;
    let (_, first) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.wait_for_stage("dev", &first)?;
        let set = p.cli(&["hold", "set", "--stage", "dev", "--reason", "db migration"])?;
        assert!(set.status.success(), "{}", text(&set));
        assert!(
            text(&set).contains("hold placed (db migration)"),
            "{}",
            text(&set)
        );
        let hold = &p.stage("dev")?["status"]["hold"];
        assert_eq!(hold["reason"], "db migration", "{hold}");
        assert_eq!(hold["by"], "admin", "{hold}");
        Ok(())
    })?;
    let (_, second) = p.release("1.1.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        // Auto-promotion skips a held Stage (`pipeline::auto::decide`): dev keeps `first`.
        assert_eq!(
            p.stage("dev")?["status"]["currentFreight"]["alias"],
            first.as_str()
        );
        let lifted = p.cli(&["hold", "lift", "--stage", "dev"])?;
        assert!(lifted.status.success(), "{}", text(&lifted));
        p.wait_for_stage("dev", &second)?;
        assert_eq!(p.stage("dev")?["status"]["hold"], Value::Null);
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_downstream_from_requests_every_fed_stage_and_names_each_refusal() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        // `qa`, also fed by dev, wants Freight to soak there for an hour: it refuses.
        p.apply(&format!(
            "apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: qa, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{stages: [dev], requiredSoakTime: 1h}}
{}",
            p.render_template()
        ))?;
        Ok(p)
    })?;
    let (id, alias) = p.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let nothing = p.cli(&["promote", "--downstream-from", "dev"])?;
        assert_eq!(nothing.status.code(), Some(2), "{}", text(&nothing));
        assert!(
            text(&nothing).contains("holds no Freight"),
            "{}",
            text(&nothing)
        );

        p.promote_ok("dev", &alias)?;
        let out = p.cli(&["promote", "--downstream-from", "dev"])?;
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains("stage staging: promotion "), "{said}");
        assert!(said.contains("stage qa: refused: "), "{said}");
        assert!(said.contains("soaking in `dev`"), "{said}");
        assert!(
            said.contains("1 of 2 Stage(s) refused the promotion: qa"),
            "{said}"
        );
        p.wait_for_stage("staging", &alias)?;
        assert_eq!(
            p.stage("staging")?["status"]["currentFreight"]["name"],
            id.as_str()
        );
        Ok(())
    })
}
