//! Warm worktrees through `git-clone` with real git: a worktree reused from its slot ends
//! with exactly the new commit's tree, whatever the previous promotion left in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::testing::{MirrorRepos, bare_remote, context_with_log, git, outputs, push_files};
use crate::{StepContext, builtin_steps};

struct World {
    root: tempfile::TempDir,
    url: String,
    repos: Arc<MirrorRepos>,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        let url = bare_remote(root.path(), "config.git");
        World {
            url,
            repos: Arc::new(MirrorRepos::new()),
            root,
        }
    }

    fn warm(&self) -> PathBuf {
        self.root.path().join("warm/dev")
    }

    /// A fresh work directory for promotion `name`, and its log.
    fn promotion(&self, name: &str) -> (StepContext, Arc<Mutex<Vec<String>>>) {
        let work = self.root.path().join("work").join(name);
        std::fs::create_dir_all(&work).unwrap();
        let (mut ctx, lines) = context_with_log(&work);
        ctx.repos = self.repos.clone();
        ctx.warm_dir = Some(self.warm());
        (ctx, lines)
    }

    /// Runs `git-clone` with `checkout` in `ctx`; returns its outputs and log.
    async fn clone(
        &self,
        ctx: &StepContext,
        lines: &Mutex<Vec<String>>,
        checkout: Value,
    ) -> (serde_json::Map<String, Value>, String) {
        let step = builtin_steps().get("git-clone").unwrap();
        let config = json!({"repoURL": self.url, "checkout": [checkout]});
        let got = outputs(step.run(ctx, config).await);
        let log = std::mem::take(&mut *lines.lock().unwrap()).join("\n");
        (got, log)
    }

    /// Ends a promotion as the engine does: park its worktrees, remove its work directory.
    async fn end(&self, ctx: &StepContext) -> usize {
        let parked = park_worktrees(Path::new("git"), &ctx.work_dir, &self.warm()).await;
        std::fs::remove_dir_all(&ctx.work_dir).unwrap();
        parked
    }

    fn mirror_worktrees(&self) -> usize {
        let mirror = only_child(self.repos.root());
        let list = git(&mirror, &["worktree", "list", "--porcelain"]);
        list.matches("worktree ").count() - 1
    }
}

fn only_child(dir: &Path) -> PathBuf {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.pop().unwrap()
}

/// Replaces the whole tree of `branch` with `files`; returns the new commit.
fn push_tree(url: &str, branch: &str, files: &[(&str, &str)], message: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    git(dir, &["init", "-q", "-b", branch]);
    git(dir, &["fetch", "-q", url, &format!("refs/heads/{branch}")]);
    git(dir, &["reset", "-q", "--hard", "FETCH_HEAD"]);
    git(dir, &["rm", "-rq", "."]);
    for (path, content) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(
        dir,
        &["push", "-q", url, &format!("HEAD:refs/heads/{branch}")],
    );
    git(dir, &["rev-parse", "HEAD"])
}

/// Every file under `dir` but `.git`, with its content.
fn files_on_disk(dir: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let relative = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if relative == ".git" {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else {
                found.insert(relative, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    found
}

/// The files of `commit` (from `git ls-tree -r`) under the `only` directories (all when
/// empty), with their content, read in `dir` (a worktree of the repository).
fn files_of(dir: &Path, commit: &str, only: &[&str]) -> BTreeMap<String, String> {
    git(dir, &["ls-tree", "-r", "--name-only", commit])
        .lines()
        .filter(|path| only.is_empty() || only.iter().any(|d| path.starts_with(&format!("{d}/"))))
        .map(|path| {
            let content = git(dir, &["show", &format!("{commit}:{path}")]);
            (path.to_owned(), content)
        })
        .collect()
}

#[tokio::test]
async fn a_warm_worktree_ends_with_exactly_the_new_commits_tree() {
    let w = World::new();
    let first = push_files(
        &w.url,
        "main",
        &[
            (".gitignore", "*.log"),
            ("app/a.yaml", "v: 1"),
            ("app/gone.yaml", "gone: 1"),
            ("app/kept.yaml", "kept: 1"),
            ("base/b.yaml", "b: 1"),
        ],
        "one",
    );
    let second = push_tree(
        &w.url,
        "main",
        &[
            (".gitignore", "*.log"),
            ("app/a.yaml", "v: 2"),
            ("app/kept.yaml", "kept: 1"),
            ("app/new.yaml", "new: 2"),
            ("base/b.yaml", "b: 1"),
        ],
        "two",
    );

    let (ctx, log) = w.promotion("p1");
    let (got, said) = w
        .clone(&ctx, &log, json!({"commit": first, "path": "./src"}))
        .await;
    assert_eq!(got["commit"], json!(first));
    assert!(said.contains("checked out"), "{said}");
    let src = ctx.work_dir.join("src");
    // What a render leaves: an untracked file, an ignored one, a changed tracked one.
    std::fs::write(src.join("app/untracked.yaml"), "u").unwrap();
    std::fs::write(src.join("render.log"), "ignored").unwrap();
    std::fs::write(src.join("app/kept.yaml"), "edited").unwrap();
    assert_eq!(w.end(&ctx).await, 1);
    assert_eq!(std::fs::read_dir(w.warm()).unwrap().count(), 1);

    let (ctx, log) = w.promotion("p2");
    let (got, said) = w
        .clone(&ctx, &log, json!({"commit": second, "path": "./src"}))
        .await;
    assert_eq!(got["commit"], json!(second));
    assert!(said.contains("reused warm worktree"), "{said}");
    let src = ctx.work_dir.join("src");
    assert_eq!(git(&src, &["rev-parse", "HEAD"]), second);
    assert_eq!(files_on_disk(&src), files_of(&src, &second, &[]));
    assert!(!src.join("app/gone.yaml").exists());
    assert_eq!(git(&src, &["status", "--porcelain", "--ignored"]), "");
    assert_eq!(
        std::fs::read_dir(w.warm()).unwrap().count(),
        0,
        "taken, not copied"
    );

    // A change of `sparse:` applies to a warm worktree, both ways.
    std::fs::write(src.join("base/left.yaml"), "x").unwrap();
    assert_eq!(w.end(&ctx).await, 1);
    let (ctx, log) = w.promotion("p3");
    let sparse = json!({"commit": second, "path": "./src", "sparse": ["base"]});
    let (_, said) = w.clone(&ctx, &log, sparse).await;
    assert!(said.contains("reused warm worktree"), "{said}");
    let src = ctx.work_dir.join("src");
    assert_eq!(files_on_disk(&src), files_of(&src, &second, &["base"]));
    assert_eq!(w.end(&ctx).await, 1);
    let (ctx, log) = w.promotion("p4");
    let (_, said) = w
        .clone(&ctx, &log, json!({"commit": first, "path": "./src"}))
        .await;
    assert!(said.contains("reused warm worktree"), "{said}");
    let src = ctx.work_dir.join("src");
    assert_eq!(files_on_disk(&src), files_of(&src, &first, &[]));
    assert_eq!(w.end(&ctx).await, 1);
    assert_eq!(w.mirror_worktrees(), 1, "one registration: the slot");
}

#[tokio::test]
async fn a_warm_branch_checkout_is_at_the_branchs_new_head() {
    let w = World::new();
    let one = push_files(&w.url, "stage/x", &[("app.yaml", "image: 1")], "one");
    let (ctx, log) = w.promotion("p1");
    let out = json!({"branch": "stage/x", "path": "./out"});
    let (got, _) = w.clone(&ctx, &log, out.clone()).await;
    assert_eq!(got["commit"], json!(one));
    // The promotion rendered and committed on the detached HEAD (as `git-commit` does).
    let dir = ctx.work_dir.join("out");
    std::fs::write(dir.join("app.yaml"), "image: 2").unwrap();
    git(&dir, &["commit", "-qam", "rendered"]);
    // And tagged it, unpushed (as `git-tag` does, in a worktree-private ref).
    git(&dir, &["update-ref", "refs/worktree/dray/tags/v1", "HEAD"]);
    assert_eq!(w.end(&ctx).await, 1);

    // The mirror's housekeeping leaves a parked worktree alone.
    let mirror = only_child(w.repos.root());
    git(&mirror, &["worktree", "prune"]);
    git(
        &mirror,
        &[
            "-c",
            "gc.worktreePruneExpire=now",
            "gc",
            "-q",
            "--prune=now",
        ],
    );
    let two = push_files(
        &w.url,
        "stage/x",
        &[("app.yaml", "image: 3"), ("b", "b")],
        "two",
    );
    let (ctx, log) = w.promotion("p2");
    let (got, said) = w.clone(&ctx, &log, out).await;
    assert_eq!(got["commit"], json!(two));
    assert!(said.contains("reused warm worktree"), "{said}");
    let dir = ctx.work_dir.join("out");
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), two);
    assert_eq!(git(&dir, &["rev-parse", "--abbrev-ref", "HEAD"]), "HEAD");
    assert_eq!(git(&dir, &["for-each-ref", "refs/worktree/"]), "");
    assert_eq!(files_on_disk(&dir), files_of(&dir, &two, &[]));
}

#[tokio::test]
async fn a_broken_slot_is_removed_and_the_checkout_made_anew() {
    let w = World::new();
    let one = push_files(&w.url, "main", &[("a", "1")], "one");
    let (ctx, log) = w.promotion("p1");
    w.clone(&ctx, &log, json!({"commit": one, "path": "src"}))
        .await;
    assert_eq!(w.end(&ctx).await, 1);
    // The slot's registration is lost (the mirror was re-cloned, or pruned by hand).
    let slot = only_child(&w.warm());
    let private = git(&slot, &["rev-parse", "--path-format=absolute", "--git-dir"]);
    std::fs::remove_dir_all(private).unwrap();
    std::fs::write(slot.join("junk"), "junk").unwrap();

    let (ctx, log) = w.promotion("p2");
    let (got, said) = w
        .clone(&ctx, &log, json!({"commit": one, "path": "src"}))
        .await;
    assert_eq!(got["commit"], json!(one));
    assert!(said.contains("checked out"), "{said}");
    assert!(!slot.exists());
    let src = ctx.work_dir.join("src");
    assert_eq!(files_on_disk(&src), files_of(&src, &one, &[]));

    // A slot whose worktree was moved by hand (its registration names another directory)
    // is not taken either: two directories would share one index.
    assert_eq!(w.end(&ctx).await, 1);
    let slot = only_child(&w.warm());
    let moved = w.root.path().join("moved");
    std::fs::rename(&slot, &moved).unwrap();
    git(&moved, &["worktree", "repair"]);
    let copy = std::process::Command::new("cp")
        .args(["-a", moved.to_str().unwrap(), slot.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copy.success());
    let (ctx, log) = w.promotion("p3");
    let (_, said) = w
        .clone(&ctx, &log, json!({"commit": one, "path": "src"}))
        .await;
    assert!(said.contains("checked out"), "{said}");
}

#[tokio::test]
async fn slots_the_last_promotion_did_not_use_are_removed_and_previews_stay_cold() {
    let w = World::new();
    let one = push_files(&w.url, "main", &[("a", "1")], "one");
    let (ctx, log) = w.promotion("p1");
    w.clone(&ctx, &log, json!({"commit": one, "path": "old"}))
        .await;
    assert_eq!(w.end(&ctx).await, 1);
    let (ctx, log) = w.promotion("p2");
    w.clone(&ctx, &log, json!({"commit": one, "path": "new"}))
        .await;
    assert_eq!(w.end(&ctx).await, 1);
    assert_eq!(std::fs::read_dir(w.warm()).unwrap().count(), 1);
    assert_eq!(
        w.mirror_worktrees(),
        1,
        "the unused slot's registration is gone"
    );

    // Without a warm directory (a preview) nothing is taken.
    let (mut ctx, log) = w.promotion("preview");
    ctx.warm_dir = None;
    let (_, said) = w
        .clone(&ctx, &log, json!({"commit": one, "path": "new"}))
        .await;
    assert!(said.contains("checked out"), "{said}");
    assert_eq!(std::fs::read_dir(w.warm()).unwrap().count(), 1);

    remove_warm_dir(Path::new("git"), &w.warm()).await;
    assert!(!w.warm().exists());
    assert_eq!(w.mirror_worktrees(), 1, "only the preview's own worktree");
}

/// A git an abort killed mid-`reset` leaves the worktree's index locked; parked so, the
/// next promotion's take removes the stale lock instead of failing on it.
#[tokio::test]
async fn a_stale_index_lock_in_a_parked_worktree_does_not_stop_the_next_checkout() {
    let w = World::new();
    let one = push_files(&w.url, "stage/x", &[("app.yaml", "image: 1")], "one");
    let (ctx, log) = w.promotion("p1");
    let out = json!({"branch": "stage/x", "path": "./out"});
    w.clone(&ctx, &log, out.clone()).await;
    let dir = ctx.work_dir.join("out");
    let private = git(&dir, &["rev-parse", "--path-format=absolute", "--git-dir"]);
    std::fs::write(Path::new(&private).join("index.lock"), "").unwrap();
    assert_eq!(w.end(&ctx).await, 1);
    let (ctx, log) = w.promotion("p2");
    let (got, said) = w.clone(&ctx, &log, out).await;
    assert!(said.contains("reused warm worktree"), "{said}");
    assert_eq!(got["commit"], json!(one));
}
