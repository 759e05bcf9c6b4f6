//! Git discovery over real smart HTTP (`git http-backend` with basic auth): credentials
//! go through gix's credential hook, a wrong password names the URL and nothing secret,
//! and an unmoved branch head is answered by `ls-remote` alone.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use dray::api::GitSubscription;
use dray::discovery::git::{GitCredentials, GitDiscoverer, GitDiscoveryError, MirrorCache};
use dray_e2e::{Credentials, GitRepo, GitServer, GitServerOptions, TestWorld};

const PASSWORD: &str = "s3cret-pass";
const WRONG: &str = "wr0ng-guess";

struct Setup {
    world: TestWorld,
    server: GitServer,
    repo: GitRepo,
    discoverer: GitDiscoverer,
    first: String,
}

/// An authenticated server with `config.git` holding one commit under `apps/`.
fn setup() -> Result<Setup> {
    let world = TestWorld::new()?;
    let auth = Credentials::new("alice", PASSWORD);
    let server = GitServer::start(&world, GitServerOptions { auth: Some(auth) })?;
    server.create_repo("config")?;
    let repo = GitRepo::clone_from_url(&world, &server.url_with_credentials("config"))?;
    repo.write("apps/web/values.yaml", "replicas: 1\n")?;
    let first = repo.commit("Add web")?;
    repo.push("main")?;
    let mirrors = Arc::new(MirrorCache::new(world.unique_dir("data")?));
    Ok(Setup {
        world,
        server,
        repo,
        discoverer: GitDiscoverer::new(mirrors),
        first,
    })
}

fn subscription(server: &GitServer) -> GitSubscription {
    GitSubscription {
        repo_url: server.url("config"),
        include_paths: vec!["apps/".into()],
        discovery_limit: 20,
        ..Default::default()
    }
}

/// Every file under `dir`, read as bytes.
fn contains_bytes(dir: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            contains_bytes(&path, needle)
        } else {
            std::fs::read(&path).is_ok_and(|data| data.windows(needle.len()).any(|w| w == needle))
        }
    })
}

#[tokio::test]
async fn discovery_over_http_with_basic_auth() -> Result<()> {
    let s = setup()?;
    let sub = subscription(&s.server);
    let creds = GitCredentials::new("alice", PASSWORD);

    let found = s.discoverer.discover(&sub, Some(&creds), None).await?;
    assert!(found.stats.fetched);
    assert_eq!(found.commits.len(), 1);
    let commit = &found.commits[0];
    assert_eq!(commit.id, s.first);
    assert_eq!(commit.branch.as_deref(), Some("main"));
    assert_eq!(commit.repo_url, s.server.url("config"));
    assert_eq!(commit.message, "Add web");

    // A docs-only commit on top keeps the same commit (no new Freight).
    s.repo.write("README.md", "docs\n")?;
    s.repo.commit("Docs")?;
    s.repo.push("main")?;
    let again = s
        .discoverer
        .discover(&sub, Some(&creds), Some(&found.state))
        .await?;
    assert!(again.stats.fetched);
    assert_eq!(again.commits[0].id, s.first);

    // The server saw the user; nothing secret was written into the mirror cache.
    assert!(
        s.server
            .requests()
            .iter()
            .any(|r| r.user.as_deref() == Some("alice"))
    );
    let root = s.discoverer.mirrors().root().to_owned();
    assert!(
        !contains_bytes(&root, PASSWORD.as_bytes()),
        "password written under the data dir"
    );
    drop(s.world);
    Ok(())
}

#[tokio::test]
async fn wrong_password_names_the_url_and_hides_the_password() -> Result<()> {
    let s = setup()?;
    let sub = subscription(&s.server);
    let url = s.server.url("config");

    let wrong = GitCredentials::new("alice", WRONG);
    let err = s
        .discoverer
        .discover(&sub, Some(&wrong), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitDiscoveryError::AuthenticationFailed { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert_eq!(
        text,
        format!("authentication failed for `{url}`: check the Credential for this repository")
    );
    let debug = format!("{err:?}");
    for shown in [&text, &debug] {
        assert!(
            !shown.contains(WRONG) && !shown.contains(PASSWORD),
            "{shown}"
        );
    }

    // No credentials at all: the same error, saying a Credential is needed.
    let err = s.discoverer.discover(&sub, None, None).await.unwrap_err();
    assert!(
        matches!(err, GitDiscoveryError::AuthenticationFailed { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(&format!("`{url}`")), "{err}");
    assert!(err.to_string().contains("add a Credential"), "{err}");

    // Fetching the mirror directly fails the same way.
    let err = s
        .discoverer
        .mirrors()
        .fetch(&url, Some(&wrong))
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitDiscoveryError::AuthenticationFailed { .. }),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn unchanged_head_is_answered_without_a_fetch() -> Result<()> {
    let s = setup()?;
    let sub = subscription(&s.server);
    let creds = GitCredentials::new("alice", PASSWORD);

    let found = s.discoverer.discover(&sub, Some(&creds), None).await?;
    let first_requests = s.server.requests().len();
    let mirror = s.discoverer.mirrors().mirror_path(&sub.repo_url);
    let packs =
        |dir: &Path| -> Result<usize> { Ok(std::fs::read_dir(dir.join("objects/pack"))?.count()) };
    let packs_before = packs(&mirror)?;

    let again = s
        .discoverer
        .discover(&sub, Some(&creds), Some(&found.state))
        .await?;
    assert!(again.unchanged);
    assert!(!again.stats.fetched);
    assert!(again.commits.is_empty());
    assert_eq!(packs(&mirror)?, packs_before, "nothing was fetched");
    let second_requests = s.server.requests().len() - first_requests;
    assert!(
        second_requests < first_requests,
        "ls-remote alone ({second_requests} requests) costs less than ls-remote + fetch \
         ({first_requests})"
    );

    // Once the head moves, discovery fetches again.
    s.repo.write("apps/web/values.yaml", "replicas: 2\n")?;
    let second = s.repo.commit("Scale web")?;
    s.repo.push("main")?;
    let moved = s
        .discoverer
        .discover(&sub, Some(&creds), Some(&found.state))
        .await?;
    assert!(!moved.unchanged && moved.stats.fetched);
    assert_eq!(moved.commits[0].id, second);
    Ok(())
}
