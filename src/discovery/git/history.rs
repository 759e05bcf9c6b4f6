//! Reading history from a mirror with `gix`: tag resolution, a commit's diff against its
//! first parent, first-parent logs of a stage branch and the metadata Freight records.
//! (The `NewestFromBranch` search is `git log` over the commit-graph: [`super::search`].)
//!
//! Blocking: call from `spawn_blocking`. Decides nothing about which commit wins beyond
//! applying [`PathFilter`] and skipping Dray's own commits; the strategies live in
//! [`super::GitDiscoverer`] and [`super::select`].

use gix::bstr::ByteSlice as _;
use gix::prelude::ObjectIdExt as _;

use super::select::{PathFilter, is_dray_commit};

/// What Freight needs to know about a commit.
#[derive(Clone, Debug)]
pub(crate) struct CommitInfo {
    /// The full commit id.
    pub(crate) id: String,
    /// The whole message.
    pub(crate) message: String,
    /// `Name <email>` of the author.
    pub(crate) author: String,
    /// `Name <email>` of the committer.
    pub(crate) committer: String,
    /// The committer time.
    pub(crate) committed_at: jiff::Timestamp,
}

impl CommitInfo {
    /// The first line of the message.
    pub(crate) fn subject(&self) -> String {
        self.message
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

type Result<T> = std::result::Result<T, String>;

fn err(e: impl std::error::Error + 'static) -> String {
    super::error::chain(&e)
}

/// The commits `ids`, in order; `None` when one is not in the mirror.
pub(crate) fn read_commits(
    repo: &gix::Repository,
    ids: &[String],
) -> Result<Option<Vec<CommitInfo>>> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Ok(commit) = repo.find_commit(parse_id(id)?) else {
            return Ok(None);
        };
        out.push(commit_info(&commit)?);
    }
    Ok(Some(out))
}

/// The commit a tag (`refs/tags/NAME` in the mirror) finally points to, with the time
/// that orders tags for `NewestTag`: the tagger's for annotated tags, else the commit's.
/// `None` when the tag is missing or points to something other than a commit.
pub(crate) fn resolve_tag(repo: &gix::Repository, tag: &str) -> Result<Option<(CommitInfo, i64)>> {
    let Some(mut reference) = repo
        .try_find_reference(&format!("refs/tags/{tag}"))
        .map_err(err)?
    else {
        return Ok(None);
    };
    let direct = reference.target().try_id().map(|id| id.to_owned());
    let Ok(peeled) = reference.peel_to_id() else {
        return Ok(None);
    };
    let Ok(commit) = repo.find_commit(peeled.detach()) else {
        return Ok(None);
    };
    let info = commit_info(&commit)?;
    let mut time = info.committed_at.as_second();
    if let Some(direct) = direct.filter(|d| *d != peeled.detach()) {
        let object = direct.attach(repo).object().map_err(err)?;
        if object.kind == gix::object::Kind::Tag
            && let Some(tagger) = object.into_tag().tagger().map_err(err)?
        {
            time = tagger.seconds();
        }
    }
    Ok(Some((info, time)))
}

/// Whether `commit` counts under `filter` (diffed against its first parent).
pub(crate) fn is_relevant(
    repo: &gix::Repository,
    commit: &CommitInfo,
    filter: &PathFilter,
) -> Result<bool> {
    if is_dray_commit(&commit.message) {
        return Ok(false);
    }
    if !filter.is_active() {
        return Ok(true);
    }
    let commit = repo.find_commit(parse_id(&commit.id)?).map_err(err)?;
    Ok(filter.is_relevant(paths(&changed_paths(repo, &commit)?)))
}

fn paths(list: &[String]) -> impl Iterator<Item = &str> {
    list.iter().map(String::as_str)
}

/// The files (never directories) a commit changed relative to its first parent; for a
/// root commit, every file it holds.
fn changed_paths(repo: &gix::Repository, commit: &gix::Commit<'_>) -> Result<Vec<String>> {
    let tree = commit.tree().map_err(err)?;
    let parent_tree = match commit.parent_ids().next() {
        Some(parent) => Some(
            parent
                .object()
                .map_err(err)?
                .try_into_commit()
                .map_err(err)?
                .tree()
                .map_err(err)?,
        ),
        None => None,
    };
    let changes = repo
        .diff_tree_to_tree(
            parent_tree.as_ref(),
            Some(&tree),
            gix::diff::Options::default(),
        )
        .map_err(err)?;
    Ok(changes
        .iter()
        .filter(|change| !change.entry_mode().is_tree())
        .map(|change| change.location().to_str_lossy().into_owned())
        .collect())
}

fn commit_info(commit: &gix::Commit<'_>) -> Result<CommitInfo> {
    let message = commit.message_raw_sloppy().to_str_lossy().into_owned();
    let author = commit.author().map_err(err)?;
    let author = format!(
        "{} <{}>",
        author.name.to_str_lossy().trim(),
        author.email.to_str_lossy().trim()
    );
    let committer = commit.committer().map_err(err)?;
    let committer = format!(
        "{} <{}>",
        committer.name.to_str_lossy().trim(),
        committer.email.to_str_lossy().trim()
    );
    let seconds = commit.time().map_err(err)?.seconds;
    let committed_at = jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    Ok(CommitInfo {
        id: commit.id.to_string(),
        message,
        author,
        committer,
        committed_at,
    })
}

fn parse_id(hex: &str) -> Result<gix::ObjectId> {
    gix::ObjectId::from_hex(hex.as_bytes()).map_err(err)
}

/// The first-parent history of `head`, newest first, at most `bound` commits, Dray's own
/// commits included (for the audit trail of a stage branch).
pub(crate) fn first_parent_log(
    repo: &gix::Repository,
    head: &str,
    bound: usize,
) -> Result<Vec<CommitInfo>> {
    let mut log = Vec::new();
    let mut next = Some(parse_id(head)?);
    while let Some(id) = next {
        if log.len() == bound {
            break;
        }
        let commit = repo.find_commit(id).map_err(err)?;
        log.push(commit_info(&commit)?);
        next = commit.parent_ids().next().map(|p| p.detach());
    }
    Ok(log)
}
