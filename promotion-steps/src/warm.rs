//! Warm worktrees: the checkouts `git-clone` made for one promotion of a Stage, kept for
//! the Stage's next promotion so that it only writes the files that changed.
//!
//! Owns: the Stage's warm directory (the engine names it, [`crate::StepContext::warm_dir`]),
//! its slots — one worktree each, keyed by (mirror, checkout path), at
//! `<warm_dir>/<sha256 of both, 32 hex>` — moving a worktree into a slot at the end of a
//! promotion ([`park_worktrees`]) and out of it into the next promotion's work directory
//! ([`take`]), and telling a sound worktree of a mirror from anything else ([`inspect`]).
//! It does not decide what a taken worktree is updated to: that is `git-clone`'s.
//!
//! Every move is `git worktree move` under the mirror's lock ([`MirrorLocks`]), in a task of
//! its own so that an aborted promotion cannot kill git half-way. A move killed anyway (the
//! process died) leaves a worktree whose registration points elsewhere: [`inspect`] calls
//! that `Other`, and it is removed and checked out anew. The slots a promotion did not take
//! are removed when it parks its own, so a Stage's warm directory holds at most the
//! checkouts of its last promotion.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::MirrorLocks;
use crate::git::{Git, GitError, read_record};

/// What is at a path that should be a worktree of a mirror.
#[derive(Debug, PartialEq)]
pub(crate) enum Existing {
    Nothing,
    /// A worktree of this mirror with this HEAD (`None`: unborn).
    Worktree(Option<String>),
    /// Something else: a plain directory, a file, another repository's worktree, or a
    /// worktree whose registration in the mirror names another directory.
    Other,
}

/// What is at `dir`, for `mirror`.
pub(crate) async fn inspect(git: &Git, mirror: &Path, dir: &Path) -> Result<Existing, GitError> {
    let Ok(meta) = tokio::fs::symlink_metadata(dir).await else {
        return Ok(Existing::Nothing);
    };
    if !meta.is_dir() || tokio::fs::symlink_metadata(dir.join(".git")).await.is_err() {
        return Ok(Existing::Other);
    }
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
        "--show-toplevel",
        "--git-dir",
    ];
    let out = git.output(dir, &args, None).await?;
    if !out.status.success() {
        return Ok(Existing::Other);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let same = |a: Option<&str>, b: &Path| {
        let a = a.and_then(|a| canonical(Path::new(a)));
        a.is_some() && a == canonical(b)
    };
    if !same(lines.next(), mirror) || !same(lines.next(), dir) {
        return Ok(Existing::Other);
    }
    // The registration must name this very directory: a worktree moved by hand (or by a
    // killed move) shares its registration with whatever directory it names.
    let Some(private) = lines.next() else {
        return Ok(Existing::Other);
    };
    let named = tokio::fs::read_to_string(Path::new(private).join("gitdir"))
        .await
        .unwrap_or_default();
    if !same(Some(named.trim()), &dir.join(".git")) {
        return Ok(Existing::Other);
    }
    Ok(Existing::Worktree(git.resolve(dir, "HEAD").await?))
}

/// The slot of the checkout at `relative` (to the work directory) of `mirror`.
pub(crate) fn slot(warm_dir: &Path, mirror: &Path, relative: &Path) -> PathBuf {
    let relative: Vec<_> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy()),
            _ => None,
        })
        .collect();
    let mut hash = Sha256::new();
    hash.update(mirror.to_string_lossy().as_bytes());
    hash.update([0]);
    hash.update(relative.join("/").as_bytes());
    let name: String = hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    warm_dir.join(name)
}

/// Moves the worktree in `slot` to `dir` (which does not exist) if it is a sound worktree
/// of `mirror`; returns whether it did. A slot holding anything else is removed.
pub(crate) async fn take(
    git: &Git,
    mirror: &Path,
    slot: &Path,
    dir: &Path,
) -> Result<bool, GitError> {
    let (git, slot, dir) = (git.clone(), slot.to_owned(), dir.to_owned());
    locked(mirror, "take the warm worktree", |mirror| async move {
        match inspect(&git, &mirror, &slot).await? {
            Existing::Nothing => return Ok(false),
            Existing::Other => {
                remove_path(&slot).await?;
                return Ok(false);
            }
            Existing::Worktree(_) => {}
        }
        create_parent(&dir).await?;
        if move_worktree(&git, &mirror, &slot, &dir).await.is_ok() {
            return Ok(true);
        }
        remove_worktree(&git, &mirror, &slot).await?;
        Ok(false)
    })
    .await
}

/// Moves every worktree `git-clone` made under `work_dir` into its slot in `warm_dir`, for
/// the Stage's next promotion, after removing the slots this promotion did not take.
/// Returns how many it parked; what cannot be parked is logged and stays in `work_dir`
/// (the caller removes it; the mirror's next `worktree prune` forgets it).
pub async fn park_worktrees(git_bin: &Path, work_dir: &Path, warm_dir: &Path) -> usize {
    let git = Git::at(git_bin);
    remove_slots(&git, warm_dir).await;
    let mut parked = 0;
    for dir in crate::preview::worktrees(work_dir).await {
        let Ok(Some(record)) = read_record(&git, &dir).await else {
            continue;
        };
        let Some(mirror) = record.mirror else {
            continue;
        };
        let relative = dir.strip_prefix(work_dir).unwrap_or(&dir);
        let slot = slot(warm_dir, &mirror, relative);
        match park(&git, &mirror, &dir, &slot).await {
            Ok(true) => parked += 1,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(worktree = %dir.display(), %error, "cannot keep a worktree warm")
            }
        }
    }
    parked
}

/// Removes a Stage's warm directory and its worktrees' registrations (the Stage is gone).
pub async fn remove_warm_dir(git_bin: &Path, warm_dir: &Path) {
    remove_slots(&Git::at(git_bin), warm_dir).await;
    if let Err(error) = tokio::fs::remove_dir_all(warm_dir).await
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %warm_dir.display(), %error, "cannot remove a warm directory");
    }
}

async fn park(git: &Git, mirror: &Path, dir: &Path, slot: &Path) -> Result<bool, GitError> {
    let (git, dir, slot) = (git.clone(), dir.to_owned(), slot.to_owned());
    locked(mirror, "park the worktree", |mirror| async move {
        if !matches!(inspect(&git, &mirror, &dir).await?, Existing::Worktree(_)) {
            return Ok(false);
        }
        create_parent(&slot).await?;
        remove_path(&slot).await?;
        move_worktree(&git, &mirror, &dir, &slot).await?;
        Ok(true)
    })
    .await
}

/// Removes every slot in `warm_dir`, and its registration in its mirror.
async fn remove_slots(git: &Git, warm_dir: &Path) {
    let Ok(mut entries) = tokio::fs::read_dir(warm_dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let slot = entry.path();
        let mirror = match read_record(git, &slot).await {
            Ok(Some(record)) => record.mirror,
            _ => None,
        };
        let removed = match mirror {
            Some(mirror) => {
                let (git, slot) = (git.clone(), slot.clone());
                locked(&mirror, "remove a warm worktree", |mirror| async move {
                    match inspect(&git, &mirror, &slot).await? {
                        Existing::Worktree(_) => remove_worktree(&git, &mirror, &slot).await,
                        _ => remove_path(&slot).await,
                    }
                })
                .await
            }
            None => remove_path(&slot).await,
        };
        if let Err(error) = removed {
            tracing::warn!(slot = %slot.display(), %error, "cannot remove a warm worktree");
        }
    }
}

/// Runs `work` (given the mirror's path) holding `mirror`'s lock, in a task of its own:
/// dropping the caller (an aborted promotion) cannot kill git half-way through a move and
/// leave a half-registered worktree (see `git-clone`'s `register`).
async fn locked<T, F>(
    mirror: &Path,
    what: &str,
    work: impl FnOnce(PathBuf) -> F,
) -> Result<T, GitError>
where
    F: std::future::Future<Output = Result<T, GitError>> + Send + 'static,
    T: Send + 'static,
{
    let mirror = mirror.to_owned();
    // A future does nothing until polled: `job` runs only under the lock.
    let job = work(mirror.clone());
    let task = tokio::spawn(async move {
        let _mirror = MirrorLocks::global().lock(&mirror).await;
        job.await
    });
    task.await.map_err(|e| GitError::Io {
        what: what.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// Creates the directory `path` will be in.
async fn create_parent(path: &Path) -> Result<(), GitError> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|source| GitError::Io {
            what: format!("create `{}`", parent.display()),
            source,
        })
}

async fn move_worktree(git: &Git, mirror: &Path, from: &Path, to: &Path) -> Result<(), GitError> {
    let args = [
        "--git-dir",
        path_str(mirror),
        "worktree",
        "move",
        path_str(from),
        path_str(to),
    ];
    git.run(mirror, &args).await.map(drop)
}

async fn remove_worktree(git: &Git, mirror: &Path, dir: &Path) -> Result<(), GitError> {
    let args = [
        "--git-dir",
        path_str(mirror),
        "worktree",
        "remove",
        "--force",
        "--force",
        path_str(dir),
    ];
    if git.run(mirror, &args).await.is_err() {
        remove_path(dir).await?;
    }
    Ok(())
}

pub(crate) async fn remove_path(path: &Path) -> Result<(), GitError> {
    let result = match tokio::fs::symlink_metadata(path).await {
        Ok(meta) if meta.is_dir() => tokio::fs::remove_dir_all(path).await,
        Ok(_) => tokio::fs::remove_file(path).await,
        Err(_) => Ok(()),
    };
    result.map_err(|source| GitError::Io {
        what: format!("remove `{}`", path.display()),
        source,
    })
}

/// `path` as an argument; paths are checked to be UTF-8 before any git runs.
fn path_str(path: &Path) -> &str {
    path.to_str().unwrap_or(".invalid-non-utf8-path")
}

#[cfg(test)]
#[path = "warm_tests.rs"]
mod tests;
