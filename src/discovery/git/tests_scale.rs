//! Tests of git discovery at monorepo scale (issue 15) against real repositories built with
//! `git fast-import`: the deep commit found, the narrowed (Bloom-filter) search and the
//! full search agreeing with `git log -- PATH`, incremental refreshes, the fetch deadline
//! releasing the mirror's lock, partial clones and one fetch for many Warehouses.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::tests::{Origin, ids};
use super::*;

/// Append commits to `main` of the origin's bare repository with `git fast-import`: each
/// `(path, message)` writes one file. Committer times increase by a second per commit.
fn import(origin: &Origin, commits: &[(String, String)]) {
    let bare = &origin.bare;
    let existing = Command::new("git")
        .args(["rev-list", "--count", "refs/heads/main"])
        .current_dir(bare)
        .output()
        .unwrap();
    let count: i64 = String::from_utf8_lossy(&existing.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let mut stream = String::new();
    for (n, (path, message)) in commits.iter().enumerate() {
        let content = format!("{path} {n} {count}\n");
        let time = 1_700_000_000 + count + n as i64;
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter Test Author <test@example.com> {time} +0000\ndata {}\n{message}\n",
            message.len()
        ));
        if n == 0 && count > 0 {
            stream.push_str("from refs/heads/main^0\n");
        }
        stream.push_str(&format!(
            "M 100644 inline {path}\ndata {}\n{content}\n",
            content.len()
        ));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(bare)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    git(bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// What `git log --first-parent -n LIMIT main -- PATH` answers in the origin.
fn git_log(origin: &Origin, limit: usize, path: &str) -> Vec<String> {
    git(
        &origin.bare,
        &[
            "log",
            "--first-parent",
            "--format=%H",
            &format!("-n{limit}"),
            "main",
            "--",
            path,
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

fn others(range: std::ops::Range<usize>) -> Vec<(String, String)> {
    range
        .map(|n| (format!("other/f{}.txt", n % 50), format!("other {n}")))
        .collect()
}

fn sub(origin: &Origin, include: &str, limit: u32) -> GitSubscription {
    GitSubscription {
        include_paths: vec![include.to_owned()],
        discovery_limit: limit,
        ..origin.sub()
    }
}

#[tokio::test]
async fn the_deep_commit_is_found_and_both_searches_agree_with_git_log() {
    let origin = Origin::new();
    let mut commits = vec![
        ("app/config.yaml".to_owned(), "app one".to_owned()),
        ("app/values.yaml".to_owned(), "app two".to_owned()),
        ("apps/abc/x.yaml".to_owned(), "apps abc".to_owned()),
        ("app/config.yaml".to_owned(), "app three".to_owned()),
    ];
    // The path was last touched 1,500 commits ago: past the old 1,000-commit horizon.
    commits.extend(others(0..1500));
    import(&origin, &commits);
    let discoverer = origin.discoverer();

    for limit in [1usize, 2, 20] {
        let expected = git_log(&origin, limit, "app/");
        assert_eq!(expected.len(), limit.min(3));
        // Narrowed by the literal pathspec `app/` (the Bloom filters), and the full walk
        // a `regex:` needs: the same answer as git's.
        for (include, narrowed) in [
            ("app/", true),
            ("glob:app/*.yaml", true),
            ("regex:^app/", false),
        ] {
            let found = discoverer
                .discover(&sub(&origin, include, limit as u32), None, None)
                .await
                .unwrap();
            assert_eq!(ids(&found), expected, "{include} limit {limit}");
            assert_eq!(found.stats.narrowed, narrowed, "{include}");
            if !narrowed {
                // The full walk read the whole branch to find the deep commits.
                assert!(found.stats.commits_scanned > 1500, "{:?}", found.stats);
            } else {
                assert!(found.stats.commits_scanned <= 4, "{:?}", found.stats);
            }
        }
    }
    // A plain path is a path (as Kargo compares): `app` takes `app/…`, not `apps/abc`, and
    // is its own pathspec.
    let found = discoverer
        .discover(&sub(&origin, "app", 20), None, None)
        .await
        .unwrap();
    assert_eq!(ids(&found), git_log(&origin, 20, "app"));
    assert_ne!(ids(&found), git_log(&origin, 20, ":(glob)app*/**"));
    assert!(found.stats.narrowed, "{:?}", found.stats);

    // The mirror carries a split commit-graph with changed-path Bloom filters, written in
    // the background after the first fetch.
    assert!(
        discoverer
            .mirrors()
            .graph_settled(&origin.url(), Duration::from_secs(60))
            .await,
        "the first commit-graph was not written within 60s"
    );
    let mirror = discoverer.mirrors().mirror_path(&origin.url());
    let chain = mirror.join("objects/info/commit-graphs/commit-graph-chain");
    assert!(
        chain.exists(),
        "no commit-graph chain in {}",
        mirror.display()
    );
    let graph = std::fs::read_dir(mirror.join("objects/info/commit-graphs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "graph"))
        .unwrap();
    let bytes = std::fs::read(graph).unwrap();
    assert!(
        bytes.windows(4).any(|w| w == b"BIDX") && bytes.windows(4).any(|w| w == b"BDAT"),
        "the commit-graph has no Bloom filter chunks"
    );
}

/// The branch search gives git's answer with the Bloom filters and without them (a first
/// discovery runs before its mirror's graph is written).
#[tokio::test]
async fn the_search_answers_the_same_with_and_without_the_commit_graph() {
    let origin = Origin::new();
    let mut commits = vec![
        ("app/config.yaml".to_owned(), "app one".to_owned()),
        ("apps/abc/x.yaml".to_owned(), "apps abc".to_owned()),
        ("app/config.yaml".to_owned(), "app two".to_owned()),
    ];
    commits.extend(others(0..400));
    import(&origin, &commits);
    let discoverer = origin.discoverer();
    let expected = git_log(&origin, 5, "app/");
    assert_eq!(expected.len(), 2);
    let first = discoverer
        .discover(&sub(&origin, "app/", 5), None, None)
        .await
        .unwrap();
    assert_eq!(ids(&first), expected);
    assert!(
        discoverer
            .mirrors()
            .graph_settled(&origin.url(), Duration::from_secs(60))
            .await,
        "the first commit-graph was not written within 60s"
    );
    let graphs = discoverer
        .mirrors()
        .mirror_path(&origin.url())
        .join("objects/info/commit-graphs");
    assert!(
        graphs.join("commit-graph-chain").exists(),
        "no graph written"
    );
    let with_graph = discoverer
        .discover(&sub(&origin, "app/", 5), None, None)
        .await
        .unwrap();
    assert_eq!(ids(&with_graph), expected, "with the Bloom filters");
    std::fs::remove_dir_all(&graphs).unwrap();
    let without = discoverer
        .discover(&sub(&origin, "app/", 5), None, None)
        .await
        .unwrap();
    assert_eq!(ids(&without), expected, "without a commit-graph");
    assert!(
        !graphs.exists(),
        "an unchanged mirror fetches and writes nothing"
    );
}

#[tokio::test]
async fn a_moved_head_is_searched_from_the_last_head_only() {
    let origin = Origin::new();
    let mut commits = vec![("app/a.yaml".to_owned(), "app one".to_owned())];
    commits.extend(others(0..300));
    import(&origin, &commits);
    let discoverer = origin.discoverer();
    let sub = sub(&origin, "app/", 20);
    let first = discoverer.discover(&sub, None, None).await.unwrap();
    assert!(!first.stats.incremental);
    assert_eq!(first.state.found, git_log(&origin, 20, "app/"));

    let mut more = others(300..303);
    more.push(("app/b.yaml".to_owned(), "app two".to_owned()));
    more.extend(others(303..305));
    import(&origin, &more);
    let second = discoverer
        .discover(&sub, None, Some(&first.state))
        .await
        .unwrap();
    assert!(second.stats.incremental, "{:?}", second.stats);
    assert_eq!(ids(&second), git_log(&origin, 20, "app/"));
    assert_eq!(second.commits.len(), 2);
    assert_eq!(second.commits[0].message, "app two");
    // A fresh mirror (no previous answer) agrees.
    let data = tempfile::tempdir().unwrap();
    let fresh = GitDiscoverer::new(Arc::new(MirrorCache::new(data.path())))
        .discover(&sub, None, None)
        .await
        .unwrap();
    assert_eq!(ids(&fresh), ids(&second));
    // An unchanged refresh keeps the previous answer in its state.
    let same = discoverer
        .discover(&sub, None, Some(&second.state))
        .await
        .unwrap();
    assert!(same.unchanged);
    assert_eq!(same.state.found, second.state.found);

    // A force-push (the head rewound and rebuilt) is searched afresh.
    let base = git(&origin.bare, &["rev-parse", "main~6"]);
    git(&origin.bare, &["update-ref", "refs/heads/main", &base]);
    import(&origin, &others(400..402));
    let rewritten = discoverer
        .discover(&sub, None, Some(&second.state))
        .await
        .unwrap();
    assert!(!rewritten.stats.incremental, "{:?}", rewritten.stats);
    assert_eq!(ids(&rewritten), git_log(&origin, 20, "app/"));
    assert_eq!(rewritten.commits.len(), 1);
}

#[tokio::test]
async fn a_stalled_fetch_is_stopped_at_its_deadline_and_the_lock_released() {
    // A "git server" that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let url = format!("http://127.0.0.1:{port}/stalled.git");
    let data = tempfile::tempdir().unwrap();
    let cache = MirrorCache::new(data.path()).with_fetch_timeout(Duration::from_secs(2));
    let listed = RemoteRefs {
        refs: [(
            "refs/heads/main".to_owned(),
            "0123456789abcdef0123456789abcdef01234567".to_owned(),
        )]
        .into(),
        head_target: Some("refs/heads/main".into()),
    };
    let err = cache.fetch_to(&url, None, &listed).await.unwrap_err();
    assert!(
        matches!(err, GitDiscoveryError::FetchTimedOut { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("fetching `{url}` did not finish in 2s;")),
        "{message}"
    );
    assert!(message.contains("hint:"), "{message}");
    assert_eq!(cache.fetch_count(), 1);
    // The lock is free again: taking it does not wait for the stalled transfer.
    let taken = tokio::time::timeout(Duration::from_secs(10), cache.lock(&url)).await;
    assert!(taken.is_ok(), "the mirror's lock is still held");
    // git and its remote helper are gone (the whole process group was killed).
    let needle = format!("127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive = git_processes_naming(&needle);
        if alive.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "git processes still running: {alive:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Command lines of running processes that mention `needle`.
fn git_processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // Zombies (`Z`) are dead already.
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if text.contains(needle) && text.contains("git") && !zombie {
            found.push(text);
        }
    }
    found
}

#[tokio::test]
async fn the_first_fetch_is_a_partial_clone_when_the_server_allows_it() {
    let allowed = Origin::new();
    allowed.commit(&[("app/a.yaml", "a: 1\n"), ("big.txt", "blob\n")], "One");
    allowed.commit(&[("app/a.yaml", "a: 2\n")], "Two");
    allowed.git_in(&allowed.bare, &["config", "uploadpack.allowFilter", "true"]);
    let cache = MirrorCache::new(allowed.data_dir());
    let mirror = cache.fetch(&allowed.url(), None).await.unwrap();
    let config = |key: &str| {
        Command::new("git")
            .args(["config", "--get", key])
            .current_dir(&mirror)
            .output()
            .unwrap()
    };
    assert_eq!(
        String::from_utf8_lossy(&config("extensions.partialclone").stdout).trim(),
        "origin"
    );
    let missing = |mirror: &Path| {
        git(
            mirror,
            &["rev-list", "--objects", "--all", "--missing=print"],
        )
        .lines()
        .filter(|l| l.starts_with('?'))
        .count()
    };
    assert!(missing(&mirror) > 0, "a partial mirror lacks blobs");
    // Discovery needs no blob...
    let found = GitDiscoverer::new(Arc::new(MirrorCache::new(allowed.data_dir())))
        .discover(&sub(&allowed, "app/", 20), None, None)
        .await
        .unwrap();
    assert_eq!(found.commits.len(), 2);
    assert!(missing(&mirror) > 0, "discovery fetched no blob");
    // ...and a worktree fetches the blobs it checks out, from the mirror's remote.
    let work = allowed.dir.path().join("wt");
    git(
        &mirror,
        &[
            "worktree",
            "add",
            "--detach",
            work.to_str().unwrap(),
            "main",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(work.join("app/a.yaml")).unwrap(),
        "a: 2\n"
    );
    // The next fetch stays incremental.
    allowed.commit(&[("app/a.yaml", "a: 3\n")], "Three");
    cache.fetch(&allowed.url(), None).await.unwrap();
    assert_eq!(cache.fetch_count(), 2);

    // A server that does not allow filters gets a full clone, and a plain mirror.
    let refused = Origin::new();
    refused.commit(&[("app/a.yaml", "a: 1\n")], "One");
    let cache = MirrorCache::new(refused.data_dir());
    let mirror = cache.fetch(&refused.url(), None).await.unwrap();
    assert!(!config_of(&mirror, "extensions.partialclone"));
    assert!(!config_of(&mirror, "remote.origin.promisor"));
    assert_eq!(missing(&mirror), 0, "a full mirror has every blob");
}

fn config_of(mirror: &Path, key: &str) -> bool {
    Command::new("git")
        .args(["config", "--get", key])
        .current_dir(mirror)
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn fifty_warehouses_on_one_repository_fetch_it_once_per_round() {
    let origin = Origin::new();
    let commits: Vec<(String, String)> = (0..50)
        .map(|n| (format!("apps/a{n}/config.yaml"), format!("app {n}")))
        .collect();
    import(&origin, &commits);
    let discoverer = origin.discoverer();
    let round = |previous: Vec<Option<GitDiscoveryState>>| {
        let tasks: Vec<_> = previous
            .into_iter()
            .enumerate()
            .map(|(n, previous)| {
                let (discoverer, sub) =
                    (discoverer.clone(), sub(&origin, &format!("apps/a{n}/"), 20));
                tokio::spawn(
                    async move { discoverer.discover(&sub, None, previous.as_ref()).await },
                )
            })
            .collect();
        async move {
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.unwrap().unwrap());
            }
            out
        }
    };
    let first = round(vec![None; 50]).await;
    assert_eq!(
        discoverer.mirrors().fetch_count(),
        1,
        "one fetch for 50 Warehouses"
    );
    for (n, found) in first.iter().enumerate() {
        assert_eq!(found.commits.len(), 1);
        assert_eq!(found.commits[0].message, format!("app {n}"));
    }

    import(
        &origin,
        &[("apps/a7/config.yaml".to_owned(), "app 7 again".to_owned())],
    );
    let second = round(first.iter().map(|f| Some(f.state.clone())).collect()).await;
    assert_eq!(
        discoverer.mirrors().fetch_count(),
        2,
        "one more fetch for the next round"
    );
    assert_eq!(second[7].commits[0].message, "app 7 again");
    assert_eq!(second[7].commits.len(), 2);
    assert_eq!(second[8].commits[0].message, "app 8");
}

/// A promotion's checkout (issue 15, item 4): the mirror is fetched only when a ref it
/// checks out moved on the remote or a commit it needs is missing; other refs moving do
/// not cost it a fetch.
#[tokio::test]
async fn a_checkout_fetches_only_when_what_it_needs_moved_or_is_missing() {
    let origin = Origin::new();
    let one = origin.commit(&[("app/a.yaml", "a: 1\n")], "One");
    let data = tempfile::tempdir().unwrap();
    let cache = MirrorCache::new(data.path());
    let url = origin.url();
    let mirror = cache.fetch(&url, None).await.unwrap();
    assert_eq!(cache.fetch_count(), 1);
    let main = ["refs/heads/main".to_owned()];

    // Another branch appears on the remote; `main` and the commit are held: no fetch.
    origin.git(&["push", "--quiet", "origin", "HEAD:refs/heads/other"]);
    let path = cache
        .fetch_for(&url, None, &main, std::slice::from_ref(&one))
        .await
        .unwrap();
    assert_eq!((path, cache.fetch_count()), (mirror.clone(), 1));
    // A branch neither has (a stage branch to be created): held too.
    let unborn = ["refs/heads/stage/dev".to_owned()];
    cache.fetch_for(&url, None, &unborn, &[]).await.unwrap();
    assert_eq!(cache.fetch_count(), 1);

    // `main` moved: one fetch, which brings every ref.
    let two = origin.commit(&[("app/a.yaml", "a: 2\n")], "Two");
    cache.fetch_for(&url, None, &main, &[]).await.unwrap();
    assert_eq!(cache.fetch_count(), 2);
    assert_eq!(git(&mirror, &["rev-parse", "refs/heads/main"]), two);
    assert_eq!(git(&mirror, &["rev-parse", "refs/heads/other"]), one);

    // A commit the mirror lacks (on a branch pushed since): a fetch.
    origin.git(&["commit", "--quiet", "--allow-empty", "-m", "Side"]);
    let side = origin.git(&["rev-parse", "HEAD"]);
    origin.git(&["push", "--quiet", "origin", "HEAD:refs/heads/side"]);
    cache
        .fetch_for(&url, None, &main, std::slice::from_ref(&side))
        .await
        .unwrap();
    assert_eq!(cache.fetch_count(), 3);
    assert_eq!(git(&mirror, &["cat-file", "-t", &side]), "commit");
    // What that fetch brought is held: no fetch.
    cache.fetch_for(&url, None, &main, &[side]).await.unwrap();
    assert_eq!(cache.fetch_count(), 3);
}
