//! The `http` gate inside a real promotion (`dray serve`): it passes on a response its CEL
//! accepts, with outputs; a gate that never passes fails at `retry.timeout` naming the
//! last response — never waiting forever (KARGO-LESSONS 4); and a rollback requested
//! while a gate waits runs once the gate's promotion is aborted (`queuePolicy: Queue`) or
//! at once, by superseding it (`Supersede`, the default: the gate has written nothing
//! yet, KARGO-LESSONS 5) — never after the gate's 10-minute timeout.

use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use dray_e2e::pipeline::{Pipeline, promotion_name, text};
use serde_json::Value;

/// A service on 127.0.0.1:0: `/never` is never ready, `/ready` is, and `/health/{tag}` is
/// ready for every version but `1.2.0`.
async fn service() -> Result<String> {
    const NOT_READY: (StatusCode, [(&str, &str); 1], &str) = (
        StatusCode::SERVICE_UNAVAILABLE,
        [("content-type", "application/json")],
        r#"{"ready":false,"reason":"warming up"}"#,
    );
    const READY: (StatusCode, [(&str, &str); 1], &str) = (
        StatusCode::OK,
        [("content-type", "application/json")],
        r#"{"ready":true,"replicas":3}"#,
    );
    let app =
        Router::new()
            .route("/never", get(|| async { NOT_READY }))
            .route("/ready", get(|| async { READY }))
            .route(
                "/health/{tag}",
                get(|Path(tag): Path<String>| async move {
                    if tag == "1.2.0" { NOT_READY } else { READY }
                }),
            );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

/// A world with the quickstart's project, Warehouse and PromotionTask (no
/// auto-promotion), a registry, the config repository and `dray serve`.
struct Gates(Pipeline);

impl std::ops::Deref for Gates {
    type Target = Pipeline;

    fn deref(&self) -> &Pipeline {
        &self.0
    }
}

impl Gates {
    fn start() -> Result<Self> {
        let pipeline = Pipeline::start()?;
        pipeline.apply_base()?;
        Ok(Gates(pipeline))
    }

    fn promote(&self, stage: &str, alias: &str, wait: bool) -> Result<Output> {
        let mut args = vec!["promote", "-p", "demo", "--stage", stage, "--alias", alias];
        if wait {
            args.extend(["--wait", "--timeout", "2m"]);
        }
        self.dray.cli(args)
    }

    /// Requests a promotion without waiting; returns its name.
    fn request(&self, stage: &str, alias: &str) -> Result<String> {
        let requested = self.promote(stage, alias, false)?;
        if !requested.status.success() {
            bail!("promote failed: {}", text(&requested));
        }
        let name = promotion_name(&requested);
        if name.is_empty() {
            bail!("no promotion name in {}", text(&requested));
        }
        Ok(name)
    }

    /// Polls promotion `name` until `done` holds of it; fails after `within`, saying
    /// what it waited for and what it saw last.
    fn wait_for(
        &self,
        name: &str,
        what: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            let promotion = self.promotion(name)?;
            if done(&promotion) {
                return Ok(promotion);
            }
            if Instant::now() >= deadline {
                bail!(
                    "promotion {name} did not get to {what} within {within:?}; last seen: {:#}",
                    promotion["status"]
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until promotion `name` is at its gate, waiting; returns the gate's attempts.
    fn gate_waiting(&self, name: &str) -> Result<u64> {
        let promotion = self.wait_for(name, "wait at its gate", Duration::from_secs(90), |p| {
            p["status"]["phase"] == "Running"
                && p["status"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("step `gate` is waiting for"))
        })?;
        attempts(&promotion)
    }

    /// The Freight id of the head of `stage/prod` (its `Dray-Freight: <id> (<alias>)`).
    fn prod_freight(&self) -> Result<String> {
        self.config.fetch()?;
        let log = self.config.log("stage/prod")?;
        let head = log.first().context("stage/prod has no commits")?;
        let trailer = head.trailer("Dray-Freight").unwrap_or_default();
        Ok(trailer.split(' ').next().unwrap_or_default().to_owned())
    }
}

fn attempts(promotion: &Value) -> Result<u64> {
    promotion["status"]["stepExecutionMetadata"][0]["attempts"]
        .as_u64()
        .with_context(|| format!("no attempts in {:#}", promotion["status"]))
}

fn phase(promotion: &Value) -> &str {
    promotion["status"]["phase"].as_str().unwrap_or_default()
}

/// A Stage whose only step is an `http` gate on `url` with a 3s `retry.timeout`.
fn gate_only(name: &str, url: &str) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: {name}
  namespace: demo
spec:
  requestedFreight:
    - origin:
        kind: Warehouse
        name: app
      sources:
        direct: true
  promotionTemplate:
    spec:
      steps:
        - uses: http
          as: check
          retry:
            timeout: 3s
          config:
            url: {url}
            successExpression: "response.status + 1 == 201 && response.body.ready && ctx.stage == '{name}'"
            pollInterval: 500ms
            outputs:
              - name: replicas
                fromExpression: response.body.replicas * 2
"#
    )
}

/// Stage `prod`: an `http` gate on the version being promoted (the default 10m
/// `retry.timeout`), then the quickstart's render into `stage/prod`.
fn prod(base: &str, queue_policy: Option<&str>) -> String {
    let policy = queue_policy
        .map(|p| format!("  queuePolicy: {p}\n"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
{policy}  requestedFreight:
    - origin:
        kind: Warehouse
        name: app
      sources:
        direct: true
  promotionTemplate:
    spec:
      steps:
        - uses: http
          as: gate
          config:
            url: {base}/health/${{{{ imageFrom('127.0.0.1:5000/demo/app').tag }}}}
            successExpression: response.status == 200 && response.body.ready
            pollInterval: 200ms
        - task:
            name: render-to-stage-branch
          vars:
            - name: repoURL
              value: http://127.0.0.1:8080/config.git
            - name: imageRepo
              value: 127.0.0.1:5000/demo/app
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_gate_passes_on_its_expression_and_times_out_naming_the_last_response() -> Result<()>
{
    let base = service().await?;
    let gates = tokio::task::block_in_place(Gates::start)?;
    let (_, alias) = gates.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        gates.apply(&format!(
            "{}---\n{}",
            gate_only("open", &format!("{base}/ready")),
            gate_only("shut", &format!("{base}/never"))
        ))?;
        let passed = gates.promote("open", &alias, true)?;
        assert!(passed.status.success(), "{}", text(&passed));

        let shut = gates.promote("shut", &alias, true)?;
        assert!(!shut.status.success(), "{}", text(&shut));
        let said = text(&shut);
        let name = said
            .lines()
            .find_map(|l| {
                l.strip_prefix("promotion ")
                    .and_then(|r| r.strip_suffix(" requested"))
            })
            .with_context(|| format!("no promotion name in {said}"))?;
        // On the record, not only in the CLI's output: Failed, with the last response.
        let promotion = gates.promotion(name)?;
        assert_eq!(phase(&promotion), "Failed", "{promotion:#}");
        let message = promotion["status"]["message"].as_str().unwrap_or_default();
        for wanted in [
            "step `check` failed: timed out after 3s waiting for",
            &format!("`GET {base}/never` to satisfy"),
            r#"last response: status 503, body `{"ready":false,"reason":"warming up"}`"#,
        ] {
            assert!(message.contains(wanted), "`{wanted}` not in: {message}");
            assert!(said.contains(wanted), "`{wanted}` not in: {said}");
        }
        // Asked more than once before giving up: it polled, it did not fail at once.
        assert!(attempts(&promotion)? > 1, "{promotion:#}");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_queue_a_rollback_waits_behind_a_gate_and_runs_once_the_gate_is_aborted() -> Result<()>
{
    let base = service().await?;
    let gates = tokio::task::block_in_place(Gates::start)?;
    let (oldest, oldest_alias) = gates.release("1.0.0").await?;
    let (current, current_alias) = gates.release("1.1.0").await?;
    let (_, waiting_alias) = gates.release("1.2.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        gates.apply(&prod(&base, Some("Queue")))?;
        for alias in [&oldest_alias, &current_alias] {
            let promoted = gates.promote("prod", alias, true)?;
            assert!(promoted.status.success(), "{}", text(&promoted));
        }
        assert_eq!(gates.prod_freight()?, current);

        // 1.2.0's gate never passes; the rollback to 1.0.0 queues behind it.
        let gate = gates.request("prod", &waiting_alias)?;
        let before = gates.gate_waiting(&gate)?;
        let rollback = gates.request("prod", &oldest_alias)?;
        // The gate keeps asking (two more attempts) while the rollback stays Pending.
        gates.wait_for(
            &gate,
            "two more gate attempts",
            Duration::from_secs(60),
            |p| attempts(p).is_ok_and(|n| n >= before + 2),
        )?;
        let queued = gates.promotion(&rollback)?;
        assert_eq!(phase(&queued), "Pending", "{queued:#}");
        assert_eq!(gates.prod_freight()?, current);

        let aborted = gates
            .dray
            .cli(["abort", "promotion", &gate, "-p", "demo"])?;
        assert!(aborted.status.success(), "{}", text(&aborted));
        let gate_end = gates.wait_for(&gate, "Aborted", Duration::from_secs(60), |p| {
            phase(p) == "Aborted"
        })?;
        assert_eq!(
            gate_end["status"]["message"], "aborted by `admin` before anything was pushed",
            "{gate_end:#}"
        );
        let done = gates.wait_for(&rollback, "its end", Duration::from_secs(120), |p| {
            !matches!(phase(p), "Pending" | "Running")
        })?;
        assert_eq!(phase(&done), "Succeeded", "{done:#}");
        assert_eq!(gates.prod_freight()?, oldest);
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_supersede_a_rollback_aborts_a_waiting_gate_that_wrote_nothing() -> Result<()> {
    let base = service().await?;
    let gates = tokio::task::block_in_place(Gates::start)?;
    let (oldest, oldest_alias) = gates.release("1.0.0").await?;
    let (current, current_alias) = gates.release("1.1.0").await?;
    let (_, waiting_alias) = gates.release("1.2.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        gates.apply(&prod(&base, None))?;
        for alias in [&oldest_alias, &current_alias] {
            let promoted = gates.promote("prod", alias, true)?;
            assert!(promoted.status.success(), "{}", text(&promoted));
        }
        let gate = gates.request("prod", &waiting_alias)?;
        gates.gate_waiting(&gate)?;

        // The gate waits up to its 10m `retry.timeout`; the rollback must not: `--wait`
        // gives it 2m, and the gate's promotion ends Aborted, not Failed by its timeout.
        let rolled_back = gates.promote("prod", &oldest_alias, true)?;
        assert!(rolled_back.status.success(), "{}", text(&rolled_back));
        let gate_end = gates.promotion(&gate)?;
        assert_eq!(phase(&gate_end), "Aborted", "{gate_end:#}");
        let message = gate_end["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("superseded by `")
                && message.ends_with("`; aborted before anything was pushed"),
            "{gate_end:#}"
        );
        let rollback = String::from_utf8_lossy(&rolled_back.stdout)
            .lines()
            .find_map(|l| {
                l.strip_prefix("promotion ")
                    .and_then(|r| r.strip_suffix(" requested"))
                    .map(str::to_owned)
            })
            .context("rollback name")?;
        assert_eq!(
            gate_end["metadata"]["annotations"]["dray.dev/abort"],
            format!("superseded by `{rollback}`"),
            "{gate_end:#}"
        );
        assert_ne!(oldest, current);
        assert_eq!(gates.prod_freight()?, oldest);
        Ok(())
    })
}

/// A service on 127.0.0.1:0 whose `/never` is never ready, counting the requests it gets.
async fn counted_never() -> Result<(String, std::sync::Arc<std::sync::atomic::AtomicUsize>)> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let app = Router::new().route(
        "/never",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { (StatusCode::SERVICE_UNAVAILABLE, r#"{"ready":false}"#) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{addr}/never"), hits))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_resumed_after_a_crash_keeps_its_deadline() -> Result<()> {
    use std::sync::atomic::Ordering;
    let (url, hits) = counted_never().await?;
    let mut gates = tokio::task::block_in_place(Gates::start)?;
    gates.release("1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        gates.apply(&gate_only("shut", &url))?;
        let alias = gates.newest_alias()?;
        let name = gates.request("shut", &alias)?;
        let waiting = gates.wait_for(&name, "wait at its gate", Duration::from_secs(90), |p| {
            p["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("step `check` is waiting for"))
        })?;
        let started: jiff::Timestamp = waiting["status"]["stepExecutionMetadata"][0]["startedAt"]
            .as_str()
            .context("no startedAt")?
            .parse()?;
        gates.0.dray.kill9()?;
        let before = hits.load(Ordering::SeqCst);
        // The gate's whole `retry.timeout` (3s) passes while Dray is down.
        let over = started.checked_add(jiff::SignedDuration::from_secs(4))?;
        while jiff::Timestamp::now() < over {
            std::thread::sleep(Duration::from_millis(100));
        }
        gates.0.dray.restart()?;
        let ended = gates.wait_for(&name, "end", Duration::from_secs(60), |p| {
            matches!(phase(p), "Failed" | "Errored" | "Succeeded" | "Aborted")
        })?;
        assert_eq!(phase(&ended), "Failed", "{:#}", ended["status"]);
        let message = ended["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("timed out after 3s"), "{message}");
        // Resumed, it looked once more and then gave up: its deadline did not start again.
        assert_eq!(
            hits.load(Ordering::SeqCst) - before,
            1,
            "{:#}",
            ended["status"]
        );
        Ok(())
    })
}
