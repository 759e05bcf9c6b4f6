//! Test helpers shared by the steps' unit tests: a [`StepContext`] over a temporary work
//! directory, with no credentials, a repository cache that refuses every fetch, and a
//! Freight holding one image and one commit.
//!
//! Only compiled for tests; steps that need more (a real mirror, credentials) build their
//! own context from [`context`] by overriding fields.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::{
    FreightCommit, FreightImage, GitCredentials, NoCredentials, RepoCache, StepContext,
    StepOutcome, TargetFreight, ToolPaths,
};

/// The Freight's image repository.
pub(crate) const IMAGE: &str = "registry.example.com/team/app";
/// The Freight's image tag.
pub(crate) const TAG: &str = "1.2.0";
/// The Freight's image digest.
pub(crate) const DIGEST: &str =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The Freight's config repository.
pub(crate) const REPO: &str = "https://git.example.com/team/config.git";
/// The Freight's commit.
pub(crate) const COMMIT: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A cache that refuses every fetch: unit tests of rendering steps never touch git.
#[derive(Debug, Default)]
pub(crate) struct NoRepos;

#[async_trait]
impl RepoCache for NoRepos {
    async fn fetch(&self, repo_url: &str, _: Option<&GitCredentials>) -> Result<PathBuf, String> {
        Err(format!(
            "no repository cache in this test (asked for `{repo_url}`)"
        ))
    }
}

/// A plain CEL evaluator for the steps' tests: the variables as given, JSON integers as
/// CEL `int`s (as the engine's evaluator does), no Dray functions.
#[derive(Debug, Default)]
pub(crate) struct TestExprs;

fn json_to_cel(value: &serde_json::Value) -> cel::Value {
    use serde_json::Value;
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Value::Object(fields) => cel::Value::Map(cel::objects::Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            cel::objects::Key::String(Arc::new(k.clone())),
                            json_to_cel(v),
                        )
                    })
                    .collect(),
            ),
        }),
    }
}

fn cel_to_json(value: &cel::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => Value::from(*f),
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::List(items) => {
            Value::Array(items.iter().map(cel_to_json).collect::<Option<_>>()?)
        }
        cel::Value::Map(map) => {
            let mut fields = serde_json::Map::new();
            for (key, value) in map.map.iter() {
                let cel::objects::Key::String(key) = key else {
                    return None;
                };
                fields.insert(key.to_string(), cel_to_json(value)?);
            }
            Value::Object(fields)
        }
        _ => return None,
    })
}

impl TestExprs {
    fn run(
        expression: &str,
        variables: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<cel::Value, String> {
        let program = cel::Program::compile(expression).map_err(|e| e.to_string())?;
        let mut ctx = cel::Context::default();
        for (name, value) in variables {
            ctx.add_variable_from_value(name.clone(), json_to_cel(value));
        }
        program
            .execute(&ctx)
            .map_err(|e| format!("expression `{expression}` failed: {e}"))
    }
}

impl crate::ExprEvaluator for TestExprs {
    fn condition(
        &self,
        expression: &str,
        variables: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<bool, String> {
        match Self::run(expression, variables)? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(format!(
                "condition `{expression}` must evaluate to a bool, not {other:?}"
            )),
        }
    }

    fn evaluate(
        &self,
        expression: &str,
        variables: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, String> {
        cel_to_json(&Self::run(expression, variables)?)
            .ok_or_else(|| format!("expression `{expression}` has no JSON value"))
    }
}

/// The Freight of [`context`]: one image ([`IMAGE`]:[`TAG`]@[`DIGEST`]) and one commit.
pub(crate) fn freight() -> TargetFreight {
    TargetFreight {
        id: "f0e1d2c3b4a5".to_owned(),
        alias: "tidy-otter".to_owned(),
        origin: "app".to_owned(),
        images: vec![FreightImage {
            repo_url: IMAGE.to_owned(),
            tag: TAG.to_owned(),
            digest: DIGEST.to_owned(),
        }],
        commits: vec![FreightCommit {
            repo_url: REPO.to_owned(),
            id: COMMIT.to_owned(),
            branch: Some("main".to_owned()),
            message: "Bump app".to_owned(),
            author: "Ada <ada@example.com>".to_owned(),
        }],
        charts: vec![],
    }
}

/// A context whose work directory is `work_dir`; log lines are dropped.
pub(crate) fn context(work_dir: &Path) -> StepContext {
    StepContext {
        work_dir: work_dir.to_path_buf(),
        warm_dir: None,
        project: "demo".to_owned(),
        stage: "staging".to_owned(),
        promotion: "staging-1".to_owned(),
        actor: "ada".to_owned(),
        alias: "step-1".to_owned(),
        freight: freight(),
        approved_by: None,
        window_override: None,
        signed_off_by: Vec::new(),
        freeze_override: None,
        credentials: Arc::new(NoCredentials),
        repos: Arc::new(NoRepos),
        http: reqwest::Client::new(),
        exprs: Arc::new(TestExprs),
        tools: ToolPaths::default(),
        cancel: CancellationToken::new(),
        log: Arc::new(|_| {}),
        saved_state: None,
        argocd: None,
    }
}

/// A context like [`context`] that also keeps its log lines, for tests that check them.
pub(crate) fn context_with_log(work_dir: &Path) -> (StepContext, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let mut ctx = context(work_dir);
    ctx.log = Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned()));
    (ctx, lines)
}

/// The outputs of a [`StepOutcome::Succeeded`], or a panic showing what came instead.
#[track_caller]
pub(crate) fn outputs(outcome: StepOutcome) -> serde_json::Map<String, serde_json::Value> {
    match outcome {
        StepOutcome::Succeeded { outputs, .. } => outputs,
        other => panic!("expected Succeeded, got {other:?}"),
    }
}

/// The reason of a [`StepOutcome::Failed`], or a panic showing what came instead.
#[track_caller]
pub(crate) fn failed(outcome: StepOutcome) -> String {
    match outcome {
        StepOutcome::Failed { reason } => reason,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// The reason of a [`StepOutcome::Errored`], or a panic showing what came instead.
#[track_caller]
pub(crate) fn errored(outcome: StepOutcome) -> String {
    match outcome {
        StepOutcome::Errored { reason } => reason,
        other => panic!("expected Errored, got {other:?}"),
    }
}

// ---- git: real repositories in temporary directories, for the git steps' tests ----

/// A [`RepoCache`] over real bare mirrors in a temporary directory: `git clone --mirror`
/// the first time, `git fetch --prune` after, one fetch at a time, holding the mirror's
/// [`crate::MirrorLocks`] lock as every cache must.
pub(crate) struct MirrorRepos {
    root: tempfile::TempDir,
    lock: tokio::sync::Mutex<()>,
}

impl MirrorRepos {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        MirrorRepos {
            root: tempfile::tempdir().unwrap(),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Where the mirrors are.
    pub(crate) fn root(&self) -> &Path {
        self.root.path()
    }
}

#[async_trait]
impl RepoCache for MirrorRepos {
    async fn fetch(&self, repo_url: &str, _: Option<&GitCredentials>) -> Result<PathBuf, String> {
        let _one_at_a_time = self.lock.lock().await;
        let name: String = repo_url
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mirror = self.root.path().join(name);
        let args: Vec<std::ffi::OsString> = if mirror.exists() {
            vec![
                "--git-dir".into(),
                mirror.clone().into(),
                "fetch".into(),
                "-q".into(),
                "--prune".into(),
                "origin".into(),
            ]
        } else {
            vec![
                "clone".into(),
                "-q".into(),
                "--mirror".into(),
                repo_url.into(),
                mirror.clone().into(),
            ]
        };
        // The contract of a RepoCache: no fetch while `git-clone` changes the worktrees.
        let _mirror = crate::MirrorLocks::global().lock(&mirror).await;
        let out = tokio::process::Command::new("git")
            .args(&args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .await
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(mirror)
    }
}

/// Runs git in `dir` with a fixed identity and returns its trimmed stdout; panics on failure.
#[track_caller]
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Outsider")
        .env("GIT_AUTHOR_EMAIL", "outsider@example.com")
        .env("GIT_COMMITTER_NAME", "Outsider")
        .env("GIT_COMMITTER_EMAIL", "outsider@example.com")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A new bare repository `name` under `dir` (default branch `main`); returns its `file://` URL.
pub(crate) fn bare_remote(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    git(
        dir,
        &["init", "-q", "--bare", "-b", "main", path.to_str().unwrap()],
    );
    format!("file://{}", path.display())
}

/// Commits `files` (path, content) on `branch` of `url` from a scratch clone, as an outside
/// user would, creating the branch when it does not exist; returns the new commit id.
pub(crate) fn push_files(url: &str, branch: &str, files: &[(&str, &str)], message: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    git(dir, &["init", "-q", "-b", branch]);
    let refspec = format!("refs/heads/{branch}");
    let exists = !git(dir, &["ls-remote", url, &refspec]).is_empty();
    if exists {
        git(dir, &["fetch", "-q", url, &refspec]);
        git(dir, &["reset", "-q", "--hard", "FETCH_HEAD"]);
    }
    for (path, content) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
    git(dir, &["push", "-q", url, &format!("HEAD:{refspec}")]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A context like [`context`] whose repository cache is `repos`.
pub(crate) fn git_context(work_dir: &Path, repos: Arc<MirrorRepos>) -> StepContext {
    let mut ctx = context(work_dir);
    ctx.repos = repos;
    ctx
}
