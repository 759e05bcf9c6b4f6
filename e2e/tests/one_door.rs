//! Issue 12's exploit, tried as a user would: a promoter (built-in `dray-promoter`, no
//! `override`) posts a Promotion of their own with git-clone / git-commit / git-push steps
//! into `stage/prod` — inside a closed Deny window, with Freight not verified upstream —
//! through the generic API and through `dray apply`. Both are refused with a hint, and
//! `stage/prod` does not exist afterwards in the real git repository. The real door then
//! works, and its commit names the promoter, never `anonymous`.

use anyhow::Result;
use dray_e2e::pipeline::{Pipeline, deny_window_now, text};
use dray_e2e::{DRAY_TOKEN_ENV, http_client};
use serde_json::{Value, json};

/// The hand-written steps the exploit used: write whatever the caller likes to stage/prod.
fn own_steps(config_url: &str) -> Value {
    json!([
        {"uses": "git-clone", "config": {"repoURL": config_url,
            "checkout": [{"branch": "main", "path": "./src"}]}},
        {"uses": "git-commit", "config": {"path": "./src", "message": "anything"}},
        {"uses": "git-push", "config": {"path": "./src", "targetBranch": "stage/prod"}},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoter_cannot_walk_around_the_gates_into_prod() -> Result<()> {
    let p = tokio::task::block_in_place(Pipeline::start)?;
    tokio::task::block_in_place(|| -> Result<()> {
        p.apply_quickstart(|yaml| yaml.to_owned())?;
        p.apply(&deny_window_now("prod-freeze", "prod"))
    })?;
    let (freight, alias) = p.release("1.0.0").await?;
    let pat = tokio::task::block_in_place(|| -> Result<String> {
        let made = p.cli(&[
            "token",
            "create",
            "--user",
            "pat",
            "--role",
            "dray-promoter",
            "-p",
            "demo",
        ])?;
        assert!(made.status.success(), "{}", text(&made));
        Ok(String::from_utf8(made.stdout)?.trim().to_owned())
    })?;

    // 1. The generic API: a Promotion with its own steps.
    let url = format!("{}/api/v1/projects/demo/promotions", p.dray.url());
    let post_as_pat = |body: Value| {
        let request = http_client().map(|c| c.post(&url).bearer_auth(&pat).json(&body));
        async move {
            let answer = request?.send().await?;
            let status = answer.status();
            anyhow::Ok((status, answer.json::<Value>().await?))
        }
    };
    let forged = json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Promotion",
        "metadata": {"name": "walk-around", "namespace": "demo"},
        "spec": {"stage": "prod", "freight": freight, "steps": own_steps(&p.config_url)}});
    let (status, body) = post_as_pat(forged.clone()).await?;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("steps and vars come from its Stage")),
        "{body}"
    );

    // 2. The same Promotion without steps still meets prod's gates: not verified in
    //    staging, and the window is closed.
    let mut plain = forged.clone();
    plain["spec"]
        .as_object_mut()
        .map(|spec| spec.remove("steps"));
    let (status, body) = post_as_pat(plain).await?;
    assert_eq!(status, 409, "{body}");
    let reasons = body["error"]["details"].to_string();
    assert!(reasons.contains("staging"), "{body}");
    assert!(reasons.contains("prod-freeze"), "{body}");

    tokio::task::block_in_place(|| -> Result<()> {
        // 3. `dray apply` of the Promotion document, as the promoter.
        let file = p.world.path().join("walk-around.yaml");
        std::fs::write(&file, serde_json::to_string(&forged)?)?;
        let mut apply = p.dray.cli_command();
        apply
            .env(DRAY_TOKEN_ENV, &pat)
            .args(["apply", "-f", file.to_str().unwrap_or_default()]);
        let applied = apply.output()?;
        let said = text(&applied);
        assert_eq!(applied.status.code(), Some(1), "{said}");
        assert!(said.contains("walk-around.yaml"), "names the file: {said}");
        assert!(
            said.contains("dray promote -p demo"),
            "says what to do: {said}"
        );

        // 4. Overriding the window takes `override`, which a promoter lacks.
        let mut promote = p.dray.cli_command();
        promote.env(DRAY_TOKEN_ENV, &pat).args([
            "promote",
            "-p",
            "demo",
            "--stage",
            "prod",
            "--alias",
            &alias,
            "--override-window",
            "just because",
        ]);
        let refused = promote.output()?;
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("user `pat` may not override stages/prod in project `demo`"),
            "{said}"
        );

        // Nothing reached git, and no Promotion was recorded.
        let branches = p.config.branches()?;
        assert!(
            !branches.iter().any(|b| b.contains("stage/prod")),
            "{branches:?}"
        );
        let promotions = p.json(&["get", "promotions", "-o", "json"])?;
        assert_eq!(promotions, json!([]), "{promotions}");

        // The door itself works, and the commit says who decided.
        let mut promote = p.dray.cli_command();
        promote.env(DRAY_TOKEN_ENV, &pat).args([
            "promote",
            "-p",
            "demo",
            "--stage",
            "dev",
            "--alias",
            &alias,
            "--wait",
            "--timeout",
            "2m",
        ]);
        let promoted = promote.output()?;
        assert!(promoted.status.success(), "{}", text(&promoted));
        let head = p.config.log("stage/dev")?.remove(0);
        assert_eq!(head.trailer("Dray-Actor"), Some("pat"), "{head:?}");
        Ok(())
    })
}
