//! `git-clone`: checks out commits, branches or tags of one repository as worktrees of
//! its shared bare mirror. Never a fresh clone: the mirror comes up to date with an
//! incremental fetch ([`crate::RepoCache`]), and each checkout is a `git worktree add`.
//!
//! Worktrees are always on a detached HEAD (see [`crate::git`]); the branch checked out
//! and the real repository URL are recorded beside the worktree for `git-push`. A branch
//! that does not exist yet can be started as an orphan (`create: true`).
//!
//! Idempotent: a path that already is a worktree of this mirror at the wanted commit is
//! reused (reset and cleaned); anything else at the path is removed and checked out anew.

use std::hash::{Hash, Hasher};
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::typed::TypedStep;
use crate::git::{CheckoutRecord, Git, GitError, is_valid_ref_name, redact_url, write_record};
use crate::warm::{Existing, inspect, remove_path};
use crate::{MirrorLocks, StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-clone";

/// The configuration of `git-clone`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The repository, e.g. `https://git.example.com/team/config.git`.
    #[serde(rename = "repoURL")]
    pub(crate) repo_url: String,
    /// What to check out, and where.
    pub(crate) checkout: Vec<Checkout>,
}

/// One checkout: exactly one of `commit`, `branch` or `tag`, and a path.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Checkout {
    /// A commit id (full or abbreviated hex).
    #[serde(default)]
    pub(crate) commit: Option<String>,
    /// A branch; its current head is checked out.
    #[serde(default)]
    pub(crate) branch: Option<String>,
    /// A tag.
    #[serde(default)]
    pub(crate) tag: Option<String>,
    /// Where, relative to the work directory, e.g. `./out`.
    pub(crate) path: String,
    /// With `branch`: start it as an empty (orphan) branch when it does not exist yet.
    #[serde(default)]
    pub(crate) create: bool,
    /// Only write these directories of the tree (e.g. `[base, overlays]`); the rest of a
    /// large repository stays in the mirror. Empty: the whole tree.
    #[serde(default)]
    pub(crate) sparse: Vec<String>,
}

/// What a checkout points at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Commit(String),
    Branch { name: String, create: bool },
    Tag(String),
}

/// A validated checkout.
#[derive(Debug)]
struct Plan {
    path: String,
    dir: PathBuf,
    target: Target,
    sparse: Vec<String>,
}

/// The `git-clone` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitClone;

#[async_trait]
impl TypedStep for GitClone {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let plans = match validate(ctx, &config) {
            Ok(plans) => plans,
            Err(reason) => return StepOutcome::failed(reason),
        };
        let url = redact_url(&config.repo_url);
        let git = Git::for_repo(ctx, &config.repo_url);
        let fetched = match needs(&plans) {
            Some((refs, commits)) => {
                ctx.repos
                    .fetch_for(&config.repo_url, git.credentials(), &refs, &commits)
                    .await
            }
            None => ctx.repos.fetch(&config.repo_url, git.credentials()).await,
        };
        let mirror = match fetched {
            Ok(mirror) => mirror,
            Err(e) => {
                return StepOutcome::errored(format!("cannot fetch `{url}`: {}", git.redact(&e)));
            }
        };
        if mirror.to_str().is_none() {
            return StepOutcome::errored(format!("the mirror of `{url}` is at a non-UTF-8 path"));
        }
        let mut commits = Map::new();
        for plan in &plans {
            let want = match resolve(&git, &mirror, &plan.target, &url).await {
                Ok(Ok(want)) => want,
                Ok(Err(missing)) => return StepOutcome::failed(missing),
                Err(e) => return StepOutcome::errored(e.to_string()),
            };
            let slot = ctx.warm_dir.as_deref().and_then(|warm| {
                let relative = plan.dir.strip_prefix(&ctx.work_dir).ok()?;
                let slot = crate::warm::slot(warm, &mirror, relative);
                slot.to_str().is_some().then_some(slot)
            });
            let how = match ensure_worktree(
                &git,
                &mirror,
                &plan.dir,
                want.as_deref(),
                &plan.sparse,
                slot.as_deref(),
            )
            .await
            {
                Ok(how) => how,
                Err(e) => {
                    return StepOutcome::errored(format!("cannot check out `{}`: {e}", plan.path));
                }
            };
            let record = CheckoutRecord {
                repo_url: config.repo_url.clone(),
                branch: match &plan.target {
                    Target::Branch { name, .. } => Some(name.clone()),
                    _ => None,
                },
                commit: want.clone(),
                mirror: Some(mirror.clone()),
            };
            if let Err(e) = write_record(&git, &plan.dir, &record).await {
                return StepOutcome::errored(e);
            }
            let how = how.as_str();
            ctx.log(&match &want {
                Some(sha) => format!(
                    "{how} `{url}` {} at {} in `{}`",
                    plan.target,
                    crate::git::short_sha(sha),
                    plan.path
                ),
                None => format!(
                    "{how} `{url}` {} as a new orphan branch in `{}`",
                    plan.target, plan.path
                ),
            });
            commits.insert(plan.path.clone(), want.map_or(Value::Null, Value::String));
        }
        let mut outputs = Map::new();
        if let [(_, single)] = commits.iter().collect::<Vec<_>>().as_slice() {
            outputs.insert("commit".into(), (*single).clone());
        }
        outputs.insert("commits".into(), Value::Object(commits.clone()));
        StepOutcome::Succeeded {
            outputs,
            state: Some(json!({ "repoURL": config.repo_url, "commits": commits })),
            effects: Vec::new(),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Commit(c) => write!(f, "commit `{c}`"),
            Target::Branch { name, .. } => write!(f, "branch `{name}`"),
            Target::Tag(t) => write!(f, "tag `{t}`"),
        }
    }
}

/// Checks the whole config before anything touches git.
fn validate(ctx: &StepContext, config: &Config) -> Result<Vec<Plan>, String> {
    let bad = |msg: String| format!("invalid `{KIND}` config: {msg}");
    if config.repo_url.trim().is_empty() || config.repo_url.starts_with('-') {
        return Err(bad(format!(
            "`repoURL` `{}` is not a repository URL",
            config.repo_url
        )));
    }
    if config.checkout.is_empty() {
        return Err(bad(
            "`checkout` is empty; name at least one commit, branch or tag".into(),
        ));
    }
    let mut plans: Vec<Plan> = Vec::new();
    for (i, c) in config.checkout.iter().enumerate() {
        let at = format!("`checkout[{i}]`");
        let target = match (&c.commit, &c.branch, &c.tag) {
            (Some(commit), None, None) => {
                let hex = commit.chars().all(|ch| ch.is_ascii_hexdigit());
                if !hex || !(4..=64).contains(&commit.len()) {
                    return Err(bad(format!("{at}: commit `{commit}` is not a commit id")));
                }
                Target::Commit(commit.to_ascii_lowercase())
            }
            (None, Some(name), None) => Target::Branch {
                name: name.clone(),
                create: c.create,
            },
            (None, None, Some(tag)) => Target::Tag(tag.clone()),
            _ => {
                return Err(bad(format!(
                    "{at} needs exactly one of `commit`, `branch` or `tag`"
                )));
            }
        };
        match &target {
            Target::Branch { name, .. } | Target::Tag(name) if !is_valid_ref_name(name) => {
                return Err(bad(format!("{at}: `{name}` is not a valid git ref name")));
            }
            Target::Commit(_) | Target::Tag(_) if c.create => {
                return Err(bad(format!("{at}: `create` only applies to a `branch`")));
            }
            _ => {}
        }
        let dir = ctx.path(&c.path).map_err(bad)?;
        if dir.to_str().is_none() {
            return Err(bad(format!("{at}: path `{}` is not UTF-8", dir.display())));
        }
        if !Path::new(&c.path)
            .components()
            .any(|p| matches!(p, Component::Normal(_)))
        {
            return Err(bad(format!(
                "{at}: path `{}` is the work directory itself; use a subdirectory such as `./src`",
                c.path
            )));
        }
        if let Some(other) = plans.iter().find(|p| overlaps(&p.dir, &dir)) {
            return Err(bad(format!(
                "{at}: path `{}` overlaps `{}`",
                c.path, other.path
            )));
        }
        for entry in &c.sparse {
            let clean = entry.trim_matches('/');
            let escapes = clean.is_empty()
                || Path::new(clean)
                    .components()
                    .any(|p| !matches!(p, Component::Normal(_)));
            if escapes {
                return Err(bad(format!(
                    "{at}: sparse entry `{entry}` must be a directory inside the repository, e.g. `overlays`"
                )));
            }
        }
        plans.push(Plan {
            path: c.path.clone(),
            dir,
            target,
            sparse: c
                .sparse
                .iter()
                .map(|e| e.trim_matches('/').to_owned())
                .collect(),
        });
    }
    Ok(plans)
}

/// Whether one path is the other or inside it (after dropping `.` components).
fn overlaps(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| {
        p.components()
            .filter(|c| *c != Component::CurDir)
            .collect::<PathBuf>()
    };
    let (a, b) = (norm(a), norm(b));
    a.starts_with(&b) || b.starts_with(&a)
}

/// What the checkouts need of the mirror: the refs they name (full names) and the commits
/// (full ids); `None` when a commit is not named by its full id (only a whole fetch can
/// tell what it is).
fn needs(plans: &[Plan]) -> Option<(Vec<String>, Vec<String>)> {
    let (mut refs, mut commits) = (Vec::new(), Vec::new());
    for plan in plans {
        match &plan.target {
            Target::Commit(id) => {
                if !crate::git::is_full_id(id) {
                    return None;
                }
                commits.push(id.clone());
            }
            Target::Branch { name, .. } => refs.push(format!("refs/heads/{name}")),
            Target::Tag(tag) => refs.push(format!("refs/tags/{tag}")),
        }
    }
    Some((refs, commits))
}

/// The commit to check out (`None`: start an orphan branch), or what is missing.
async fn resolve(
    git: &Git,
    mirror: &Path,
    target: &Target,
    url: &str,
) -> Result<Result<Option<String>, String>, GitError> {
    let (rev, missing) = match target {
        Target::Commit(c) => (c.clone(), format!("commit `{c}` does not exist in `{url}`")),
        Target::Tag(t) => (
            format!("refs/tags/{t}"),
            format!("tag `{t}` does not exist in `{url}`"),
        ),
        Target::Branch { name, create } => {
            let found = git.resolve(mirror, &format!("refs/heads/{name}")).await?;
            return Ok(match (found, create) {
                (Some(sha), _) => Ok(Some(sha)),
                (None, true) => Ok(None),
                (None, false) => Err(format!(
                    "branch `{name}` does not exist in `{url}`; hint: set `create: true` to start it as an empty branch"
                )),
            });
        }
    };
    Ok(git.resolve(mirror, &rev).await?.map(Some).ok_or(missing))
}

/// How a checkout came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Added anew to the mirror, every file written.
    CheckedOut,
    /// The worktree already at the path (a resumed promotion), reset and cleaned.
    Reused,
    /// The Stage's warm worktree from its previous promotion, moved here and updated in
    /// place: only the files that differ are written.
    Warm,
}

impl How {
    fn as_str(self) -> &'static str {
        match self {
            How::CheckedOut => "checked out",
            How::Reused => "reused",
            How::Warm => "reused warm worktree of",
        }
    }
}

/// Makes `dir` a clean worktree of `mirror` at `want` (or an empty orphan), from the warm
/// `slot` when there is one and nothing is at `dir` yet; says how.
async fn ensure_worktree(
    git: &Git,
    mirror: &Path,
    dir: &Path,
    want: Option<&str>,
    sparse: &[String],
    slot: Option<&Path>,
) -> Result<How, GitError> {
    let mut existing = inspect(git, mirror, dir).await?;
    let mut how = How::Reused;
    if let (Existing::Nothing, Some(sha), Some(slot)) = (&existing, want, slot)
        && crate::warm::take(git, mirror, slot, dir).await?
    {
        // `--no-deref`: an unborn orphan's HEAD names a branch that must never be made.
        git.run(dir, &["update-ref", "--no-deref", "HEAD", sha])
            .await?;
        // The last promotion's worktree-private refs (an unpushed `git-tag`) go too.
        let private = [
            "for-each-ref",
            "--format=delete %(refname)",
            "refs/worktree/",
        ];
        let stale = git.run(dir, &private).await?;
        if !stale.trim().is_empty() {
            git.run_with_input(dir, &["update-ref", "--stdin"], Some(&stale))
                .await?;
        }
        // A git the last promotion's abort killed may have left the index locked; nothing
        // runs in a parked worktree, so the lock is stale.
        let lock = crate::git::private_git_dir(git, dir)
            .await?
            .join("index.lock");
        let _ = tokio::fs::remove_file(&lock).await;
        existing = Existing::Worktree(want.map(str::to_string));
        how = How::Warm;
    }
    if existing == Existing::Worktree(want.map(str::to_string)) {
        if want.is_some() {
            checkout_files(git, dir, sparse).await?;
        } else {
            git.run(dir, &["read-tree", "--empty"]).await?;
        }
        git.run(dir, &["clean", "-q", "-ffdx"]).await?;
        return Ok(how);
    }
    register(git, mirror, dir, existing, want).await?;
    // Files are checked out outside the mirror lock, so checkouts run in parallel.
    if want.is_some() {
        checkout_files(git, dir, sparse).await?;
    }
    Ok(How::CheckedOut)
}

/// Registers `dir` as a worktree of `mirror` at `want` (`None`: an empty orphan), replacing
/// what `existing` found there, while holding the mirror's lock.
///
/// The registration runs in a task of its own and finishes even when the promotion is
/// aborted meanwhile: dropping the step would kill git half-way through
/// `git worktree add`, leave `<mirror>/worktrees/<id>` half made and, while the killed
/// git still wrote, let the next registration read it unlocked.
async fn register(
    git: &Git,
    mirror: &Path,
    dir: &Path,
    existing: Existing,
    want: Option<&str>,
) -> Result<(), GitError> {
    let (git, mirror, dir) = (git.clone(), mirror.to_owned(), dir.to_owned());
    let want = want.map(str::to_owned);
    let task = tokio::spawn(async move {
        let _mirror = MirrorLocks::global().lock(&mirror).await;
        let worktree = |args: &[&'static str]| {
            let mut all = vec!["--git-dir", path_str(&mirror), "worktree"];
            all.extend_from_slice(args);
            all
        };
        match existing {
            Existing::Worktree(_) => {
                let mut args = worktree(&["remove", "--force", "--force"]);
                args.push(path_str(&dir));
                if git.run(&mirror, &args).await.is_err() {
                    remove_path(&dir).await?;
                }
            }
            Existing::Other => remove_path(&dir).await?,
            Existing::Nothing => {}
        }
        // Forget worktrees whose directories are gone (old promotions' work dirs).
        git.run(&mirror, &worktree(&["prune"])).await?;
        // `-f` replaces a stale registration of this very path.
        let mut args = worktree(&["add", "-q", "-f", "--no-checkout", "--detach"]);
        let Some(sha) = want else {
            return register_orphan(&git, &mirror, &dir, args).await;
        };
        args.extend([path_str(&dir), sha.as_str()]);
        git.run(&mirror, &args).await.map(drop)
    });
    task.await.map_err(|e| GitError::Io {
        what: "register the worktree".into(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// Registers `dir` as an empty orphan worktree of `mirror`, on any git (`worktree add
/// --orphan` came in git 2.42; Debian 12 has 2.39): the worktree is added detached at an
/// empty root commit, then its HEAD names an unborn branch and its index is emptied. The
/// root commit has fixed author, committer and dates, so it is the same object every time
/// (written once into the mirror, referenced by nothing). The unborn branch only names
/// HEAD until the first commit, which `git-commit` detaches: it never becomes a branch in
/// the shared mirror.
async fn register_orphan(
    git: &Git,
    mirror: &Path,
    dir: &Path,
    mut add: Vec<&str>,
) -> Result<(), GitError> {
    const ROOT_IDENTITY: [(&str, &str); 6] = [
        ("GIT_AUTHOR_NAME", "Dray"),
        ("GIT_AUTHOR_EMAIL", "dray@localhost"),
        ("GIT_AUTHOR_DATE", "1970-01-01T00:00:00Z"),
        ("GIT_COMMITTER_NAME", "Dray"),
        ("GIT_COMMITTER_EMAIL", "dray@localhost"),
        ("GIT_COMMITTER_DATE", "1970-01-01T00:00:00Z"),
    ];
    let empty_tree = git.run_with_input(mirror, &["mktree"], Some("")).await?;
    let commit_tree = ["commit-tree", empty_tree.trim(), "-m", "dray: empty root"];
    let output = git
        .output_env(mirror, &commit_tree, None, &ROOT_IDENTITY)
        .await?;
    if !output.status.success() {
        return Err(git.failure(&commit_tree, &output));
    }
    let root = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    add.extend([path_str(dir), root.as_str()]);
    git.run(mirror, &add).await?;
    let unborn = format!("refs/heads/dray/unborn/{:016x}", path_hash(dir));
    git.run(dir, &["symbolic-ref", "HEAD", &unborn]).await?;
    git.run(dir, &["read-tree", "--empty"]).await.map(drop)
}

/// Writes the worktree's files from its HEAD: all of them, or only the `sparse`
/// directories; only files that differ from the index are written, so a warm worktree
/// costs what changed. The sparse setting is passed per command and the pattern file lives
/// in this worktree's own git directory, so the shared mirror's configuration is untouched.
/// A worktree that was sparse before and is not now is widened first (its pattern file is
/// set to everything, then removed), so no directory stays missing.
async fn checkout_files(git: &Git, dir: &Path, sparse: &[String]) -> Result<(), GitError> {
    let file = crate::git::private_git_dir(git, dir)
        .await?
        .join("info/sparse-checkout");
    let io = |source| GitError::Io {
        what: format!("write `{}`", file.display()),
        source,
    };
    let was_sparse = tokio::fs::try_exists(&file).await.unwrap_or(false);
    if sparse.is_empty() && !was_sparse {
        return git.run(dir, &["reset", "-q", "--hard"]).await.map(drop);
    }
    let patterns: String = if sparse.is_empty() {
        "/*\n".to_owned()
    } else {
        sparse.iter().map(|d| format!("/{d}/\n")).collect()
    };
    if let Some(parent) = file.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(io)?;
    }
    tokio::fs::write(&file, patterns).await.map_err(io)?;
    git.run(
        dir,
        &[
            "-c",
            "core.sparseCheckout=true",
            "-c",
            "core.sparseCheckoutCone=false",
            "reset",
            "-q",
            "--hard",
        ],
    )
    .await?;
    if sparse.is_empty() {
        tokio::fs::remove_file(&file).await.map_err(io)?;
    }
    Ok(())
}

fn path_hash(path: &Path) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish()
}

/// `path` as an argument; paths are checked to be UTF-8 before any git runs.
fn path_str(path: &Path) -> &str {
    path.to_str().unwrap_or(".invalid-non-utf8-path")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::testing::{MirrorRepos, bare_remote, failed, git, git_context, outputs, push_files};

    struct World {
        _dir: tempfile::TempDir,
        work: PathBuf,
        url: String,
        repos: Arc<MirrorRepos>,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = bare_remote(dir.path(), "config.git");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        World {
            work,
            url,
            repos: Arc::new(MirrorRepos::new()),
            _dir: dir,
        }
    }

    #[tokio::test]
    async fn clones_a_commit_and_starts_an_orphan_branch_idempotently() {
        let w = world();
        let first = push_files(&w.url, "main", &[("app/a.yaml", "v: 1\n")], "one");
        let _second = push_files(&w.url, "main", &[("app/a.yaml", "v: 2\n")], "two");
        let ctx = git_context(&w.work, w.repos.clone());
        let config = json!({
            "repoURL": w.url,
            "checkout": [
                {"commit": first, "path": "./src"},
                {"branch": "stage/dev", "create": true, "path": "./out"},
            ],
        });
        let outcome = GitClone.run(&ctx, config.clone()).await;
        let StepOutcome::Succeeded { outputs, state, .. } = outcome.clone() else {
            panic!("{outcome:?}")
        };
        assert_eq!(outputs["commits"], json!({"./src": first, "./out": null}));
        assert!(outputs.get("commit").is_none());
        assert_eq!(state.unwrap()["commits"]["./src"], json!(first));
        let src = w.work.join("src");
        let out = w.work.join("out");
        assert_eq!(git(&src, &["rev-parse", "HEAD"]), first);
        assert_eq!(
            std::fs::read_to_string(src.join("app/a.yaml")).unwrap(),
            "v: 1\n"
        );
        // Detached, so the shared mirror's branches are never checked out.
        assert_eq!(git(&src, &["rev-parse", "--abbrev-ref", "HEAD"]), "HEAD");
        let names: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(".git")]);
        // A worktree of the mirror, not a clone.
        let common = git(
            &src,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        );
        let mirror = ctx.repos.fetch(&w.url, None).await.unwrap();
        assert_eq!(
            std::fs::canonicalize(common).unwrap(),
            std::fs::canonicalize(&mirror).unwrap()
        );

        // Re-run after a crash, with leftovers in both worktrees: reused and cleaned.
        std::fs::write(src.join("app/a.yaml"), "dirty").unwrap();
        std::fs::write(src.join("junk"), "junk").unwrap();
        std::fs::write(out.join("half-rendered.yaml"), "x").unwrap();
        let again = GitClone.run(&ctx, config).await;
        assert_eq!(outputs, crate::testing::outputs(again));
        assert_eq!(
            std::fs::read_to_string(src.join("app/a.yaml")).unwrap(),
            "v: 1\n"
        );
        assert!(!src.join("junk").exists());
        assert!(!out.join("half-rendered.yaml").exists());
        let list = git(&mirror, &["worktree", "list", "--porcelain"]);
        assert_eq!(list.matches("worktree ").count(), 3, "{list}"); // the mirror + 2
    }

    #[tokio::test]
    async fn a_branch_checks_out_its_head_and_a_changed_path_is_replaced() {
        let w = world();
        let one = push_files(&w.url, "stage/dev", &[("a", "1")], "one");
        let ctx = git_context(&w.work, w.repos.clone());
        let config =
            json!({"repoURL": w.url, "checkout": [{"branch": "stage/dev", "path": "out"}]});
        let got = outputs(GitClone.run(&ctx, config.clone()).await);
        assert_eq!(got["commit"], json!(one));
        assert_eq!(got["commits"], json!({"out": one}));

        // The branch moved: the worktree is checked out again at the new head.
        let two = push_files(&w.url, "stage/dev", &[("a", "2")], "two");
        let got = outputs(GitClone.run(&ctx, config.clone()).await);
        assert_eq!(got["commit"], json!(two));
        assert_eq!(git(&w.work.join("out"), &["rev-parse", "HEAD"]), two);

        // Something else at the path (not a worktree) is replaced.
        std::fs::remove_dir_all(w.work.join("out")).unwrap();
        std::fs::create_dir_all(w.work.join("out/stuff")).unwrap();
        let got = outputs(GitClone.run(&ctx, config).await);
        assert_eq!(got["commit"], json!(two));
        assert!(!w.work.join("out/stuff").exists());
        assert_eq!(std::fs::read_to_string(w.work.join("out/a")).unwrap(), "2");
    }

    #[tokio::test]
    async fn tags_resolve_and_missing_refs_fail_with_a_hint() {
        let w = world();
        let one = push_files(&w.url, "main", &[("a", "1")], "one");
        let scratch = tempfile::tempdir().unwrap();
        git(scratch.path(), &["init", "-q"]);
        git(scratch.path(), &["fetch", "-q", &w.url, "main"]);
        git(scratch.path(), &["tag", "v1.0.0", "FETCH_HEAD"]);
        git(scratch.path(), &["push", "-q", &w.url, "refs/tags/v1.0.0"]);
        let ctx = git_context(&w.work, w.repos.clone());
        let got = outputs(
            GitClone
                .run(
                    &ctx,
                    json!({"repoURL": w.url, "checkout": [{"tag": "v1.0.0", "path": "t"}]}),
                )
                .await,
        );
        assert_eq!(got["commit"], json!(one));

        let cases = [
            (
                json!({"branch": "stage/prod", "path": "p"}),
                "branch `stage/prod` does not exist",
            ),
            (json!({"tag": "v9", "path": "p"}), "tag `v9` does not exist"),
            (
                json!({"commit": "deadbeefdeadbeef", "path": "p"}),
                "commit `deadbeefdeadbeef` does not exist",
            ),
        ];
        for (checkout, want) in cases {
            let reason = failed(
                GitClone
                    .run(&ctx, json!({"repoURL": w.url, "checkout": [checkout]}))
                    .await,
            );
            assert!(reason.contains(want), "{reason}");
        }
        let reason = failed(
            GitClone
                .run(
                    &ctx,
                    json!({"repoURL": w.url, "checkout": [{"branch": "stage/prod", "path": "p"}]}),
                )
                .await,
        );
        assert!(reason.contains("hint: set `create: true`"), "{reason}");
    }

    #[tokio::test]
    async fn a_sparse_checkout_writes_only_the_named_directories() {
        let w = world();
        let files = [("base/a.yaml", "a: 1\n"), ("filler/x.yaml", "x: 1\n")];
        let head = push_files(&w.url, "main", &files, "one");
        let ctx = git_context(&w.work, w.repos.clone());
        let config = json!({"repoURL": w.url, "checkout": [{"commit": head, "path": "src", "sparse": ["base"]}]});
        let got = outputs(GitClone.run(&ctx, config.clone()).await);
        assert_eq!(got["commit"], json!(head));
        let src = w.work.join("src");
        assert!(src.join("base/a.yaml").is_file());
        assert!(
            !src.join("filler").exists(),
            "directories outside `sparse` are not written"
        );
        // A re-run reuses the worktree and keeps it sparse.
        let _ = outputs(GitClone.run(&ctx, config).await);
        assert!(src.join("base/a.yaml").is_file() && !src.join("filler").exists());
    }

    #[tokio::test]
    async fn bad_configs_fail_before_touching_git() {
        let work = tempfile::tempdir().unwrap();
        // The default test context refuses every fetch: a bad config must fail before.
        let ctx = crate::testing::context(work.path());
        let url = "https://git.example.com/c.git";
        let cases = [
            (
                json!({"repoURL": url, "checkout": []}),
                "`checkout` is empty",
            ),
            (
                json!({"repoURL": url, "checkout": [{"path": "a"}]}),
                "exactly one of",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "b", "tag": "t", "path": "a"}]}),
                "exactly one of",
            ),
            (
                json!({"repoURL": url, "checkout": [{"tag": "t", "create": true, "path": "a"}]}),
                "`create` only applies",
            ),
            (
                json!({"repoURL": url, "checkout": [{"commit": "xyz", "path": "a"}]}),
                "is not a commit id",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "-f", "path": "a"}]}),
                "not a valid git ref name",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "b", "path": "."}]}),
                "the work directory itself",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "b", "path": "../x"}]}),
                "leaves the promotion's work directory",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "b", "path": "a"}, {"branch": "c", "path": "./a/b"}]}),
                "overlaps",
            ),
            (
                json!({"repoURL": url, "checkout": [{"branch": "b", "path": "a", "depth": 1}]}),
                "unknown field `depth`",
            ),
            (
                json!({"repoUrl": url, "checkout": []}),
                "unknown field `repoUrl`",
            ),
        ];
        for (config, want) in cases {
            let reason = failed(GitClone.run(&ctx, config.clone()).await);
            assert!(reason.contains(want), "{config}: {reason}");
        }
        let reason = crate::testing::errored(
            GitClone
                .run(
                    &ctx,
                    json!({"repoURL": url, "checkout": [{"branch": "b", "path": "a"}]}),
                )
                .await,
        );
        assert!(reason.contains("cannot fetch"), "{reason}");
    }

    #[tokio::test]
    async fn a_half_made_registration_left_by_a_killed_git_is_cleared() {
        let w = world();
        let one = push_files(&w.url, "main", &[("a", "1")], "one");
        let ctx = git_context(&w.work, w.repos.clone());
        let config =
            |path: &str| json!({"repoURL": w.url, "checkout": [{"commit": one, "path": path}]});
        outputs(GitClone.run(&ctx, config("first")).await);
        // What `git worktree add` leaves when it is killed between creating `commondir` and
        // writing it: locked as initializing, `commondir` empty.
        let mirror = ctx.repos.fetch(&w.url, None).await.unwrap();
        let junk = mirror.join("worktrees/out");
        std::fs::create_dir_all(&junk).unwrap();
        std::fs::write(junk.join("locked"), "initializing").unwrap();
        std::fs::write(
            junk.join("gitdir"),
            format!("{}\n", w.work.join("out/.git").display()),
        )
        .unwrap();
        std::fs::write(junk.join("commondir"), "").unwrap();
        let got = outputs(GitClone.run(&ctx, config("second")).await);
        assert_eq!(got["commit"], json!(one));
        assert!(!junk.exists(), "the half-made registration is still there");
        assert_eq!(
            std::fs::read_to_string(w.work.join("second/a")).unwrap(),
            "1"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_aborted_clone_still_finishes_registering_its_worktree() {
        let w = world();
        let one = push_files(&w.url, "main", &[("a", "1")], "one");
        let mut ctx = git_context(&w.work, w.repos.clone());
        let mirror = ctx.repos.fetch(&w.url, None).await.unwrap();
        // A git that, at `worktree add`, says so and waits to be let go.
        let gate = tempfile::tempdir().unwrap();
        let (started, go) = (gate.path().join("started"), gate.path().join("go"));
        for fifo in [&started, &go] {
            let made = std::process::Command::new("mkfifo")
                .arg(fifo)
                .status()
                .unwrap();
            assert!(made.success());
        }
        let wrapper = gate.path().join("git");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\ncase \"$*\" in *' worktree add '*) echo > '{}'; read _ < '{}';; esac\nexec git \"$@\"\n",
                started.display(),
                go.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        ctx.tools.git = wrapper;
        let config = json!({"repoURL": w.url, "checkout": [{"commit": one, "path": "src"}]});

        // Threads, not blocking tasks: a FIFO nobody opens any more must not keep the
        // test's runtime from ending when the test fails.
        let (tell_started, has_started) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || tell_started.send(std::fs::read(started).is_ok()));
        let run = GitClone.run(&ctx, config.clone());
        tokio::select! {
            _ = run => panic!("the clone ended before `git worktree add`"),
            started = has_started => assert!(started.unwrap()),
        }
        // The step was dropped (the promotion aborted) while git registers the worktree.
        let (tell_let_go, let_go) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || tell_let_go.send(std::fs::write(go, "\n").is_ok()));
        let let_go = tokio::time::timeout(std::time::Duration::from_secs(60), let_go).await;
        assert!(
            matches!(let_go, Ok(Ok(true))),
            "the aborted step killed git half-way through `git worktree add`"
        );
        let _registered = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            MirrorLocks::global().lock(&mirror),
        )
        .await
        .expect("the registration never released the mirror's lock");
        let list = git(&mirror, &["worktree", "list", "--porcelain"]);
        assert!(
            list.contains(&*w.work.join("src").to_string_lossy()),
            "{list}"
        );
        drop(_registered);
        ctx.tools.git = "git".into();
        let got = outputs(GitClone.run(&ctx, config).await);
        assert_eq!(got["commit"], json!(one));
    }
}
