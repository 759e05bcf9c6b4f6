//! The receivers for Gitea, Bitbucket (Cloud and Server), Azure (Container Registry and
//! DevOps), Docker Hub, Quay, Harbor and Artifactory, and the project-independent receiver,
//! tried from outside against `dray serve`. For every kind: the service's documented
//! example delivery (adapted only in the repository it names and its secret or
//! signature) refreshes exactly the subscribed Warehouse and not an unrelated one, and a
//! forged, unsigned, empty-secret or wrong-secret call answers 401 and refreshes nothing.
//! Where the sender gives a delivery id (Gitea, Bitbucket), a replay answers 200 and
//! refreshes nothing.
//!
//! The world: the quickstart's Warehouse `app` (the registry's `demo/app` and the config
//! repository), `unrelated` (the registry's `demo/other`) and `hub` (Docker Hub's
//! `svendowideit/testhook`, the repository Docker Hub's example names).

use anyhow::Result;
use dray_e2e::webhooks::{Doors, WRONG_SECRET, fixture, hmac_hex, knock};

/// The receivers' shared secret (35 bytes).
const SECRET: &str = "webhook-receivers-secret-0123456789";
/// As long as [`SECRET`], one byte different.
const FORGED: &str = "webhook-receivers-secret-012345678X";

/// Every Warehouse a knock is checked against.
const WATCHED: [&str; 3] = ["app", "unrelated", "hub"];

fn world_yaml() -> String {
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
    - {{name: gitea, gitea: {{secretRef: hook}}}}
    - {{name: bitbucket, bitbucket: {{secretRef: hook}}}}
    - {{name: azure, azure: {{secretRef: hook}}}}
    - {{name: dockerhub, dockerhub: {{secretRef: hook}}}}
    - {{name: quay, quay: {{secretRef: hook}}}}
    - {{name: harbor, harbor: {{secretRef: hook}}}}
    - {{name: artifactory, artifactory: {{secretRef: hook}}}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: unrelated, namespace: demo}}
spec:
  interval: 1h
  subscriptions:
    - image: {{repoURL: 127.0.0.1:5000/demo/other, insecure: true}}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {{name: hub, namespace: demo}}
spec:
  interval: 1h
  subscriptions:
    - image: {{repoURL: svendowideit/testhook}}
"
    )
}

async fn start() -> Result<Doors> {
    Doors::start(&world_yaml(), SECRET, &WATCHED).await
}

/// A receiver that takes the secret in the path: the forgeries are refused, then `body`
/// with the secret in the path refreshes exactly `expected`.
async fn takes_the_path_token(
    doors: &Doors,
    receiver: &str,
    what: &str,
    body: &[u8],
    expected: &[&str],
) -> Result<()> {
    doors
        .refused(&doors.forged_path_tokens(receiver, body))
        .await?;
    let at = format!("/webhooks/demo/{receiver}/{SECRET}");
    doors
        .admitted(&knock(what, &at, vec![], body), expected)
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

/// How a signing service sends a delivery: its event header, the header carrying the
/// signature and the signature's prefix, and the header carrying the delivery id.
struct Signing {
    event: (&'static str, &'static str),
    signature: (&'static str, &'static str),
    id: &'static str,
}

const GITEA: Signing = Signing {
    event: ("X-Gitea-Event", "push"),
    signature: ("X-Gitea-Signature", ""),
    id: "X-Gitea-Delivery",
};

/// A signing receiver at `path`: the forgeries are refused; `body` signed with the secret
/// under delivery id `id` refreshes exactly `expected`; its replays (the same id, and the
/// same body under another id) refresh nothing.
async fn takes_one_signed_delivery(
    doors: &Doors,
    path: &str,
    how: &Signing,
    id: &str,
    body: &[u8],
    expected: &[&str],
) -> Result<()> {
    let event = (how.event.0, how.event.1.to_owned());
    let (header, prefix) = how.signature;
    let delivery = |id: &str| (how.id, id.to_owned());
    // The forgeries name the genuine delivery's id: none of them may use it up.
    let base = [event.clone(), delivery(id)];
    doors
        .refused(&doors.forged_signatures(path, &base, how.signature, body))
        .await?;
    let signed = (header, format!("{prefix}{}", hmac_hex(SECRET, body)));
    let first = vec![event.clone(), delivery(id), signed.clone()];
    doors
        .admitted(&knock("signed", path, first.clone(), body), expected)
        .await?;
    let other_id = vec![
        event,
        delivery("7c5b0a44-0f5e-4b5a-9c62-1d2a3b4c5d6e"),
        signed,
    ];
    doors
        .replayed(&[
            knock("replay", path, first, body),
            knock("replay, new id", path, other_id, body),
        ])
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_takes_its_signed_push_once_and_refuses_forgeries() -> Result<()> {
    let doors = start().await?;
    let body = fixture("gitea-push.json")?
        .replace("http://localhost:3000/gitea/webhooks", &doors.config_repo())
        .into_bytes();
    let id = "f6266f16-1bf3-46a5-9ea4-602e06ead473";
    takes_one_signed_delivery(&doors, "/webhooks/demo/gitea", &GITEA, id, &body, &["app"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitbucket_cloud_and_server_pushes_refresh_once_and_forgeries_are_refused() -> Result<()> {
    let doors = start().await?;
    let path = "/webhooks/demo/bitbucket";
    // Cloud names the repository by its html link.
    let cloud = fixture("bitbucket-cloud-push.json")?
        .replace(
            "https://api.bitbucket.org/team_name/repo_name",
            &doors.config_repo(),
        )
        .into_bytes();
    // GitHub's header is not Bitbucket's.
    doors
        .refused(&[knock(
            "signed in X-Hub-Signature-256",
            path,
            vec![
                ("X-Event-Key", "repo:push".to_owned()),
                (
                    "X-Hub-Signature-256",
                    format!("sha256={}", hmac_hex(SECRET, &cloud)),
                ),
            ],
            &cloud,
        )])
        .await?;
    let how = Signing {
        event: ("X-Event-Key", "repo:push"),
        signature: ("X-Hub-Signature", "sha256="),
        id: "X-Request-UUID",
    };
    let id = "afe2bd41-cfc8-4bc7-9b36-66f0c8c52d0f";
    takes_one_signed_delivery(&doors, path, &how, id, &cloud, &["app"]).await?;

    // Server names it by its clone links.
    let server = fixture("bitbucket-server-refs-changed.json")?
        .replace(
            "https://bitbucketserver/scm/myproject/test-repo.git",
            &doors.p.config_url,
        )
        .into_bytes();
    let how = Signing {
        event: ("X-Event-Key", "repo:refs_changed"),
        signature: ("X-Hub-Signature", "sha256="),
        id: "X-Request-Id",
    };
    let id = "d4d1a3f0-2a1d-4c8e-9b4c-5a1e2b3c4d5e";
    takes_one_signed_delivery(&doors, path, &how, id, &server, &["app"]).await?;

    // Bitbucket Server's "Test connection".
    let ping = br#"{"test": true}"#;
    let signed = format!("sha256={}", hmac_hex(SECRET, ping));
    let (status, answer) = doors
        .send(&knock(
            "ping",
            path,
            vec![
                ("X-Event-Key", "diagnostics:ping".to_owned()),
                ("X-Hub-Signature", signed),
            ],
            ping,
        ))
        .await?;
    assert_eq!(
        (status, &answer["refreshed"]),
        (200, &serde_json::json!(0)),
        "{answer}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_container_registry_and_devops_refresh_by_the_path_token() -> Result<()> {
    let doors = start().await?;
    let acr = fixture("acr-push.json")?
        .replace("myregistry.azurecr.io", &doors.p.registry.host())
        .replace("\"hello-world\"", "\"demo/app\"")
        .into_bytes();
    takes_the_path_token(&doors, "azure", "ACR push", &acr, &["app"]).await?;
    let devops = fixture("azure-devops-git-push.json")?
        .replace(
            "https://dev.azure.com/my-org/my-project/_git/my-repo",
            &doors.config_repo(),
        )
        .into_bytes();
    takes_the_path_token(&doors, "azure", "Azure DevOps push", &devops, &["app"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_hub_refreshes_the_warehouse_of_the_hub_repository_by_the_path_token() -> Result<()>
{
    let doors = start().await?;
    // Docker Hub's example names `svendowideit/testhook`: only `hub` subscribes to it.
    let body = fixture("dockerhub-push.json")?.into_bytes();
    takes_the_path_token(&doors, "dockerhub", "Docker Hub push", &body, &["hub"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quay_refreshes_by_the_path_token() -> Result<()> {
    let doors = start().await?;
    let body = fixture("quay-push.json")?
        .replace(
            "quay.io/dgangaia/test",
            &format!("{}/demo/app", doors.p.registry.host()),
        )
        .into_bytes();
    takes_the_path_token(&doors, "quay", "Quay push", &body, &["app"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harbor_takes_its_auth_header_and_refuses_anything_else() -> Result<()> {
    let doors = start().await?;
    let body = fixture("harbor-push.json")?
        .replace(
            "localhost/harbor/alpine",
            &format!("{}/demo/app", doors.p.registry.host()),
        )
        .into_bytes();
    let path = "/webhooks/demo/harbor";
    let auth = |value: String| ("Authorization", value);
    doors
        .refused(&[
            knock("forged", path, vec![auth(FORGED.to_owned())], &body),
            knock("no Authorization", path, vec![], &body),
            knock(
                "empty Authorization",
                path,
                vec![auth(String::new())],
                &body,
            ),
            knock(
                "wrong secret",
                path,
                vec![auth(WRONG_SECRET.to_owned())],
                &body,
            ),
            knock(
                "the secret as a bearer token",
                path,
                vec![auth(format!("Bearer {SECRET}"))],
                &body,
            ),
            knock(
                "the secret in the path",
                &format!("{path}/{SECRET}"),
                vec![],
                &body,
            ),
        ])
        .await?;
    doors
        .admitted(
            &knock(
                "the auth header",
                path,
                vec![auth(SECRET.to_owned())],
                &body,
            ),
            &["app"],
        )
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifactory_takes_its_secret_token_or_its_signature() -> Result<()> {
    let doors = start().await?;
    let body = fixture("artifactory-docker-push.json")?
        .replace(
            "https://example.jfrog.io",
            &format!("http://{}", doors.p.registry.host()),
        )
        .replace("\"docker-remote-cache\"", "\"demo\"")
        .replace("\"library/ubuntu\"", "\"app\"")
        .into_bytes();
    let path = "/webhooks/demo/artifactory";
    let event_auth = |value: String| ("X-JFrog-Event-Auth", value);
    doors
        .refused(&[
            knock(
                "forged token",
                path,
                vec![event_auth(FORGED.to_owned())],
                &body,
            ),
            knock(
                "forged signature",
                path,
                vec![event_auth(hmac_hex(FORGED, &body))],
                &body,
            ),
            knock("no header", path, vec![], &body),
            knock("empty header", path, vec![event_auth(String::new())], &body),
            knock(
                "wrong secret",
                path,
                vec![event_auth(WRONG_SECRET.to_owned())],
                &body,
            ),
            knock(
                "signed, then the body changed",
                path,
                vec![event_auth(hmac_hex(SECRET, &body))],
                &[body.as_slice(), b" "].concat(),
            ),
        ])
        .await?;
    doors
        .admitted(
            &knock(
                "the secret token",
                path,
                vec![event_auth(SECRET.to_owned())],
                &body,
            ),
            &["app"],
        )
        .await?;
    // A signed delivery of another push.
    let other = String::from_utf8(body.clone())?
        .replace("\"latest\"", "\"1.0.1\"")
        .into_bytes();
    doors
        .admitted(
            &knock(
                "the signature",
                path,
                vec![event_auth(hmac_hex(SECRET, &other))],
                &other,
            ),
            &["app"],
        )
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_independent_receiver_takes_what_a_project_secret_authenticates() -> Result<()>
{
    let doors = start().await?;
    let body = fixture("gitea-push.json")?
        .replace("http://localhost:3000/gitea/webhooks", &doors.config_repo())
        .into_bytes();
    let id = "0b7e7f5c-4a4e-4d0c-8f43-2f0f3c1d9e11";
    takes_one_signed_delivery(&doors, "/webhooks/-/gitea", &GITEA, id, &body, &["app"]).await?;
    // A path-token kind: the token in the path, nowhere else.
    let hub = fixture("dockerhub-push.json")?.into_bytes();
    doors
        .refused(&[
            knock("no token", "/webhooks/-/dockerhub", vec![], &hub),
            knock(
                "wrong token",
                &format!("/webhooks/-/dockerhub/{WRONG_SECRET}"),
                vec![],
                &hub,
            ),
            knock(
                "an unknown kind",
                &format!("/webhooks/-/nosuch/{SECRET}"),
                vec![],
                &hub,
            ),
        ])
        .await?;
    doors
        .admitted(
            &knock(
                "Docker Hub",
                &format!("/webhooks/-/dockerhub/{SECRET}"),
                vec![],
                &hub,
            ),
            &["hub"],
        )
        .await?;
    doors.logs_keep_the_secret();
    Ok(())
}
