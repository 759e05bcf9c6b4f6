//! The webhook receivers' doors, tried from outside against `dray serve`: for every kind
//! (`github`, `gitlab`, `registry`, `generic`) a forged, an unsigned, an empty and a
//! wrong-secret request answer 401 and refresh nothing; a replayed GitHub delivery answers
//! 200 and refreshes nothing, also after a restart. In every test a correct request then
//! does refresh (and discovery answers it), so the refusals cannot pass vacuously. `dray
//! apply` refuses a short or empty webhook secret with a hint, never echoing it.
//!
//! What a refresh is: a new `dray.dev/refresh` annotation on the Warehouse, set by the
//! receiver before it answers. The payloads are the forges' and the registry's documented
//! examples (`tests/fixtures/webhooks`), pointed at this world's repositories.

use anyhow::Result;
use dray_e2e::pipeline::text;
use dray_e2e::webhooks::{Doors, fixture, hmac_hex, knock};
use serde_json::json;

/// The receivers' shared secret (32 bytes).
const SECRET: &str = "webhook-doors-secret-0123456789ab";
/// As long as [`SECRET`], one byte different.
const FORGED: &str = "webhook-doors-secret-0123456789aX";
/// Another secret altogether.
const WRONG: &str = "a-wrong-secret";

fn receivers() -> String {
    format!(
        "apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: hook, namespace: demo}}
spec: {{type: webhook, token: {SECRET}}}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: demo, namespace: demo}}
spec:
  webhookReceivers:
    - {{name: github, github: {{secretRef: hook}}}}
    - {{name: gitlab, gitlab: {{secretRef: hook}}}}
    - {{name: registry, registry: {{secretRef: hook}}}}
    - {{name: ci, generic: {{secretRef: hook}}}}
"
    )
}

fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

/// The quickstart's Warehouse `app` (the registry's `demo/app` and the config repository)
/// and the four receivers over [`SECRET`].
async fn start() -> Result<Doors> {
    Doors::start(&receivers(), SECRET, &["app"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_refuses_forged_unsigned_empty_wrong_and_replayed_deliveries() -> Result<()> {
    let mut doors = start().await?;
    let body = fixture("github-push.json")?
        .replace(
            "https://github.com/jessesuen/test-repo",
            &doors.config_repo(),
        )
        .into_bytes();
    let path = "/webhooks/demo/github";
    let event = || ("X-GitHub-Event", "push".to_owned());
    let delivery = |id: &str| ("X-GitHub-Delivery", id.to_owned());
    let signed = |secret: &str| ("X-Hub-Signature-256", github_signature(secret, &body));
    let base = [event(), delivery("d-1")];
    doors
        .refused(&doors.forged_signatures(path, &base, ("X-Hub-Signature-256", "sha256="), &body))
        .await?;

    // The refused knocks named `d-1`; none of them took it.
    let first = knock(
        "signed",
        path,
        vec![event(), delivery("d-1"), signed(SECRET)],
        &body,
    );
    doors.admitted(&first, &["app"]).await?;

    // The same delivery again, and the same signed body under another id or none: replays.
    let replays = [
        knock(
            "replay",
            path,
            vec![event(), delivery("d-1"), signed(SECRET)],
            &body,
        ),
        knock(
            "replay, new id",
            path,
            vec![event(), delivery("d-2"), signed(SECRET)],
            &body,
        ),
        knock("replay, no id", path, vec![event(), signed(SECRET)], &body),
    ];
    doors.replayed(&replays).await?;
    // The delivery log is in the store: a restart does not reopen the window.
    tokio::task::block_in_place(|| doors.p.dray.restart())?;
    doors.replayed(&replays).await?;

    // A new delivery (another body) still refreshes.
    let other = String::from_utf8(body.clone())?
        .replace(
            "63738bb582c8b540af7bcfc18f87c575c3ed66e0",
            "5e2bd7ab6e1b9a0bd8e2f43da0bc6a1b4a7e8c11",
        )
        .into_bytes();
    let second = knock(
        "a new delivery",
        path,
        vec![
            event(),
            delivery("d-3"),
            ("X-Hub-Signature-256", github_signature(SECRET, &other)),
        ],
        &other,
    );
    doors.admitted(&second, &["app"]).await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_refuses_forged_missing_empty_and_wrong_tokens() -> Result<()> {
    let doors = start().await?;
    let body = fixture("gitlab-push.json")?
        .replace("http://example.com/mike/diaspora", &doors.config_repo())
        .into_bytes();
    let path = "/webhooks/demo/gitlab";
    let event = || ("X-Gitlab-Event", "Push Hook".to_owned());
    let token = |t: &str| ("X-Gitlab-Token", t.to_owned());
    doors
        .refused(&[
            knock("forged", path, vec![event(), token(FORGED)], &body),
            knock("no token", path, vec![event()], &body),
            knock("empty token", path, vec![event(), token("")], &body),
            knock("wrong secret", path, vec![event(), token(WRONG)], &body),
            knock(
                "the secret and more",
                path,
                vec![event(), token(&format!("{SECRET}x"))],
                &body,
            ),
            knock(
                "the secret in another header",
                path,
                vec![event(), ("Authorization", format!("Bearer {SECRET}"))],
                &body,
            ),
        ])
        .await?;
    doors
        .admitted(
            &knock("the secret", path, vec![event(), token(SECRET)], &body),
            &["app"],
        )
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_receiver_refuses_forged_missing_empty_and_wrong_bearer_tokens() -> Result<()>
{
    let doors = start().await?;
    let body = fixture("registry-push.json")?
        .replace("registrycluster.local", &doors.p.registry.host())
        .replace("library/test", "demo/app")
        .into_bytes();
    let path = "/webhooks/demo/registry";
    let bearer = |t: &str| ("Authorization", format!("Bearer {t}"));
    doors
        .refused(&[
            knock("forged", path, vec![bearer(FORGED)], &body),
            knock("no Authorization", path, vec![], &body),
            knock("empty bearer token", path, vec![bearer("")], &body),
            knock(
                "empty Authorization",
                path,
                vec![("Authorization", String::new())],
                &body,
            ),
            knock("wrong secret", path, vec![bearer(WRONG)], &body),
            knock(
                "the secret as Basic credentials",
                path,
                vec![("Authorization", format!("Basic {SECRET}"))],
                &body,
            ),
        ])
        .await?;
    doors
        .admitted(
            &knock("the secret", path, vec![bearer(SECRET)], &body),
            &["app"],
        )
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generic_receiver_refuses_forged_missing_empty_and_wrong_path_tokens() -> Result<()> {
    let doors = start().await?;
    let body = serde_json::to_vec(&json!({"repoURL": doors.p.config_url}))?;
    let at = |token: &str| format!("/webhooks/demo/ci/{token}");
    doors
        .refused(&doors.forged_path_tokens("ci", &body))
        .await?;
    // An empty path segment is no token: the route is not there at all.
    let before = doors.refresh_token("app").await?;
    let (status, body_of) = doors
        .send(&knock("empty token", &at(""), vec![], &body))
        .await?;
    assert!(
        matches!(status, 401 | 404 | 405),
        "empty token: {status} {body_of}"
    );
    assert_eq!(
        doors.refresh_token("app").await?,
        before,
        "an empty token refreshed"
    );
    doors
        .admitted(&knock("the secret", &at(SECRET), vec![], &body), &["app"])
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_a_short_or_empty_webhook_secret_with_a_hint() -> Result<()> {
    let doors = start().await?;
    let credential = |token: &str| {
        format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Credential\nmetadata: {{name: hook, namespace: demo}}\nspec: {{type: webhook, token: '{token}'}}\n"
        )
    };
    for (token, says) in [
        ("", "the webhook secret is empty"),
        (
            "hunter2hunter2",
            "the webhook secret is shorter than 16 bytes",
        ),
    ] {
        let output = tokio::task::block_in_place(|| doors.p.try_apply(&credential(token)))?;
        let said = text(&output);
        assert!(!output.status.success(), "applied `{token}`: {said}");
        assert!(said.contains("Credential demo/hook"), "{said}");
        assert!(said.contains("spec.token"), "{said}");
        assert!(said.contains(says), "{said}");
        assert!(said.contains("openssl rand -hex 32"), "{said}");
        assert!(token.is_empty() || !said.contains(token), "{said}");
        assert!(
            !doors.p.dray.log().contains("hunter2"),
            "the short secret is in the log"
        );
    }
    // Nothing was stored: the receiver still takes the old secret.
    let body = serde_json::to_vec(&json!({"repoURL": doors.p.config_url}))?;
    let path = format!("/webhooks/demo/ci/{SECRET}");
    doors
        .admitted(&knock("the stored secret", &path, vec![], &body), &["app"])
        .await?;
    doors
        .refused(&[knock(
            "the refused secret",
            "/webhooks/demo/ci/hunter2hunter2",
            vec![],
            &body,
        )])
        .await?;
    Ok(())
}
