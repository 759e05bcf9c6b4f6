//! Tests of git discovery and the mirror cache against local repositories made with the
//! git CLI in temporary directories, reached through `file://` URLs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tempfile::TempDir;

use super::*;

/// A bare "remote" repository and a working copy that pushes to it.
pub(super) struct Origin {
    pub(super) dir: TempDir,
    pub(super) work: PathBuf,
    pub(super) bare: PathBuf,
}

impl Origin {
    pub(super) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (work, bare) = (dir.path().join("work"), dir.path().join("origin.git"));
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let origin = Self { dir, work, bare };
        origin.git_in(
            origin.dir.path(),
            &["init", "--quiet", "--bare", "origin.git"],
        );
        origin.git_in(origin.dir.path(), &["init", "--quiet", "work"]);
        origin.git(&["remote", "add", "origin", origin.bare.to_str().unwrap()]);
        origin
    }

    pub(super) fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    pub(super) fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub(super) fn git_in(&self, cwd: &Path, args: &[&str]) -> String {
        self.git_env(cwd, args, &[])
    }

    pub(super) fn git_env(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
        let output = Command::new("git")
            .current_dir(cwd)
            .env("HOME", self.dir.path().join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .envs(env.iter().copied())
            .args([
                "-c",
                "user.name=Test Author",
                "-c",
                "user.email=test@example.com",
            ])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(["-c", "tag.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    pub(super) fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.work, args)
    }

    /// Write `files`, commit everything with `message` at `date` (if given), push `main`.
    pub(super) fn commit_at(
        &self,
        files: &[(&str, &str)],
        message: &str,
        date: Option<&str>,
    ) -> String {
        for (path, content) in files {
            let full = self.work.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, content).unwrap();
        }
        self.git(&["add", "--all"]);
        let env: Vec<(&str, &str)> = date
            .map(|d| vec![("GIT_COMMITTER_DATE", d), ("GIT_AUTHOR_DATE", d)])
            .unwrap_or_default();
        self.git_env(
            &self.work,
            &["commit", "--quiet", "--allow-empty", "-m", message],
            &env,
        );
        self.git(&["push", "--quiet", "origin", "HEAD:refs/heads/main"]);
        self.git(&["rev-parse", "HEAD"])
    }

    pub(super) fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        self.commit_at(files, message, None)
    }

    /// Tag `HEAD` (annotated at `date` when given, else lightweight) and push the tag.
    fn tag(&self, name: &str, annotated_at: Option<&str>) {
        match annotated_at {
            Some(date) => self.git_env(
                &self.work,
                &["tag", "-a", "-m", name, name],
                &[("GIT_COMMITTER_DATE", date)],
            ),
            None => self.git(&["tag", name]),
        };
        self.git(&["push", "--quiet", "origin", &format!("refs/tags/{name}")]);
    }

    pub(super) fn sub(&self) -> GitSubscription {
        GitSubscription {
            repo_url: self.url(),
            discovery_limit: 20,
            strict_semvers: true,
            ..Default::default()
        }
    }

    pub(super) fn discoverer(&self) -> GitDiscoverer {
        GitDiscoverer::new(Arc::new(MirrorCache::new(self.data_dir())))
    }
}

pub(super) fn ids(found: &GitDiscovery) -> Vec<&str> {
    found.commits.iter().map(|c| c.id.as_str()).collect()
}

fn tags(found: &GitDiscovery) -> Vec<&str> {
    found
        .commits
        .iter()
        .filter_map(|c| c.tag.as_deref())
        .collect()
}

fn packs(mirror: &Path) -> Vec<PathBuf> {
    let dir = mirror.join("objects/pack");
    let mut packs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    packs.retain(|p| p.extension().is_some_and(|e| e == "pack"));
    packs
}

#[tokio::test]
async fn mirror_is_created_then_fetched_incrementally() {
    let origin = Origin::new();
    let first = origin.commit(&[("apps/a.yaml", "a: 1\n")], "First");
    let cache = MirrorCache::new(origin.data_dir());
    let path = cache.mirror_path(&origin.url());
    assert!(path.starts_with(origin.data_dir().join("git-mirrors")));
    assert!(!path.exists());

    let refs = cache.ls_remote(&origin.url(), None).await.unwrap();
    assert_eq!(refs.get("refs/heads/main"), Some(&first));

    assert_eq!(cache.fetch(&origin.url(), None).await.unwrap(), path);
    let mirror = gix::open(&path).unwrap();
    assert!(mirror.is_bare());
    let head = |repo: &gix::Repository| {
        repo.find_reference("refs/heads/main")
            .unwrap()
            .id()
            .to_string()
    };
    assert_eq!(head(&mirror), first);
    let first_packs = packs(&path);
    assert_eq!(first_packs.len(), 1, "{first_packs:?}");

    let second = origin.commit(&[("apps/b.yaml", "b: 1\n")], "Second");
    origin.git(&["push", "--quiet", "origin", "HEAD:refs/heads/feature"]);
    cache.fetch(&origin.url(), None).await.unwrap();
    let mirror = gix::open(&path).unwrap();
    assert_eq!(head(&mirror), second);
    assert!(mirror.find_reference("refs/heads/feature").is_ok());
    // Incremental: the first pack is kept and one more (holding only new objects) added.
    let now = packs(&path);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.contains(&first_packs[0]));
    // The mirror's HEAD follows the remote's default branch.
    assert_eq!(
        mirror.head_name().unwrap().unwrap().as_bstr(),
        "refs/heads/main"
    );

    // A branch deleted upstream is pruned from the mirror.
    origin.git(&["push", "--quiet", "origin", ":refs/heads/feature"]);
    cache.fetch(&origin.url(), None).await.unwrap();
    let mirror = gix::open(&path).unwrap();
    assert!(
        mirror
            .try_find_reference("refs/heads/feature")
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn commit_exists_checks_the_mirror_then_fetches() {
    let origin = Origin::new();
    let first = origin.commit(&[("a", "1")], "One");
    let cache = MirrorCache::new(origin.data_dir());
    let url = origin.url();
    assert!(cache.commit_exists(&url, &first, None).await.unwrap());
    assert!(cache.commit_exists(&url, &first[..10], None).await.unwrap());
    let second = origin.commit(&[("a", "2")], "Two");
    assert!(
        cache.commit_exists(&url, &second, None).await.unwrap(),
        "fetched on a miss"
    );
    let tree = origin.git(&["rev-parse", "HEAD^{tree}"]);
    assert!(
        !cache.commit_exists(&url, &tree, None).await.unwrap(),
        "a tree is no commit"
    );
    let missing = "0123456789abcdef0123456789abcdef01234567";
    assert!(!cache.commit_exists(&url, missing, None).await.unwrap());
    assert!(
        !cache.commit_exists(&url, "main", None).await.unwrap(),
        "ids only"
    );
}

#[tokio::test]
async fn concurrent_fetches_of_one_url_share_the_mirror() {
    let origin = Origin::new();
    let sha = origin.commit(&[("a", "1")], "One");
    let cache = Arc::new(MirrorCache::new(origin.data_dir()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (cache, url) = (Arc::clone(&cache), origin.url());
            tokio::spawn(async move { cache.fetch(&url, None).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let mirror = gix::open(cache.mirror_path(&origin.url())).unwrap();
    assert_eq!(
        mirror
            .find_reference("refs/heads/main")
            .unwrap()
            .id()
            .to_string(),
        sha
    );
    let entries = std::fs::read_dir(cache.root()).unwrap().count();
    assert_eq!(entries, 1, "no staging directories left behind");
}

#[tokio::test]
async fn unchanged_head_short_circuits_without_fetching() {
    let origin = Origin::new();
    let first = origin.commit(&[("apps/a.yaml", "a: 1\n")], "First");
    let discoverer = origin.discoverer();
    let sub = origin.sub();

    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert!(!found.unchanged && found.stats.fetched);
    assert_eq!(ids(&found), [first.as_str()]);
    assert_eq!(found.state.branch.as_deref(), Some("main"));
    assert_eq!(found.state.head.as_deref(), Some(first.as_str()));
    let commit = &found.commits[0];
    assert_eq!(commit.branch.as_deref(), Some("main"));
    assert_eq!(commit.message, "First");
    assert_eq!(commit.author, "Test Author <test@example.com>");

    let again = discoverer
        .discover(&sub, None, Some(&found.state))
        .await
        .unwrap();
    assert!(again.unchanged);
    assert!(!again.stats.fetched);
    assert!(again.commits.is_empty());
    assert_eq!(again.state, found.state);

    // The state survives a round trip through JSON (it is stored between runs).
    let json = serde_json::to_string(&found.state).unwrap();
    let stored: GitDiscoveryState = serde_json::from_str(&json).unwrap();
    assert!(
        discoverer
            .discover(&sub, None, Some(&stored))
            .await
            .unwrap()
            .unchanged
    );

    // A changed subscription never short-circuits.
    let other = GitSubscription {
        include_paths: vec!["apps/".into()],
        ..sub.clone()
    };
    assert!(
        !discoverer
            .discover(&other, None, Some(&found.state))
            .await
            .unwrap()
            .unchanged
    );

    let second = origin.commit(&[("apps/a.yaml", "a: 2\n")], "Second");
    let moved = discoverer
        .discover(&sub, None, Some(&found.state))
        .await
        .unwrap();
    assert!(!moved.unchanged && moved.stats.fetched);
    assert_eq!(ids(&moved), [second.as_str(), first.as_str()]);
}

#[tokio::test]
async fn readme_only_commit_keeps_the_selected_commit() {
    let origin = Origin::new();
    origin.commit(&[("README.md", "hello\n")], "Readme");
    let included = origin.commit(&[("apps/web/values.yaml", "replicas: 1\n")], "Scale web");
    let sub = GitSubscription {
        include_paths: vec!["apps/".into()],
        ..origin.sub()
    };
    let discoverer = origin.discoverer();
    let before = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(before.commits[0].id, included);

    origin.commit(&[("README.md", "hello again\n")], "Docs only");
    let after = discoverer
        .discover(&sub, None, Some(&before.state))
        .await
        .unwrap();
    assert!(!after.unchanged, "the head moved, so discovery ran");
    assert_eq!(after.commits[0].id, included, "same commit: no new Freight");
    assert_eq!(
        ids(&after),
        [included.as_str()],
        "the README commits never count"
    );
}

#[tokio::test]
async fn glob_regex_and_exclude_paths() {
    let origin = Origin::new();
    let values = origin.commit(&[("apps/web/values.yaml", "a\n")], "Values");
    origin.commit(&[("apps/web/nested/values.yaml", "b\n")], "Nested values");
    let dev = origin.commit(&[("env/dev/app.yaml", "c\n")], "Dev");
    origin.commit(&[("env/qa/app.yaml", "d\n")], "QA");
    origin.commit(&[("env/dev/NOTES.md", "e\n")], "Dev notes");
    let discoverer = origin.discoverer();

    let glob = GitSubscription {
        include_paths: vec!["glob:apps/*/values.yaml".into()],
        ..origin.sub()
    };
    assert_eq!(
        ids(&discoverer.discover(&glob, None, None).await.unwrap()),
        [values.as_str()]
    );

    let regex = GitSubscription {
        include_paths: vec![r"regex:^env/(dev|prod)/".into()],
        exclude_paths: vec!["glob:**/*.md".into()],
        ..origin.sub()
    };
    assert_eq!(
        ids(&discoverer.discover(&regex, None, None).await.unwrap()),
        [dev.as_str()]
    );

    let bad = GitSubscription {
        exclude_paths: vec!["glob:{".into()],
        ..origin.sub()
    };
    let err = discoverer
        .discover(&bad, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid excludePaths pattern `glob:{`"),
        "{err}"
    );
}

#[tokio::test]
async fn dray_promotion_commits_never_count() {
    let origin = Origin::new();
    let human = origin.commit(&[("apps/a.yaml", "1\n")], "Human change");
    origin.commit(
        &[("apps/a.yaml", "2\n")],
        "Promote abc to prod\n\nDray-Freight: abc\nDray-Promotion: prod-1\nDray-Stage: prod",
    );
    let found = origin
        .discoverer()
        .discover(&origin.sub(), None, None)
        .await
        .unwrap();
    assert_eq!(ids(&found), [human.as_str()]);
}

#[tokio::test]
async fn discovery_limit_narrowing_and_no_match_messages() {
    let origin = Origin::new();
    let old = origin.commit(&[("apps/a.yaml", "1\n")], "Apps");
    for n in 0..3 {
        origin.commit(&[("docs/n.txt", &n.to_string())], "Docs");
    }
    let newest = origin.commit(&[("x", "1")], "X");
    let limited = GitSubscription {
        discovery_limit: 2,
        ..origin.sub()
    };
    let found = origin
        .discoverer()
        .discover(&limited, None, None)
        .await
        .unwrap();
    assert_eq!(found.commits.len(), 2);
    assert_eq!(found.commits[0].id, newest);

    let sub = GitSubscription {
        include_paths: vec!["apps/".into()],
        ..origin.sub()
    };
    let found = origin
        .discoverer()
        .discover(&sub, None, None)
        .await
        .unwrap();
    assert_eq!(ids(&found), [old.as_str()]);

    // The search reads only commits under `apps/` (narrowed by pathspec).
    assert!(found.stats.narrowed);
    assert_eq!(found.stats.commits_scanned, 1);

    let none = GitSubscription {
        include_paths: vec!["nowhere/".into()],
        ..origin.sub()
    };
    let err = origin
        .discoverer()
        .discover(&none, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no commit of `main` in") && err.contains("(its whole history)"),
        "{err}"
    );
    let bounded = GitSubscription {
        since: Some("2100-01-01T00:00:00Z".into()),
        ..sub
    };
    let err = origin
        .discoverer()
        .discover(&bounded, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(back to since `2100-01-01T00:00:00Z`)"),
        "{err}"
    );
}

#[tokio::test]
async fn semver_selects_releases_and_skips_pre_releases() {
    let origin = Origin::new();
    for (tag, annotated) in [("v1.0.0", false), ("v1.4.0", true), ("v1.5.0-rc.1", false)] {
        origin.commit(&[("apps/a.yaml", tag)], tag);
        origin.tag(tag, annotated.then_some("2024-01-01T00:00:00Z"));
    }
    origin.commit(&[("apps/a.yaml", "x")], "untagged");
    origin.tag("release-candidate", None);
    let sub = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::SemVer,
        semver_constraint: Some("^1.0.0".into()),
        ..origin.sub()
    };
    let discoverer = origin.discoverer();
    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(tags(&found), ["v1.4.0", "v1.0.0"]);
    assert!(found.commits.iter().all(|c| c.branch.is_none()));
    assert_eq!(
        found.commits[0].message, "v1.4.0",
        "an annotated tag resolves to its commit"
    );
    assert!(found.state.tags.is_some() && found.state.head.is_none());

    // Same tags: no fetch.
    let again = discoverer
        .discover(&sub, None, Some(&found.state))
        .await
        .unwrap();
    assert!(again.unchanged && !again.stats.fetched);

    let pre = GitSubscription {
        semver_constraint: Some(">=1.5.0-rc.0".into()),
        ..sub.clone()
    };
    assert_eq!(
        tags(&discoverer.discover(&pre, None, None).await.unwrap()),
        ["v1.5.0-rc.1"]
    );

    let two = GitSubscription {
        semver_constraint: Some("^2.0.0".into()),
        ..sub.clone()
    };
    let err = discoverer
        .discover(&two, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("constraint `^2.0.0` matched 0 of 4 tags (newest: `v1.4.0`)"),
        "{err}"
    );

    let bad = GitSubscription {
        semver_constraint: Some("^^x".into()),
        ..sub
    };
    let err = discoverer
        .discover(&bad, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("invalid semverConstraint `^^x`"), "{err}");
}

#[tokio::test]
async fn strict_semvers_false_takes_partial_versions_as_kargo_does() {
    let origin = Origin::new();
    for tag in ["v1.0.0", "v1.5", "v2"] {
        origin.commit(&[("apps/a.yaml", tag)], tag);
        origin.tag(tag, None);
    }
    let strict = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::SemVer,
        ..origin.sub()
    };
    let discoverer = origin.discoverer();
    let found = discoverer.discover(&strict, None, None).await.unwrap();
    assert_eq!(
        tags(&found),
        ["v1.0.0"],
        "strict by default: `v1.5` and `v2` are not versions"
    );
    let loose = GitSubscription {
        strict_semvers: false,
        semver_constraint: Some("^1.0.0".into()),
        ..strict
    };
    let found = discoverer.discover(&loose, None, None).await.unwrap();
    assert_eq!(tags(&found), ["v1.5", "v1.0.0"]);
}

#[tokio::test]
async fn lexical_and_newest_tag_with_tag_filters() {
    let origin = Origin::new();
    let tags_made = [
        ("b-2", Some("2024-03-01T00:00:00Z")),
        ("c-1", Some("2024-01-01T00:00:00Z")),
        ("a-3", Some("2024-05-01T00:00:00Z")),
        ("skip-9", None),
    ];
    for (tag, date) in tags_made {
        origin.commit(&[("f", tag)], tag);
        origin.tag(tag, date);
    }
    let discoverer = origin.discoverer();
    let lexical = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::Lexical,
        ignore_tags: vec!["^skip-".into()],
        ..origin.sub()
    };
    assert_eq!(
        tags(&discoverer.discover(&lexical, None, None).await.unwrap()),
        ["c-1", "b-2", "a-3"]
    );

    let newest = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::NewestTag,
        allow_tags: vec![r"^[abc]-\d$".into()],
        ..origin.sub()
    };
    assert_eq!(
        tags(&discoverer.discover(&newest, None, None).await.unwrap()),
        ["a-3", "b-2", "c-1"]
    );

    let nothing = GitSubscription {
        allow_tags: vec!["^zzz".into()],
        ..lexical
    };
    let err = discoverer
        .discover(&nothing, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("allowTags/ignoreTags matched 0 of 4 tags (newest: `skip-9`)"),
        "{err}"
    );
}

#[tokio::test]
async fn branch_errors_name_the_branch_and_list_branches() {
    let origin = Origin::new();
    origin.commit(&[("a", "1")], "One");
    origin.git(&["push", "--quiet", "origin", "HEAD:refs/heads/dev"]);
    origin.git(&["push", "--quiet", "origin", "HEAD:refs/heads/stage/prod"]);
    let discoverer = origin.discoverer();

    let missing = GitSubscription {
        branch: Some("nope".into()),
        ..origin.sub()
    };
    let err = discoverer
        .discover(&missing, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "branch `nope` not found in `{}` (branches: `dev`, `main`)",
            origin.url()
        )),
        "{err}"
    );

    let stage = GitSubscription {
        branch: Some("stage/prod".into()),
        ..origin.sub()
    };
    let err = discoverer
        .discover(&stage, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("refusing to follow `stage/prod`"), "{err}");

    let dev = GitSubscription {
        branch: Some("refs/heads/dev".into()),
        ..origin.sub()
    };
    let found = discoverer.discover(&dev, None, None).await.unwrap();
    assert_eq!(found.commits[0].branch.as_deref(), Some("dev"));
}

#[tokio::test]
async fn unreachable_repository_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let discoverer = GitDiscoverer::new(Arc::new(MirrorCache::new(dir.path())));
    let url = format!("file://{}/missing.git", dir.path().display());
    let sub = GitSubscription {
        repo_url: url.clone(),
        ..Default::default()
    };
    let err = discoverer.discover(&sub, None, None).await.unwrap_err();
    assert!(
        matches!(err, GitDiscoveryError::Unreachable { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("cannot reach the repository `{url}`")),
        "{err}"
    );
}

/// The controller spawns discoveries on the runtime: the futures must be `Send`.
#[test]
fn discovery_futures_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let discoverer = GitDiscoverer::new(Arc::new(MirrorCache::new(dir.path())));
    let sub = GitSubscription::default();
    let creds = GitCredentials::new("u", "p");
    let state = GitDiscoveryState::default();
    is_send(&discoverer.discover(&sub, Some(&creds), Some(&state)));
    is_send(&discoverer.mirrors().fetch("file:///x", Some(&creds)));
    is_send(&discoverer.mirrors().ls_remote("file:///x", None));
}

#[tokio::test]
async fn expression_filter_and_since_choose_commits_and_discovery_limit_counts_only_those() {
    let origin = Origin::new();
    let old = origin.commit_at(&[("a", "1")], "feat: old", Some("2025-06-01T00:00:00Z"));
    let kept = origin.commit_at(&[("a", "2")], "feat: kept", Some("2026-02-01T00:00:00Z"));
    origin.commit_at(&[("a", "3")], "wip: skip me", Some("2026-02-02T00:00:00Z"));
    let mut sub = GitSubscription {
        expression_filter: Some("!subject.startsWith('wip')".into()),
        discovery_limit: 1,
        ..origin.sub()
    };
    let discoverer = origin.discoverer();
    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(
        ids(&found),
        vec![kept.as_str()],
        "the wip commit does not count"
    );

    sub.discovery_limit = 20;
    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(ids(&found), vec![kept.as_str(), old.as_str()]);

    sub.since = Some("2026-01-01T00:00:00Z".into());
    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(
        ids(&found),
        vec![kept.as_str()],
        "the old commit is before since"
    );

    // Tags: the filter sees `tag`.
    origin.tag("v1.0.0", None);
    origin.tag("v2.0.0-skip", None);
    let sub = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::Lexical,
        expression_filter: Some("!tag.endsWith('-skip')".into()),
        ..origin.sub()
    };
    let found = discoverer.discover(&sub, None, None).await.unwrap();
    assert_eq!(tags(&found), vec!["v1.0.0"]);

    // A filter that refuses everything says so; one that errs names the commit.
    let sub = GitSubscription {
        expression_filter: Some("subject == 'nothing'".into()),
        ..origin.sub()
    };
    let err = discoverer
        .discover(&sub, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("passes expressionFilter and since"), "{err}");
    let sub = GitSubscription {
        expression_filter: Some("int(subject) > 0".into()),
        ..origin.sub()
    };
    let err = discoverer
        .discover(&sub, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("expressionFilter failed on commit `"),
        "{err}"
    );
}

#[tokio::test]
async fn a_kargo_warehouse_filters_commits_and_tags_in_expr_lang() {
    let origin = Origin::new();
    let old = origin.commit_at(&[("a", "1")], "feat: old", Some("2023-06-01T00:00:00Z"));
    let kept = origin.commit_at(&[("a", "2")], "feat: kept", Some("2026-02-01T00:00:00Z"));
    origin.commit_at(
        &[("a", "3")],
        "chore: [skip-ci] x",
        Some("2026-02-02T00:00:00Z"),
    );
    let discoverer = origin.discoverer();
    let lang = ExprLanguage::ExprLang;
    // Kargo's documented filters, as written there.
    let sub = GitSubscription {
        expression_filter: Some("!(subject contains '[skip-ci]')".into()),
        ..origin.sub()
    };
    let found = discoverer
        .discover_in(&sub, None, None, lang)
        .await
        .unwrap();
    assert_eq!(ids(&found), vec![kept.as_str(), old.as_str()]);
    let sub = GitSubscription {
        expression_filter: Some("commitDate.After(date('2025-01-01'))".into()),
        ..origin.sub()
    };
    let found = discoverer
        .discover_in(&sub, None, None, lang)
        .await
        .unwrap();
    assert_eq!(ids(&found).len(), 2, "both 2026 commits, not the 2023 one");
    assert!(!ids(&found).contains(&old.as_str()));

    origin.tag("v1.0.0", None);
    origin.tag("v2.0.0-skip", None);
    let sub = GitSubscription {
        commit_selection_strategy: CommitSelectionStrategy::Lexical,
        expression_filter: Some(
            "tag matches '^v[0-9]+\\\\.[0-9]+\\\\.[0-9]+$' && creatorDate.Year() >= 2024".into(),
        ),
        ..origin.sub()
    };
    let found = discoverer
        .discover_in(&sub, None, None, lang)
        .await
        .unwrap();
    assert_eq!(tags(&found), vec!["v1.0.0"]);

    // The same filter read as CEL (a Dray document) is refused before any fetch.
    let err = discoverer
        .discover(&sub, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expressionFilter") && err.contains("CEL"),
        "{err}"
    );
}
