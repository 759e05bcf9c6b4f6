//! One way to name things (issue #19, deliverable 1 and the `get` parts of 5), through the
//! real CLI against `dray serve` and the quickstart pipeline: Freight named by full id, id
//! prefix or alias everywhere and shown as `alias (short id)`; `--stage` on every command;
//! one duration grammar with its bounds; `get` filters that filter (or name what does not
//! exist), the window gate in the per-Stage Freight listing, pipeline order, `-o name`,
//! `-o wide`, the STAGES column and `--watch`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dray_e2e::oci;
use dray_e2e::pipeline::{Pipeline, deny_window_now, text};

/// The quickstart pipeline with one image released: its Freight's id and alias.
async fn released() -> Result<(Pipeline, String, String)> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    let (id, alias) = p.release("1.0.0").await?;
    Ok((p, id, alias))
}

/// `alias (short id)`, as the CLI shows Freight.
fn label(id: &str, alias: &str) -> String {
    format!("{alias} ({})", &id[..12])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freight_is_named_by_id_prefix_or_alias_and_shown_as_alias_and_short_id() -> Result<()> {
    let (p, id, alias) = released().await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let short = &id[..12];
        // `get freight NAME` takes the short id it prints, a 7-character prefix and the alias.
        for name in [short, &id[..7], alias.as_str(), id.as_str()] {
            let got = p.json(&["get", "freight", name, "-o", "json"])?;
            assert_eq!(got["metadata"]["name"], id.as_str(), "named by `{name}`");
        }
        // Too short a prefix is no name; a slip of the alias gets "did you mean".
        let refused = p.cli(&["get", "freight", &id[..5]])?;
        assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
        assert!(
            text(&refused).contains("(by id, id prefix or alias)"),
            "{}",
            text(&refused)
        );
        let typo = format!("{alias}x");
        let refused = p.cli(&["get", "freight", &typo])?;
        assert!(
            text(&refused).contains(&format!("did you mean `{alias}`?")),
            "{}",
            text(&refused)
        );

        // promote and approve take the short id through --freight, and --alias takes it too.
        let promoted = p.cli(&[
            "promote",
            "--stage",
            "dev",
            "--freight",
            short,
            "--wait",
            "--timeout",
            "2m",
        ])?;
        assert!(promoted.status.success(), "{}", text(&promoted));
        let approved = p.cli(&["approve", "--stage", "prod", "--alias", short])?;
        assert!(approved.status.success(), "{}", text(&approved));
        assert!(
            text(&approved).contains(&format!("freight {alias} approved for prod")),
            "{}",
            text(&approved)
        );

        // Freight shows as `alias (short id)` in stages, promotions and refresh --wait.
        let shown = label(&id, &alias);
        let stages = text(&p.cli(&["get", "stages"])?);
        let dev = stages
            .lines()
            .find(|l| l.starts_with("dev "))
            .context("a dev row")?;
        assert!(dev.contains(&shown), "{stages}");
        let promotions = text(&p.cli(&["get", "promotions"])?);
        assert!(promotions.contains(&shown), "{promotions}");
        let refreshed = text(&p.cli(&["refresh", "warehouse", "app", "--wait"])?);
        assert!(
            refreshed.contains(&format!("newest freight: {shown}")),
            "{refreshed}"
        );
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_flags_and_durations_are_one_grammar() -> Result<()> {
    let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
        let p = Pipeline::start()?;
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        Ok(p)
    })?;
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        // The Go form works for refresh's timeout; a bare number is still seconds.
        for timeout in ["1m", "90s", "30"] {
            let refreshed = p.cli(&[
                "refresh",
                "warehouse",
                "app",
                "--wait",
                "--timeout",
                timeout,
            ])?;
            assert!(
                refreshed.status.success(),
                "{timeout}: {}",
                text(&refreshed)
            );
        }
        // Beyond the documented maximum is refused, naming it, however it is written.
        for timeout in ["500", "500s", "1h"] {
            let refused = p.cli(&["refresh", "warehouse", "app", "--timeout", timeout])?;
            assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
            assert!(
                text(&refused).contains("at most 2m (120s)"),
                "{timeout}: {}",
                text(&refused)
            );
        }
        let refused = p.cli(&["verify", "--stage", "dev", "--wait", "--timeout", "10"])?;
        assert!(text(&refused).contains("has no unit"), "{}", text(&refused));

        // --stage works on verify and audit; the positional forms still do.
        for args in [
            &["verify", "--stage", "dev"][..],
            &["verify", "stage", "dev"][..],
        ] {
            let asked = p.cli(args)?;
            assert_eq!(asked.status.code(), Some(1), "{args:?}: {}", text(&asked));
            assert!(
                text(&asked).contains("Stage `dev` holds no Freight yet"),
                "{args:?}: {}",
                text(&asked)
            );
        }
        let alias = p.newest_alias()?;
        p.promote_ok("dev", &alias)?;
        for args in [&["audit", "--stage", "dev"][..], &["audit", "dev"][..]] {
            let audit = p.cli(args)?;
            assert!(audit.status.success(), "{args:?}: {}", text(&audit));
            assert!(text(&audit).contains(&alias), "{args:?}: {}", text(&audit));
        }
        Ok(())
    })
}

/// A second Warehouse and a Stage `side` that takes Freight only from it.
const SIDE: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: other, namespace: demo}
spec:
  interval: 5m
  subscriptions:
    - image: {repoURL: 127.0.0.1:5000/demo/other, insecure: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: side, namespace: demo}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: other}
      sources: {direct: true}
";

/// The first column of each table row (the header left out).
fn first_column(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_filter_order_and_show_what_promote_would_say() -> Result<()> {
    let (p, id, alias) = released().await?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply(SIDE)?;

        // Pipeline order: upstream first, ties by name.
        let stages = text(&p.cli(&["get", "stages"])?);
        assert_eq!(
            first_column(&stages),
            ["dev", "side", "staging", "prod"],
            "{stages}"
        );
        let names = p.cli(&["get", "stages", "-o", "name"])?;
        assert_eq!(
            String::from_utf8_lossy(&names.stdout),
            "stage/dev\nstage/side\nstage/staging\nstage/prod\n"
        );

        // The filters filter.
        let only = text(&p.cli(&["get", "stages", "--stage", "staging"])?);
        assert_eq!(first_column(&only), ["staging"], "{only}");
        let from_app = text(&p.cli(&["get", "stages", "--warehouse", "app"])?);
        assert_eq!(
            first_column(&from_app),
            ["dev", "staging", "prod"],
            "{from_app}"
        );
        let from_other = text(&p.cli(&["get", "stages", "--warehouse", "other"])?);
        assert_eq!(first_column(&from_other), ["side"], "{from_other}");

        // A filter naming nothing is an error naming it, with what to do.
        let refused = p.cli(&["get", "stages", "--stage", "dve"])?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("Stage `dve` does not exist in project `demo`")
                && said.contains("did you mean `dev`?")
                && said.contains("dray get stages -p demo"),
            "{said}"
        );
        let refused = p.cli(&["get", "promotions", "--stage", "nope"])?;
        let said = text(&refused);
        assert!(!refused.status.success(), "{said}");
        assert!(said.contains("Stage `nope` does not exist"), "{said}");
        let refused = p.cli(&["get", "freight", "--warehouse", "ap"])?;
        assert!(
            text(&refused).contains("did you mean `app`?"),
            "{}",
            text(&refused)
        );

        // get freight: the Stages each is in, and the full id with -o wide.
        p.promote_ok("dev", &alias)?;
        let freight = text(&p.cli(&["get", "freight"])?);
        let header = freight.lines().next().context("a header")?;
        assert!(header.contains("STAGES"), "{freight}");
        let row = freight
            .lines()
            .find(|l| l.starts_with(&alias))
            .context("a row for the Freight")?;
        assert!(
            row.split_whitespace().any(|cell| cell == "dev"),
            "{freight}"
        );
        let wide = text(&p.cli(&["get", "freight", "-o", "wide"])?);
        assert!(wide.contains("FULL ID") && wide.contains(&id), "{wide}");

        // A closed window shows in the per-Stage listing as promote says it.
        p.apply(&deny_window_now("freeze", "dev"))?;
        let refused = p.promote("dev", &alias)?;
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("frozen by window `freeze`"),
            "{}",
            text(&refused)
        );
        let listed = text(&p.cli(&["get", "freight", "--stage", "dev"])?);
        assert!(listed.contains("frozen by window `freeze`"), "{listed}");
        assert!(!listed.contains("available"), "{listed}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_a_change_and_ends_on_ctrl_c() -> Result<()> {
    let (p, id, alias) = released().await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let mut watch = p
            .dray
            .cli_command()
            .args(["-p", "demo", "get", "stages", "--watch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start `dray get stages --watch`")?;
        let stdout = watch.stdout.take().context("piped stdout")?;
        let (lines, seen) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let wait_for = |what: &str, found: &dyn Fn(&str) -> bool| -> Result<String> {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match seen.recv_timeout(left) {
                    Ok(line) if found(&line) => return Ok(line),
                    Ok(_) => {}
                    Err(_) => bail!("the watch printed no line with {what} in 60s"),
                }
            }
        };
        wait_for("the dev row", &|l| l.starts_with("dev "))?;
        p.promote_ok("dev", &alias)?;
        let shown = label(&id, &alias);
        let line = wait_for("dev holding the Freight", &|l| {
            l.starts_with("dev ") && l.contains(&shown)
        })?;
        assert!(line.contains(&shown), "{line}");

        // Ctrl-C ends it cleanly.
        let pid = watch.id().to_string();
        let sent = Command::new("sh")
            .args(["-c", "kill -INT \"$1\"", "sh", &pid])
            .status()?;
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = watch.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = watch.kill();
                bail!("the watch did not end within 30s of Ctrl-C");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{status}");
        Ok(())
    })
}
