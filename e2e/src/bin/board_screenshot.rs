//! The release board of 50 services, photographed for the README (issue 18): seeds a data
//! directory with 50 projects (a Warehouse and `dev → staging → prod` each, a few Freight,
//! the Stages holding older Freight the further downstream they are, some unhealthy, held
//! or failing verification), starts `dray serve` (`$DRAY_BIN`) on it, logs in with a real
//! headless Chromium and saves `/` as a PNG.
//!
//! Not a test and not run by CI; run it when the board's look changes:
//!
//! ```text
//! cargo build -p dray --bin dray && DRAY_BIN=$PWD/target/debug/dray \
//!   cargo run -p dray-e2e --bin board_screenshot -- docs/images/release-board-50.png
//! ```
//!
//! Checks what it photographs: the board must show 50 rows, at least 25 of them within the
//! first 1080 px of the viewport, else it saves nothing and exits 1.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use dray::api::{API_VERSION, FreightCommit, FreightImage};
use dray::discovery::mint::{alias_for, freight_id, freight_object};
use dray::store::{SqliteStore, Store, Write};
use dray_e2e::browser::Browser;
use dray_e2e::{Dray, DrayOptions, TestWorld};
use fantoccini::Locator;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How many projects (services) the board shows.
const PROJECTS: usize = 50;
/// How many rows must end within the first 1080 px of the viewport.
const FIRST_SCREEN: u64 = 25;
/// Freight minted per service.
const FREIGHT: usize = 4;
/// The Stages of each service, in pipeline order.
const STAGES: [&str; 3] = ["dev", "staging", "prod"];

const SERVICES: [&str; 25] = [
    "api", "auth", "billing", "cart", "catalog", "checkout", "search", "mobile", "web", "worker",
    "reports", "ledger", "notify", "orders", "payments", "pricing", "profile", "ratings",
    "returns", "shipping", "stock", "support", "tax", "users", "wishlist",
];

fn hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn service(i: usize) -> String {
    let base = SERVICES[i % SERVICES.len()];
    if i < SERVICES.len() {
        base.to_owned()
    } else {
        format!("{base}-eu")
    }
}

/// Every resource of the 50 projects, ready to write.
fn seed() -> Result<Vec<Value>> {
    let now = jiff::Timestamp::now();
    let ago = |minutes: i64| -> Result<String> {
        Ok(now
            .checked_sub(jiff::SignedDuration::from_mins(minutes))?
            .round(jiff::Unit::Second)?
            .to_string())
    };
    let mut out = Vec::new();
    let mut aliases = BTreeSet::new();
    for p in 0..PROJECTS {
        let project = service(p);
        let image_repo = format!("registry.example.com/{project}/app");
        let repo = format!("https://git.example.com/{project}/config.git");
        out.push(json!({"apiVersion": API_VERSION, "kind": "Project",
            "metadata": {"name": project}, "spec": {}}));
        out.push(json!({"apiVersion": API_VERSION, "kind": "Warehouse",
            "metadata": {"name": "app", "namespace": project},
            "spec": {"interval": "24h", "subscriptions": [
                {"image": {"repoURL": image_repo, "imageSelectionStrategy": "SemVer"}},
                {"git": {"repoURL": repo, "branch": "main"}}]}}));
        // Freight 0 is the oldest.
        let mut freight = Vec::new();
        for n in 0..FREIGHT {
            let tag = format!("1.{}.{n}", p % 7);
            let images = vec![FreightImage {
                repo_url: image_repo.clone(),
                tag: tag.clone(),
                digest: format!("sha256:{}", hex(&format!("{project} {tag}"))),
                ..Default::default()
            }];
            let commits = vec![FreightCommit {
                repo_url: repo.clone(),
                id: hex(&format!("{project} commit {n}"))[..40].to_owned(),
                branch: Some("main".into()),
                tag: None,
                message: format!("Release {tag}"),
                author: "Release Bot <release@example.com>".into(),
            }];
            let id = freight_id(&images, &commits);
            let alias = alias_for(&id, &aliases);
            aliases.insert(alias.clone());
            let mut object = freight_object(&project, "app", &alias, &images, &commits, &[], &[]);
            object["metadata"]["creationTimestamp"] = json!(ago(((FREIGHT - n) * 600) as i64)?);
            object["status"] = json!({"currentlyIn": {}, "verifiedIn": {}});
            freight.push((id, alias, object));
        }
        for (s, stage) in STAGES.iter().enumerate() {
            let sources = match s {
                0 => json!({"direct": true}),
                _ => json!({"stages": [STAGES[s - 1]]}),
            };
            // dev holds the newest, each Stage downstream one older; some services lag.
            let lag = s + usize::from(p % 5 == 0 && s == 2);
            let held = FREIGHT.saturating_sub(1 + lag);
            let (id, alias, object) = &mut freight[held];
            let since = ago((lag * 180 + 20) as i64)?;
            object["status"]["currentlyIn"][*stage] = json!({"since": since});
            object["status"]["verifiedIn"][*stage] = json!({"verifiedAt": since});
            let health = match (p % 9, s) {
                (4, 1) => {
                    json!({"status": "Unhealthy", "message": "Deployment app: 0/3 available (CrashLoopBackOff)"})
                }
                (7, 0) => json!({"status": "Progressing", "message": "waiting for rollout"}),
                _ => json!({"status": "Healthy"}),
            };
            let mut status = json!({
                "currentFreight": {"name": id, "alias": alias, "since": since},
                "health": health,
            });
            if p % 11 == 3 && s == 2 {
                status["hold"] = json!({"by": "ann", "freight": id, "reason": "database migration", "since": since});
            }
            out.push(json!({"apiVersion": API_VERSION, "kind": "Stage",
                "metadata": {"name": stage, "namespace": project},
                "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                                               "sources": sources}]},
                "status": status}));
        }
        out.extend(freight.into_iter().map(|(_, _, o)| o));
    }
    Ok(out)
}

fn main() -> Result<()> {
    let target = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "docs/images/release-board-50.png".into()),
    );
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(target))
}

async fn run(target: PathBuf) -> Result<()> {
    let world = TestWorld::new()?;
    let mut dray = Dray::start(&world, DrayOptions::default())?;
    dray.stop(Duration::from_secs(10))?;
    {
        let store = SqliteStore::open(&dray.data_dir())?;
        let writes: Vec<Write> = seed()?.into_iter().map(Write::Create).collect();
        store.commit(writes).await.context("writing the seed")?;
    }
    dray.restart()?;
    let browser = Browser::start().await?;
    let base = dray.url();
    browser.log_in(&base, dray.token()).await?;
    // One full-HD screen, as a release manager's.
    browser.client().set_window_size(1920, 1080).await?;
    let chrome = browser
        .client()
        .execute("return window.outerHeight - window.innerHeight;", vec![])
        .await?
        .as_u64()
        .unwrap_or(0);
    browser
        .client()
        .set_window_size(1920, 1080 + u32::try_from(chrome)?)
        .await?;
    browser.wait_for("table.board", "the release board").await?;
    let rows = browser
        .client()
        .find_all(Locator::Css("table.board tr[data-project]"))
        .await?
        .len();
    if rows != PROJECTS {
        bail!("the board shows {rows} projects, not {PROJECTS}");
    }
    // One screen: at least FIRST_SCREEN rows end within the first 1080 px.
    let within = browser
        .client()
        .execute(
            "return [...document.querySelectorAll('table.board tr[data-project]')]\
               .filter(r => r.getBoundingClientRect().bottom <= 1080).length;",
            vec![],
        )
        .await?
        .as_u64()
        .context("counting the rows within 1080 px")?;
    if within < FIRST_SCREEN {
        bail!("only {within} projects fit in the first 1080 px, not {FIRST_SCREEN}");
    }
    println!("{within} of {PROJECTS} projects within the first 1080 px");
    let shot = browser.screenshot("release-board-50").await?;
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::copy(&shot, &target)
        .with_context(|| format!("copying {} to {}", shot.display(), target.display()))?;
    println!("{}", target.display());
    Ok(())
}
